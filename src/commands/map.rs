//! From a [`Command`] and what is known of its target to the control message for the wire
//! (docs/commands.md):
//!
//! | command | message |
//! |---|---|
//! | unit `brightness` b | `controlUnit` `Dimmer {value: b/255}` (4 decimals; 0 = off) |
//! | unit `ON` without brightness | `Dimmer {value: <last level above 0 seen>}` (1 if none was seen); on/off-only units `OnOff {value: 1}` |
//! | unit `OFF` | `Dimmer {value: 0}`; on/off-only units `OnOff {value: 0}`; other fields of the command are ignored |
//! | unit `TOGGLE` | `ON` or `OFF`, from the current state |
//! | unit `color_temp` K | `ColorTemperature {value: K}` + `Colorsource {source: "TW"}`, K clamped to the unit's CCT min..max |
//! | unit `color` hs, xy or rgb | `RGB {hue, sat}` + `Colorsource {source: "RGB"}` (hs only scaled; see [`crate::color`]) |
//! | group | `controlGroup` `level` = b/255, `OFF` = 0; `ON` without brightness: `controlUnits` per last level of its member lights (`OnOff {value: 1}` for on/off-only ones) |
//! | scene | `controlScene` `level` = b/255, `ON` = 1, `OFF` = 0; `/state` is refreshed after it |
//! | network | `controlNetwork` `level`; `/state` is refreshed after it |
//!
//! A unit that has both a Dimmer and an OnOff control (or neither, but is a light) is driven by
//! its Dimmer, the control every client uses; only units whose controls say on/off and nothing
//! dimmable get `OnOff`. The unit's capabilities are checked first: colour to a unit without
//! colour, colour temperature to a unit without CCT and brightness to an on/off-only unit are
//! refused with the reason, and so is any command to a unit the cloud reports offline or to a
//! network whose gateway is offline (the cloud would take it and nothing would change).

use super::error::CommandError;
use super::known::{Key, NetworkInfo, UnitInfo};
use super::parse::{ColorCommand, Command, LevelCommand, LightCommand, Switch};
use crate::cloud::model::{ClientMessage, RgbTarget, SourceTarget, TargetControls, ValueTarget};
use crate::color::{hs_to_hue_sat, rgb8_to_hue_sat, xy_to_hue_sat};
use std::collections::BTreeMap;
use std::time::Duration;

/// What to send for a command.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The message, with wire 0 (the real wire number is put in by [`with_wire`] when it is sent).
    pub message: ClientMessage,
    /// Messages sent after it, in order, each once the one before went out (a group switched on
    /// without a brightness: one message per level its members return to).
    pub then: Vec<ClientMessage>,
    /// Refresh `/state` afterwards (scene and network commands: `activeScenes` only comes over REST).
    pub refresh_after: bool,
    /// On/off the target should be in once the message is applied (remembered for `TOGGLE`).
    pub expect_on: Option<bool>,
}

/// The message with its wire number set.
pub fn with_wire(mut message: ClientMessage, wire_number: u32) -> ClientMessage {
    match &mut message {
        ClientMessage::Open { wire, .. }
        | ClientMessage::Close { wire }
        | ClientMessage::Ping { wire }
        | ClientMessage::ControlUnit { wire, .. }
        | ClientMessage::ControlUnits { wire, .. }
        | ClientMessage::ControlScene { wire, .. }
        | ClientMessage::ControlGroup { wire, .. }
        | ClientMessage::ControlNetwork { wire, .. } => *wire = wire_number,
    }
    message
}

/// Rounds a 0..1 level to 4 decimals (finer than a 1/255 step, so `brightness` round-trips).
fn level4(v: f64) -> f64 {
    ((v * 10_000.0).round() / 10_000.0).clamp(0.0, 1.0)
}

fn level_of(b: u8) -> f64 {
    level4(f64::from(b) / 255.0)
}

