//! The unit, group and network state JSON of docs/mqtt.md, and the plain per-attribute values.
//!
//! Every key of the unit JSON is always present (`null` when unknown), so Home Assistant
//! templates and Node-RED flows never miss a key. The raw controls are kept under `controls`, so
//! nothing the cloud reports is lost even when the bridge does not understand it.

use super::state_text::{Leaf, StateText};
use crate::bridge::caps::Caps;
use crate::bridge::state::{GroupInfo, NetworkStatus, SceneInfo, presence};
use crate::cloud::model::{ColorSource, Control, UnitState};
use crate::color::{hue_sat_to_hs, hue_sat_to_xy, parse_rgb, rgb8_to_hue_sat, rgb8_to_xy, round4, xy_to_hue_sat};
use crate::json_object::Object;
use field::{Scalar, UnitField};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::ops::Range;

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

/// The colour of the unit as hs and CIE xy, from whatever form the `Color` control carries: each
/// as the cloud reports it when it does, else converted from the other (or from `rgb`).
fn colour(unit: &UnitState) -> Option<Colour> {
    find(unit, |c| match c {
        Control::Color(col) => {
            let rgb = || col.rgb.as_deref().and_then(parse_rgb);
            let xy = match (col.x, col.y, col.hue, col.sat) {
                (Some(x), Some(y), ..) => (round4(x), round4(y)),
                (_, _, Some(h), Some(s)) => rounded(hue_sat_to_xy(h, s)),
                _ => rgb().map(|(r, g, b)| rounded(rgb8_to_xy(r, g, b)))?,
            };
            let (hue, sat) = match (col.hue, col.sat) {
                (Some(h), Some(s)) => (h, s),
                _ if col.x.is_some() && col.y.is_some() => xy_to_hue_sat(xy.0, xy.1),
                _ => rgb().map(|(r, g, b)| rgb8_to_hue_sat(r, g, b))?,
            };
            let (h, s) = hue_sat_to_hs(hue, sat);
            Some(Colour { h, s, x: xy.0, y: xy.1 })
        }
        _ => None,
    })
}

/// The active colour mode: follows `Colorsource` (XY/RGB → `hs`, TW → `color_temp`), else the
/// richest control the unit has; always one of the unit's supported modes.
fn color_mode(unit: &UnitState, caps: &Caps) -> &'static str {
    let supported = caps.color_modes();
    let source = find(unit, |c| match c {
        Control::Colorsource(s) => Some(s.source.clone()),
        _ => None,
    });
    let wanted = match source {
        Some(ColorSource::Xy | ColorSource::Rgb) => "hs",
        Some(ColorSource::Tw) => "color_temp",
        _ if find(unit, |c| matches!(c, Control::Color(_)).then_some(())).is_some() => "hs",
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

/// A colour as published: hs (degrees, percent) for Home Assistant's `hs` mode and CIE xy for
/// every reader of the earlier contract. Fields in alphabetical order, as written.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct Colour {
    h: f64,
    s: f64,
    x: f64,
    y: f64,
}

/// Declares the unit JSON once: each line is a field of [`UnitJson`] and its key, in the order
/// of the contract (the order of the attribute topics and of [`UNIT_KEYS`]). The JSON text has
/// its keys in alphabetical order ([`JSON_ORDER`], sorted at compile time), as it always had
/// (readers do not care; golden files and people diffing payloads do). How a field is written
/// follows from its type ([`UnitField`]).
macro_rules! unit_json {
    (<$a:lifetime> $($field:ident: $ty:ty = $key:literal,)*) => {
        /// The unit JSON (docs/mqtt.md), borrowed from the unit: every reading computed once, then
        /// written straight to text ([`UnitJson::write_json`]) and to the plain attribute values
        /// ([`UnitJson::write_parts`]). This is the event hot path: no intermediate `Value` tree,
        /// no allocation but the output buffer's.
        #[derive(Debug)]
        pub struct UnitJson<$a> {
            $($field: $ty,)*
        }

        /// The keys of the unit JSON, in the order of the contract. A `static`: each key is one
        /// string at one address, which names its attribute topic's leaf ([`Leaf::Below`]).
        pub static UNIT_KEYS: [&str; KEY_COUNT] = KEYS;

        const KEYS: [&str; KEY_COUNT] = [$($key,)*];

        /// The number of keys.
        const KEY_COUNT: usize = [$($key,)*].len();

        /// Each field's index in [`UNIT_KEYS`], for the `match`es below.
        #[allow(non_upper_case_globals)]
        mod field_index {
            #[allow(non_camel_case_types, dead_code)]
            enum Field { $($field,)* }
            $(pub(super) const $field: usize = Field::$field as usize;)*
        }

        impl<$a> UnitJson<$a> {
            /// Writes the field of `index` into `o` and returns where its value lies when the
            /// attribute topic copies its spelling (a number).
            #[inline(always)]
            fn write_field(&self, index: usize, o: &mut Object<'_>) -> Range<usize> {
                match index {
                    $(field_index::$field => UnitField::write_json(&self.$field, o, $key),)*
                    _ => 0..0,
                }
            }

            /// The plain scalar of the field of `index` (`None`: null, or not a scalar).
            #[inline(always)]
            fn scalar(&self, index: usize) -> Option<Scalar<'_>> {
                match index {
                    $(field_index::$field => UnitField::scalar(&self.$field),)*
                    _ => None,
                }
            }
        }

        impl Serialize for UnitJson<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut object = s.serialize_struct("UnitJson", KEY_COUNT)?;
                for index in JSON_ORDER {
                    match index {
                        $(field_index::$field => object.serialize_field($key, &self.$field)?,)*
                        _ => {}
                    }
                }
                object.end()
            }
        }
    };
}

