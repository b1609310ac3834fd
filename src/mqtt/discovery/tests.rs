//! Discovery payloads of the demo site checked against Home Assistant's documented rules.

use super::*;
use crate::bridge::photos::NetPhoto;
use crate::bridge::state::NetworkView;
use crate::cloud::datapoints::{Datapoint, DatapointValue};
use crate::cloud::model::{Fixture, NetworkState};
use crate::mqtt::mirror::NetMirror;
use crate::mqtt::mirror::photos::PhotoSet;
use crate::mqtt::render::Renderer;
use crate::mqtt::topics::{self, Layout};
use crate::sim::site::Site;
use crate::sim::world::World;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The demo site's networks as mirrors (slugs assigned as the publisher does).
pub(super) fn demo_mirrors() -> Vec<NetMirror> {
    let site = Site::demo();
    let world = World::new(&site);
    let names: Vec<(String, String)> =
        world.networks.values().map(|n| (n.def.id.clone(), n.def.name.clone())).collect();
    let slugs = topics::assign(names, &["bridge"]);
    world
        .networks
        .iter()
        .map(|(id, n)| {
            let state: NetworkState = serde_json::from_value(crate::sim::render::network(n, true)).unwrap();
            let mut view = NetworkView::new(id);
            view.apply_snapshot(state);
            let fixtures = world
                .fixtures
                .values()
                .map(|f| {
                    let json = json!({"id": f.id, "type": f.kind, "vendor": f.vendor, "model": f.model, "controls": f.controls});
                    let fixture: Fixture = serde_json::from_value(json).unwrap();
                    (fixture.id, Arc::new(fixture))
                })
                .collect();
            view.set_fixtures(fixtures);
            let mut mirror = NetMirror::new(view, slugs[id].clone());
            // The photos as the bridge fetches them: the gallery's PNGs.
            let photos: Vec<NetPhoto> = n
                .def
                .photos
                .iter()
                .map(|p| NetPhoto::new(p.name.clone(), p.image.clone(), crate::sim::images::picture(&p.image).unwrap().into()))
                .collect();
            mirror.photos = PhotoSet::new(photos.into());
            // Logged datapoints of every built-in key on the first unit, so their sensors are
            // checked with the rest.
            let first = mirror.view.units.keys().next().copied();
            let keys = ["energy", "power", "battery_level", "driver_temperature", "operating_hours", "dimmer"];
            let points: Vec<Datapoint> = keys
                .iter()
                .map(|key| Datapoint {
                    time: chrono::DateTime::UNIX_EPOCH,
                    unit: first,
                    key: (*key).into(),
                    value: DatapointValue::parse("1"),
                })
                .collect();
            mirror.data.take(&points);
            mirror
        })
        .collect()
}

pub(super) fn renderer(mode: DiscoveryMode) -> Renderer {
    Renderer {
        layout: Layout::new("casambi"),
        discovery: Some(Discovery { prefix: "homeassistant".into(), mode, qos: 1 }),
        attribute_topics: true,
        data_sensors: Default::default(),
    }
}

/// Every discovery config (topic → parsed payload) of the demo site in `mode`.
fn configs(mode: DiscoveryMode) -> BTreeMap<String, Value> {
    configs_of(mode, demo_mirrors())
}

/// Every discovery config (topic → parsed payload) of `mirrors` in `mode`.
pub(super) fn configs_of(mode: DiscoveryMode, mirrors: Vec<NetMirror>) -> BTreeMap<String, Value> {
    let r = renderer(mode);
    let mut out = BTreeMap::new();
    let mut all = r.bridge(&json!({"version": "x"}));
    for mirror in mirrors {
        for o in mirror.owners() {
            all.extend(r.owner(&mirror, &o));
        }
    }
    for (t, p) in all {
        if t.starts_with("homeassistant/") {
            assert!(out.insert(t.clone(), serde_json::from_str(&p).unwrap()).is_none(), "config topic {t} twice");
        }
    }
    out
}

