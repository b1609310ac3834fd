//! `devices:` — per-device settings (docs/configuration.md#devices): each key checked for what it
//! names, each entry for its values; every problem names its key.

use super::error::Problem;
use super::reader::Reader;
use crate::mqtt::devices::{DeviceFile, DeviceKey, DeviceSettings, Devices};
use std::collections::BTreeMap;

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
        match DeviceSettings::from_file(&key, entry) {
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
