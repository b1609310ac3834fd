//! `sensor` entities: illuminance of light sensors and the bridge version.

use super::{Component, Name, base_config};
use serde_json::json;

/// Illuminance from the unit JSON's `illuminance`. HA accepts only `lx` as the unit of this
/// class (`lux` draws a warning).
pub fn illuminance(unique_id: String, name: Name, entity_id: &str, state_topic: String) -> Component {
    let mut config = base_config(&name, entity_id);
    config.insert("device_class".into(), json!("illuminance"));
    config.insert("unit_of_measurement".into(), json!("lx"));
    config.insert("state_class".into(), json!("measurement"));
    config.insert("state_topic".into(), json!(state_topic));
    config.insert("value_template".into(), json!("{{ value_json.illuminance }}"));
    Component { key: "illuminance".into(), platform: "sensor", unique_id, availability: None, config }
}

/// The bridge's version, from `<base>/bridge/info`.
pub fn version(unique_id: String, entity_id: &str, state_topic: String, availability: Vec<String>) -> Component {
    let mut config = base_config(&Name::Text("Version".into()), entity_id);
    config.insert("entity_category".into(), json!("diagnostic"));
    config.insert("icon".into(), json!("mdi:information-outline"));
    config.insert("state_topic".into(), json!(state_topic));
    config.insert("value_template".into(), json!("{{ value_json.version }}"));
    Component { key: "version".into(), platform: "sensor", unique_id, availability: Some(availability), config }
}
