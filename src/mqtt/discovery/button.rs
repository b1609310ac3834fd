//! `button` entities: the bridge's Reload.

use super::{Component, Name, base_config};
use serde_json::json;

/// The bridge's Reload button: pressing it sends `PRESS` to `command_topic`
/// (`<base>/bridge/request/reload`), and the bridge fetches every network again and publishes
/// discovery and state again. A configuration entity: it changes nothing a user sees by itself.
pub fn reload(unique_id: String, entity_id: &str, command_topic: String, availability: Vec<String>) -> Component {
    let mut config = base_config(&Name::Text("Reload".into()), entity_id);
    config.insert("entity_category".into(), json!("config"));
    config.insert("icon".into(), json!("mdi:refresh"));
    config.insert("command_topic".into(), json!(command_topic));
    config.insert("payload_press".into(), json!("PRESS"));
    Component { key: "reload".into(), platform: "button", unique_id, availability: Some(availability), config }
}
