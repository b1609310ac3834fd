//! `datapoints:` — fetching each network's logged datapoints (docs/configuration.md#datapoints,
//! docs/datapoints.md): the file form, its defaults and its rules.

use super::error::Problem;
use super::file::duration;
use super::reader::Reader;
use crate::bridge::datapoints::{
    DEFAULT_DATA_TYPES, DEFAULT_DATAPOINTS_INTERVAL, DEFAULT_DATAPOINTS_LOOKBACK, DatapointSettings,
};
use crate::cloud::rest::DataType;
use crate::mqtt::settings::{DatapointSensors, SensorSemantics};
use crate::mqtt::unit_data;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The shortest interval: the service logs on a 15-minute grid, and each fetch costs at least
/// one request of the per-key quota per network.
pub const MIN_DATAPOINTS_INTERVAL: Duration = Duration::from_secs(60);
/// The longest lookback: the service keeps datapoints for 60 days.
pub const MAX_DATAPOINTS_LOOKBACK: Duration = Duration::from_secs(60 * 24 * 3600);
/// Every `dataType` the service knows, in its spelling.
pub const DATA_TYPES: [DataType; 6] =
    [DataType::Sensors, DataType::Vendor, DataType::Control, DataType::Energy, DataType::Details, DataType::Status];
/// The `state_class` values Home Assistant's sensors take.
pub const STATE_CLASSES: [&str; 3] = ["measurement", "total", "total_increasing"];

/// `datapoints:` as written in the file.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct DatapointsFile {
    pub enabled: bool,
    #[serde(deserialize_with = "duration")]
    pub interval: Duration,
    #[serde(deserialize_with = "duration")]
    pub lookback: Duration,
    pub data_types: Vec<String>,
    /// `sensors:` with no value (null) means no extra keys.
    pub sensors: Option<BTreeMap<String, SensorFile>>,
}

impl Default for DatapointsFile {
    fn default() -> Self {
        DatapointsFile {
            enabled: true,
            interval: DEFAULT_DATAPOINTS_INTERVAL,
            lookback: DEFAULT_DATAPOINTS_LOOKBACK,
            data_types: DEFAULT_DATA_TYPES.iter().map(|t| t.as_str().to_string()).collect(),
            sensors: None,
        }
    }
}

/// One entry of `datapoints.sensors` as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct SensorFile {
    pub device_class: Option<String>,
    pub unit: Option<String>,
    pub state_class: Option<String>,
    pub diagnostic: bool,
}

/// Checks `datapoints:` and builds the bridge's [`DatapointSettings`] and the MQTT side's
/// sensors of extra keys.
pub(crate) fn validate(reader: &mut Reader, d: DatapointsFile) -> Option<(DatapointSettings, DatapointSensors)> {
    let before = reader.problems.len();
    let show = |d: Duration| humantime::format_duration(d).to_string();
    if d.interval < MIN_DATAPOINTS_INTERVAL {
        reader.push(Problem::invalid(
            "datapoints.interval",
            format!("must be at least {}, got {}", show(MIN_DATAPOINTS_INTERVAL), show(d.interval)),
        ));
    }
    if d.lookback > MAX_DATAPOINTS_LOOKBACK {
        reader.push(Problem::invalid(
            "datapoints.lookback",
            format!("must be at most 60 days (the service keeps datapoints no longer), got {}", days(d.lookback)),
        ));
    }
    let data_types = data_types(reader, &d.data_types);
    let mut sensors = BTreeMap::new();
    for (key, entry) in d.sensors.unwrap_or_default() {
        if let Some(semantics) = sensor(reader, &key, entry) {
            sensors.insert(key, semantics);
        }
    }
    let settings = DatapointSettings { enabled: d.enabled, interval: d.interval, lookback: d.lookback, data_types };
    (reader.problems.len() == before).then_some((settings, sensors))
}

/// A duration in days (humantime would count 61 days as "2months"), two decimals at most.
fn days(d: Duration) -> String {
    let text = format!("{:.2}", d.as_secs_f64() / 86_400.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} days")
}

/// The `dataType` names, each known and given once; at least one.
fn data_types(reader: &mut Reader, names: &[String]) -> Vec<DataType> {
    if names.is_empty() {
        let all: Vec<&str> = DATA_TYPES.iter().map(|t| t.as_str()).collect();
        reader.push(Problem::invalid("datapoints.data_types", format!("needs at least one of {}", all.join(", "))));
    }
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let key = format!("datapoints.data_types[{i}]");
        match DATA_TYPES.iter().find(|t| t.as_str() == name.trim()) {
            Some(t) if out.contains(t) => reader.push(Problem::invalid(key, format!("{name:?} is listed twice"))),
            Some(t) => out.push(*t),
            None => {
                let all: Vec<&str> = DATA_TYPES.iter().map(|t| t.as_str()).collect();
                reader.push(Problem::invalid(key, format!("expected one of {}, got {name:?}", all.join(", "))));
            }
        }
    }
    out
}

/// One `datapoints.sensors` entry: a key that can have a sensor and has none yet, a snake_case
/// device class, a unit that is not blank, a state class Home Assistant knows.
fn sensor(reader: &mut Reader, key: &str, entry: SensorFile) -> Option<SensorSemantics> {
    let before = reader.problems.len();
    let at = format!("datapoints.sensors.{key}");
    // A sensor reads its key's plain topic, so a key without one would get none, in silence.
    if !unit_data::is_plain_key(key) {
        reader.push(Problem::invalid(&at, "a datapoint key with a sensor has letters, digits, _ and - only"));
    } else if unit_data::LIVE_KEYS.contains(&key) {
        reader.push(Problem::invalid(&at, "is in the unit's live state already, so it gets no second sensor"));
    } else if unit_data::is_built_in(key) {
        reader.push(Problem::invalid(&at, "has a built-in sensor (docs/datapoints.md); leave it out"));
    }
    if let Some(class) = &entry.device_class
        && (class.is_empty() || !class.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
    {
        reader.push(Problem::invalid(
            format!("{at}.device_class"),
            format!("expected a Home Assistant device class in snake_case (like voltage), got {class:?}"),
        ));
    }
    if let Some(unit) = &entry.unit
        && unit.trim().is_empty()
    {
        reader.push(Problem::invalid(format!("{at}.unit"), "must not be blank (leave it out for no unit)"));
    }
    if let Some(class) = &entry.state_class
        && !STATE_CLASSES.contains(&class.as_str())
    {
        reader.push(Problem::invalid(
            format!("{at}.state_class"),
            format!("expected one of {}, got {class:?}", STATE_CLASSES.join(", ")),
        ));
    }
    (reader.problems.len() == before).then_some(SensorSemantics {
        device_class: entry.device_class,
        unit: entry.unit,
        state_class: entry.state_class,
        diagnostic: entry.diagnostic,
    })
}
