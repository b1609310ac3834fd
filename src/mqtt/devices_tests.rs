//! Keys, values and matching of `devices:`.

use super::*;
use crate::config::devices::{DeviceFile, FieldProblem, settings_of};
use serde_json::json;

fn file(v: Value) -> DeviceFile {
    serde_json::from_value(v).unwrap()
}

fn settings(key: &str, v: Value) -> Result<DeviceSettings, Vec<FieldProblem>> {
    settings_of(&DeviceKey::parse(key).unwrap(), file(v))
}

#[test]
fn keys_name_units_groups_scenes_and_networks() {
    assert_eq!(DeviceKey::parse("A1B2c3d4e5f6"), Ok(DeviceKey::Address("a1b2c3d4e5f6".into())));
    assert_eq!(DeviceKey::parse("home/porch"), Ok(DeviceKey::Unit("home".into(), "porch".into())));
    assert_eq!(DeviceKey::parse("home/group/kitchen"), Ok(DeviceKey::Group("home".into(), "kitchen".into())));
    assert_eq!(DeviceKey::parse("home/scene/evening"), Ok(DeviceKey::Scene("home".into(), "evening".into())));
    assert_eq!(DeviceKey::parse("home"), Ok(DeviceKey::Network("home".into())));
    for bad in ["", "Home/Porch", "home/", "home/porch light", "home/x/y", "a/b/c/d"] {
        assert!(DeviceKey::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn values_are_checked_and_each_problem_names_its_key() {
    let ok = settings(
        "a1b2c3d4e5f6",
        json!({"name": " Porch light ", "homeassistant": {"platform": "switch", "icon": "mdi:fan",
            "entity_category": null, "enabled_by_default": true, "device_class": "outlet", "suggested_area": "Porch"}}),
    )
    .unwrap();
    assert_eq!(ok.name.as_deref(), Some("Porch light"));
    assert_eq!(ok.homeassistant.platform, Some(Platform::Switch));
    assert_eq!(ok.homeassistant.device, vec![("suggested_area".to_string(), json!("Porch"))]);
    let mut config = Map::new();
    config.insert("entity_category".into(), json!("config"));
    ok.homeassistant.apply_entity(&mut config);
    assert_eq!(
        Value::Object(config),
        json!({"icon": "mdi:fan", "enabled_by_default": true, "device_class": "outlet"}),
        "null removes, values set"
    );
    // Each bad entry is refused naming exactly its one bad key.
    let bad = [
        ("home/porch", json!({"homeassistant": {"platform": "fan"}}), "homeassistant.platform"),
        ("home/group/kitchen", json!({"homeassistant": {"platform": "switch"}}), "homeassistant.platform"),
        ("home/porch", json!({"homeassistant": {"icon": "fan"}}), "homeassistant.icon"),
        ("home/porch", json!({"homeassistant": {"entity_category": "system"}}), "homeassistant.entity_category"),
        ("home/porch", json!({"homeassistant": {"enabled_by_default": "no"}}), "homeassistant.enabled_by_default"),
        ("home/porch", json!({"homeassistant": {"device_class": "outlet"}}), "homeassistant.device_class"),
        ("home/porch", json!({"homeassistant": {"state_topic": "x"}}), "homeassistant.state_topic"),
        ("home/porch", json!({"homeassistant": {"entity_picture": "file:///x.png"}}), "homeassistant.entity_picture"),
        ("home/porch", json!({"name": "!!"}), "name"),
    ];
    for (key, entry, field) in bad {
        let fields: Vec<String> = settings(key, entry.clone()).unwrap_err().into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, [field], "{key} {entry}");
    }
    assert!(serde_json::from_value::<DeviceFile>(json!({"nmae": "x"})).is_err(), "unknown keys are refused");
}

#[test]
fn matching_prefers_the_address_and_records_what_matched() {
    let parse = |k: &str, v: Value| (k.to_string(), DeviceKey::parse(k).unwrap(), settings(k, v).unwrap());
    let devices = Devices::new([
        parse("d0c0ffee0001", json!({"name": "By address"})),
        parse("home/kitchen-ceiling", json!({"name": "By slug"})),
        parse("home/kuche-spots", json!({"exclude": true})),
        parse("home/group/kitchen", json!({"name": "Cooking"})),
        parse("home/scene/evening", json!({})),
        parse("home", json!({"name": "House"})),
        parse("office/desk", json!({})),
        parse("a1b2c3d4e5f6", json!({})),
    ]);
    let names = Names {
        network: "home",
        units: vec![(1, Some("D0C0FFEE0001"), "kitchen-ceiling"), (2, Some("d0c0ffee0002"), "kuche-spots")],
        groups: vec![(1, "kitchen")],
        scenes: vec![(1, "evening")],
    };
    let r = Resolved::of(&devices, &names);
    assert_eq!(r.unit(1).unwrap().name.as_deref(), Some("By address"));
    assert!(r.unit(2).unwrap().exclude);
    assert_eq!(r.group(1).unwrap().name.as_deref(), Some("Cooking"));
    assert!(r.scene(1).is_some());
    assert_eq!(r.network.as_ref().unwrap().name.as_deref(), Some("House"));
    assert!(r.matched.contains("home/kitchen-ceiling"), "named twice: both keys matched");
    assert_eq!(unmatched(&devices, &[("home", &r)]), ["a1b2c3d4e5f6"], "office is not loaded yet");
    let office = Resolved::default();
    assert_eq!(unmatched(&devices, &[("home", &r), ("office", &office)]), ["a1b2c3d4e5f6", "office/desk"]);
}

#[test]
fn network_slugs_follow_friendly_names_and_keep_the_cloud_ones() {
    let names = vec![("n1".to_string(), "Home".to_string()), ("n2".to_string(), "Office".to_string())];
    let plain = network_slugs(&Devices::default(), names.clone());
    assert_eq!(plain["n1"], ("home".to_string(), "home".to_string()));
    let devices = Devices::new([(
        "home".to_string(),
        DeviceKey::Network("home".into()),
        DeviceSettings { name: Some("Cottage".into()), ..DeviceSettings::default() },
    )]);
    let renamed = network_slugs(&devices, names);
    assert_eq!(renamed["n1"], ("cottage".to_string(), "home".to_string()));
    assert_eq!(renamed["n2"], ("office".to_string(), "office".to_string()));
}
