//! Control objects of a unit (`Dimmer`, `CCT`, `Presence`, …) and the `controls` list parser.
//!
//! The REST state nests controls (`[[{…},{…}]]`) while `unitChanged` events send them flat
//! (`[{…},{…}]`); [`controls_opt`] accepts both and yields one flat list. Known control types are
//! typed; an unknown type is kept as raw JSON in [`Control::Other`], and fields of a known type that
//! the model does not name are kept in [`Extra`], so re-serialising a control loses nothing (the
//! bridge republishes the raw controls under `controls`).
//!
//! Parsing is on the event hot path, so a control is read in one pass: every known key goes into a
//! fixed slot, every other key into a side map, and the typed variant is built once the `type` is
//! known (key order in real frames is arbitrary).

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::OptF64;

mod ser;

/// One control object of a unit, as reported in unit state and events.
#[derive(Clone, Debug, PartialEq)]
pub enum Control {
    /// `Dimmer`: `value` 0..1 (several may sit on one unit, told apart by `name`).
    Dimmer(ValueControl),
    /// `OnOff`: `value` 0 or 1.
    OnOff(ValueControl),
    /// `CCT`: tunable white; `value` in kelvin between `min` and `max`.
    Cct(Cct),
    /// `Color`: hue/saturation 0..1, CIE xy and/or an `rgb(r, g, b)` string. Boxed: the
    /// largest control (104 bytes) would make every control of every unit 104 bytes instead of
    /// 72, and a unit's list of two a 224-byte block instead of 160.
    Color(Box<Color>),
    /// `Colorsource`: which colour model is active (`XY`, `RGB`, `TW`).
    Colorsource(Colorsource),
    /// `Presence`: a presence sensor's `status` (`absent` or something else).
    Presence(StatusControl),
    /// `Lux`: a light sensor's `value` (lux) and `level`.
    Lux(Lux),
    /// `Switch`: a switch or push button; no fields are documented.
    Switch(Plain),
    /// `White`: the white channel of an RGBW luminaire, `value` 0..1.
    White(ValueControl),
    /// `Vertical`: up/down light distribution, `value` 0..1.
    Vertical(ValueControl),
    /// `Overheat`: read-only `status` (`ok`).
    Overheat(StatusControl),
    /// `Slider`: a generic slider with optional `min`, `max`, `value`, `label`.
    Slider(Slider),
    /// A control of an unknown type, or a known type missing a required field, kept as raw JSON.
    Other(Value),
}

/// A control with a single numeric `value` (Dimmer, OnOff, White, Vertical).
#[derive(Clone, Debug, PartialEq)]
pub struct ValueControl {
    /// The level, 0..1 (OnOff: 0 or 1).
    pub value: f64,
    /// Channel name such as `dimmer0`, when the unit has several.
    pub name: Option<Box<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// A `CCT` (tunable white) control.
#[derive(Clone, Debug, PartialEq)]
pub struct Cct {
    /// Warmest colour temperature in kelvin.
    pub min: f64,
    /// Coldest colour temperature in kelvin.
    pub max: f64,
    /// Current colour temperature in kelvin.
    pub value: f64,
    /// Position between `min` and `max`, 0..1.
    pub level: OptF64,
    /// Undocumented `tw` number.
    pub tw: OptF64,
    /// Channel name, usually `temperature`.
    pub name: Option<Box<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// A `Color` control; every field is optional because clients have seen different subsets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Color {
    /// Hue, 0..1.
    pub hue: Option<f64>,
    /// Saturation, 0..1.
    pub sat: Option<f64>,
    /// CIE 1931 x.
    pub x: Option<f64>,
    /// CIE 1931 y.
    pub y: Option<f64>,
    /// `rgb(r, g, b)` string.
    pub rgb: Option<Box<str>>,
    /// Channel name, usually `rgb`.
    pub name: Option<Box<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// A `Colorsource` control.
#[derive(Clone, Debug, PartialEq)]
pub struct Colorsource {
    /// The active colour model.
    pub source: ColorSource,
    /// Channel name, if any.
    pub name: Option<Box<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// The colour model named by a `Colorsource` control.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColorSource {
    /// CIE xy (`XY`).
    Xy,
    /// Hue/saturation (`RGB`).
    Rgb,
    /// Tunable white (`TW`).
    Tw,
    /// Any other spelling, kept as sent.
    Other(Box<str>),
}

impl ColorSource {
    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Self {
        match s {
            "XY" => Self::Xy,
            "RGB" => Self::Rgb,
            "TW" => Self::Tw,
            other => Self::Other(other.into()),
        }
    }

    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Xy => "XY",
            Self::Rgb => "RGB",
            Self::Tw => "TW",
            Self::Other(s) => s,
        }
    }
}

