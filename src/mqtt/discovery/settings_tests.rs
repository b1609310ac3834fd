//! `devices:` settings on the demo site: what each changes in discovery and topics, and that
//! every shape they make is one Home Assistant takes.

use super::tests::{MODES, check_schemas, configs_of, demo_mirrors, entities_of, renderer};
use super::*;
use crate::config::devices::{DeviceFile, settings_of};
use crate::mqtt::command_intake;
use crate::mqtt::devices::{DeviceKey, Devices};
use crate::mqtt::mirror::NetMirror;
use crate::mqtt::topics::Layout;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `devices:` from (key, entry) pairs, checked as the configuration checks them.
fn devices(entries: &[(&str, Value)]) -> Arc<Devices> {
    Arc::new(Devices::new(entries.iter().map(|(k, v)| {
        let key = DeviceKey::parse(k).unwrap();
        let file: DeviceFile = serde_json::from_value(v.clone()).unwrap();
        let settings = settings_of(&key, file).unwrap();
        (k.to_string(), key, settings)
    })))
}

/// The demo site's mirrors with `devices`.
fn mirrors(devices: &Arc<Devices>) -> Vec<NetMirror> {
    demo_mirrors()
        .into_iter()
        .map(|mut mirror| {
            mirror.devices = devices.clone();
            mirror.reslug();
            mirror
        })
        .collect()
}

fn home(mirrors: &[NetMirror]) -> &NetMirror {
    mirrors.iter().find(|m| m.slug == "home").unwrap()
}

/// The device config of a unit, parsed.
fn unit_config(mirror: &NetMirror, id: u32) -> Value {
    let topics = renderer(DiscoveryMode::Device).unit(mirror, id);
    serde_json::from_str(&topics[0].1).unwrap()
}

fn network_config(mirror: &NetMirror) -> Value {
    serde_json::from_str(&renderer(DiscoveryMode::Device).network(mirror)[0].1).unwrap()
}

#[test]
fn a_rename_changes_names_and_topics_and_keeps_every_unique_id() {
    let plain = demo_mirrors();
    let d = devices(&[("home/kitchen-ceiling", json!({"name": "Porch light"}))]);
    let renamed = mirrors(&d);
    let (before, after) = (unit_config(home(&plain), 1), unit_config(home(&renamed), 1));
    assert_eq!(after["device"]["name"], "Porch light");
    assert_eq!(after["cmps"]["light"]["state_topic"], "casambi/home/unit/porch-light");
    assert_eq!(after["cmps"]["light"]["command_topic"], "casambi/home/unit/porch-light/set");
    assert_eq!(before["cmps"]["light"]["unique_id"], after["cmps"]["light"]["unique_id"]);
    assert_eq!(before["device"]["identifiers"], after["device"]["identifiers"]);
    // Commands reach the unit on its new topic only.
    let nets: BTreeMap<String, NetMirror> = renamed.into_iter().map(|m| (m.view.status.id.clone(), m)).collect();
    let layout = Layout::new("casambi");
    assert!(command_intake::resolve(&layout, &nets, "casambi/home/unit/porch-light/set").is_some());
    assert!(command_intake::resolve(&layout, &nets, "casambi/home/unit/kitchen-ceiling/set").is_none());
}

#[test]
fn an_excluded_unit_has_no_topics_no_discovery_and_no_command_topic() {
    let d = devices(&[("d0c0ffee0002", json!({"exclude": true}))]);
    let ms = mirrors(&d);
    let r = renderer(DiscoveryMode::Device);
    assert!(r.unit(home(&ms), 2).is_empty(), "Küche Spots is left out");
    assert!(!r.unit(home(&ms), 1).is_empty(), "only it");
    let group = &network_config(home(&ms))["cmps"]["group_1"]["group"];
    assert_eq!(group.as_array().unwrap().len(), 1, "the Kitchen group lists its bridged member only: {group}");
    let nets: BTreeMap<String, NetMirror> = ms.into_iter().map(|m| (m.view.status.id.clone(), m)).collect();
    assert!(command_intake::resolve(&Layout::new("casambi"), &nets, "casambi/home/unit/kuche-spots/set").is_none());
}

