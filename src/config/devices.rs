//! `devices:` — per-device settings (docs/configuration.md#devices): each key checked for what it
//! names, each entry for its values; every problem names its key.

use super::error::Problem;
use super::reader::Reader;
use crate::mqtt::devices::{DeviceKey, DeviceSettings, Devices, HaOverrides, Platform};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One entry of `devices:` as the file has it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceFile {
    /// The friendly name: topics (its slug) and Home Assistant's names.
    #[serde(default)]
    pub name: Option<String>,
    /// Not bridged at all.
    #[serde(default)]
    pub exclude: bool,
    /// What Home Assistant's discovery says of the entity ([`HaOverrides`]).
    #[serde(default)]
    pub homeassistant: Map<String, Value>,
}

/// The discovery keys a setting may give an entity, with what each takes. `null` removes a key
/// the bridge would set (an icon, a category).
const ENTITY_KEYS: [(&str, &str); 5] = [
    ("icon", "an icon like mdi:fan, or null"),
    ("entity_category", "config, diagnostic or null"),
    ("enabled_by_default", "true, false or null"),
    ("device_class", "outlet, switch or null (with platform: switch)"),
    ("entity_picture", "an http:// or https:// URL, or null"),
];

/// The discovery keys a setting may give the device.
const DEVICE_KEYS: [(&str, &str); 1] = [("suggested_area", "an area name, or null")];

/// `devices:` as written in the file.
pub(crate) type DevicesFile = BTreeMap<String, DeviceFile>;

/// The dotted key of `field` of the entry `key` (`devices.home/porch.name`), as the reader spells
/// the keys it reports.
fn dotted(key: &str, field: Option<&str>) -> String {
    match field {
        Some(f) => format!("devices.{key}.{f}"),
        None => format!("devices.{key}"),
    }
}

/// Checks every entry; `None` after a problem was recorded.
pub(crate) fn validate(reader: &mut Reader, file: DevicesFile) -> Option<Devices> {
    let before = reader.problems.len();
    let mut entries = Vec::new();
    for (text, entry) in file {
        let key = match DeviceKey::parse(&text) {
            Ok(key) => key,
            Err(shape) => {
                reader.push(Problem::invalid(dotted(&text, None), format!("expected {shape}")));
                continue;
            }
        };
        let network_only = |field: &str| {
            Problem::invalid(
                dotted(&text, Some(field)),
                "a network takes only name and homeassistant.suggested_area (choose networks with networks[].ids)",
            )
        };
        if matches!(key, DeviceKey::Network(_)) {
            if entry.exclude {
                reader.push(network_only("exclude"));
            }
            for k in entry.homeassistant.keys().filter(|k| *k != "suggested_area") {
                reader.push(network_only(&format!("homeassistant.{k}")));
            }
        }
        match settings_of(&key, entry) {
            Ok(settings) => entries.push((text, key, settings)),
            Err(problems) => {
                for (field, reason) in problems {
                    reader.push(Problem::invalid(dotted(&text, Some(&field)), reason));
                }
            }
        }
    }
    (reader.problems.len() == before).then(|| Devices::new(entries))
}

/// A problem with one key of an entry: the key below the entry (`homeassistant.icon`) and why.
pub type FieldProblem = (String, String);

/// Checks an entry for `key`; every problem names the key below the entry.
pub fn settings_of(key: &DeviceKey, file: DeviceFile) -> Result<DeviceSettings, Vec<FieldProblem>> {
    let mut problems = Vec::new();
    let name = file.name.map(|n| n.trim().to_string());
    if name.as_deref().is_some_and(|n| crate::mqtt::topics::slug(n).is_empty()) {
        problems.push(("name".into(), "must contain a letter or a digit (it names the topics)".into()));
    }
    let mut ha = HaOverrides::default();
    for (k, v) in file.homeassistant {
        let field = format!("homeassistant.{k}");
        if k == "platform" {
            match v.as_str() {
                _ if !key.is_unit() => problems.push((field, "only a unit's entity has a platform to choose".into())),
                Some("light") => ha.platform = Some(Platform::Light),
                Some("switch") => ha.platform = Some(Platform::Switch),
                _ => problems.push((field, format!("expected light or switch, got {v}"))),
            }
            continue;
        }
        if matches!(key, DeviceKey::Group(..) | DeviceKey::Scene(..)) && DEVICE_KEYS.iter().any(|(d, _)| *d == k) {
            let reason = "a group's or a scene's entity is on its network's device: give the network the area";
            problems.push((field, reason.into()));
            continue;
        }
        let (expected, to) =
            match (ENTITY_KEYS.iter().find(|(e, _)| *e == k), DEVICE_KEYS.iter().find(|(d, _)| *d == k)) {
                (Some((_, expected)), _) => (*expected, &mut ha.entity),
                (_, Some((_, expected))) => (*expected, &mut ha.device),
                _ => {
                    let valid: Vec<&str> = ["platform"]
                        .into_iter()
                        .chain(ENTITY_KEYS.iter().chain(&DEVICE_KEYS).map(|(k, _)| *k))
                        .collect();
                    problems.push((field, format!("unknown key (valid: {})", valid.join(", "))));
                    continue;
                }
            };
        if v.is_null() || valid_value(&k, &v) {
            to.push((k, v));
        } else {
            problems.push((field, format!("expected {expected}, got {v}")));
        }
    }
    if ha.entity.iter().any(|(k, v)| k == "device_class" && !v.is_null()) && ha.platform != Some(Platform::Switch) {
        problems.push(("homeassistant.device_class".into(), "needs platform: switch (a light has none)".into()));
    }
    if problems.is_empty() {
        Ok(DeviceSettings { name, exclude: file.exclude, homeassistant: ha })
    } else {
        Err(problems)
    }
}

/// Whether `v` is a value Home Assistant takes for `key` (one of [`ENTITY_KEYS`] or
/// [`DEVICE_KEYS`]; `null` is handled by the caller).
fn valid_value(key: &str, v: &Value) -> bool {
    let text = v.as_str().unwrap_or_default();
    match key {
        // HA's icon check: `prefix:name`.
        "icon" => text.split_once(':').is_some_and(|(p, n)| {
            let ok =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            ok(p) && ok(n)
        }),
        "entity_category" => matches!(text, "config" | "diagnostic"),
        "enabled_by_default" => v.is_boolean(),
        "device_class" => matches!(text, "outlet" | "switch"),
        "entity_picture" => {
            (text.starts_with("https://") || text.starts_with("http://")) && !text.contains(char::is_whitespace)
        }
        "suggested_area" => !text.trim().is_empty(),
        _ => false,
    }
}
