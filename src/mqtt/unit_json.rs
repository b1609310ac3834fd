//! The unit, group and network state JSON of docs/mqtt.md, and the plain per-attribute values.
//!
//! Every key of the unit JSON is always present (`null` when unknown), so Home Assistant
//! templates and Node-RED flows never miss a key. The raw controls are kept under `controls`, so
//! nothing the cloud reports is lost even when the bridge does not understand it.

use super::caps::Caps;
use super::state_text::{Leaf, StateText, level_at};
use crate::bridge::state::{GroupInfo, NetworkStatus, SceneInfo, presence};
use crate::cloud::model::{ColorSource, Control, UnitState};
use crate::color::{hue_sat_to_xy, parse_rgb, rgb8_to_xy, round4};
use crate::json_object::{Object, write_array};
use serde::{Serialize, Serializer};
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
    serde_json::to_value(Reading(v)).unwrap_or(Value::Null)
}

/// A reading written as [`number`] spells it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Reading(f64);

impl Reading {
    fn is_whole(self) -> bool {
        self.0.is_finite() && self.0.fract() == 0.0 && self.0.abs() < 1e15
    }
}

impl Serialize for Reading {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_whole() { s.serialize_i64(self.0 as i64) } else { s.serialize_f64(self.0) }
    }
}

/// Brightness 0–255 from a 0..1 level.
fn to_255(level: f64) -> u8 {
    (level.clamp(0.0, 1.0) * 255.0).round() as u8
}

/// A colour as published.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct Xy {
    x: f64,
    y: f64,
}

/// The unit JSON of docs/mqtt.md, borrowed from the unit: every reading computed once, then written
/// straight to text ([`UnitJson::write_json`]) and to the plain attribute values
/// ([`UnitJson::write_parts`]). This is the event hot path: no intermediate `Value` tree,
/// no allocation but the output buffer's.
///
/// The fields are declared in alphabetical order, the order the JSON has always had (readers do
/// not care; golden files and people diffing payloads do).
#[derive(Debug, Serialize)]
pub struct UnitJson<'a> {
    active_scene_id: Option<u32>,
    brightness: Option<u8>,
    color: Option<Xy>,
    color_mode: Option<&'static str>,
    color_temp: Option<u32>,
    condition: Option<i64>,
    controls: Option<&'a [Control]>,
    dim_level: Option<Reading>,
    firmware: Option<&'a str>,
    id: u32,
    illuminance: Option<Reading>,
    name: Option<&'a str>,
    occupancy: Option<bool>,
    online: Option<bool>,
    priority: Option<i64>,
    state: Option<&'static str>,
    status: Option<&'a str>,
    #[serde(rename = "type")]
    unit_type: Option<&'a str>,
}

/// A scalar of the unit JSON, as an attribute topic carries it.
#[derive(Clone, Copy, Debug)]
enum Scalar<'a> {
    Str(&'a str),
    Int(i64),
    Num(Reading),
    Bool(bool),
}

impl Scalar<'_> {
    /// Appends the plain text: strings bare, numbers and booleans in their JSON spelling.
    fn write(self, out: &mut Vec<u8>) {
        let written = match self {
            Scalar::Str(s) => {
                out.extend_from_slice(s.as_bytes());
                Ok(())
            }
            Scalar::Int(i) => serde_json::to_writer(&mut *out, &i),
            Scalar::Num(r) => serde_json::to_writer(&mut *out, &r),
            Scalar::Bool(b) => {
                out.extend_from_slice(if b { b"true" } else { b"false" });
                Ok(())
            }
        };
        // Writing numbers to a Vec cannot fail; a NaN is written as `null` by serde_json.
        debug_assert!(written.is_ok());
    }
}