/// Every entity config as (platform, merged config): device-mode components with the root's
/// shared keys, or component-mode payloads as they are.
fn entities(mode: DiscoveryMode) -> Vec<(String, Value)> {
    entities_of(mode, demo_mirrors())
}

/// [`entities`] of `mirrors`.
pub(super) fn entities_of(mode: DiscoveryMode, mirrors: Vec<NetMirror>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (topic, v) in configs_of(mode, mirrors) {
        match mode {
            DiscoveryMode::Device => {
                for (_, c) in v["cmps"].as_object().unwrap() {
                    let mut merged = c.clone();
                    for k in ["availability", "availability_mode", "device", "origin", "qos"] {
                        if merged.get(k).is_none()
                            && let Some(x) = v.get(k)
                        {
                            merged[k] = x.clone();
                        }
                    }
                    out.push((c["p"].as_str().unwrap().to_string(), merged));
                }
            }
            DiscoveryMode::Component => {
                let platform = topic.split('/').nth(1).unwrap().to_string();
                out.push((platform, v));
            }
        }
    }
    out
}

pub(super) const MODES: [DiscoveryMode; 2] = [DiscoveryMode::Device, DiscoveryMode::Component];

#[test]
fn required_keys_per_platform() {
    for mode in MODES {
        check_schemas(mode, entities(mode));
    }
}

/// Checks every entity against Home Assistant's documented schema of its platform: the keys it
/// requires, the keys every entity needs, and the rules of each platform.
pub(super) fn check_schemas(mode: DiscoveryMode, entities: Vec<(String, Value)>) {
    for (platform, c) in entities {
        let required: &[&str] = match platform.as_str() {
            "light" => &["command_topic", "state_topic", "schema", "supported_color_modes"],
            "binary_sensor" => &["state_topic"],
            "sensor" => &["state_topic"],
            "event" => &["state_topic", "event_types"],
            "number" => &["command_topic", "state_topic", "min", "max", "step"],
            "switch" => &["command_topic", "state_topic"],
            "button" => &["command_topic"],
            "device_automation" => &["automation_type", "topic", "type", "subtype"],
            "image" => &["image_topic", "content_type"],
            other => panic!("unexpected platform {other}"),
        };
        for k in required {
            assert!(c.get(*k).is_some(), "{mode:?} {platform} lacks {k}: {c}");
        }
        if platform == "device_automation" {
            check_trigger(&c);
            continue;
        }
        for k in ["unique_id", "device", "origin", "default_entity_id"] {
            assert!(c.get(k).is_some(), "{mode:?} {platform} lacks {k}: {c}");
        }
        assert!(c.get("object_id").is_none(), "object_id is deprecated: {c}");
        let eid = c["default_entity_id"].as_str().unwrap();
        assert!(eid.starts_with(&format!("{platform}.")), "{eid}");
        assert!(
            eid[platform.len() + 1..].chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_'),
            "{eid}"
        );
        assert!(c["device"]["identifiers"].as_array().is_some_and(|a| !a.is_empty()), "{c}");
        assert!(c["device"]["name"].is_string(), "{c}");
        if let Some(t) = c.get("command_topic") {
            let t = t.as_str().unwrap();
            assert!(t.ends_with("/set") || t == "casambi/bridge/request/reload", "{c}");
            assert!(Layout::new("casambi").is_command(t), "the bridge takes commands on {t}");
        }
        if platform == "light" {
            assert_eq!(c["schema"], "json");
        }
        if platform == "event" {
            assert!(c.get("entity_category").is_none(), "events take no entity_category");
        }
        if platform == "image" {
            // Exactly one of image_topic and url_topic; raw bytes (no b64 encoding).
            assert!(c.get("url_topic").is_none() && c.get("image_encoding").is_none(), "{c}");
            assert_eq!(c["content_type"], "image/png");
            assert!(c["image_topic"].as_str().unwrap().starts_with("casambi/home/photo/"), "{c}");
        }
        check_common_options(&platform, &c);
    }
}

