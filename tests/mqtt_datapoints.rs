//! Logged datapoints on MQTT (docs/mqtt.md#logged-datapoints, docs/homeassistant.md): the
//! publisher on a real mosquitto keeps the latest value of each unit and key on
//! `<unit>/data` and `<unit>/data/<key>`, gives the built-in keys Home Assistant sensors, keeps
//! text values text, holds the points of a unit it does not know until the unit appears; and the
//! whole bridge (`app::run`) on the simulator fetches and publishes them by itself.

mod common;
#[path = "common/matrix.rs"]
mod matrix;

use casambi2mqtt::bridge::state::Topology;
use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::cloud::datapoints::{Datapoint, DatapointValue};
use casambi2mqtt::mqtt::{DiscoveryMode, Protocol};
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use chrono::{TimeZone, Utc};
use common::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const KITCHEN: &str = "casambi/home/unit/kitchen-ceiling";

fn point(unit: Option<u32>, key: &str, value: &str, minute: u32) -> Datapoint {
    Datapoint {
        time: Utc.with_ymd_and_hms(2026, 11, 27, 8, minute, 0).single().expect("a valid time"),
        unit,
        key: key.into(),
        value: DatapointValue::parse(value),
    }
}

fn datapoints(network: &str, points: Vec<Datapoint>) -> Update {
    Update::Datapoints { network: network.into(), points: points.into() }
}

/// The components of the device config whose topic ends with `object_id`'s config.
fn components(r: &BTreeMap<String, String>, object_id_part: &str) -> serde_json::Map<String, Value> {
    let topic = r
        .keys()
        .find(|t| t.starts_with("homeassistant/device/") && t.contains(object_id_part))
        .unwrap_or_else(|| panic!("no device config for {object_id_part}"));
    let config: Value = serde_json::from_str(&r[topic]).expect("device config is JSON");
    config["cmps"].as_object().expect("cmps").clone()
}