impl<'a> UnitJson<'a> {
    /// The readings of `unit` with capabilities `caps`.
    pub fn of(unit: &'a UnitState, caps: &Caps) -> UnitJson<'a> {
        let light = caps.is_light();
        UnitJson {
            active_scene_id: unit.active_scene_id,
            brightness: find(unit, |c| match c {
                Control::Dimmer(d) => Some(to_255(d.value)),
                _ => None,
            }),
            color: color_xy(unit).map(|(x, y)| Xy { x, y }),
            color_mode: light.then(|| color_mode(unit, caps)),
            color_temp: find(unit, |c| match c {
                Control::Cct(c) => Some(c.value.round() as u32),
                _ => None,
            }),
            condition: unit.condition.get(),
            controls: unit.controls.as_deref(),
            dim_level: unit.dim_level.map(Reading),
            firmware: unit.firmware_version.as_deref(),
            id: unit.id,
            illuminance: find(unit, |c| match c {
                Control::Lux(l) => l.value,
                _ => None,
            })
            .map(Reading),
            name: unit.name.as_deref(),
            occupancy: presence(unit),
            online: unit.online,
            priority: unit.priority.get(),
            state: if light { light_state(unit) } else { None },
            status: unit.status.as_deref(),
            unit_type: unit.unit_type.as_deref(),
        }
    }

    /// The scalar of each key of [`UNIT_KEYS`] (`None`: null, or not a scalar).
    fn scalars(&self) -> [(&'static str, Option<Scalar<'a>>); UNIT_KEYS.len()] {
        let int = |v: Option<i64>| v.map(Scalar::Int);
        [
            ("id", Some(Scalar::Int(i64::from(self.id)))),
            ("name", self.name.map(Scalar::Str)),
            ("type", self.unit_type.map(Scalar::Str)),
            ("online", self.online.map(Scalar::Bool)),
            ("state", self.state.map(Scalar::Str)),
            ("brightness", int(self.brightness.map(i64::from))),
            ("dim_level", self.dim_level.filter(|r| r.0.is_finite()).map(Scalar::Num)),
            ("color_mode", self.color_mode.map(Scalar::Str)),
            ("color_temp", int(self.color_temp.map(i64::from))),
            ("color", None),
            ("occupancy", self.occupancy.map(Scalar::Bool)),
            ("illuminance", self.illuminance.filter(|r| r.0.is_finite()).map(Scalar::Num)),
            ("active_scene_id", int(self.active_scene_id.map(i64::from))),
            ("status", self.status.map(Scalar::Str)),
            ("condition", int(self.condition)),
            ("priority", int(self.priority)),
            ("firmware", self.firmware.map(Scalar::Str)),
            ("controls", None),
        ]
    }

    /// Appends the unit JSON to `out`: the bytes serde_json writes for the derived `Serialize`
    /// (the field order of the struct), with the constant keys copied instead of escaped (see
    /// [`crate::json_object`]; the test `direct_json_is_what_serde_writes` holds the two together).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write_json_at(out);
    }

    /// [`UnitJson::write_json`], returning where each numeric field's value lies in `out`, by
    /// its index in [`UNIT_KEYS`] (an empty range for the others).
    fn write_json_at(&self, out: &mut Vec<u8>) -> NumberSpans {
        let mut at = NumberSpans::default();
        let mut o = Object::open(out);
        at.0[const { key_index("active_scene_id") }] = o.field_at("active_scene_id", &self.active_scene_id);
        at.0[const { key_index("brightness") }] = o.field_at("brightness", &self.brightness);
        match self.color {
            Some(Xy { x, y }) => o.field_with("color", |out| {
                let mut xy = Object::open(out);
                xy.field("x", &x);
                xy.field("y", &y);
                xy.close();
            }),
            None => o.field("color", &self.color),
        }
        o.field("color_mode", &self.color_mode);
        at.0[const { key_index("color_temp") }] = o.field_at("color_temp", &self.color_temp);
        at.0[const { key_index("condition") }] = o.field_at("condition", &self.condition);
        match self.controls {
            Some(controls) => o.field_with("controls", |out| write_array(out, controls, Control::write_json)),
            None => o.field("controls", &self.controls),
        }
        at.0[const { key_index("dim_level") }] = o.field_at("dim_level", &self.dim_level);
        o.field("firmware", &self.firmware);
        at.0[const { key_index("id") }] = o.field_at("id", &self.id);
        at.0[const { key_index("illuminance") }] = o.field_at("illuminance", &self.illuminance);
        o.field("name", &self.name);
        o.field("occupancy", &self.occupancy);
        o.field("online", &self.online);
        at.0[const { key_index("priority") }] = o.field_at("priority", &self.priority);
        o.field("state", &self.state);
        o.field("status", &self.status);
        o.field("type", &self.unit_type);
        o.close();
        at
    }

    /// Writes the unit JSON into `text` as its state part, then (with `attributes`) the plain
    /// value of every non-null scalar key, one part per key below the state topic, in
    /// [`UNIT_KEYS`] order. A number's plain value is its JSON spelling, so it is copied from
    /// the JSON just written instead of being formatted again.
    pub fn write_parts(&self, text: &mut StateText, attributes: bool) {
        let at = self.write_json_at(text.buf());
        text.end_part(Leaf::State);
        if !attributes {
            return;
        }
        for (index, (key, scalar)) in (0..).zip(self.scalars()) {
            let Some(s) = scalar else { continue };
            let span = at.0[usize::from(index)].clone();
            match s {
                Scalar::Int(_) | Scalar::Num(_) if !span.is_empty() => text.buf().extend_from_within(span),
                _ => s.write(text.buf()),
            }
            // The level's own name (its string in the level table), which the store compares by
            // address ([`super::state_text::is_level`]).
            let name = level_at(index);
            debug_assert_eq!(name, key);
            text.end_part(Leaf::Below(name));
        }
    }
}