unit_json! {
    <'a>
    id: u32 = "id",
    name: Option<&'a str> = "name",
    unit_type: Option<&'a str> = "type",
    online: Option<bool> = "online",
    state: Option<&'static str> = "state",
    brightness: Option<u8> = "brightness",
    dim_level: Option<Reading> = "dim_level",
    color_mode: Option<&'static str> = "color_mode",
    color_temp: Option<u32> = "color_temp",
    color: Option<Colour> = "color",
    occupancy: Option<bool> = "occupancy",
    illuminance: Option<Reading> = "illuminance",
    active_scene_id: Option<u32> = "active_scene_id",
    status: Option<&'a str> = "status",
    condition: Option<i64> = "condition",
    priority: Option<i64> = "priority",
    firmware: Option<&'a str> = "firmware",
    controls: Option<&'a [Control]> = "controls",
}

/// The indices of [`UNIT_KEYS`] in the order the JSON text has them: by key, alphabetically.
const JSON_ORDER: [usize; KEY_COUNT] = {
    let mut order = [0; KEY_COUNT];
    let mut i = 0;
    while i < KEY_COUNT {
        order[i] = i;
        i += 1;
    }
    // An insertion sort: `sort` is not `const`.
    let mut i = 1;
    while i < KEY_COUNT {
        let mut j = i;
        while j > 0 && is_before(KEYS[order[j]].as_bytes(), KEYS[order[j - 1]].as_bytes()) {
            let t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
            j -= 1;
        }
        i += 1;
    }
    order
};

/// `a < b` for byte strings, usable in a `const` (the slices' `<` is not).
const fn is_before(a: &[u8], b: &[u8]) -> bool {
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    a.len() < b.len()
}

impl<'a> UnitJson<'a> {
    /// The readings of `unit` with capabilities `caps`.
    pub fn of(unit: &'a UnitState, caps: &Caps) -> UnitJson<'a> {
        let light = caps.is_light();
        UnitJson {
            active_scene_id: unit.active_scene_id.get(),
            brightness: find(unit, |c| match c {
                Control::Dimmer(d) => Some(to_255(d.value)),
                _ => None,
            }),
            color: colour(unit),
            color_mode: light.then(|| color_mode(unit, caps)),
            color_temp: find(unit, |c| match c {
                Control::Cct(c) => Some(c.value.round() as u32),
                _ => None,
            }),
            condition: unit.condition.get(),
            controls: unit.controls.as_deref(),
            dim_level: unit.dim_level.get().map(Reading),
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

    /// Appends the unit JSON to `out`: the bytes serde_json writes for its `Serialize` (keys in
    /// [`JSON_ORDER`]), with the constant keys copied instead of escaped (see
    /// [`crate::json_object`]; the test `direct_json_is_what_serde_writes` holds the two together).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write_json_at(out);
    }

    /// [`UnitJson::write_json`], returning where each numeric field's value lies in `out`, by
    /// its index in [`UNIT_KEYS`] (an empty range for the others).
    fn write_json_at(&self, out: &mut Vec<u8>) -> NumberSpans {
        let mut at = NumberSpans::default();
        let mut o = Object::open(out);
        for index in JSON_ORDER {
            at.0[index] = self.write_field(index, &mut o);
        }
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
        for (index, leaf) in UNIT_KEYS.iter().copied().enumerate() {
            let Some(s) = self.scalar(index) else { continue };
            let span = at.0[index].clone();
            match s {
                Scalar::Int(_) | Scalar::Num(_) if !span.is_empty() => text.buf().extend_from_within(span),
                _ => s.write(text.buf()),
            }
            text.end_part(Leaf::Below(leaf));
        }
    }
}

/// Where [`UnitJson::write_json`] wrote each numeric field's value, by key index.
#[derive(Default)]
struct NumberSpans([Range<usize>; KEY_COUNT]);

/// The unit JSON as a JSON object (all keys present): for tests and tools; the publisher writes
/// [`UnitJson`] straight to text.
pub fn unit_json(unit: &UnitState, caps: &Caps) -> Map<String, Value> {
    match serde_json::to_value(UnitJson::of(unit, caps)) {
        Ok(Value::Object(map)) => map,
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
/// and none is), `brightness` the highest of the members that are on (an on/off-only member that
/// is on counts as 255), or of all members while none is on, `members` the unit ids. Fields in
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
        // The highest level of the members that are on (an on/off-only member that is on counts
        // as full), and of all members as long as none is on.
        let (mut lit, mut any): (Option<u8>, Option<u8>) = (None, None);
        let higher = |old: Option<u8>, b: u8| Some(old.map_or(b, |old| old.max(b)));
        for member in readings.flatten() {
            match member.state {
                Some("ON") => {
                    state = Some("ON");
                    lit = higher(lit, member.brightness.unwrap_or(u8::MAX));
                }
                Some("OFF") if state.is_none() => state = Some("OFF"),
                _ => {}
            }
            if let Some(b) = member.brightness {
                any = higher(any, b);
            }
        }
        let brightness = lit.or(any);
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

mod field;

#[cfg(test)]
mod tests;
