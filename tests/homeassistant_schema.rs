//! The demo's discovery configs in both layouts (the reviewed golden files of tests/golden)
//! through Home Assistant's own discovery schemas (docs/homeassistant.md#checked-by-home-assistant):
//! an error fails, and so does a key Home Assistant drops. The live test sites go through the
//! same check in tests/homeassistant_e2e.rs.

mod common;
mod ha_support;

use std::path::Path;

#[test]
fn home_assistant_takes_every_golden_discovery_config_as_published() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let (device, component) = (golden.join("demo_device.txt"), golden.join("demo_component.txt"));
    let summary = ha_support::check_discovery_files(&[&device, &component]);
    println!("{summary}");
    let components = &summary["components"];
    // Both layouts of the demo: every platform the bridge uses, a switch's trigger in each.
    for platform in ["binary_sensor", "button", "event", "image", "light", "number", "sensor", "switch"] {
        assert!(components[platform].as_u64().is_some_and(|n| n >= 2), "{platform}: {summary}");
    }
    assert_eq!(components["device_automation"], 2, "{summary}");
    // The only key dropped: the group lights' `group` (three groups, two layouts).
    let ignored = summary["ignored"].as_array().expect("ignored");
    assert_eq!(ignored.len(), 6, "{summary}");
    assert!(ignored.iter().all(|i| i.as_str().is_some_and(|i| i.contains("light 'group'"))), "{summary}");
}
