//! From an MQTT payload to a typed [`Command`], with every check that needs no knowledge of the
//! network: size, encoding, JSON shape, field types and ranges. Capability checks (colour to a
//! unit without colour, …) need the unit and happen in [`super::map`].
//!
//! What each command topic takes (docs/commands.md):
//!
//! | topic | payload |
//! |---|---|
//! | `…/unit/<unit>/set` | `ON` / `OFF` / `TOGGLE` (any case, also as a JSON string), or HA's JSON light command `{"state", "brightness" 0..255, "color_temp" K, "color" {h,s}, {x,y} or {r,g,b}, "transition"}` |
//! | `…/unit/<unit>/set/state` | `ON` / `OFF` / `TOGGLE` |
//! | `…/unit/<unit>/set/brightness` | a number 0..255 |
//! | `…/unit/<unit>/set/color_temp` | a number of kelvin, 1000..20000 |
//! | `…/unit/<unit>/set/color` | `{"h":…,"s":…}`, `{"x":…,"y":…}` or `{"r":…,"g":…,"b":…}` |
//! | `…/group/<group>/set`, `…/scene/<scene>/set` | `ON` / `OFF` / `TOGGLE`, or `{"state", "brightness", "transition"}` |
//! | `<base>/<net>/set` | `{"dim_level": 0..1}` (what HA's "Dim level" number sends: its 0–100 % divided by 100) or a plain number 0..1 |
//!
//! `transition` is accepted (HA sends it when a user sets one) and checked to be a non-negative
//! number, then ignored: the cloud's control messages have no fade time. A unit's `dim_level`
//! takes no commands: it is the Dimmer level times the network level, so setting it would be
//! ambiguous; use `brightness` for the unit or the network's `dim_level`.
//!
//! Unknown keys are refused rather than ignored, so a typo (`"brigthness"`) is reported instead
//! of silently doing half of what was meant. Parsing never panics and reads at most
//! [`MAX_PAYLOAD`] bytes.

use super::error::{CommandError, shorten};
use serde_json::{Map, Value};

/// Largest payload accepted (16 KiB; a real command is well under 200 bytes).
pub const MAX_PAYLOAD: usize = 16 * 1024;

/// The colour temperatures accepted at all, in kelvin (the unit's own range clamps further).
pub const KELVIN_RANGE: (u32, u32) = (1000, 20000);

/// What a command topic names, resolved from its slugs by the MQTT side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// `…/unit/<unit>/set` (`attr: None`) or `…/unit/<unit>/set/<attr>`.
    Unit {
        /// Unit id.
        id: u32,
        /// The attribute of `…/set/<attr>`.
        attr: Option<String>,
    },
    /// `…/group/<group>/set`.
    Group(u32),
    /// `…/scene/<scene>/set`.
    Scene(u32),
    /// `<base>/<net>/set`.
    Network,
    /// `<base>/bridge/request/reload`: fetch every network again and publish everything again.
    Reload,
}

/// On, off or the opposite of now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// `ON`.
    On,
    /// `OFF`.
    Off,
    /// `TOGGLE`: the opposite of the current state.
    Toggle,
}

/// A colour as sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ColorCommand {
    /// CIE 1931 xy (what HA's `xy` colour mode sends).
    Xy {
        /// x, 0..1.
        x: f64,
        /// y, above 0 up to 1.
        y: f64,
    },
    /// Hue in degrees (0..360) and saturation in percent (0..100): what HA's `hs` colour mode
    /// sends, and what the cloud takes with no conversion but the scale.
    Hs {
        /// Hue, degrees.
        h: f64,
        /// Saturation, percent.
        s: f64,
    },
    /// sRGB channels (a Node-RED convenience).
    Rgb {
        /// Red.
        r: u8,
        /// Green.
        g: u8,
        /// Blue.
        b: u8,
    },
}

/// A command for a unit: HA's JSON light command.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LightCommand {
    /// `state`.
    pub state: Option<Switch>,
    /// `brightness`, 0..255 (0 = off).
    pub brightness: Option<u8>,
    /// `color_temp` in kelvin.
    pub color_temp: Option<u32>,
    /// `color`.
    pub color: Option<ColorCommand>,
    /// `transition` in seconds: accepted and ignored (control messages have no fade time).
    pub transition: Option<f64>,
}

/// A command for a group or a scene: on/off and a level.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LevelCommand {
    /// `state`.
    pub state: Option<Switch>,
    /// `brightness`, 0..255 (becomes the level b/255).
    pub brightness: Option<u8>,
}

/// A parsed command.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Command {
    /// For a unit.
    Unit(LightCommand),
    /// For a group.
    Group(LevelCommand),
    /// For a scene.
    Scene(LevelCommand),
    /// The network dim level, 0..1.
    Network {
        /// Level 0..1.
        level: f64,
    },
    /// Fetch every network again (any payload: Home Assistant's button sends `PRESS`).
    Reload,
}

