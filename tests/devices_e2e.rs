//! `devices:` against a real mosquitto: a renamed unit moves to its new topics (the old ones are
//! cleared by the start-up clean-up of an earlier run's topics) and takes commands there; an
//! excluded unit leaves no topic and refuses commands; a relay shown as a switch; every unique id
//! stays what it was.

mod common;

use casambi2mqtt::bridge::state::Topology;
use casambi2mqtt::commands::Target;
use casambi2mqtt::config::devices::{DeviceFile, settings_of};
use casambi2mqtt::mqtt::devices::{DeviceKey, Devices};
use casambi2mqtt::mqtt::{Config, DiscoveryMode, Protocol};
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn devices(entries: &[(&str, Value)]) -> Arc<Devices> {
    Arc::new(Devices::new(entries.iter().map(|(k, v)| {
        let key = DeviceKey::parse(k).unwrap();
        let file: DeviceFile = serde_json::from_value(v.clone()).unwrap();
        (k.to_string(), key.clone(), settings_of(&key, file).unwrap())
    })))
}

/// Runs a bridge with `config` over the demo site until both networks are published.
async fn run(config: Config, sim: &Simulator, port: u16, ready: &str) -> Bridge {
    let bridge = start_bridge(config);
    for id in demo_network_ids(sim) {
        bridge.updates.send(network_update(&view_of(sim, &id), Topology::default())).await.unwrap();
    }
    retained_until(port, Duration::from_secs(15), |r| r.contains_key(ready)).await;
    bridge
}

const UNIT_1: &str = "homeassistant/device/casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_d0c0ffee0001/config";
const UNIT_8: &str = "homeassistant/device/casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_d0c0ffee0008/config";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renamed_excluded_and_switched_units_over_mqtt() {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let plain = config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
    let first = run(plain.clone(), &sim, broker.port(), "casambi/office/unit/window-lux").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = retained(broker.port()).await;
    first.stop().await;
    assert!(before.contains_key("casambi/home/unit/kitchen-ceiling/brightness"));

    let mut with = plain;
    with.devices = devices(&[
        ("home/kitchen-ceiling", json!({"name": "Porch light"})),
        ("d0c0ffee0002", json!({"exclude": true})),
        ("home/living-room-floor", json!({"homeassistant": {"platform": "switch", "icon": "mdi:fan"}})),
    ]);
    let bridge = run(with, &sim, broker.port(), "casambi/home/unit/porch-light").await;
    // The start-up clean-up clears what the earlier run left and this one does not publish.
    let r = retained_until(broker.port(), Duration::from_secs(15), |r| {
        !r.keys().any(|t| {
            t.starts_with("casambi/home/unit/kitchen-ceiling") || t.starts_with("casambi/home/unit/kuche-spots")
        })
    })
    .await;
    assert!(r.contains_key("casambi/home/unit/porch-light/brightness"), "{:?}", r.keys().collect::<Vec<_>>());
    assert!(
        !r.keys().any(|t| t.contains("d0c0ffee0002") && t.contains("7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b")),
        "no config"
    );
    let (old, new): (Value, Value) =
        (serde_json::from_str(&before[UNIT_1]).unwrap(), serde_json::from_str(&r[UNIT_1]).unwrap());
    assert_eq!(new["device"]["name"], "Porch light");
    assert_eq!(old["cmps"]["light"]["unique_id"], new["cmps"]["light"]["unique_id"], "the entity keeps its history");
    let floor: Value = serde_json::from_str(&r[UNIT_8]).unwrap();
    assert_eq!(floor["cmps"]["switch"]["p"], "switch", "{floor}");
    assert_eq!(floor["cmps"]["switch"]["icon"], "mdi:fan");

    // Commands: the new topic reaches the unit; the old one and the excluded unit's are refused.
    let mut bridge = bridge;
    let mut w = Watcher::start(broker.port(), "casambi/bridge/error").await;
    w.publish("casambi/home/unit/porch-light/set", "ON", false).await;
    let command = tokio::time::timeout(Duration::from_secs(5), bridge.commands.recv()).await.unwrap().unwrap();
    assert_eq!(command.target, Target::Unit { id: 1, attr: None });
    for topic in ["casambi/home/unit/kitchen-ceiling/set", "casambi/home/unit/kuche-spots/set"] {
        w.publish(topic, "ON", false).await;
        let err = w.wait_for(Duration::from_secs(5), |s| s.payload.contains(topic)).await;
        assert!(err.payload.contains("no network, unit, group or scene has this command topic"), "{}", err.payload);
    }
    bridge.stop().await;
}