/// A control with a textual `status` (Presence, Overheat).
#[derive(Clone, Debug, PartialEq)]
pub struct StatusControl {
    /// The status as sent (`absent`, `ok`, …).
    pub status: Box<str>,
    /// Channel name, if any.
    pub name: Option<Box<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// A `Lux` control.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lux {
    /// Illuminance in lux.
    pub value: Option<f64>,
    /// Relative level, 0..1.
    pub level: Option<f64>,
    /// Channel name, if any.
    pub name: Option<Box<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// A `Slider` control.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Slider {
    /// Lower bound.
    pub min: OptF64,
    /// Upper bound.
    pub max: OptF64,
    /// Current value.
    pub value: OptF64,
    /// Display label.
    pub label: Option<Box<str>>,
    /// Channel name, if any.
    pub name: Option<Box<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// A control with no documented fields (Switch).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plain {
    /// Channel name, if any.
    pub name: Option<Box<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// Fields of a known control type that the model does not name (or that had an unexpected JSON
/// type), kept so that re-serialising the control gives back what the cloud sent. Empty in the
/// common case and then costs one pointer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Extra(Option<Box<Map<String, Value>>>);

impl Extra {
    /// The extra fields, if any.
    pub fn get(&self) -> Option<&Map<String, Value>> {
        self.0.as_deref()
    }

    fn from_map(map: Map<String, Value>) -> Self {
        if map.is_empty() { Self(None) } else { Self(Some(Box::new(map))) }
    }
}

impl Control {
    /// The control's `type` as sent (`Dimmer`, `CCT`, …); `None` for a raw control without one.
    pub fn type_name(&self) -> Option<&str> {
        Some(match self {
            Self::Dimmer(_) => "Dimmer",
            Self::OnOff(_) => "OnOff",
            Self::Cct(_) => "CCT",
            Self::Color(_) => "Color",
            Self::Colorsource(_) => "Colorsource",
            Self::Presence(_) => "Presence",
            Self::Lux(_) => "Lux",
            Self::Switch(_) => "Switch",
            Self::White(_) => "White",
            Self::Vertical(_) => "Vertical",
            Self::Overheat(_) => "Overheat",
            Self::Slider(_) => "Slider",
            Self::Other(v) => return v.get("type").and_then(Value::as_str),
        })
    }

    /// The control's `name` (channel name such as `dimmer0`), if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Dimmer(c) | Self::OnOff(c) | Self::White(c) | Self::Vertical(c) => c.name.as_deref(),
            Self::Cct(c) => c.name.as_deref(),
            Self::Color(c) => c.name.as_deref(),
            Self::Colorsource(c) => c.name.as_deref(),
            Self::Presence(c) | Self::Overheat(c) => c.name.as_deref(),
            Self::Lux(c) => c.name.as_deref(),
            Self::Switch(c) => c.name.as_deref(),
            Self::Slider(c) => c.name.as_deref(),
            Self::Other(v) => v.get("name").and_then(Value::as_str),
        }
    }

    /// The control as the JSON object the cloud sent (up to key order and `3.0` → `3`).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

// ---------------------------------------------------------------------------------------------
// Deserialisation
// ---------------------------------------------------------------------------------------------

/// Keys with a fixed slot in [`Fields`]; the order matches [`KEY_NAMES`].
#[derive(Clone, Copy)]
#[repr(usize)]
enum K {
    Type,
    Name,
    Value,
    Min,
    Max,
    Level,
    Tw,
    Hue,
    Sat,
    X,
    Y,
    Rgb,
    Source,
    Status,
    Label,
}

const KEY_NAMES: [&str; 15] =
    ["type", "name", "value", "min", "max", "level", "tw", "hue", "sat", "x", "y", "rgb", "source", "status", "label"];

/// A key of a control object: a known slot or any other name.
enum Key {
    Known(usize),
    Unknown(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a control field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match KEY_NAMES.iter().position(|k| *k == v) {
                    Some(i) => Key::Known(i),
                    None => Key::Unknown(v.to_owned()),
                })
            }
        }
        deserializer.deserialize_identifier(V)
    }
}

/// One known field of a control object while it is being read: numbers and strings (borrowed
/// from the frame when it has no escapes) without building a `serde_json::Value`; anything else
/// as raw JSON, which then ends up in the control's extra fields.
enum Slot<'de> {
    Num(serde_json::Number),
    Str(Cow<'de, str>),
    Raw(Value),
}