/// The options every entity may carry, as Home Assistant's schemas take them.
fn check_common_options(platform: &str, c: &Value) {
    if let Some(cat) = c.get("entity_category") {
        assert!(cat == "config" || cat == "diagnostic", "entity_category {cat}: {c}");
    }
    if let Some(e) = c.get("enabled_by_default") {
        assert!(e.is_boolean(), "{c}");
    }
    if let Some(icon) = c.get("icon").and_then(Value::as_str).or(c.get("icon").map(|_| "")) {
        assert!(icon.split_once(':').is_some_and(|(p, n)| !p.is_empty() && !n.is_empty()), "icon {icon:?}: {c}");
    }
    match platform {
        "light" => {
            assert!(c.get("device_class").is_none(), "a light has no device_class: {c}");
            const MODES: [&str; 9] = ["onoff", "brightness", "color_temp", "hs", "xy", "rgb", "rgbw", "rgbww", "white"];
            for m in c["supported_color_modes"].as_array().unwrap() {
                assert!(MODES.contains(&m.as_str().unwrap()), "colour mode {m}: {c}");
            }
            if let Some(g) = c.get("group") {
                assert!(g.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_string)), "{c}");
            }
        }
        "switch" => {
            if let Some(dc) = c.get("device_class") {
                assert!(dc == "outlet" || dc == "switch", "{c}");
            }
        }
        "button" => {
            assert!(c.get("state_topic").is_none(), "a button has no state: {c}");
            assert!(c.get("payload_press").is_none_or(Value::is_string), "{c}");
        }
        _ => {}
    }
}

/// A device trigger as Home Assistant's `device_automation` schema takes it: strings for
/// `automation_type` (`trigger`), `topic`, `type`, `subtype`, `payload` and `value_template`; no
/// entity keys (it is no entity); a device with identifiers; a topic under the base topic.
fn check_trigger(c: &Value) {
    assert_eq!(c["automation_type"], "trigger", "{c}");
    for k in ["topic", "type", "subtype", "payload", "value_template"] {
        assert!(c.get(k).is_none_or(Value::is_string), "{k} must be a string: {c}");
    }
    for k in ["name", "default_entity_id", "state_topic", "command_topic", "entity_category", "icon"] {
        assert!(c.get(k).is_none(), "a trigger takes no {k}: {c}");
    }
    assert!(c["device"]["identifiers"].as_array().is_some_and(|a| !a.is_empty()), "{c}");
    assert!(c["topic"].as_str().is_some_and(|t| t.starts_with("casambi/") && t.ends_with("/event")), "{c}");
}

#[test]
fn switches_have_a_device_trigger_per_button_or_one() {
    for mode in MODES {
        let all = entities(mode);
        let triggers: Vec<_> = all.iter().filter(|(p, _)| p == "device_automation").collect();
        assert_eq!(triggers.len(), 1, "the entrance switch's fixture names one button: one trigger");
        let t = &triggers[0].1;
        assert_eq!((t["type"].as_str(), t["subtype"].as_str()), (Some("button_short_press"), Some("switch")));
        assert_eq!(t["topic"], "casambi/home/unit/entrance-switch/event");
        assert_eq!(t["payload"], "switch");
        let events: Vec<_> = all.iter().filter(|(p, c)| p == "event" && c["state_topic"] == t["topic"]).collect();
        assert_eq!(events.len(), 1, "the event entity stays besides the trigger");
    }
    let component = configs(DiscoveryMode::Component);
    let topics: Vec<&String> = component.keys().filter(|t| t.starts_with("homeassistant/device_automation/")).collect();
    assert_eq!(topics.len(), 1, "per component, the trigger has a config topic of its own");
}