#[test]
fn a_relay_as_a_switch_and_a_dimmer_stays_a_light() {
    let d = devices(&[
        (
            "home/living-room-floor",
            json!({"homeassistant": {"platform": "switch", "icon": "mdi:fan", "device_class": "outlet"}}),
        ),
        ("home/kitchen-ceiling", json!({"homeassistant": {"platform": "switch"}})),
    ]);
    let ms = mirrors(&d);
    let floor = unit_config(home(&ms), 8);
    let cmps = floor["cmps"].as_object().unwrap();
    assert!(cmps.get("light").is_none(), "{floor}");
    let switch = &cmps["switch"];
    assert_eq!(switch["p"], "switch");
    assert_eq!(switch["icon"], "mdi:fan");
    assert_eq!(switch["device_class"], "outlet");
    assert_eq!(switch["value_template"], "{{ value_json.state }}");
    assert_eq!((&switch["payload_on"], &switch["payload_off"]), (&json!("ON"), &json!("OFF")));
    assert_eq!(switch["command_topic"], "casambi/home/unit/living-room-floor/set");
    assert!(switch["unique_id"].as_str().unwrap().ends_with("_switch"));
    assert!(unit_config(home(&ms), 1)["cmps"].get("light").is_some(), "a dimmer cannot be a switch");
    assert_eq!(home(&ms).switches_refused(), ["home/kitchen-ceiling"], "and the bridge warns of it");
    let group = &network_config(home(&ms))["cmps"]["group_2"]["group"];
    assert_eq!(group.as_array().unwrap().len(), 1, "a switch is no member light of a group: {group}");
}

#[test]
fn groups_scenes_and_networks_take_their_settings() {
    let d = devices(&[
        (
            "home/group/kitchen",
            json!({"name": "Cooking area", "homeassistant": {"icon": null, "entity_category": "config"}}),
        ),
        ("home/scene/evening", json!({"homeassistant": {"enabled_by_default": false}})),
        ("home/scene/cooking", json!({"exclude": true})),
        ("home", json!({"name": "Cottage", "homeassistant": {"suggested_area": "Garden"}})),
        ("d0c0ffee0005", json!({"homeassistant": {"entity_category": "diagnostic"}})),
        ("home/entrance-switch", json!({"homeassistant": {"entity_category": "config"}})),
    ]);
    let ms = mirrors(&d);
    let net = network_config(home(&ms));
    let group = &net["cmps"]["group_1"];
    assert_eq!(group["name"], "Cooking area");
    assert!(group.get("icon").is_none(), "null removes the bridge's icon");
    assert_eq!(group["entity_category"], "config");
    assert_eq!(group["state_topic"], "casambi/home/group/cooking-area");
    assert_eq!(net["cmps"]["scene_1"]["enabled_by_default"], false);
    assert!(net["cmps"].get("scene_2").is_none(), "an excluded scene has no switch");
    assert!(renderer(DiscoveryMode::Device).scene(home(&ms), 2).is_empty());
    assert_eq!(net["device"]["name"], "Cottage");
    assert_eq!(net["device"]["suggested_area"], "Garden");
    assert_eq!(unit_config(home(&ms), 5)["cmps"]["illuminance"]["entity_category"], "diagnostic");
    let switch = unit_config(home(&ms), 6);
    assert!(switch["cmps"]["event"].get("entity_category").is_none(), "an event takes no category");
}

#[test]
fn every_shape_the_settings_make_is_valid() {
    let d = devices(&[
        (
            "home/living-room-floor",
            json!({"name": "Fan", "homeassistant": {"platform": "switch", "icon": "mdi:fan",
            "entity_category": "config", "enabled_by_default": true, "device_class": "outlet",
            "entity_picture": "https://example.com/fan.png", "suggested_area": "Living room"}}),
        ),
        ("home/group/kitchen", json!({"homeassistant": {"entity_category": "config", "icon": "mdi:stove"}})),
        ("home/kuche-spots", json!({"exclude": true})),
    ]);
    for mode in MODES {
        check_schemas(mode, entities_of(mode, mirrors(&d)));
        let spots = configs_of(mode, mirrors(&d))
            .into_keys()
            .filter(|t| t.contains("7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_d0c0ffee0002"))
            .count();
        assert_eq!(spots, 0, "{mode:?}: the excluded unit has no config");
    }
}

#[test]
fn without_settings_nothing_changes() {
    let empty = devices(&[]);
    for mode in MODES {
        assert_eq!(configs_of(mode, mirrors(&empty)), configs_of(mode, demo_mirrors()));
    }
    let unmatched = devices(&[("home/nothing", json!({"name": "X"}))]);
    assert_eq!(
        configs_of(DiscoveryMode::Device, mirrors(&unmatched)),
        configs_of(DiscoveryMode::Device, demo_mirrors())
    );
}