/// Where [`UnitJson::write_json`] wrote each numeric field's value, by key index.
#[derive(Default)]
struct NumberSpans([std::ops::Range<usize>; UNIT_KEYS.len()]);

/// The index of `key` in [`UNIT_KEYS`], for `const` blocks: a key that is not there fails the
/// build.
const fn key_index(key: &str) -> usize {
    let mut i = 0;
    while i < UNIT_KEYS.len() {
        if const_eq(UNIT_KEYS[i].as_bytes(), key.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("not a key of the unit JSON")
}

/// `a == b` for byte strings, usable in a `const fn` (the slices' `==` is not).
const fn const_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The unit JSON as a JSON object (all keys present): for tests and tools; the publisher writes
/// [`UnitJson`] straight to text.
pub fn unit_json(unit: &UnitState, caps: &Caps) -> Map<String, Value> {
    match serde_json::to_value(UnitJson::of(unit, caps)) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
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
pub fn member_reading(unit: &UnitState, is_light: bool) -> MemberReading {
    MemberReading {
        state: if is_light { light_state(unit) } else { None },
        brightness: find(unit, |c| match c {
            Control::Dimmer(d) => Some(to_255(d.value)),
            _ => None,
        }),
    }
}

/// The group JSON: `state` ON when any member light is on (OFF when the members' states are known
/// and none is), `brightness` the highest of the members', `members` the unit ids. Fields in
/// alphabetical order, as published from the start.
#[derive(Debug, Serialize)]
pub struct GroupJson<'a> {
    brightness: Option<u8>,
    id: u32,
    members: &'a [u32],
    name: &'a str,
    state: Option<&'static str>,
}

impl<'a> GroupJson<'a> {
    /// The JSON of `group`, whose members read `reading(unit id)` (`None`: not a known unit).
    pub fn of(group: &'a GroupInfo, reading: impl Fn(u32) -> Option<MemberReading>) -> GroupJson<'a> {
        GroupJson::from_readings(group, group.units.iter().map(|id| reading(*id)))
    }

    /// The JSON of `group` whose members, in order, read `readings`.
    pub fn from_readings(group: &'a GroupInfo, readings: impl Iterator<Item = Option<MemberReading>>) -> GroupJson<'a> {
        let mut state: Option<&'static str> = None;
        let mut brightness: Option<u8> = None;
        for m in readings.flatten() {
            match m.state {
                Some("ON") => state = Some("ON"),
                Some("OFF") if state.is_none() => state = Some("OFF"),
                _ => {}
            }
            if let Some(b) = m.brightness {
                brightness = Some(brightness.map_or(b, |old| old.max(b)));
            }
        }
        GroupJson { brightness, id: group.id, members: &group.units, name: &group.name, state }
    }

    /// Appends the group JSON to `out`: the bytes of the derived `Serialize`, keys copied (as
    /// [`UnitJson::write_json`]).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = Object::open(out);
        o.field("brightness", &self.brightness);
        write_fixed_fields(&mut o, self.id, self.members, self.name);
        o.field("state", &self.state);
        o.close();
    }

    /// [`GroupJson::write_json`] with the fields only a new configuration changes already written
    /// ([`write_group_fixed`]: the group cache keeps them).
    pub fn write_with_fixed(&self, fixed: &str, out: &mut Vec<u8>) {
        let mut o = Object::open(out);
        o.field("brightness", &self.brightness);
        o.raw_fields(fixed);
        o.field("state", &self.state);
        o.close();
    }
}

/// Appends the fields of `group`'s JSON that only a new configuration changes, as JSON text:
/// `"id":1,"members":[1,2],"name":"Hall"` (the group cache keeps it; made once per group).
pub fn write_group_fixed(group: &GroupInfo, out: &mut Vec<u8>) {
    write_fixed_fields(&mut Object::fields_only(out), group.id, &group.units, &group.name);
}

/// The group JSON's `id`, `members` and `name`, written the one way both writers share.
fn write_fixed_fields(o: &mut Object<'_>, id: u32, members: &[u32], name: &str) {
    o.field("id", &id);
    o.field("members", members);
    o.field("name", name);
}

/// The group JSON as a value (for tests and tools).
pub fn group_json(group: &GroupInfo, members: &BTreeMap<u32, MemberReading>) -> Value {
    serde_json::to_value(GroupJson::of(group, |id| members.get(&id).copied())).unwrap_or(Value::Null)
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
mod tests;
