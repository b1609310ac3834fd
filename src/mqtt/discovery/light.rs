//! `light` entities (JSON schema): one per luminaire, one per group.
//!
//! The JSON schema lets one state topic carry state, brightness, colour mode, colour temperature
//! and colour, which is exactly the unit JSON, and takes HA's JSON commands on `…/set`.

use super::{Component, Name, base_config};
use crate::bridge::caps::Caps;
use serde_json::json;

/// The light of a luminaire: colour modes from its capabilities, kelvin when it has CCT.
pub fn unit(unique_id: String, entity_id: &str, state_topic: String, command_topic: String, caps: &Caps) -> Component {
    let mut config = base_config(&Name::Main, entity_id);
    config.insert("schema".into(), json!("json"));
    config.insert("state_topic".into(), json!(state_topic));
    config.insert("command_topic".into(), json!(command_topic));
    let modes = caps.color_modes();
    if modes.contains(&"color_temp") {
        config.insert("color_temp_kelvin".into(), json!(true));
        if let Some((min, max)) = caps.kelvin {
            config.insert("min_kelvin".into(), json!(min));
            config.insert("max_kelvin".into(), json!(max));
        }
    }
    config.insert("supported_color_modes".into(), json!(modes));
    Component { key: "light".into(), platform: "light", unique_id, availability: None, config }
}

/// What a group's light is made of, besides its names and topics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupMembers {
    /// A member has a dimmer: the group light takes a brightness.
    pub dimmable: bool,
    /// The unique ids of the members' light entities. HA (2026.4 and later) shows the group as
    /// a group of these entities when discovery carries them under `group`; earlier releases
    /// drop the key.
    pub lights: Vec<String>,
}

/// The light of a group (on/off and brightness of all its members).
pub fn group(
    key: String,
    unique_id: String,
    name: Name,
    entity_id: &str,
    topics: (String, String),
    members: GroupMembers,
) -> Component {
    let (state_topic, command_topic) = topics;
    let mut config = base_config(&name, entity_id);
    config.insert("schema".into(), json!("json"));
    config.insert("state_topic".into(), json!(state_topic));
    config.insert("command_topic".into(), json!(command_topic));
    config.insert("supported_color_modes".into(), json!([if members.dimmable { "brightness" } else { "onoff" }]));
    config.insert("icon".into(), json!("mdi:lightbulb-group"));
    if !members.lights.is_empty() {
        config.insert("group".into(), json!(members.lights));
    }
    Component { key, platform: "light", unique_id, availability: None, config }
}
