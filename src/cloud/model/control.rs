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
//! known (key order in real frames is arbitrary): `control/de.rs`.

use serde_json::{Map, Value};
use std::sync::Arc;

use super::OptF64;

mod de;
mod ser;

pub use de::controls_opt;

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
    pub name: Option<Arc<str>>,
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
    pub name: Option<Arc<str>>,
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
    pub name: Option<Arc<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// A `Colorsource` control.
#[derive(Clone, Debug, PartialEq)]
pub struct Colorsource {
    /// The active colour model.
    pub source: ColorSource,
    /// Channel name, if any.
    pub name: Option<Arc<str>>,
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
    pub status: Arc<str>,
    /// Channel name, if any.
    pub name: Option<Arc<str>>,
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
    pub name: Option<Arc<str>>,
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
    pub name: Option<Arc<str>>,
    /// Fields the model does not name.
    pub extra: Extra,
}

/// A control with no documented fields (Switch).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plain {
    /// Channel name, if any.
    pub name: Option<Arc<str>>,
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
