//! Typed serde model of the cloud service's resources and WebSocket messages.
//!
//! The model follows the service's REST specification and the payload facts collected from public
//! clients. It is deliberately tolerant (docs/cloud.md): integers may arrive as floats, controls come
//! nested or flat, offline units lack fields, unknown fields are ignored and unknown control types
//! are kept raw. REST resources are parsed rarely and use `String`; the unit state, which also
//! arrives in every `unitChanged` event, uses `Box<str>` to stay small, and [`shared_text`] for
//! the short strings that repeat from unit to unit.
//!
//! Submodules: [`control`] (control objects), [`frame`] (server → client WebSocket messages),
//! [`client`] (client → server WebSocket messages), [`de`] (the lenient serde helpers).

pub mod client;
pub mod control;
pub mod de;
pub mod frame;
mod opt_f64;
mod opt_int;
mod secret;
mod sessions;
pub mod shared_text;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use client::{ClientMessage, RgbTarget, SourceTarget, TargetControls, ValueTarget, XyTarget};
pub use control::{
    Cct, Color, ColorSource, Colorsource, Control, Extra, Lux, Plain, Slider, StatusControl, ValueControl,
};
pub use frame::{FrameError, JsonError, ServerMessage, WireStatusKind, parse_frame};
pub use opt_f64::OptF64;
pub use opt_int::{Absent, OptI32, OptInt, OptNum, OptU32};
pub use secret::Secret;
pub use sessions::{Credentials, NetworkSessionEntry, NetworkSessions, NetworkSummary, Site, UserSession};

// ---------------------------------------------------------------------------------------------
// Network
// ---------------------------------------------------------------------------------------------

/// The gateway of a network (the phone or device bridging it to the cloud).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Gateway {
    /// Gateway name.
    #[serde(deserialize_with = "de::or_default")]
    pub name: String,
}

/// A network document: `GET /v1/networks/{id}` ([`Network`], units without state) and
/// `GET /v1/networks/{id}/state` ([`NetworkState`], unit states plus `dimLevel` and
/// `activeScenes`). The two responses share every other field, so they share one type, generic
/// over the unit type.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, bound(deserialize = "U: Deserialize<'de> + Default"))]
pub struct NetworkDoc<U> {
    /// Network id.
    #[serde(deserialize_with = "de::or_default")]
    pub id: String,
    /// Network name.
    #[serde(deserialize_with = "de::or_default")]
    pub name: String,
    /// Configuration revision; changes when units, scenes or groups change.
    #[serde(deserialize_with = "de::lenient_int_opt")]
    pub revision: Option<u64>,
    /// Network grade.
    #[serde(deserialize_with = "de::or_default")]
    pub grade: String,
    /// Network address (12 hex digits).
    #[serde(deserialize_with = "de::or_default")]
    pub address: String,
    /// Former name of `address`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The gateway, if reported.
    pub gateway: Option<Gateway>,
    /// Network type.
    #[serde(rename = "type", deserialize_with = "de::or_default")]
    pub network_type: String,
    /// Time zone in region/city form.
    #[serde(deserialize_with = "de::or_default")]
    pub timezone: String,
    /// Photos of the network.
    #[serde(deserialize_with = "de::or_default")]
    pub photos: Vec<Photo>,
    /// Network-wide dim level, 0..1 (state only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dim_level: Option<f64>,
    /// Ids of the active scenes (state only).
    #[serde(deserialize_with = "de::lenient_int_vec", skip_serializing_if = "Vec::is_empty")]
    pub active_scenes: Vec<u32>,
    /// Units (or unit states) by unit id (string key).
    #[serde(deserialize_with = "de::or_default")]
    pub units: BTreeMap<String, U>,
    /// Scenes by key; the key need not equal the scene's `id`.
    #[serde(deserialize_with = "de::or_default")]
    pub scenes: BTreeMap<String, Scene>,
    /// Groups by group id (string key).
    #[serde(deserialize_with = "de::or_default")]
    pub groups: BTreeMap<String, Group>,
}

