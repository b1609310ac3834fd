//! Serialisation of [`Control`] back to the JSON object the cloud sent: `type` first, then the
//! typed fields, then the extra fields kept from parsing. One list of fields feeds both serde
//! (`Serialize`) and the direct writer of the event hot path ([`Control::write_json`]).

use std::convert::Infallible;

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::{Control, Extra};
use crate::json_object::{Object, write_value};

/// A number written as an integer when it is integral (`2700.0` → `2700`), as JSON readers expect.
struct Num(f64);

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
        if self.0.is_finite() && self.0.fract() == 0.0 && self.0.abs() < EXACT {
            s.serialize_i64(self.0 as i64)
        } else {
            s.serialize_f64(self.0)
        }
    }
}

/// Where the fields of a typed control go: a serde map ([`MapWriter`], for `Serialize`) or a
/// JSON object written straight to bytes ([`Object`], for [`Control::write_json`]). The list of
/// fields is written once, in [`Control::write_fields`].
trait FieldSink {
    type Ok;
    type Error;
    fn num(&mut self, key: &'static str, v: Option<f64>) -> Result<(), Self::Error>;
    fn str(&mut self, key: &'static str, v: Option<&str>) -> Result<(), Self::Error>;
    /// Writes the extra fields kept from parsing and closes the object.
    fn end(self, extra: &Extra) -> Result<Self::Ok, Self::Error>;
}

/// Writes the fields of a typed control into an open serde map.
struct MapWriter<M>(M);

impl<M: SerializeMap> FieldSink for MapWriter<M> {
    type Ok = M::Ok;
    type Error = M::Error;

    fn num(&mut self, key: &'static str, v: Option<f64>) -> Result<(), M::Error> {
        match v {
            Some(v) => self.0.serialize_entry(key, &Num(v)),
            None => Ok(()),
        }
    }

    fn str(&mut self, key: &'static str, v: Option<&str>) -> Result<(), M::Error> {
        match v {
            Some(v) => self.0.serialize_entry(key, v),
            None => Ok(()),
        }
    }

    fn end(mut self, extra: &Extra) -> Result<M::Ok, M::Error> {
        if let Some(map) = extra.get() {
            for (k, v) in map {
                self.0.serialize_entry(k, v)?;
            }
        }
        self.0.end()
    }
}

impl FieldSink for Object<'_> {
    type Ok = ();
    type Error = Infallible;

    fn num(&mut self, key: &'static str, v: Option<f64>) -> Result<(), Infallible> {
        if let Some(v) = v {
            self.field(key, &Num(v));
        }
        Ok(())
    }

    fn str(&mut self, key: &'static str, v: Option<&str>) -> Result<(), Infallible> {
        if let Some(v) = v {
            self.field(key, v);
        }
        Ok(())
    }

    fn end(mut self, extra: &Extra) -> Result<(), Infallible> {
        if let Some(map) = extra.get() {
            for (k, v) in map {
                self.any_field(k, v);
            }
        }
        self.close();
        Ok(())
    }
}

impl Control {
    /// Appends the control's JSON to `out`: the same bytes as serde_json writes for its
    /// `Serialize`, without escaping the constant keys (the event hot path; see
    /// [`crate::json_object`]).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let kind = match self {
            Self::Other(v) => return write_value(out, v),
            other => other.type_name().unwrap_or_default(),
        };
        let mut object = Object::open(out);
        object.field("type", kind);
        let Ok(()) = self.write_fields(object);
    }

    /// Writes the typed fields (after `type`) and the extra fields, and closes the object.
    fn write_fields<F: FieldSink>(&self, mut w: F) -> Result<F::Ok, F::Error> {
        match self {
            Self::Dimmer(c) | Self::OnOff(c) | Self::White(c) | Self::Vertical(c) => {
                w.str("name", c.name.as_deref())?;
                w.num("value", Some(c.value))?;
                w.end(&c.extra)
            }
            Self::Cct(c) => {
                w.str("name", c.name.as_deref())?;
                w.num("min", Some(c.min))?;
                w.num("max", Some(c.max))?;
                w.num("value", Some(c.value))?;
                w.num("level", c.level.get())?;
                w.num("tw", c.tw.get())?;
                w.end(&c.extra)
            }
            Self::Color(c) => {
                w.str("name", c.name.as_deref())?;
                w.num("hue", c.hue)?;
                w.num("sat", c.sat)?;
                w.num("x", c.x)?;
                w.num("y", c.y)?;
                w.str("rgb", c.rgb.as_deref())?;
                w.end(&c.extra)
            }
            Self::Colorsource(c) => {
                w.str("name", c.name.as_deref())?;
                w.str("source", Some(c.source.as_str()))?;
                w.end(&c.extra)
            }
            Self::Presence(c) | Self::Overheat(c) => {
                w.str("name", c.name.as_deref())?;
                w.str("status", Some(&c.status))?;
                w.end(&c.extra)
            }
            Self::Lux(c) => {
                w.str("name", c.name.as_deref())?;
                w.num("value", c.value)?;
                w.num("level", c.level)?;
                w.end(&c.extra)
            }
            Self::Switch(c) => {
                w.str("name", c.name.as_deref())?;
                w.end(&c.extra)
            }
            Self::Slider(c) => {
                w.str("name", c.name.as_deref())?;
                w.str("label", c.label.as_deref())?;
                w.num("min", c.min.get())?;
                w.num("max", c.max.get())?;
                w.num("value", c.value.get())?;
                w.end(&c.extra)
            }
            // Written whole by the callers; closing the object keeps the match total without a
            // panic path.
            Self::Other(_) => w.end(&Extra::default()),
        }
    }
}

impl Serialize for Control {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kind = match self {
            Self::Other(v) => return v.serialize(s),
            other => other.type_name().unwrap_or_default(),
        };
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", kind)?;
        self.write_fields(MapWriter(m))
    }
}