const UNIT_KEYS: &str = "state, brightness, color_temp, color, transition";
const LEVEL_KEYS: &str = "state, brightness, transition";

/// Parses a payload for a target. Never panics.
pub fn parse(target: &Target, payload: &[u8]) -> Result<Command, CommandError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(CommandError::TooLarge { size: payload.len(), limit: MAX_PAYLOAD });
    }
    let text = std::str::from_utf8(payload).map_err(|_| CommandError::NotUtf8)?.trim();
    if text.is_empty() {
        return Err(CommandError::Empty);
    }
    match target {
        Target::Unit { attr: None, .. } if text.starts_with('{') => light_object(&object(text)?).map(Command::Unit),
        Target::Unit { attr: None, .. } => Ok(Command::Unit(LightCommand {
            state: Some(switch_word(text, "ON, OFF, TOGGLE or a JSON light command")?),
            ..LightCommand::default()
        })),
        Target::Unit { attr: Some(attr), .. } => attribute(attr, text).map(Command::Unit),
        Target::Group(_) => level_payload(text, "group").map(Command::Group),
        Target::Scene(_) => level_payload(text, "scene").map(Command::Scene),
        Target::Network => network(text),
        Target::Reload => Ok(Command::Reload),
    }
}

/// Parses JSON text that must be an object.
fn object(text: &str) -> Result<Map<String, Value>, CommandError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(CommandError::Unexpected { expected: "a JSON object", got: shorten(&other.to_string()) }),
        Err(e) => Err(CommandError::InvalidJson(e.to_string())),
    }
}

/// `ON`/`OFF`/`TOGGLE` as plain text (any case) or as a JSON string.
fn switch_word(text: &str, expected: &'static str) -> Result<Switch, CommandError> {
    let word = if text.starts_with('"') {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::String(s)) => s,
            Ok(_) | Err(_) => return Err(CommandError::Unexpected { expected, got: shorten(text) }),
        }
    } else {
        text.to_string()
    };
    parse_switch(word.trim()).ok_or_else(|| CommandError::Unexpected { expected, got: shorten(text) })
}

fn parse_switch(word: &str) -> Option<Switch> {
    if word.eq_ignore_ascii_case("ON") {
        Some(Switch::On)
    } else if word.eq_ignore_ascii_case("OFF") {
        Some(Switch::Off)
    } else if word.eq_ignore_ascii_case("TOGGLE") {
        Some(Switch::Toggle)
    } else {
        None
    }
}

/// The `state` field of a JSON command.
fn state_field(v: &Value) -> Result<Switch, CommandError> {
    match v {
        Value::String(s) => parse_switch(s).ok_or_else(|| CommandError::BadState(shorten(s))),
        _ => Err(CommandError::WrongType { field: "state", expected: "a string (ON, OFF or TOGGLE)" }),
    }
}

/// A JSON number field.
fn number_field(field: &'static str, v: &Value) -> Result<f64, CommandError> {
    v.as_f64().filter(|n| n.is_finite()).ok_or(CommandError::WrongType { field, expected: "a number" })
}

/// A plain-text number (an attribute topic).
fn number_text(field: &'static str, text: &str) -> Result<f64, CommandError> {
    text.parse::<f64>().ok().filter(|n| n.is_finite()).ok_or(CommandError::WrongType { field, expected: "a number" })
}

fn in_range(field: &'static str, value: f64, lo: f64, hi: f64, range: &'static str) -> Result<f64, CommandError> {
    if (lo..=hi).contains(&value) { Ok(value) } else { Err(CommandError::OutOfRange { field, value, range }) }
}

fn brightness(value: f64) -> Result<u8, CommandError> {
    // In range, so the cast cannot truncate.
    Ok(in_range("brightness", value, 0.0, 255.0, "0..255")?.round() as u8)
}

fn color_temp(value: f64) -> Result<u32, CommandError> {
    let (lo, hi) = KELVIN_RANGE;
    Ok(in_range("color_temp", value, f64::from(lo), f64::from(hi), "1000..20000 K")?.round() as u32)
}

fn transition(v: &Value) -> Result<f64, CommandError> {
    in_range("transition", number_field("transition", v)?, 0.0, 3600.0, "0..3600 s")
}