/// The unit of a key, or why it cannot take commands.
fn unit(net: &NetworkInfo, id: u32) -> Result<UnitInfo, CommandError> {
    let u = net.unit(id).ok_or_else(|| unknown("unit", id, net))?;
    if u.caps.is_light() { Ok(u) } else { Err(CommandError::NotALight(u.name())) }
}

fn unknown(kind: &'static str, id: u32, net: &NetworkInfo) -> CommandError {
    CommandError::UnknownTarget { kind, id, network: net.name.clone() }
}

/// Checks a unit command against the unit's reachability and capabilities.
fn check_unit(c: &LightCommand, u: &UnitInfo) -> Result<(), CommandError> {
    if u.state.online == Some(false) {
        return Err(CommandError::Offline(u.name()));
    }
    let missing = |control| Err(CommandError::Unsupported { unit: u.name(), control });
    if c.color.is_some() && !u.caps.color {
        return missing("colour");
    }
    if c.color_temp.is_some() && !u.caps.cct {
        return missing("colour temperature");
    }
    if c.brightness.is_some() && on_off_only(u) {
        return missing("dimmer");
    }
    Ok(())
}

fn on_off_only(u: &UnitInfo) -> bool {
    u.caps.onoff && !u.caps.dimmer
}

/// Checks a command against what is known of the network, without building anything (used when
/// a command arrives, so an impossible one is refused at once rather than after queueing).
pub fn check(command: &Command, key: Key, net: &NetworkInfo) -> Result<(), CommandError> {
    if net.gateway_offline {
        return Err(CommandError::GatewayOffline(net.name.clone()));
    }
    match (command, key) {
        (Command::Unit(c), Key::Unit(id)) => check_unit(c, &unit(net, id)?),
        (Command::Group(_), Key::Group(id)) if !net.groups.contains_key(&id) => Err(unknown("group", id, net)),
        (Command::Scene(_), Key::Scene(id)) if !net.scenes.contains(&id) => Err(unknown("scene", id, net)),
        _ => Ok(()),
    }
}

/// Builds the message for a command. `memory` is how long a sent command's expected on/off
/// counts for `TOGGLE` (see [`NetworkInfo::is_on`]).
pub fn plan(command: &Command, key: Key, net: &NetworkInfo, memory: Duration) -> Result<Plan, CommandError> {
    check(command, key, net)?;
    match (command, key) {
        (Command::Unit(c), Key::Unit(id)) => {
            let u = unit(net, id)?;
            let (controls, expect_on) = unit_controls(c, &u, net.is_on(key, memory))?;
            let message = ClientMessage::ControlUnit { wire: 0, id, target_controls: controls };
            Ok(Plan { message, then: Vec::new(), refresh_after: false, expect_on })
        }
        (Command::Group(c), Key::Group(id)) => {
            let level = level(c, net.is_on(key, memory));
            if level > 0.0
                && c.brightness.is_none()
                && let Some((message, then)) = restore_levels(net, id)
            {
                return Ok(Plan { message, then, refresh_after: false, expect_on: Some(true) });
            }
            Ok(Plan {
                message: ClientMessage::ControlGroup { wire: 0, id, level },
                then: Vec::new(),
                refresh_after: false,
                expect_on: Some(level > 0.0),
            })
        }
        (Command::Scene(c), Key::Scene(id)) => {
            let level = level(c, net.is_on(key, memory));
            Ok(Plan {
                message: ClientMessage::ControlScene { wire: 0, id, level },
                then: Vec::new(),
                refresh_after: true,
                expect_on: Some(level > 0.0),
            })
        }
        (Command::Network { level }, Key::Network) => Ok(Plan {
            message: ClientMessage::ControlNetwork { wire: 0, level: level4(*level) },
            then: Vec::new(),
            refresh_after: true,
            expect_on: None,
        }),
        // The dispatcher pairs commands with keys of their own kind; anything else is a bug
        // upstream, refused rather than sent somewhere unintended.
        _ => Err(CommandError::Nothing),
    }
}