impl Slot<'_> {
    fn into_value(self) -> Value {
        match self {
            Self::Num(n) => Value::Number(n),
            Self::Str(s) => Value::String(s.into_owned()),
            Self::Raw(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for Slot<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Slot<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Slot<'de>, E> {
                Ok(Slot::Num(v.into()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Slot<'de>, E> {
                Ok(Slot::Num(v.into()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Slot<'de>, E> {
                Ok(serde_json::Number::from_f64(v).map_or(Slot::Raw(Value::Null), Slot::Num))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Slot<'de>, E> {
                Ok(Slot::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Slot<'de>, E> {
                Ok(Slot::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Slot<'de>, E> {
                Ok(Slot::Str(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Slot<'de>, E> {
                Ok(Slot::Raw(Value::Bool(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Slot<'de>, E> {
                Ok(Slot::Raw(Value::Null))
            }
            fn visit_none<E: de::Error>(self) -> Result<Slot<'de>, E> {
                Ok(Slot::Raw(Value::Null))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Slot<'de>, D::Error> {
                Slot::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Slot<'de>, A::Error> {
                Value::deserialize(SeqAccessDeserializer::new(seq)).map(Slot::Raw)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Slot<'de>, A::Error> {
                Value::deserialize(MapAccessDeserializer::new(map)).map(Slot::Raw)
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The fields of one control object while it is being read.
#[derive(Default)]
struct Fields<'de> {
    known: [Option<Slot<'de>>; 15],
    extra: Map<String, Value>,
}

impl<'de> Fields<'de> {
    fn is_num(&self, k: K) -> bool {
        matches!(self.known[k as usize], Some(Slot::Num(_)))
    }

    fn is_str(&self, k: K) -> bool {
        matches!(self.known[k as usize], Some(Slot::Str(_)))
    }

    /// Takes a numeric field; a field of another JSON type stays and ends up in `extra`.
    fn num(&mut self, k: K) -> Option<f64> {
        let slot = &mut self.known[k as usize];
        match slot {
            Some(Slot::Num(n)) => {
                let v = n.as_f64();
                *slot = None;
                v
            }
            _ => None,
        }
    }

    /// Takes a string field; a field of another JSON type stays and ends up in `extra`.
    fn string(&mut self, k: K) -> Option<Box<str>> {
        let slot = &mut self.known[k as usize];
        if matches!(slot, Some(Slot::Str(_)))
            && let Some(Slot::Str(s)) = slot.take()
        {
            return Some(s.into());
        }
        None
    }

    /// Whatever was not taken, as the control's extra fields.
    fn take_extra(&mut self) -> Extra {
        self.known[K::Type as usize] = None;
        if self.extra.is_empty() && self.known.iter().all(Option::is_none) {
            return Extra(None);
        }
        let mut extra = std::mem::take(&mut self.extra);
        for (i, slot) in self.known.iter_mut().enumerate() {
            if let Some(v) = slot.take() {
                extra.insert(KEY_NAMES[i].to_owned(), v.into_value());
            }
        }
        Extra::from_map(extra)
    }

    /// The whole object back as raw JSON (for [`Control::Other`]).
    fn into_value(self) -> Value {
        let mut map = self.extra;
        for (i, v) in self.known.into_iter().enumerate() {
            if let Some(v) = v {
                map.insert(KEY_NAMES[i].to_owned(), v.into_value());
            }
        }
        Value::Object(map)
    }

    fn value_control(&mut self) -> Option<ValueControl> {
        if !self.is_num(K::Value) {
            return None;
        }
        Some(ValueControl {
            value: self.num(K::Value).unwrap_or(0.0),
            name: self.string(K::Name),
            extra: self.take_extra(),
        })
    }

    fn status_control(&mut self) -> Option<StatusControl> {
        if !self.is_str(K::Status) {
            return None;
        }
        let status = self.string(K::Status).unwrap_or_default();
        Some(StatusControl { status, name: self.string(K::Name), extra: self.take_extra() })
    }

    /// Builds the typed control for `kind`; `None` (with nothing taken) when the fields do not
    /// fit it.
    fn build(&mut self, kind: &str) -> Option<Control> {
        Some(match kind {
            "Dimmer" => Control::Dimmer(self.value_control()?),
            "OnOff" => Control::OnOff(self.value_control()?),
            "White" => Control::White(self.value_control()?),
            "Vertical" => Control::Vertical(self.value_control()?),
            "Presence" => Control::Presence(self.status_control()?),
            "Overheat" => Control::Overheat(self.status_control()?),
            "CCT" => {
                if !(self.is_num(K::Min) && self.is_num(K::Max) && self.is_num(K::Value)) {
                    return None;
                }
                Control::Cct(Cct {
                    min: self.num(K::Min).unwrap_or(0.0),
                    max: self.num(K::Max).unwrap_or(0.0),
                    value: self.num(K::Value).unwrap_or(0.0),
                    level: self.num(K::Level).into(),
                    tw: self.num(K::Tw).into(),
                    name: self.string(K::Name),
                    extra: self.take_extra(),
                })
            }
            "Color" => Control::Color(Box::new(Color {
                hue: self.num(K::Hue),
                sat: self.num(K::Sat),
                x: self.num(K::X),
                y: self.num(K::Y),
                rgb: self.string(K::Rgb),
                name: self.string(K::Name),
                extra: self.take_extra(),
            })),
            "Colorsource" => {
                let source = self.string(K::Source)?;
                Control::Colorsource(Colorsource {
                    source: ColorSource::parse(&source),
                    name: self.string(K::Name),
                    extra: self.take_extra(),
                })
            }
            "Lux" => Control::Lux(Lux {
                value: self.num(K::Value),
                level: self.num(K::Level),
                name: self.string(K::Name),
                extra: self.take_extra(),
            }),
            "Switch" => Control::Switch(Plain { name: self.string(K::Name), extra: self.take_extra() }),
            "Slider" => Control::Slider(Slider {
                min: self.num(K::Min).into(),
                max: self.num(K::Max).into(),
                value: self.num(K::Value).into(),
                label: self.string(K::Label),
                name: self.string(K::Name),
                extra: self.take_extra(),
            }),
            _ => return None,
        })
    }
}

/// Reads one control object from a map.
fn control_from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Control, A::Error> {
    let mut fields = Fields::default();
    while let Some(key) = map.next_key::<Key>()? {
        match key {
            Key::Known(i) => fields.known[i] = Some(map.next_value()?),
            Key::Unknown(name) => {
                fields.extra.insert(name, map.next_value()?);
            }
        }
    }
    let kind = match fields.known[K::Type as usize].take() {
        Some(Slot::Str(s)) => s,
        other => {
            fields.known[K::Type as usize] = other;
            return Ok(Control::Other(fields.into_value()));
        }
    };
    match fields.build(&kind) {
        Some(control) => Ok(control),
        None => {
            fields.known[K::Type as usize] = Some(Slot::Str(kind));
            Ok(Control::Other(fields.into_value()))
        }
    }
}

/// A control, or a nested list of controls (REST's `[[…]]` shape), or any other JSON value.
enum Entry {
    One(Control),
    Many(Vec<Control>),
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a control object or a list of control objects")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Entry, A::Error> {
        control_from_map(map).map(Entry::One)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Entry, A::Error> {
        Vec::<Control>::deserialize(SeqAccessDeserializer::new(seq)).map(Entry::Many)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Entry, E> {
        Ok(Entry::One(Control::Other(Value::Bool(v))))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Entry, E> {
        Ok(Entry::One(Control::Other(v.into())))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Entry, E> {
        Ok(Entry::One(Control::Other(v.into())))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Entry, E> {
        Ok(Entry::One(Control::Other(v.into())))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Entry, E> {
        Ok(Entry::One(Control::Other(v.into())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Entry, E> {
        Ok(Entry::Many(Vec::new()))
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EntryVisitor)
    }
}

impl<'de> Deserialize<'de> for Control {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(EntryVisitor)? {
            Entry::One(c) => Ok(c),
            // A list where one control was expected: keep it raw rather than fail the frame.
            Entry::Many(list) => Ok(Control::Other(Value::Array(list.iter().map(Control::to_value).collect()))),
        }
    }
}

/// Deserialises a `controls` field, flat or nested, into one flat list; `null` gives `None`.
///
/// Use with `#[serde(default, deserialize_with = "controls_opt")]` so a missing field (offline
/// units) also gives `None`, which tells "no news" apart from "no controls".
pub fn controls_opt<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<Control>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Vec<Control>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of controls (flat or nested)")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            // Most units have one or two controls. The list lives as long as the unit (25,000 of
            // them on a big site), so spare capacity is given back.
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(2));
            while let Some(entry) = seq.next_element::<Entry>()? {
                match entry {
                    Entry::One(c) => out.push(c),
                    Entry::Many(list) => out.extend(list),
                }
            }
            out.shrink_to_fit();
            Ok(Some(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            // `{}` (seen for `sensors`) means no controls; any other object is one control.
            let value = Map::deserialize(MapAccessDeserializer::new(map))?;
            if value.is_empty() {
                return Ok(Some(Vec::new()));
            }
            let control = Control::deserialize(Value::Object(value)).map_err(de::Error::custom)?;
            Ok(Some(vec![control]))
        }
    }
    deserializer.deserialize_any(V)
}