#[test]
fn a_switch_whose_fixture_names_its_buttons_gets_one_trigger_each() {
    let r = renderer(DiscoveryMode::Device);
    let mut mirror = demo_mirrors().into_iter().find(|mirror| mirror.view.status.name == "Home").unwrap();
    let fixture_id = mirror.view.units[&6].fixture_id.get().unwrap();
    let mut fixture = (*mirror.view.fixtures[&fixture_id]).clone();
    fixture.controls = (0..4)
        .map(|id| {
            serde_json::from_value(json!({"type": "button", "id": id, "buttonLabel": format!("{}", id + 1)})).unwrap()
        })
        .collect();
    mirror.view.fixtures.insert(fixture_id, Arc::new(fixture));
    let (_, payload) = &r.unit(&mirror, 6)[0];
    let v: Value = serde_json::from_str(payload).unwrap();
    let cmps = v["cmps"].as_object().unwrap();
    let subtypes: Vec<&str> =
        cmps.values().filter(|c| c["p"] == "device_automation").map(|c| c["subtype"].as_str().unwrap()).collect();
    assert_eq!(subtypes, ["button_1", "button_2", "button_3", "button_4"]);
    assert_eq!(cmps["trigger_button_2"]["payload"], "2");
    assert!(cmps["trigger_button_2"]["value_template"].as_str().unwrap().contains("'button'"));
    assert!(cmps.get("trigger_switch").is_none());
    // Home Assistant tells triggers apart by their component key; a trigger takes no unique id.
    assert!(cmps.values().filter(|c| c["p"] == "device_automation").all(|c| c.get("unique_id").is_none()));
}

/// The keys of Home Assistant's trigger schema (`device_trigger.TRIGGER_DISCOVERY_SCHEMA`), which
/// drops every other: `device` is the component layout's (the device layout's root carries it),
/// `p` the device layout's.
const TRIGGER_KEYS: [&str; 9] =
    ["automation_type", "topic", "type", "subtype", "payload", "value_template", "qos", "device", "p"];

#[test]
fn triggers_carry_only_the_keys_home_assistant_takes() {
    for mode in MODES {
        let mut triggers = Vec::new();
        for (topic, v) in configs(mode) {
            match mode {
                DiscoveryMode::Device => triggers
                    .extend(v["cmps"].as_object().unwrap().values().filter(|c| c["p"] == "device_automation").cloned()),
                DiscoveryMode::Component if topic.starts_with("homeassistant/device_automation/") => triggers.push(v),
                DiscoveryMode::Component => {}
            }
        }
        assert_eq!(triggers.len(), 1, "{mode:?}");
        for t in triggers {
            for k in t.as_object().unwrap().keys() {
                assert!(TRIGGER_KEYS.contains(&k.as_str()), "{mode:?}: a trigger takes no {k}: {t}");
            }
        }
    }
}

#[test]
fn group_lights_name_their_member_lights() {
    for mode in MODES {
        let all = entities(mode);
        let light_ids: BTreeSet<&str> =
            all.iter().filter(|(p, _)| p == "light").map(|(_, c)| c["unique_id"].as_str().unwrap()).collect();
        let groups: Vec<_> = all.iter().filter(|(_, c)| c["icon"] == "mdi:lightbulb-group").collect();
        assert_eq!(groups.len(), 3, "Kitchen, Living room and the office's");
        for (_, g) in groups {
            let members = g["group"].as_array().unwrap_or_else(|| panic!("group light without `group`: {g}"));
            assert!(!members.is_empty());
            for m in members {
                let m = m.as_str().unwrap();
                assert!(light_ids.contains(m), "{m} is no light's unique id");
                assert_ne!(m, g["unique_id"].as_str().unwrap(), "a group is not its own member");
            }
        }
    }
}

#[test]
fn each_gallery_photo_is_an_image_entity_of_its_network() {
    for mode in MODES {
        let images: Vec<_> = entities(mode).into_iter().filter(|(p, _)| p == "image").map(|(_, c)| c).collect();
        assert_eq!(images.len(), 1, "{mode:?}: the demo's Home has one photo");
        let c = &images[0];
        assert_eq!(c["image_topic"], "casambi/home/photo/ground-floor");
        assert_eq!(c["name"], "Ground floor");
        assert_eq!(c["default_entity_id"], "image.home_photo_ground_floor");
        assert_eq!(c["unique_id"], "casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_photo_photo-home-1");
        assert_eq!(c["device"]["identifiers"][0], "casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b");
    }
}

