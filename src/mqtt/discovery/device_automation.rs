//! `device_automation` triggers: a switch's presses as device triggers, so Home Assistant's
//! automation editor offers them (besides the switch's `event` entity). They are published with
//! the rest of the unit's discovery, before the first press.
//!
//! A trigger has no entity: no name, no entity id, no state. Home Assistant matches each message
//! on its topic by rendering `value_template` and comparing the result with `payload`.

use super::Component;
use serde_json::{Map, json};

/// The platform of a device trigger.
pub const PLATFORM: &str = "device_automation";

/// The trigger `type` of every press ("Button short press" in Home Assistant's editor).
pub const PRESS: &str = "button_short_press";

/// The switch's one trigger: any `switch` event on `event_topic` (an occupancy event of a
/// combined sensor on the same topic does not fire it).
pub fn switch(unique_id: String, event_topic: String) -> Component {
    trigger("trigger_switch".into(), unique_id, event_topic, "switch", "{{ value_json.type }}", "switch")
}

/// The trigger of button `id` (the `id` of the fixture's `button` control): a `switch` event
/// whose `Switch` control names that button (`"button": id`). Subtype `button_<id + 1>`, which
/// Home Assistant's editor shows as "First button", "Second button", ….
pub fn button(unique_id: String, event_topic: String, id: u32) -> Component {
    let template = "{{ value_json.controls | selectattr('type', 'eq', 'Switch') \
                    | map(attribute='button', default='') | first | default('') \
                    if value_json.type == 'switch' else '' }}";
    let payload = id.to_string();
    let subtype = format!("button_{}", u64::from(id) + 1);
    trigger(format!("trigger_button_{id}"), unique_id, event_topic, &subtype, template, &payload)
}

fn trigger(
    key: String,
    unique_id: String,
    topic: String,
    subtype: &str,
    value_template: &str,
    payload: &str,
) -> Component {
    let mut config = Map::new();
    config.insert("automation_type".into(), json!("trigger"));
    config.insert("topic".into(), json!(topic));
    config.insert("type".into(), json!(PRESS));
    config.insert("subtype".into(), json!(subtype));
    config.insert("value_template".into(), json!(value_template));
    config.insert("payload".into(), json!(payload));
    Component { key, platform: PLATFORM, unique_id, availability: None, config }
}