/// The messages that switch group `id` on with each member light back at its own last level,
/// as `ON` does for a unit: a `controlUnits` per level the members return to (members that were
/// at the same level share one), and one with `OnOff` for the on/off-only members. `None` when
/// the group has no member light the bridge knows (the group level then does it).
fn restore_levels(net: &NetworkInfo, id: u32) -> Option<(ClientMessage, Vec<ClientMessage>)> {
    let mut by_level: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut on_off = Vec::new();
    for uid in net.groups.get(&id)? {
        let Some(u) = net.unit(*uid).filter(|u| u.caps.is_light()) else { continue };
        if on_off_only(&u) {
            on_off.push(*uid);
        } else {
            // In 1/10,000 steps, the precision every level is sent with.
            by_level.entry((level4(u.last_level) * 10_000.0).round() as u32).or_default().push(*uid);
        }
    }
    let units = |ids: Vec<u32>, t: TargetControls| ClientMessage::ControlUnits { wire: 0, ids, target_controls: t };
    let dimmed = by_level.into_iter().map(|(level, ids)| {
        let dimmer = Some(ValueTarget { value: f64::from(level) / 10_000.0 });
        units(ids, TargetControls { dimmer, ..TargetControls::default() })
    });
    let mut all: Vec<ClientMessage> = dimmed.collect();
    if !on_off.is_empty() {
        all.push(units(
            on_off,
            TargetControls { on_off: Some(ValueTarget { value: 1.0 }), ..TargetControls::default() },
        ));
    }
    let mut all = all.into_iter();
    all.next().map(|first| (first, all.collect()))
}

/// The level of a group or scene command.
fn level(c: &LevelCommand, is_on: bool) -> f64 {
    let on = match c.state {
        Some(Switch::On) => true,
        Some(Switch::Off) => false,
        Some(Switch::Toggle) => !is_on,
        None => true,
    };
    match (on, c.brightness) {
        (false, _) => 0.0,
        (true, Some(b)) => level_of(b),
        (true, None) => 1.0,
    }
}

/// The `targetControls` of a unit command and the on/off it should lead to.
fn unit_controls(c: &LightCommand, u: &UnitInfo, is_on: bool) -> Result<(TargetControls, Option<bool>), CommandError> {
    let switch = match c.state {
        Some(Switch::On) => Some(true),
        Some(Switch::Off) => Some(false),
        Some(Switch::Toggle) => Some(!is_on),
        None => None,
    };
    let onoff = on_off_only(u);
    let mut t = TargetControls::default();
    if switch == Some(false) || c.brightness == Some(0) {
        if onoff {
            t.on_off = Some(ValueTarget { value: 0.0 });
        } else {
            t.dimmer = Some(ValueTarget { value: 0.0 });
        }
        return Ok((t, Some(false)));
    }
    let mut expect = None;
    if let Some(b) = c.brightness {
        t.dimmer = Some(ValueTarget { value: level_of(b) });
        expect = Some(true);
    } else if switch == Some(true) {
        if onoff {
            t.on_off = Some(ValueTarget { value: 1.0 });
        } else {
            t.dimmer = Some(ValueTarget { value: level4(u.last_level) });
        }
        expect = Some(true);
    }
    if let Some(k) = c.color_temp {
        let k = match u.caps.kelvin {
            Some((lo, hi)) => k.clamp(lo, hi),
            None => k,
        };
        t.color_temperature = Some(ValueTarget { value: f64::from(k) });
        t.colorsource = Some(SourceTarget { source: "TW".into() });
    }
    if let Some(color) = c.color {
        let (hue, sat) = match color {
            ColorCommand::Hs { h, s } => hs_to_hue_sat(h, s),
            ColorCommand::Xy { x, y } => xy_to_hue_sat(x, y),
            ColorCommand::Rgb { r, g, b } => rgb8_to_hue_sat(r, g, b),
        };
        t.rgb = Some(RgbTarget { hue: Some(hue), sat: Some(sat), rgb: None });
        t.colorsource = Some(SourceTarget { source: "RGB".into() });
    }
    if t.is_empty() {
        return Err(CommandError::Nothing);
    }
    Ok((t, expect))
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
