//! The latest logged datapoint of each unit and key, and the topics and Home Assistant sensors it
//! makes (docs/mqtt.md#logged-datapoints, docs/homeassistant.md#logged-datapoints).
//!
//! Pages of datapoints arrive oldest first, every `datapoints.interval`; the mirror keeps only the
//! newest value of each key, which is what the retained topics carry. Points of a unit the bridge
//! does not know yet are kept too: the unit is published with them once a snapshot brings it.

use super::discovery::{self, Component, Name, base_config};
use super::settings::SensorSemantics;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

mod latest;

pub use latest::{Latest, NetData, UnitData};

/// Keys the unit JSON exports live already: no second sensor for them.
pub const LIVE_KEYS: [&str; 6] = ["dimmer", "lux", "presence", "cct", "onoff", "status"];

/// The datapoint keys the store keeps as levels below a unit's data topic (its
/// `store::levels`): the built-in ones and the live ones, which nearly every unit logs.
pub const DATA_LEVELS: [&str; 11] = [
    "energy",
    "power",
    "battery_level",
    "driver_temperature",
    "operating_hours",
    "dimmer",
    "lux",
    "presence",
    "cct",
    "onoff",
    "status",
];

/// A built-in sensor: a datapoint key with its Home Assistant semantics, and a name where the
/// device class alone would not say what it is (HA names the rest after their class).
struct BuiltIn {
    key: &'static str,
    class: &'static str,
    unit: &'static str,
    state_class: &'static str,
    diagnostic: bool,
    name: Option<&'static str>,
}

/// The built-in sensors (docs/datapoints.md#topics-and-sensors).
const BUILT_IN: [BuiltIn; 5] = [
    BuiltIn {
        key: "energy",
        class: "energy",
        unit: "kWh",
        state_class: "total_increasing",
        diagnostic: false,
        name: None,
    },
    BuiltIn { key: "power", class: "power", unit: "W", state_class: "measurement", diagnostic: false, name: None },
    BuiltIn {
        key: "battery_level",
        class: "battery",
        unit: "%",
        state_class: "measurement",
        diagnostic: true,
        name: None,
    },
    BuiltIn {
        key: "driver_temperature",
        class: "temperature",
        unit: "°C",
        state_class: "measurement",
        diagnostic: true,
        name: Some("Driver temperature"),
    },
    BuiltIn {
        key: "operating_hours",
        class: "duration",
        unit: "h",
        state_class: "total_increasing",
        diagnostic: true,
        name: Some("Operating hours"),
    },
];

/// Whether `key` is one of the built-in sensor keys.
pub fn is_built_in(key: &str) -> bool {
    BUILT_IN.iter().any(|b| b.key == key)
}

/// Whether a key may name a topic level and a template key as it is: letters, digits, `_`, `-`.
/// Other keys stay in the data JSON alone.
pub fn is_plain_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The plain topics below `<unit>/data` ([`super::settings::OutputSettings::attribute_topics`]):
/// one per plain key, with its value as text.
pub fn attribute_topics<'d>(data_topic: &'d str, data: &'d UnitData) -> impl Iterator<Item = (String, String)> + 'd {
    data.latest()
        .filter(|(key, _)| is_plain_key(key))
        .map(move |(key, l)| (format!("{data_topic}/{key}"), l.value.to_string()))
}

/// The semantics of a key with a sensor: a built-in one, or one of `datapoints.sensors`.
fn semantics(key: &str, extra: &BTreeMap<String, SensorSemantics>) -> Option<(SensorSemantics, Name)> {
    if let Some(b) = BUILT_IN.iter().find(|b| b.key == key) {
        let s = SensorSemantics {
            device_class: Some(b.class.into()),
            unit: Some(b.unit.into()),
            state_class: Some(b.state_class.into()),
            diagnostic: b.diagnostic,
        };
        return Some((s, b.name.map_or(Name::FromClass, |n| Name::Text(n.into()))));
    }
    if LIVE_KEYS.contains(&key) {
        return None;
    }
    extra.get(key).map(|s| (s.clone(), Name::Text(key.replace('_', " "))))
}

/// Whether units that log `key` get a sensor for it ([`is_plain_key`], and built in or in
/// `datapoints.sensors`).
pub fn has_sensor(key: &str, extra: &BTreeMap<String, SensorSemantics>) -> bool {
    is_plain_key(key) && semantics(key, extra).is_some()
}

/// The sensors of a unit's reported keys that have semantics (built in, or configured), as
/// components of the unit's device `oid`, reading `data_topic`.
pub fn components<'k>(
    oid: &str,
    keys: impl Iterator<Item = &'k str>,
    extra: &BTreeMap<String, SensorSemantics>,
    entity_words: &[&str],
    data_topic: &str,
) -> Vec<Component> {
    keys.filter(|key| is_plain_key(key))
        .filter_map(|key| semantics(key, extra).map(|s| (key, s)))
        .map(|(key, (s, name))| {
            let words: Vec<&str> = entity_words.iter().copied().chain([key]).collect();
            let mut config = base_config(&name, &discovery::entity_id("sensor", &words));
            if let Some(class) = s.device_class {
                config.insert("device_class".into(), json!(class));
            }
            if let Some(unit) = s.unit {
                config.insert("unit_of_measurement".into(), json!(unit));
            }
            if let Some(class) = s.state_class {
                config.insert("state_class".into(), json!(class));
            }
            if s.diagnostic {
                config.insert("entity_category".into(), json!("diagnostic"));
            }
            config.insert("state_topic".into(), json!(data_topic));
            config.insert("value_template".into(), json!(format!("{{{{ value_json['{key}'].value }}}}")));
            // A plain key ([`is_plain_key`]) is fit for ids as it is.
            Component {
                key: format!("data_{key}"),
                platform: "sensor",
                unique_id: format!("{oid}_data_{key}"),
                availability: None,
                config,
            }
        })
        .collect()
}

/// Keys reported that neither have a sensor nor are exported live: what `check` lists, so an
/// installer can give them semantics in `datapoints.sensors`.
pub fn unknown_keys<'k>(
    keys: impl Iterator<Item = &'k str>,
    extra: &BTreeMap<String, SensorSemantics>,
) -> BTreeSet<String> {
    keys.filter(|k| !is_built_in(k) && !LIVE_KEYS.contains(k) && !extra.contains_key(*k)).map(str::to_string).collect()
}

#[cfg(test)]
mod tests;
