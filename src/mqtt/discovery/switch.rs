//! `switch` entities: one per scene (on = the scene is active), and an on/off unit shown as a
//! switch (`devices:` … `platform: switch`). Turning one on or off sends `ON` / `OFF` to its
//! `…/set`.

use super::{Component, Name, base_config};
use serde_json::json;

/// The switch of a scene reading `ON`/`OFF` from the scene topic. A scene hidden in the app
/// gets a switch disabled by default: HA lists it, a user enables it when wanted.
pub fn scene(
    key: String,
    unique_id: String,
    name: Name,
    entity_id: &str,
    topics: (String, String),
    hidden: bool,
) -> Component {
    let (state_topic, command_topic) = topics;
    let mut config = base_config(&name, entity_id);
    config.insert("icon".into(), json!("mdi:palette"));
    if hidden {
        config.insert("enabled_by_default".into(), json!(false));
    }
    config.insert("state_topic".into(), json!(state_topic));
    config.insert("command_topic".into(), json!(command_topic));
    config.insert("payload_on".into(), json!("ON"));
    config.insert("payload_off".into(), json!("OFF"));
    Component { key, platform: "switch", unique_id, availability: None, config }
}

/// The switch of an on/off unit (a relay driving a fan, a pump), reading `state` of the unit JSON.
pub fn unit(unique_id: String, entity_id: &str, state_topic: String, command_topic: String) -> Component {
    let mut config = base_config(&Name::Main, entity_id);
    config.insert("state_topic".into(), json!(state_topic));
    config.insert("value_template".into(), json!("{{ value_json.state }}"));
    config.insert("command_topic".into(), json!(command_topic));
    config.insert("payload_on".into(), json!("ON"));
    config.insert("payload_off".into(), json!("OFF"));
    Component { key: "switch".into(), platform: "switch", unique_id, availability: None, config }
}
