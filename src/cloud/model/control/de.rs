//! Reading a control object in one pass: every known key goes into a fixed slot, every other key
//! into a side map, and the typed [`Control`] is built once the `type` is known (key order in
//! real frames is arbitrary). Also [`controls_opt`], the flat-or-nested `controls` list.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::super::shared_text;
use super::{Cct, Color, ColorSource, Colorsource, Control, Extra, Lux, Plain, Slider, StatusControl, ValueControl};

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
                // A `match` on the name compiles to a dispatch on its length and bytes; a scan of
                // `KEY_NAMES` would compare up to 15 names per key.
                let k = match v {
                    "type" => K::Type,
                    "name" => K::Name,
                    "value" => K::Value,
                    "min" => K::Min,
                    "max" => K::Max,
                    "level" => K::Level,
                    "tw" => K::Tw,
                    "hue" => K::Hue,
                    "sat" => K::Sat,
                    "x" => K::X,
                    "y" => K::Y,
                    "rgb" => K::Rgb,
                    "source" => K::Source,
                    "status" => K::Status,
                    "label" => K::Label,
                    _ => return Ok(Key::Unknown(v.to_owned())),
                };
                Ok(Key::Known(k as usize))
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

    /// Takes a string field through `make`; a field of another JSON type stays and ends up in
    /// `extra`.
    fn take_str<T>(&mut self, k: K, make: impl FnOnce(Cow<'de, str>) -> T) -> Option<T> {
        let slot = &mut self.known[k as usize];
        if matches!(slot, Some(Slot::Str(_)))
            && let Some(Slot::Str(s)) = slot.take()
        {
            return Some(make(s));
        }
        None
    }

    /// Takes a string field.
    fn string(&mut self, k: K) -> Option<Box<str>> {
        self.take_str(k, Into::into)
    }

    /// Takes a string field as a shared string ([`shared_text`]): a control's name or status
    /// repeats from unit to unit.
    fn shared(&mut self, k: K) -> Option<Arc<str>> {
        self.take_str(k, |s| shared_text::share(&s))
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
            name: self.shared(K::Name),
            extra: self.take_extra(),
        })
    }

    fn status_control(&mut self) -> Option<StatusControl> {
        if !self.is_str(K::Status) {
            return None;
        }
        let status = self.shared(K::Status).unwrap_or_else(|| shared_text::share(""));
        Some(StatusControl { status, name: self.shared(K::Name), extra: self.take_extra() })
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
                    name: self.shared(K::Name),
                    extra: self.take_extra(),
                })
            }
            "Color" => Control::Color(Box::new(Color {
                hue: self.num(K::Hue),
                sat: self.num(K::Sat),
                x: self.num(K::X),
                y: self.num(K::Y),
                rgb: self.string(K::Rgb),
                name: self.shared(K::Name),
                extra: self.take_extra(),
            })),
            "Colorsource" => {
                let source = self.string(K::Source)?;
                Control::Colorsource(Colorsource {
                    source: ColorSource::parse(&source),
                    name: self.shared(K::Name),
                    extra: self.take_extra(),
                })
            }
            "Lux" => Control::Lux(Lux {
                value: self.num(K::Value),
                level: self.num(K::Level),
                name: self.shared(K::Name),
                extra: self.take_extra(),
            }),
            "Switch" => Control::Switch(Plain { name: self.shared(K::Name), extra: self.take_extra() }),
            "Slider" => Control::Slider(Slider {
                min: self.num(K::Min).into(),
                max: self.num(K::Max).into(),
                value: self.num(K::Value).into(),
                label: self.string(K::Label),
                name: self.shared(K::Name),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `match` in `Key`'s visitor and `KEY_NAMES` must name every slot alike: a key read into
    /// the wrong slot would be written back under another name.
    #[test]
    fn every_key_name_reads_into_its_own_slot() {
        for (i, name) in KEY_NAMES.iter().enumerate() {
            match serde_json::from_str::<Key>(&format!("\"{name}\"")) {
                Ok(Key::Known(slot)) => assert_eq!(slot, i, "{name}"),
                _ => panic!("{name} is not a known key"),
            }
        }
        assert!(matches!(serde_json::from_str::<Key>("\"Value\""), Ok(Key::Unknown(k)) if k == "Value"));
    }
}