/// `GET /v1/networks/{id}`: network configuration (units without state, scenes, groups).
pub type Network = NetworkDoc<Unit>;

/// `GET /v1/networks/{id}/state`: the network with unit states, dim level and active scenes.
pub type NetworkState = NetworkDoc<UnitState>;

/// A unit (luminaire, sensor, switch) as listed in the network configuration.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unit {
    /// Unit id (may change when a unit is re-added; `address` is stable).
    #[serde(deserialize_with = "de::lenient_int")]
    pub id: u32,
    /// Unit address (12 hex digits).
    #[serde(default, deserialize_with = "de::or_default")]
    pub address: String,
    /// Unit name.
    #[serde(default, deserialize_with = "de::or_default")]
    pub name: String,
    /// Image id, when the unit has an image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// View order; 0 when the unit belongs to a group.
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub position: Option<i32>,
    /// Fixture id (see `GET /v1/fixtures/{id}`).
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub fixture_id: Option<u32>,
    /// Firmware version such as `32.10`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware_version: Option<String>,
    /// Group id; 0 when the unit is in no group.
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub group_id: Option<u32>,
    /// Free-form labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Value>,
    /// Unit type (`Luminaire`, `Sensor`, `Driver`, `BatterySwitch`, `PushButton`, …).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub unit_type: Option<String>,
}

/// The state of one unit: `GET …/units/{id}/state`, the units of the network state, and the
/// body of a `unitChanged` event.
///
/// Everything but `id` is optional: offline units omit `on`, `controls`, `dimLevel`, `status` and
/// `priority`, and events carry only what the gateway reported. A missing field means "not
/// reported", not "false" or "empty".
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitState {
    /// Unit id.
    #[serde(deserialize_with = "de::lenient_int")]
    pub id: u32,
    /// Unit address (12 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Box<str>>,
    /// Unit name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Box<str>>,
    /// Image id. Boxed twice, a thin pointer: most units have none, and the 8 bytes it saves keep
    /// a `UnitState` (kept per unit, in an `Arc`) in the allocator's 192-byte size class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Box<Box<str>>>,
    /// View order.
    #[serde(default, skip_serializing_if = "OptI32::is_none")]
    pub position: OptI32,
    /// Fixture id.
    #[serde(default, skip_serializing_if = "OptU32::is_none")]
    pub fixture_id: OptU32,
    /// Firmware version.
    #[serde(default, deserialize_with = "shared_text::opt", skip_serializing_if = "Option::is_none")]
    pub firmware_version: Option<Arc<str>>,
    /// Group id; 0 = none.
    #[serde(default, skip_serializing_if = "OptU32::is_none")]
    pub group_id: OptU32,
    /// Unit type.
    #[serde(default, rename = "type", deserialize_with = "shared_text::opt", skip_serializing_if = "Option::is_none")]
    pub unit_type: Option<Arc<str>>,
    /// Priority (meaning not documented; 0, 3, 12 seen).
    #[serde(default, skip_serializing_if = "OptInt::is_none")]
    pub priority: OptInt,
    /// Scene number (meaning not documented).
    #[serde(default, skip_serializing_if = "OptInt::is_none")]
    pub scene: OptInt,
    /// Whether the unit is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<bool>,
    /// Whether the unit is reachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online: Option<bool>,
    /// Condition flags (0, 128, 134 seen).
    #[serde(default, skip_serializing_if = "OptInt::is_none")]
    pub condition: OptInt,
    /// Status text (`ok` or a message).
    #[serde(default, deserialize_with = "shared_text::opt", skip_serializing_if = "Option::is_none")]
    pub status: Option<Arc<str>>,
    /// Id of the scene the unit follows; 0 = none.
    #[serde(default, skip_serializing_if = "OptU32::is_none")]
    pub active_scene_id: OptU32,
    /// The unit's controls, flattened; `None` when the payload had none (offline units).
    #[serde(default, deserialize_with = "control::controls_opt", skip_serializing_if = "Option::is_none")]
    pub controls: Option<Vec<Control>>,
    /// The unit's dim level, 0..1 (not the same number as the Dimmer value).
    #[serde(default, skip_serializing_if = "OptF64::is_none")]
    pub dim_level: OptF64,
    /// Older identity block (`_name`, `fixture_model`, `OEM`, …), kept raw. Boxed: it is rare,
    /// and inline it would take a `UnitState` over the allocator's 192-byte size class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Box<Value>>,
}

