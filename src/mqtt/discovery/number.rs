//! `number` entities: the network dim level, 0–100 % on a slider (the cloud's 0..1 scaled).

use super::{Component, Name, base_config};
use serde_json::json;

/// The network's dim level from the network JSON; commands go to `<base>/<net>/set` as
/// `{"dim_level": 0..1}`.
pub fn dim_level(unique_id: String, entity_id: &str, state_topic: String, command_topic: String) -> Component {
    let mut config = base_config(&Name::Text("Dim level".into()), entity_id);
    config.insert("min".into(), json!(0));
    config.insert("max".into(), json!(100));
    config.insert("step".into(), json!(1));
    config.insert("mode".into(), json!("slider"));
    config.insert("unit_of_measurement".into(), json!("%"));
    config.insert("icon".into(), json!("mdi:brightness-percent"));
    config.insert("state_topic".into(), json!(state_topic));
    config.insert(
        "value_template".into(),
        json!("{% if value_json.dim_level is none %}None{% else %}{{ (value_json.dim_level * 100) | round(0) | int }}{% endif %}"),
    );
    config.insert("command_topic".into(), json!(command_topic));
    config.insert("command_template".into(), json!("{\"dim_level\": {{ value / 100 }}}"));
    Component { key: "dim_level".into(), platform: "number", unique_id, availability: None, config }
}