#[test]
fn hidden_scenes_are_disabled_by_default() {
    let r = renderer(DiscoveryMode::Device);
    let mut mirror = demo_mirrors().into_iter().find(|mirror| mirror.view.status.name == "Home").unwrap();
    let shown = r.network(&mirror);
    let first = *mirror.view.scenes.keys().next().unwrap();
    mirror.view.scenes.get_mut(&first).unwrap().hidden = true;
    let hidden = r.network(&mirror);
    let cmps =
        |topics: &[(String, String)]| -> Value { serde_json::from_str::<Value>(&topics[0].1).unwrap()["cmps"].clone() };
    let (shown, hidden) = (cmps(&shown), cmps(&hidden));
    let key = format!("scene_{first}");
    assert!(shown[&key].get("enabled_by_default").is_none(), "{}", shown[&key]);
    assert_eq!(hidden[&key]["enabled_by_default"], false);
    assert_eq!(shown[&key]["unique_id"], hidden[&key]["unique_id"]);
    let other = mirror.view.scenes.keys().nth(1).map(|id| format!("scene_{id}")).unwrap();
    assert!(hidden[&other].get("enabled_by_default").is_none(), "only the hidden scene");
}

#[test]
fn colour_modes_are_exclusive() {
    let mut seen = BTreeSet::new();
    for (platform, c) in entities(DiscoveryMode::Device) {
        if platform != "light" {
            continue;
        }
        let modes: Vec<&str> =
            c["supported_color_modes"].as_array().unwrap().iter().map(|mode| mode.as_str().unwrap()).collect();
        assert!(!modes.is_empty());
        if modes.contains(&"onoff") || modes.contains(&"brightness") {
            assert_eq!(modes.len(), 1, "onoff/brightness must stand alone: {modes:?}");
        }
        if modes.contains(&"color_temp") {
            assert_eq!(c["color_temp_kelvin"], true);
            assert!(c["min_kelvin"].as_u64().unwrap() < c["max_kelvin"].as_u64().unwrap());
        }
        seen.insert(modes.join(","));
    }
    // The demo site covers every kind of light.
    for expected in ["brightness", "color_temp", "hs", "onoff"] {
        assert!(seen.contains(expected), "{seen:?}");
    }
}

#[test]
fn sensors_use_ha_units_and_classes() {
    let all = entities(DiscoveryMode::Device);
    let lux: Vec<_> = all.iter().filter(|(_, c)| c["device_class"] == "illuminance").collect();
    assert_eq!(lux.len(), 2, "Garden lux and Window lux");
    for (p, c) in lux {
        assert_eq!(p, "sensor");
        assert_eq!(c["unit_of_measurement"], "lx");
        assert_eq!(c["state_class"], "measurement");
    }
    let occupancy: Vec<_> = all.iter().filter(|(_, c)| c["device_class"] == "occupancy").collect();
    assert_eq!(occupancy.len(), 2);
    assert!(occupancy.iter().all(|(p, _)| p == "binary_sensor"));
    let events: Vec<_> = all.iter().filter(|(p, _)| p == "event").collect();
    assert_eq!(events.len(), 1, "the entrance switch");
}

