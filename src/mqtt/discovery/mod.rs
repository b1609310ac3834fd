//! Home Assistant MQTT discovery payloads (docs/homeassistant.md), one module per HA platform.
//!
//! The bridge describes what HA should see as [`Device`]s holding [`Component`]s; [`Discovery::render`]
//! lays them out either as one device-based config (`<prefix>/device/<id>/config` with `cmps`)
//! or as one config per component (`<prefix>/<platform>/<unique_id>/config`). Both layouts use
//! the same `unique_id`s and device identifiers, so switching between them keeps HA's registry.
//!
//! Identity is built from the network id and the unit address, never from names: a rename
//! changes names and topics in the payloads but not which entity they describe.

pub mod binary_sensor;
pub mod button;
pub mod device_automation;
pub mod event;
pub mod image;
pub mod light;
pub mod number;
pub mod sensor;
pub mod switch;

use super::settings::DiscoveryMode;
use serde_json::{Map, Value, json};

/// The `origin.name` of every payload, and the prefix of every unique id and object id: how the
/// start-up clean-up recognises configs of this bridge.
pub const ORIGIN_NAME: &str = "casambi2mqtt";

/// One HA entity inside a device.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    /// The component's key within its device (`light`, `occupancy`, `scene_3`, …).
    pub key: String,
    /// HA platform (`light`, `binary_sensor`, …).
    pub platform: &'static str,
    /// Site-wide unique id.
    pub unique_id: String,
    /// Availability topics overriding the device's (`None` = the device's; an empty list is
    /// treated as `None`, since device-based discovery cannot drop inherited availability).
    pub availability: Option<Vec<String>>,
    /// The platform's options (names, topics, templates, classes).
    pub config: Map<String, Value>,
}

impl Component {
    /// Whether the component is an entity. A device trigger (`device_automation`) is not: Home
    /// Assistant's trigger schema takes no `unique_id`, `availability` or `origin`
    /// (docs/homeassistant.md#switch-presses-as-device-triggers), so it is sent none.
    pub fn is_entity(&self) -> bool {
        self.platform != device_automation::PLATFORM
    }
}

/// One HA device with its entities.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// Object id of the device-based config topic (also the base of the unique ids).
    pub object_id: String,
    /// The HA `device` block.
    pub device: Value,
    /// Availability topics shared by the components (all must say `online`).
    pub availability: Vec<String>,
    /// The entities.
    pub components: Vec<Component>,
}

/// Where and how discovery is published.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// HA's discovery prefix.
    pub prefix: String,
    /// Device-based or per-component.
    pub mode: DiscoveryMode,
    /// QoS HA should subscribe with.
    pub qos: u8,
}

/// A string reduced to `[a-z0-9-]` for object ids and unique ids (which may only use
/// `[a-zA-Z0-9_-]`; `_` is kept free as the separator).
pub fn key(s: &str) -> String {
    let k: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    if k.is_empty() { "-".into() } else { k }
}

/// The `origin` block.
pub fn origin() -> Value {
    json!({"name": ORIGIN_NAME, "sw_version": env!("CARGO_PKG_VERSION")})
}

/// The HA availability list for `topics` (payloads `online` / `offline`).
fn availability(topics: &[String]) -> Value {
    Value::Array(
        topics
            .iter()
            .map(|t| json!({"topic": t, "payload_available": "online", "payload_not_available": "offline"}))
            .collect(),
    )
}

/// Inserts the availability keys for `topics` into `config` (nothing for an empty list).
fn put_availability(config: &mut Map<String, Value>, topics: &[String]) {
    if !topics.is_empty() {
        config.insert("availability".into(), availability(topics));
        config.insert("availability_mode".into(), json!("all"));
    }
}

/// How an entity is named in HA (which shows "`<device name> <entity name>`").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    /// The device's main entity: `name: null`, shown with the device name alone.
    Main,
    /// No `name`: HA names the entity after its device class ("Occupancy", "Illuminance").
    FromClass,
    /// This name.
    Text(String),
}

impl Name {
    /// Puts the `name` key (or leaves it out) into `config`.
    pub fn put(&self, config: &mut Map<String, Value>) {
        match self {
            Name::Main => {
                config.insert("name".into(), Value::Null);
            }
            Name::FromClass => {}
            Name::Text(t) => {
                config.insert("name".into(), json!(t));
            }
        }
    }
}

/// Common options of a component: name and suggested entity id.
pub fn base_config(name: &Name, default_entity_id: &str) -> Map<String, Value> {
    let mut config = Map::new();
    name.put(&mut config);
    config.insert("default_entity_id".into(), json!(default_entity_id));
    config
}