// ---------------------------------------------------------------------------------------------
// Scenes, groups, photos
// ---------------------------------------------------------------------------------------------

/// A scene.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scene {
    /// Scene id (the key of the scenes map may differ).
    #[serde(deserialize_with = "de::lenient_int")]
    pub id: u32,
    /// Scene name.
    #[serde(default, deserialize_with = "de::or_default")]
    pub name: String,
    /// View order.
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub position: Option<i32>,
    /// Icon number.
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub icon: Option<i64>,
    /// Colour `#RRGGBB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Scene type (seen: `REGULAR`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub scene_type: Option<String>,
    /// Whether the scene is hidden in the app.
    #[serde(default, deserialize_with = "de::or_default")]
    pub hidden: bool,
    /// Units of the scene, by unit id (string key).
    #[serde(default, deserialize_with = "de::or_default")]
    pub units: BTreeMap<String, SceneUnit>,
}

impl Scene {
    /// Ids of the scene's units (from each entry's `id`, else from its key), sorted.
    pub fn unit_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.units.iter().filter_map(|(key, u)| u.id.or_else(|| key.parse().ok())).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// A unit entry of a scene.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct SceneUnit {
    /// Unit id.
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// Raw stored state (hex string such as `fc03`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// A group of units.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Group {
    /// Group id.
    #[serde(deserialize_with = "de::lenient_int")]
    pub id: u32,
    /// Group name.
    #[serde(default, deserialize_with = "de::or_default")]
    pub name: String,
    /// View position of the group and its units.
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub position: Option<i32>,
    /// Member units with their position inside the group.
    #[serde(default, deserialize_with = "de::or_default")]
    pub units: Vec<GroupUnit>,
}

/// A member of a group: `{"id":12,"position":0}` (groups endpoint) or `{"0":12,"position":0}`
/// (network and state responses); both shapes are accepted.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct GroupUnit {
    /// Unit id.
    #[serde(alias = "0", deserialize_with = "de::lenient_int")]
    pub id: u32,
    /// Position within the group.
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub position: Option<i32>,
}

/// A photo of the network (network `photos`, gallery entries).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Photo {
    /// Photo name.
    #[serde(deserialize_with = "de::or_default")]
    pub name: String,
    /// Controls placed on the photo (shape not documented; kept raw).
    #[serde(deserialize_with = "de::or_default")]
    pub controls: Vec<Value>,
    /// Image id (see `GET …/images/{imageId}`).
    pub image: Option<String>,
    /// View order.
    #[serde(deserialize_with = "de::lenient_int_opt")]
    pub position: Option<i32>,
}

// ---------------------------------------------------------------------------------------------
// Fixtures and datapoints
// ---------------------------------------------------------------------------------------------

/// `GET /v1/fixtures/{id}`: the product behind a unit (vendor, model, capabilities).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fixture {
    /// Fixture id.
    #[serde(deserialize_with = "de::lenient_int")]
    pub id: u32,
    /// Fixture type (seen: `Driver`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub fixture_type: Option<String>,
    /// Manufacturer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Translations of labels, raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translations: Option<Value>,
    /// The fixture's control capabilities.
    #[serde(default, deserialize_with = "de::or_default")]
    pub controls: Vec<FixtureControl>,
    /// Whether the fixture is a luminaire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_luminaire: Option<bool>,
    /// Whether the fixture is a switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_switch: Option<bool>,
    /// Whether the fixture is a light sensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_light_sensor: Option<bool>,
    /// Whether the fixture is a presence sensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_presence_sensor: Option<bool>,
}