#[test]
fn device_mode_has_origin_and_every_component_p_and_unique_id() {
    for (topic, v) in configs(DiscoveryMode::Device) {
        assert!(topic.starts_with("homeassistant/device/") && topic.ends_with("/config"), "{topic}");
        assert_eq!(v["origin"]["name"], ORIGIN_NAME, "{topic}");
        let cmps = v["cmps"].as_object().unwrap();
        assert!(!cmps.is_empty());
        for (key, c) in cmps {
            assert!(c["p"].is_string(), "{topic} {key}");
            assert_eq!(c["unique_id"].is_string(), c["p"] != "device_automation", "{topic} {key}");
            assert_eq!(c["qos"], 1, "the root's qos is not handed down: {topic} {key}");
            assert!(c.as_object().unwrap().len() > 2, "each component needs an option of its own");
        }
        let object_id = topic.split('/').nth(2).unwrap();
        assert!(object_id.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-'), "{object_id}");
    }
}

#[test]
fn component_topics_use_the_unique_id() {
    for (topic, v) in configs(DiscoveryMode::Component) {
        let levels: Vec<&str> = topic.split('/').collect();
        assert_eq!(levels.len(), 4, "{topic}");
        if levels[1] == "device_automation" {
            // A trigger carries neither; its topic still starts with the bridge's prefix.
            assert!(v.get("unique_id").is_none() && v.get("origin").is_none(), "{topic}");
            assert!(levels[2].starts_with(ORIGIN_NAME), "{topic}");
            continue;
        }
        assert_eq!(levels[2], v["unique_id"].as_str().unwrap());
        assert_eq!(v["origin"]["name"], ORIGIN_NAME);
    }
}

#[test]
fn unique_ids_are_unique_across_the_site_and_the_same_in_both_modes() {
    let ids = |mode| -> Vec<String> {
        entities(mode)
            .into_iter()
            .filter(|(p, _)| p != "device_automation")
            .map(|(_, c)| c["unique_id"].as_str().unwrap().to_string())
            .collect()
    };
    let device = ids(DiscoveryMode::Device);
    let set: BTreeSet<_> = device.iter().cloned().collect();
    assert_eq!(set.len(), device.len(), "duplicate unique ids: {device:?}");
    let component: BTreeSet<_> = ids(DiscoveryMode::Component).into_iter().collect();
    assert_eq!(set, component);
}

#[test]
fn the_bridge_has_a_reload_button() {
    for mode in MODES {
        let buttons: Vec<_> = entities(mode).into_iter().filter(|(p, _)| p == "button").collect();
        assert_eq!(buttons.len(), 1, "{mode:?}");
        let c = &buttons[0].1;
        assert_eq!(c["name"], "Reload");
        assert_eq!(c["command_topic"], "casambi/bridge/request/reload");
        assert_eq!(c["payload_press"], "PRESS");
        assert_eq!(c["entity_category"], "config");
        assert_eq!(c["device"]["identifiers"][0], "casambi2mqtt_bridge_casambi");
        assert_eq!(c["availability"][0]["topic"], "casambi/bridge/state");
    }
    let nets = BTreeMap::new();
    let target = crate::mqtt::command_intake::resolve(&Layout::new("casambi"), &nets, "casambi/bridge/request/reload");
    assert_eq!(target, Some((String::new(), crate::commands::Target::Reload)));
}

#[test]
fn availability_is_bridge_and_unit_with_mode_all() {
    for (platform, c) in entities(DiscoveryMode::Device) {
        let Some(av) = c.get("availability").and_then(Value::as_array) else {
            // Only the bridge's own connectivity sensor reads the bridge state directly.
            assert_eq!(c["state_topic"], "casambi/bridge/state", "{platform} without availability: {c}");
            continue;
        };
        assert_eq!(c["availability_mode"], "all");
        assert_eq!(av[0]["topic"], "casambi/bridge/state");
        for a in av {
            assert_eq!(a["payload_available"], "online");
            assert_eq!(a["payload_not_available"], "offline");
        }
    }
}

#[test]
fn devices_link_units_to_networks_to_the_bridge() {
    let configs = configs(DiscoveryMode::Device);
    let bridge: Vec<_> = configs.values().filter(|v| v["device"].get("via_device").is_none()).collect();
    assert_eq!(bridge.len(), 1, "only the bridge has no via_device");
    let bridge_id = &bridge[0]["device"]["identifiers"][0];
    let networks: Vec<_> = configs.values().filter(|v| &v["device"]["via_device"] == bridge_id).collect();
    assert_eq!(networks.len(), 2);
    let network_ids: Vec<&Value> = networks.iter().map(|v| &v["device"]["identifiers"][0]).collect();
    let units = configs.values().filter(|v| network_ids.contains(&&v["device"]["via_device"])).count();
    assert_eq!(units, configs.len() - 3);
    let spots = configs.values().find(|v| v["device"]["name"] == "Küche Spots").unwrap();
    assert_eq!(spots["device"]["manufacturer"], "Lumen Works");
    assert_eq!(spots["device"]["model"], "TW Spot 2700-6500");
    assert!(spots["device"]["sw_version"].is_string());
    assert_eq!(spots["cmps"]["light"]["name"], Value::Null, "the main entity is unnamed");
}

#[test]
fn a_rename_keeps_identity() {
    let r = renderer(DiscoveryMode::Device);
    let mut mirror = demo_mirrors().into_iter().find(|mirror| mirror.view.status.name == "Home").unwrap();
    let before = r.unit(&mirror, 1);
    let mut unit = (*mirror.view.units[&1]).clone();
    unit.name = Some("Kitchen main".into());
    mirror.view.units.insert(1, Arc::new(unit));
    mirror.reslug();
    let after = r.unit(&mirror, 1);
    assert_eq!(before[0].0, after[0].0, "same config topic");
    let (b, a): (Value, Value) =
        (serde_json::from_str(&before[0].1).unwrap(), serde_json::from_str(&after[0].1).unwrap());
    assert_eq!(b["cmps"]["light"]["unique_id"], a["cmps"]["light"]["unique_id"]);
    assert_eq!(b["device"]["identifiers"], a["device"]["identifiers"]);
    assert_eq!(a["cmps"]["light"]["state_topic"], "casambi/home/unit/kitchen-main");
}

#[test]
fn removal_step_cuts_removed_components_to_their_platform() {
    let old = r#"{"cmps":{"a":{"p":"switch","unique_id":"a"},"b":{"p":"light","unique_id":"b"}}}"#;
    let new = r#"{"cmps":{"a":{"p":"switch","unique_id":"a"}}}"#;
    let step: Value = serde_json::from_str(&removal_step(old, new).unwrap()).unwrap();
    assert_eq!(step["cmps"]["b"], json!({"p": "light"}));
    assert!(removal_step(new, old).is_none(), "nothing removed");
}

#[test]
fn ours_is_recognised_by_origin_and_base_topic() {
    let v = json!({"origin": {"name": ORIGIN_NAME}, "cmps": {"x": {"state_topic": "casambi/home"}}});
    assert!(is_ours(&v, "casambi"));
    assert!(!is_ours(&v, "other"));
    let v = json!({"origin": {"name": "zigbee2mqtt"}, "state_topic": "casambi/home"});
    assert!(!is_ours(&v, "casambi"));
    // A device trigger has no origin: its topic under the base topic marks it.
    let v = json!({"automation_type": "trigger", "topic": "casambi/home/unit/x/event"});
    assert!(is_ours(&v, "casambi"));
    assert!(!is_ours(&v, "other"));
}

#[test]
fn logged_keys_with_a_sensor_are_sensors_of_their_unit_and_live_keys_are_not() {
    for mode in MODES {
        let data: Vec<(String, Value)> = entities(mode)
            .into_iter()
            .filter(|(_, c)| c["unique_id"].as_str().is_some_and(|u| u.contains("_data_")))
            .collect();
        // Five built-in keys on one unit of each of the two networks; `dimmer` is live.
        assert_eq!(data.len(), 10, "{mode:?}");
        assert!(data.iter().all(|(p, _)| p == "sensor"));
        assert!(!data.iter().any(|(_, c)| c["unique_id"].as_str().is_some_and(|u| u.ends_with("_data_dimmer"))));
        for (_, c) in &data {
            assert!(c["state_topic"].as_str().is_some_and(|t| t.ends_with("/data")), "{c}");
            assert!(
                c["device"]["identifiers"][0]
                    .as_str()
                    .is_some_and(|d| c["unique_id"].as_str().is_some_and(|u| u.starts_with(d))),
                "{c}"
            );
        }
    }
}