/// An HA entity id suggestion (`default_entity_id`) from slug-like words: `light.home_kitchen`.
pub fn entity_id(platform: &str, words: &[&str]) -> String {
    let joined: Vec<String> = words.iter().filter(|w| !w.is_empty()).map(|w| w.replace('-', "_")).collect();
    format!("{platform}.{}", joined.join("_"))
}

impl Discovery {
    /// The config topic of a device-based config.
    pub fn device_topic(&self, object_id: &str) -> String {
        format!("{}/device/{object_id}/config", self.prefix)
    }

    /// The config topic of a per-component config.
    pub fn component_topic(&self, platform: &str, unique_id: &str) -> String {
        format!("{}/{platform}/{unique_id}/config", self.prefix)
    }

    /// The retained config topics and payloads for `device`, in the configured layout. A device
    /// without components has none.
    pub fn render(&self, device: &Device) -> Vec<(String, String)> {
        if device.components.is_empty() {
            return Vec::new();
        }
        match self.mode {
            DiscoveryMode::Device => {
                // Home Assistant hands only the availability keys of the root down to the
                // components (not `qos`), so each component carries its own `qos`.
                let mut root = Map::new();
                root.insert("device".into(), device.device.clone());
                root.insert("origin".into(), origin());
                put_availability(&mut root, &device.availability);
                let mut cmps = Map::new();
                for c in &device.components {
                    let mut config = c.config.clone();
                    config.insert("p".into(), json!(c.platform));
                    config.insert("qos".into(), json!(self.qos));
                    if c.is_entity() {
                        config.insert("unique_id".into(), json!(c.unique_id));
                        if let Some(av) = &c.availability {
                            put_availability(&mut config, av);
                        }
                    }
                    cmps.insert(c.key.clone(), Value::Object(config));
                }
                root.insert("cmps".into(), Value::Object(cmps));
                vec![(self.device_topic(&device.object_id), Value::Object(root).to_string())]
            }
            DiscoveryMode::Component => device
                .components
                .iter()
                .map(|c| {
                    let mut config = c.config.clone();
                    config.insert("device".into(), device.device.clone());
                    config.insert("qos".into(), json!(self.qos));
                    if c.is_entity() {
                        config.insert("origin".into(), origin());
                        config.insert("unique_id".into(), json!(c.unique_id));
                        put_availability(&mut config, c.availability.as_deref().unwrap_or(&device.availability));
                    }
                    (self.component_topic(c.platform, &c.unique_id), Value::Object(config).to_string())
                })
                .collect(),
        }
    }
}

/// Whether a retained config payload was published by this bridge: its origin is ours (or it is
/// a device trigger) and one of its topics lies under `base/`.
pub fn is_ours(payload: &Value, base: &str) -> bool {
    let origin = payload.get("origin").or_else(|| payload.get("o"));
    let named = origin.and_then(|o| o.get("name")).and_then(Value::as_str) == Some(ORIGIN_NAME);
    // A device trigger carries no origin (Home Assistant's trigger schema takes none); its
    // `casambi2mqtt_` object id (checked by the caller) and its topic under `base/` mark it.
    let trigger = payload.get("automation_type").and_then(Value::as_str) == Some("trigger");
    (named || trigger) && mentions_topic_under(payload, &format!("{base}/"))
}

fn mentions_topic_under(v: &Value, prefix: &str) -> bool {
    match v {
        Value::Object(object) => object.iter().any(|(k, v)| match v {
            Value::String(s) => (k.ends_with("topic") || k.ends_with("_t")) && s.starts_with(prefix),
            other => mentions_topic_under(other, prefix),
        }),
        Value::Array(a) => a.iter().any(|v| mentions_topic_under(v, prefix)),
        _ => false,
    }
}

/// The device-based intermediate payload HA needs before a component disappears from a device:
/// the new payload with each removed component cut down to `{"p": platform}`. `None` when no
/// component was removed (or either payload is not a device config).
pub fn removal_step(old: &str, new: &str) -> Option<String> {
    let old: Value = serde_json::from_str(old).ok()?;
    let mut new: Value = serde_json::from_str(new).ok()?;
    let old_cmps = old.get("cmps")?.as_object()?;
    let new_cmps = new.get_mut("cmps")?.as_object_mut()?;
    let mut removed = false;
    for (k, v) in old_cmps {
        if !new_cmps.contains_key(k) {
            let p = v.get("p").cloned().unwrap_or(Value::Null);
            new_cmps.insert(k.clone(), json!({"p": p}));
            removed = true;
        }
    }
    removed.then(|| new.to_string())
}

#[cfg(test)]
mod settings_tests;
#[cfg(test)]
mod tests;