/// A control capability of a fixture.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixtureControl {
    /// Control type (lowercase on this endpoint).
    #[serde(rename = "type")]
    pub control_type: FixtureControlType,
    /// Control id within the fixture.
    #[serde(default, deserialize_with = "de::lenient_int_opt", skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// Whether the control is read-only.
    #[serde(default, deserialize_with = "de::or_default")]
    pub readonly: bool,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Button label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub button_label: Option<String>,
    /// Data name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataname: Option<String>,
    /// Unit of the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Value type (seen: `FLOAT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_type: Option<String>,
}

/// Type of a fixture control (lowercase on the wire).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(from = "String", into = "String")]
pub enum FixtureControlType {
    /// `button`
    Button,
    /// `dimmer`
    Dimmer,
    /// `rgb`
    Rgb,
    /// `temperature`
    Temperature,
    /// `colorsource`
    Colorsource,
    /// `slider`
    Slider,
    /// `overheat`
    Overheat,
    /// `vertical`
    Vertical,
    /// `onoff`
    Onoff,
    /// Any other type, kept as sent.
    Other(String),
}

impl From<String> for FixtureControlType {
    fn from(s: String) -> Self {
        match s.as_str() {
            "button" => Self::Button,
            "dimmer" => Self::Dimmer,
            "rgb" => Self::Rgb,
            "temperature" => Self::Temperature,
            "colorsource" => Self::Colorsource,
            "slider" => Self::Slider,
            "overheat" => Self::Overheat,
            "vertical" => Self::Vertical,
            "onoff" => Self::Onoff,
            _ => Self::Other(s),
        }
    }
}

impl From<FixtureControlType> for String {
    fn from(t: FixtureControlType) -> Self {
        match t {
            FixtureControlType::Button => "button".into(),
            FixtureControlType::Dimmer => "dimmer".into(),
            FixtureControlType::Rgb => "rgb".into(),
            FixtureControlType::Temperature => "temperature".into(),
            FixtureControlType::Colorsource => "colorsource".into(),
            FixtureControlType::Slider => "slider".into(),
            FixtureControlType::Overheat => "overheat".into(),
            FixtureControlType::Vertical => "vertical".into(),
            FixtureControlType::Onoff => "onoff".into(),
            FixtureControlType::Other(s) => s,
        }
    }
}

/// `GET /datapoints/networks/{id}/datapoints`: logged values.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DatapointResult {
    /// Number of datapoints returned.
    #[serde(deserialize_with = "de::lenient_int_opt")]
    pub result_count: Option<u64>,
    /// The limit that was applied.
    #[serde(deserialize_with = "de::lenient_int_opt")]
    pub query_limit: Option<u64>,
    /// Server-side processing time.
    #[serde(deserialize_with = "de::lenient_int_opt")]
    pub processing_time_ms: Option<u64>,
    /// True when the limit cut the result and more matching data exists.
    #[serde(deserialize_with = "de::or_default")]
    pub has_more_results: bool,
    /// Error text; empty when there was none.
    #[serde(deserialize_with = "de::or_default")]
    pub errors: String,
    /// The datapoints.
    #[serde(deserialize_with = "de::or_default")]
    pub data_points: Vec<DataPoint>,
}

/// One logged value.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct DataPoint {
    /// Unit id.
    #[serde(deserialize_with = "de::lenient_int_opt")]
    pub unit: Option<u32>,
    /// Key such as `dimmer`, `lux`, `presence`.
    #[serde(deserialize_with = "de::or_default")]
    pub key: String,
    /// Value as text (numbers are kept in their JSON spelling).
    #[serde(deserialize_with = "de::string_or_scalar")]
    pub value: String,
    /// Time, ISO 8601 with milliseconds and offset (UTC).
    #[serde(deserialize_with = "de::or_default")]
    pub time: String,
}

impl DataPoint {
    /// The time parsed as RFC 3339, if it is well-formed.
    pub fn parsed_time(&self) -> Option<chrono::DateTime<chrono::FixedOffset>> {
        chrono::DateTime::parse_from_rfc3339(&self.time).ok()
    }
}
