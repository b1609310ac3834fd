//! `binary_sensor` entities: occupancy of presence sensors, connectivity of the cloud link and of
//! the bridge.

use super::{Component, Name, base_config};
use serde_json::json;

/// Occupancy from the unit JSON's `occupancy` (`true`/`false`/`null` → ON/OFF/unknown).
/// `occupancy`, not `presence`: HA's `presence` class means home/away.
pub fn occupancy(unique_id: String, name: Name, entity_id: &str, state_topic: String) -> Component {
    let mut config = base_config(&name, entity_id);
    config.insert("device_class".into(), json!("occupancy"));
    config.insert("state_topic".into(), json!(state_topic));
    config.insert(
        "value_template".into(),
        json!("{% if value_json.occupancy is none %}None{% elif value_json.occupancy %}ON{% else %}OFF{% endif %}"),
    );
    Component { key: "occupancy".into(), platform: "binary_sensor", unique_id, availability: None, config }
}

/// A diagnostic connectivity sensor reading an `online`/`offline` topic. `availability` should
/// not include `state_topic` itself, or the sensor would go unavailable instead of off.
pub fn connectivity(
    key: &str,
    unique_id: String,
    name: Name,
    entity_id: &str,
    state_topic: String,
    availability: Option<Vec<String>>,
) -> Component {
    let mut config = base_config(&name, entity_id);
    config.insert("device_class".into(), json!("connectivity"));
    config.insert("entity_category".into(), json!("diagnostic"));
    config.insert("state_topic".into(), json!(state_topic));
    config.insert("payload_on".into(), json!("online"));
    config.insert("payload_off".into(), json!("offline"));
    Component { key: key.into(), platform: "binary_sensor", unique_id, availability, config }
}