/// `{"h","s"}`, `{"x","y"}` or `{"r","g","b"}`.
fn color(v: &Value) -> Result<ColorCommand, CommandError> {
    const SHAPE: &str = "an object {h, s}, {x, y} or {r, g, b}";
    let Value::Object(m) = v else {
        return Err(CommandError::WrongType { field: "color", expected: SHAPE });
    };
    let keys: Vec<&str> = m.keys().map(String::as_str).collect();
    match keys.as_slice() {
        ["h", "s"] | ["s", "h"] => Ok(ColorCommand::Hs {
            h: in_range("color.h", number_field("color.h", &m["h"])?, 0.0, 360.0, "0..360")?,
            s: in_range("color.s", number_field("color.s", &m["s"])?, 0.0, 100.0, "0..100")?,
        }),
        ["x", "y"] | ["y", "x"] => {
            let x = in_range("color.x", number_field("color.x", &m["x"])?, 0.0, 1.0, "0..1")?;
            let y = number_field("color.y", &m["y"])?;
            if !(y > 0.0 && y <= 1.0) {
                return Err(CommandError::OutOfRange { field: "color.y", value: y, range: "0 (exclusive)..1" });
            }
            Ok(ColorCommand::Xy { x, y })
        }
        _ if keys.len() == 3 && ["r", "g", "b"].iter().all(|k| m.contains_key(*k)) => {
            let channel = |field: &'static str, key: &str| -> Result<u8, CommandError> {
                let v = number_field(field, &m[key])?;
                Ok(in_range(field, v, 0.0, 255.0, "0..255")?.round() as u8)
            };
            Ok(ColorCommand::Rgb {
                r: channel("color.r", "r")?,
                g: channel("color.g", "g")?,
                b: channel("color.b", "b")?,
            })
        }
        _ => Err(CommandError::WrongType { field: "color", expected: SHAPE }),
    }
}

/// HA's JSON light command.
fn light_object(m: &Map<String, Value>) -> Result<LightCommand, CommandError> {
    let mut c = LightCommand::default();
    for (key, v) in m {
        match key.as_str() {
            "state" => c.state = Some(state_field(v)?),
            "brightness" => c.brightness = Some(brightness(number_field("brightness", v)?)?),
            "color_temp" => c.color_temp = Some(color_temp(number_field("color_temp", v)?)?),
            "color" => c.color = Some(color(v)?),
            "transition" => c.transition = Some(transition(v)?),
            other => {
                return Err(CommandError::UnknownKey { key: shorten(other), target: "unit", accepted: UNIT_KEYS });
            }
        }
    }
    if c.color.is_some() && c.color_temp.is_some() {
        return Err(CommandError::ColorConflict);
    }
    if c.state.is_none() && c.brightness.is_none() && c.color_temp.is_none() && c.color.is_none() {
        return Err(CommandError::Nothing);
    }
    Ok(c)
}

/// `…/unit/<unit>/set/<attr>`.
fn attribute(attr: &str, text: &str) -> Result<LightCommand, CommandError> {
    let mut c = LightCommand::default();
    match attr {
        "state" => c.state = Some(switch_word(text, "ON, OFF or TOGGLE")?),
        "brightness" => c.brightness = Some(brightness(number_text("brightness", text)?)?),
        "color_temp" => c.color_temp = Some(color_temp(number_text("color_temp", text)?)?),
        "color" => {
            let v = serde_json::from_str::<Value>(text).map_err(|e| CommandError::InvalidJson(e.to_string()))?;
            c.color = Some(color(&v)?);
        }
        other => return Err(CommandError::UnknownAttribute(shorten(other))),
    }
    Ok(c)
}

/// A group's or scene's payload.
fn level_payload(text: &str, target: &'static str) -> Result<LevelCommand, CommandError> {
    if !text.starts_with('{') {
        let state = switch_word(text, "ON, OFF, TOGGLE or a JSON object {state, brightness}")?;
        return Ok(LevelCommand { state: Some(state), brightness: None });
    }
    let mut c = LevelCommand::default();
    for (key, v) in &object(text)? {
        match key.as_str() {
            "state" => c.state = Some(state_field(v)?),
            "brightness" => c.brightness = Some(brightness(number_field("brightness", v)?)?),
            "transition" => {
                transition(v)?;
            }
            other => return Err(CommandError::UnknownKey { key: shorten(other), target, accepted: LEVEL_KEYS }),
        }
    }
    if c.state.is_none() && c.brightness.is_none() {
        return Err(CommandError::Nothing);
    }
    Ok(c)
}

/// `<base>/<net>/set`: `{"dim_level": 0..1}` or a plain number.
fn network(text: &str) -> Result<Command, CommandError> {
    let level = if text.starts_with('{') {
        let m = object(text)?;
        if let Some(key) = m.keys().find(|k| *k != "dim_level") {
            return Err(CommandError::UnknownKey { key: shorten(key), target: "network", accepted: "dim_level" });
        }
        let v = m.get("dim_level").ok_or(CommandError::Nothing)?;
        number_field("dim_level", v)?
    } else {
        text.parse::<f64>().ok().filter(|n| n.is_finite()).ok_or_else(|| CommandError::Unexpected {
            expected: "{\"dim_level\": 0..1} or a number 0..1",
            got: shorten(text),
        })?
    };
    Ok(Command::Network { level: in_range("dim_level", level, 0.0, 1.0, "0..1")? })
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
