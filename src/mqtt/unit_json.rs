//! The unit, group and network state JSON of DESIGN §4, and the plain per-attribute values.
//!
//! Every key of the unit JSON is always present (`null` when unknown), so Home Assistant
//! templates and Node-RED flows never miss a key. The raw controls are kept under `controls`, so
//! nothing the cloud reports is lost even when the bridge does not understand it.

use super::caps::Caps;
use crate::bridge::state::{GroupInfo, NetworkStatus, SceneInfo, presence};
use crate::cloud::model::{ColorSource, Control, UnitState};
use crate::color::{hue_sat_to_xy, parse_rgb, rgb8_to_xy, round4};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The keys of the unit JSON, in the order of the contract.
pub const UNIT_KEYS: [&str; 18] = [
    "id",
    "name",
    "type",
    "online",
    "state",
    "brightness",
    "dim_level",
    "color_mode",
    "color_temp",
    "color",
    "occupancy",
    "illuminance",
    "active_scene_id",
    "status",
    "condition",
    "priority",
    "firmware",
    "controls",
];

/// The light reading of a unit: `ON` when on and its Dimmer (and OnOff, if any) is above 0.
fn light_state(unit: &UnitState) -> Option<&'static str> {
    let on = unit.on?;
    let mut level_zero = false;
    for c in unit.controls.iter().flatten() {
        match c {
            Control::Dimmer(d) | Control::OnOff(d) if d.value <= 0.0 => level_zero = true,
            _ => {}
        }
    }
    Some(if on && !level_zero { "ON" } else { "OFF" })
}

/// The first control matching `f`.
fn find<'a, T>(unit: &'a UnitState, f: impl Fn(&'a Control) -> Option<T>) -> Option<T> {
    unit.controls.as_ref()?.iter().find_map(f)
}

/// xy rounded to 4 decimals, as published.
fn rounded((x, y): (f64, f64)) -> (f64, f64) {
    (round4(x), round4(y))
}

/// The colour of the unit as CIE xy, from whatever form the `Color` control carries.
fn color_xy(unit: &UnitState) -> Option<(f64, f64)> {
    find(unit, |c| match c {
        Control::Color(col) => match (col.x, col.y, col.hue, col.sat, col.rgb.as_deref()) {
            (Some(x), Some(y), ..) => Some((round4(x), round4(y))),
            (_, _, Some(h), Some(s), _) => Some(rounded(hue_sat_to_xy(h, s))),
            (_, _, _, _, Some(rgb)) => parse_rgb(rgb).map(|(r, g, b)| rounded(rgb8_to_xy(r, g, b))),
            _ => None,
        },
        _ => None,
    })
}

/// The active colour mode: follows `Colorsource` (XY/RGB → `xy`, TW → `color_temp`), else the
/// richest control the unit has; always one of the unit's supported modes.
fn color_mode(unit: &UnitState, caps: &Caps) -> &'static str {
    let supported = caps.color_modes();
    let source = find(unit, |c| match c {
        Control::Colorsource(s) => Some(s.source.clone()),
        _ => None,
    });
    let wanted = match source {
        Some(ColorSource::Xy | ColorSource::Rgb) => "xy",
        Some(ColorSource::Tw) => "color_temp",
        _ if find(unit, |c| matches!(c, Control::Color(_)).then_some(())).is_some() => "xy",
        _ if find(unit, |c| matches!(c, Control::Cct(_)).then_some(())).is_some() => "color_temp",
        _ => supported.last().copied().unwrap_or("onoff"),
    };
    if supported.contains(&wanted) { wanted } else { supported.last().copied().unwrap_or("onoff") }
}

/// A reading as JSON: whole numbers without a fraction (`412`, not `412.0`), so plain attribute
/// topics read `412` as the contract shows.
pub fn number(v: f64) -> Value {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 { json!(v as i64) } else { json!(v) }
}

/// Brightness 0–255 from a 0..1 level.
fn to_255(level: f64) -> u8 {
    (level.clamp(0.0, 1.0) * 255.0).round() as u8
}

/// The unit JSON (all keys present).
pub fn unit_json(unit: &UnitState, caps: &Caps) -> Map<String, Value> {
    let light = caps.is_light();
    let brightness = find(unit, |c| match c {
        Control::Dimmer(d) => Some(to_255(d.value)),
        _ => None,
    });
    let color_temp = find(unit, |c| match c {
        Control::Cct(c) => Some(c.value.round() as u32),
        _ => None,
    });
    let illuminance = find(unit, |c| match c {
        Control::Lux(l) => l.value,
        _ => None,
    });
    let mut m = Map::new();
    m.insert("id".into(), json!(unit.id));
    m.insert("name".into(), json!(unit.name));
    m.insert("type".into(), json!(unit.unit_type));
    m.insert("online".into(), json!(unit.online));
    m.insert("state".into(), json!(if light { light_state(unit) } else { None }));
    m.insert("brightness".into(), json!(brightness));
    m.insert("dim_level".into(), unit.dim_level.map_or(Value::Null, number));
    m.insert("color_mode".into(), json!(light.then(|| color_mode(unit, caps))));
    m.insert("color_temp".into(), json!(color_temp));
    m.insert("color".into(), color_xy(unit).map_or(Value::Null, |(x, y)| json!({"x": x, "y": y})));
    m.insert("occupancy".into(), json!(presence(unit)));
    m.insert("illuminance".into(), illuminance.map_or(Value::Null, number));
    m.insert("active_scene_id".into(), json!(unit.active_scene_id));
    m.insert("status".into(), json!(unit.status));
    m.insert("condition".into(), json!(unit.condition));
    m.insert("priority".into(), json!(unit.priority));
    m.insert("firmware".into(), json!(unit.firmware_version));
    m.insert(
        "controls".into(),
        unit.controls.as_ref().map_or(Value::Null, |cs| Value::Array(cs.iter().map(Control::to_value).collect())),
    );
    m
}

