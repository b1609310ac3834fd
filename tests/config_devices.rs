//! `devices:` in the configuration: a valid section loads; every bad key or value is a
//! configuration error naming its key (the binary exits with code 2 on any).

use casambi2mqtt::config;
use casambi2mqtt::mqtt::devices::DeviceKey;

const BASE: &str = "cloud:\n  api_key: k\nnetworks:\n  - email: a@example.com\n    password: p\n";

fn problems(devices: &str) -> Vec<String> {
    match config::parse(&format!("{BASE}devices:\n{devices}"), Vec::new()) {
        Ok(_) => panic!("expected an error for:\n{devices}"),
        Err(e) => e.problems().iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_valid_section_loads() {
    let yaml = format!(
        "{BASE}devices:\n  \"a1b2c3d4e5f6\":\n    name: Porch light\n    homeassistant:\n      platform: switch\n      \
         icon: mdi:fan\n      entity_category: null\n      enabled_by_default: true\n  home/garage-light:\n    \
         exclude: true\n  home/group/kitchen:\n    name: Cooking\n  home:\n    name: Cottage\n"
    );
    let c = config::parse(&yaml, Vec::new()).unwrap();
    let keys: Vec<(&str, &DeviceKey)> = c.devices.keys().collect();
    assert_eq!(keys.len(), 4, "{keys:?}");
    assert!(c.mqtt_config().devices.keys().any(|(k, _)| k == "home/garage-light"));
    assert!(config::parse(BASE, Vec::new()).unwrap().devices.is_empty(), "no section: no settings");
}

#[test]
fn bad_keys_and_values_name_their_key() {
    let p = problems("  Home/Porch:\n    name: x\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("devices.Home/Porch: expected a unit's address (12 hex digits)"), "{p:?}");
    assert_eq!(
        problems("  home/porch:\n    homeassistant:\n      platform: fan\n"),
        ["devices.home/porch.homeassistant.platform: expected light or switch, got \"fan\""]
    );
    assert_eq!(
        problems("  home/porch:\n    homeassistant:\n      icon: fan\n"),
        ["devices.home/porch.homeassistant.icon: expected an icon like mdi:fan, or null, got \"fan\""]
    );
    let p = problems("  home/porch:\n    homeassistant:\n      state_topic: x\n");
    assert!(
        p[0].starts_with("devices.home/porch.homeassistant.state_topic: unknown key (valid: platform, icon,"),
        "{p:?}"
    );
    let p = problems("  home/porch:\n    nmae: x\n");
    assert!(p[0].starts_with("unknown key devices.home/porch.nmae"), "{p:?}");
    let p = problems("  home:\n    exclude: true\n");
    assert!(p[0].starts_with("devices.home.exclude: a network takes only name"), "{p:?}");
    assert_eq!(
        problems("  home/group/kitchen:\n    homeassistant:\n      suggested_area: Kitchen\n"),
        ["devices.home/group/kitchen.homeassistant.suggested_area: a group's or a scene's entity is on its \
          network's device: give the network the area"]
    );
    let p = problems("  home/porch:\n    exclude: maybe\n");
    assert!(p[0].starts_with("devices.home/porch.exclude: expected"), "{p:?}");
    // Every problem at once.
    assert_eq!(
        problems("  home/a:\n    name: \"!\"\n  home/b:\n    homeassistant:\n      entity_category: x\n").len(),
        2
    );
}