/// The keys Home Assistant's MQTT sensor schema requires, and the values it accepts for the
/// classes the bridge sets.
fn assert_valid_sensor(c: &Value) {
    assert_eq!(c["p"], "sensor", "{c}");
    for key in ["unique_id", "state_topic", "value_template"] {
        assert!(c[key].is_string(), "sensor lacks {key}: {c}");
    }
    if let Some(class) = c["state_class"].as_str() {
        assert!(["measurement", "total", "total_increasing"].contains(&class), "{c}");
    }
    if let Some(category) = c.get("entity_category") {
        assert!(category == "diagnostic" || category == "config", "{c}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latest_values_are_retained_with_sensors_for_the_built_in_keys() {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.expect("simulator");
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    let home = demo_network_ids(&sim)[0].clone();
    let view = view_of(&sim, &home);
    bridge.updates.send(network_update(&view, Topology::default())).await.expect("publisher runs");
    let points = vec![
        point(Some(1), "energy", "1.5", 0),
        point(Some(1), "power", "12", 0),
        point(Some(1), "energy", "1.75", 15),
        // A malformed reading stays text; a key that cannot name a topic stays in the JSON.
        point(Some(1), "driver_temperature", "41,5", 15),
        point(Some(1), "odd/key", "3", 15),
        // A unit the bridge does not know (yet) and a point of no unit: nothing crashes.
        point(Some(999), "energy", "8", 15),
        point(None, "energy", "9", 15),
    ];
    bridge.updates.send(datapoints(&home, points)).await.expect("publisher runs");
    let r =
        retained_until(broker.port(), Duration::from_secs(15), |r| r.contains_key(&format!("{KITCHEN}/data"))).await;
    let data: Value = serde_json::from_str(&r[&format!("{KITCHEN}/data")]).expect("data is JSON");
    assert_eq!(data["energy"], json!({"value": 1.75, "time": "2026-11-27T08:15:00.000Z"}));
    assert_eq!(data["power"]["value"], json!(12));
    assert_eq!(data["driver_temperature"]["value"], json!("41,5"));
    assert_eq!(data["odd/key"]["value"], json!(3));
    assert_eq!(r.get(&format!("{KITCHEN}/data/energy")).map(String::as_str), Some("1.75"));
    assert_eq!(r.get(&format!("{KITCHEN}/data/driver_temperature")).map(String::as_str), Some("41,5"));
    assert!(!r.keys().any(|t| t.contains("odd")), "a key with a slash names no topic");
    assert!(!r.keys().any(|t| t.contains("/unit/") && t.ends_with("/data") && !t.starts_with(KITCHEN)));

    let cmps = components(&r, "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_d0c0ffee0001");
    let energy = &cmps["data_energy"];
    assert_valid_sensor(energy);
    assert_eq!(energy["device_class"], "energy");
    assert_eq!(energy["unit_of_measurement"], "kWh");
    assert_eq!(energy["state_class"], "total_increasing");
    assert_eq!(energy["state_topic"], format!("{KITCHEN}/data"));
    assert_valid_sensor(&cmps["data_power"]);
    assert_eq!(cmps["data_driver_temperature"]["entity_category"], "diagnostic");
    assert!(!cmps.contains_key("data_odd/key"));
    assert!(cmps.contains_key("light"), "the unit's own entities stay");

    // The unknown unit appears: its data, held meanwhile, is published with it.
    let mut unit = (*view.units[&1]).clone();
    unit.id = 999;
    unit.name = Some("Porch".into());
    unit.address = Some("aa00000003e7".into());
    let mut grown = view.clone();
    grown.units.insert(999, unit.into());
    bridge.updates.send(network_update(&grown, Topology::default())).await.expect("publisher runs");
    let r = retained_until(broker.port(), Duration::from_secs(15), |r| r.contains_key("casambi/home/unit/porch/data"))
        .await;
    let data: Value = serde_json::from_str(&r["casambi/home/unit/porch/data"]).expect("data is JSON");
    assert_eq!(data["energy"]["value"], json!(8));
    // The kitchen kept its data through the new view.
    assert!(r.contains_key(&format!("{KITCHEN}/data")));
    bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_change_leaves_the_data_topics_alone_and_new_values_move_only_them() {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.expect("simulator");
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    let home = demo_network_ids(&sim)[0].clone();
    bridge.updates.send(network_update(&view_of(&sim, &home), Topology::default())).await.expect("runs");
    bridge.updates.send(datapoints(&home, vec![point(Some(1), "energy", "1", 0)])).await.expect("runs");
    let mut w = Watcher::start(broker.port(), "#").await;
    w.wait_for(Duration::from_secs(10), |s| s.topic == format!("{KITCHEN}/data/energy")).await;
    w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;

    sim.shared().world().control_unit(&home, 1, &json!({"Dimmer": {"value": 0.3}})).expect("unit 1");
    let unit = view_of(&sim, &home).units[&1].clone();
    bridge.updates.send(Update::Unit { network: home.as_str().into(), unit }).await.expect("runs");
    let changed = w.settle(Duration::from_millis(500), Duration::from_secs(5)).await;
    let topics: Vec<&str> = changed.iter().map(|s| s.topic.as_str()).collect();
    assert!(topics.contains(&KITCHEN), "{topics:?}");
    assert!(!topics.iter().any(|t| t.contains("/data")), "data republished on a state change: {topics:?}");

    // A newer value of a known key: its data topics, no discovery.
    bridge.updates.send(datapoints(&home, vec![point(Some(1), "energy", "2", 15)])).await.expect("runs");
    let changed = w.settle(Duration::from_millis(500), Duration::from_secs(5)).await;
    let mut topics: Vec<&str> = changed.iter().map(|s| s.topic.as_str()).collect();
    topics.sort_unstable();
    assert_eq!(topics, [format!("{KITCHEN}/data"), format!("{KITCHEN}/data/energy")]);
    bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_fetches_and_publishes_the_demo_sites_datapoints_by_itself() {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.expect("simulator");
    let yaml = matrix::yaml(&sim, &broker.url(), "v5", "", matrix::DEMO_NETWORKS);
    let (shutdown, task) = matrix::run_bridge(&format!("{yaml}datapoints:\n  interval: 1m\n  lookback: 2h\n")).await;
    let r = retained_until(broker.port(), Duration::from_secs(30), |r| {
        r.contains_key(&format!("{KITCHEN}/data/energy"))
            && r.keys().any(|t| t.ends_with("/data/battery_level"))
            && r.contains_key("casambi/office/unit/window-lux/data")
    })
    .await;
    let data: Value = serde_json::from_str(&r[&format!("{KITCHEN}/data")]).expect("data is JSON");
    assert!(data["energy"]["value"].is_number(), "{data}");
    assert!(data["power"]["value"].is_number(), "{data}");
    let cmps = components(&r, "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_d0c0ffee0001");
    assert_eq!(cmps["data_energy"]["state_class"], "total_increasing");
    let battery_unit = r.keys().find(|t| t.ends_with("/data/battery_level")).expect("a battery unit");
    let slug = battery_unit.trim_end_matches("/data/battery_level").rsplit('/').next().expect("a slug");
    let with_battery: Vec<Value> = r
        .iter()
        .filter(|(t, _)| t.starts_with("homeassistant/device/"))
        .filter_map(|(_, p)| serde_json::from_str::<Value>(p).ok())
        .filter(|c| c["cmps"].get("data_battery_level").is_some())
        .collect();
    assert!(!with_battery.is_empty(), "no battery sensor (unit {slug})");
    for c in &with_battery {
        let battery = &c["cmps"]["data_battery_level"];
        assert_valid_sensor(battery);
        assert_eq!(battery["device_class"], "battery");
        assert_eq!(battery["entity_category"], "diagnostic");
    }
    // Only after every network's start-up snapshot, and one query per network so far (the
    // demo's two hours fit one page).
    let log = sim.shared().log.requests();
    let first_datapoints = log.iter().position(|r| r.path.starts_with("/datapoints/")).expect("datapoints asked");
    let states = log.iter().filter(|r| r.path.ends_with("/state")).count();
    assert!(states >= 2, "{states}");
    for id in demo_network_ids(&sim) {
        let snapshot = log.iter().position(|r| r.path == format!("/v1/networks/{id}/state")).expect("a snapshot");
        assert!(snapshot < first_datapoints, "datapoints before {id}'s snapshot");
        let asked = log.iter().filter(|r| r.path == format!("/datapoints/networks/{id}/datapoints")).count();
        assert_eq!(asked, 1, "{id}");
    }
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}

/// A network's first datapoint page re-renders the device config of every unit that gets a
/// sensor: a change that comes in meanwhile is published before most of that work, not after
/// all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_change_is_not_held_back_by_a_big_datapoint_page() {
    const UNITS: u32 = 250;
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::generate(1, UNITS as usize))).await.expect("simulator");
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    let net = demo_network_ids(&sim)[0].clone();
    let view = view_of(&sim, &net);
    let unit = view.units.values().next().expect("a unit").clone();
    bridge.updates.send(network_update(&view, Topology::default())).await.expect("runs");
    let mut w = Watcher::start(broker.port(), "casambi/#").await;
    let first = w.settle(Duration::from_millis(500), Duration::from_secs(20)).await;
    let unit_topic = first
        .iter()
        .find(|s| {
            s.topic.contains("/unit/")
                && serde_json::from_str::<Value>(&s.payload).is_ok_and(|v| v["id"] == json!(unit.id))
        })
        .map(|s| s.topic.clone())
        .expect("the unit's JSON");

    // The change is ready before the page goes in, so that it follows right behind it.
    sim.shared().world().control_unit(&net, unit.id.into(), &json!({"Dimmer": {"value": 0.3}})).expect("the unit");
    let changed = view_of(&sim, &net).units[&unit.id].clone();
    let energy: Vec<Datapoint> = view.units.keys().map(|id| point(Some(*id), "energy", "1", 0)).collect();
    bridge.updates.send(datapoints(&net, energy)).await.expect("runs");
    bridge.updates.send(Update::Unit { network: net.as_str().into(), unit: changed }).await.expect("runs");

    let seen = w.settle(Duration::from_millis(500), Duration::from_secs(30)).await;
    let is_data = |t: &str| t.ends_with("/data");
    let state = seen.iter().position(|s| s.topic == unit_topic).unwrap_or_else(|| {
        panic!("the change was not published: {:?}", seen.iter().map(|s| &s.topic).collect::<Vec<_>>())
    });
    let data_before = seen[..state].iter().filter(|s| is_data(&s.topic)).count();
    let data_all = seen.iter().filter(|s| is_data(&s.topic)).count();
    assert_eq!(data_all, UNITS as usize, "every unit's data published in the end");
    assert!(data_before < data_all / 4, "{data_before} of {data_all} units' datapoints went out before the change");
    bridge.stop().await;
}