/// The plain text of a scalar JSON value for an attribute topic: strings bare (`ON`), numbers
/// and booleans in their JSON spelling. `None` for null, objects and arrays (no topic).
pub fn plain(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// What the group JSON needs of a member: the `state` and `brightness` of its unit JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberReading {
    /// `ON`/`OFF` for a light, `None` otherwise.
    pub state: Option<&'static str>,
    /// Brightness 0–255 of its Dimmer.
    pub brightness: Option<u8>,
}

/// A member's reading, as [`unit_json`] computes `state` and `brightness` (without building the
/// whole unit JSON: a group is re-rendered whenever one of its members changes).
pub fn member_reading(unit: &UnitState, caps: &Caps) -> MemberReading {
    MemberReading {
        state: if caps.is_light() { light_state(unit) } else { None },
        brightness: find(unit, |c| match c {
            Control::Dimmer(d) => Some(to_255(d.value)),
            _ => None,
        }),
    }
}

/// The group JSON: `state` ON when any member light is on (OFF when the members' states are known
/// and none is), `brightness` the highest of the members', `members` the unit ids.
pub fn group_json(group: &GroupInfo, members: &BTreeMap<u32, MemberReading>) -> Value {
    let mut state: Option<&str> = None;
    let mut brightness: Option<u8> = None;
    for id in &group.units {
        let Some(m) = members.get(id) else { continue };
        match m.state {
            Some("ON") => state = Some("ON"),
            Some("OFF") if state.is_none() => state = Some("OFF"),
            _ => {}
        }
        if let Some(b) = m.brightness {
            brightness = Some(brightness.map_or(b, |old| old.max(b)));
        }
    }
    json!({"id": group.id, "name": group.name, "state": state, "brightness": brightness, "members": group.units})
}

/// The network JSON at `<base>/<net>`.
pub fn network_json(status: &NetworkStatus, scenes: &BTreeMap<u32, SceneInfo>) -> Value {
    let active: Vec<Value> = status
        .active_scenes
        .iter()
        .map(|id| json!({"id": id, "name": scenes.get(id).map(|s| s.name.as_str())}))
        .collect();
    json!({
        "id": status.id,
        "name": status.name,
        "gateway_online": status.gateway_online,
        "connection": status.connection.as_str(),
        "dim_level": status.dim_level.map(number),
        "active_scenes": active,
        "revision": status.revision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(json: &str) -> UnitState {
        serde_json::from_str(json).unwrap()
    }

    fn render(json: &str) -> Map<String, Value> {
        let u = unit(json);
        unit_json(&u, &Caps::of(&u, None))
    }

    #[test]
    fn every_key_is_always_present() {
        let m = render(r#"{"id":7}"#);
        for k in UNIT_KEYS {
            assert!(m.contains_key(k), "{k}");
        }
        assert_eq!(m.len(), UNIT_KEYS.len());
        assert_eq!(m["state"], Value::Null);
        assert_eq!(m["controls"], Value::Null);
    }

    #[test]
    fn dimmer_gives_state_and_brightness() {
        let m = render(r#"{"id":1,"type":"Luminaire","on":true,"controls":[{"type":"Dimmer","value":0.5}]}"#);
        assert_eq!(m["state"], "ON");
        assert_eq!(m["brightness"], 128);
        assert_eq!(m["color_mode"], "brightness");
        let m = render(r#"{"id":1,"type":"Luminaire","on":true,"controls":[{"type":"Dimmer","value":0}]}"#);
        assert_eq!(m["state"], "OFF");
    }

    #[test]
    fn colour_follows_colorsource() {
        let m = render(
            r#"{"id":3,"on":true,"controls":[{"type":"Dimmer","value":1},{"type":"Colorsource","source":"TW"},
            {"type":"CCT","value":3000.4,"min":2700,"max":6500},{"type":"Color","hue":0,"sat":1}]}"#,
        );
        assert_eq!(m["color_mode"], "color_temp");
        assert_eq!(m["color_temp"], 3000);
        assert_eq!(m["color"]["y"], 0.33);
        let m = render(
            r#"{"id":3,"on":true,"controls":[{"type":"Colorsource","source":"XY"},{"type":"Color","x":0.31234,"y":0.3}]}"#,
        );
        assert_eq!(m["color_mode"], "xy");
        assert_eq!(m["color"], json!({"x": 0.3123, "y": 0.3}));
    }

    #[test]
    fn sensors_have_readings_and_no_state() {
        let m = render(
            r#"{"id":4,"type":"Sensor","on":true,"controls":[{"type":"Presence","status":"present"},{"type":"Lux","value":412}]}"#,
        );
        assert_eq!(m["state"], Value::Null);
        assert_eq!(m["color_mode"], Value::Null);
        assert_eq!(m["occupancy"], true);
        assert_eq!(m["illuminance"], 412);
        assert_eq!(plain(&m["illuminance"]).as_deref(), Some("412"));
        let m = render(r#"{"id":4,"controls":[{"type":"Presence","status":"absent"}]}"#);
        assert_eq!(m["occupancy"], false);
    }

    #[test]
    fn plain_values() {
        assert_eq!(plain(&json!("ON")).as_deref(), Some("ON"));
        assert_eq!(plain(&json!(128)).as_deref(), Some("128"));
        assert_eq!(plain(&json!(true)).as_deref(), Some("true"));
        assert_eq!(plain(&json!(0.5)).as_deref(), Some("0.5"));
        assert_eq!(plain(&Value::Null), None);
        assert_eq!(plain(&json!({"x": 1})), None);
    }
}
