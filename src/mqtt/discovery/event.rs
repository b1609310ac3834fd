//! `event` entities: switches and push buttons. Events have no state, so their topic is never
//! retained and the entity has no `entity_category`.

use super::{Component, Name, base_config};
use serde_json::json;

/// The event entity of a unit reading `…/event`; `event_types` are the `type`s the unit emits.
pub fn unit(unique_id: String, name: Name, entity_id: &str, event_topic: String, event_types: &[&str]) -> Component {
    let mut config = base_config(&name, entity_id);
    config.insert("state_topic".into(), json!(event_topic));
    config.insert("event_types".into(), json!(event_types));
    // The bridge's event JSON names its kind `type`; HA wants `event_type`. Other keys become
    // the event's attributes.
    config.insert("value_template".into(), json!("{{ dict(value_json, event_type=value_json.type) | to_json }}"));
    Component { key: "event".into(), platform: "event", unique_id, availability: None, config }
}
