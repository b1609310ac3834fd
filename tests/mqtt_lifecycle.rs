//! The publisher's behaviour over time against a real mosquitto: broker restart, Home
//! Assistant's birth message, removed and renamed units, retained commands, stale configs of an
//! earlier run, the last will, `TCP_NODELAY` on the connections, and a device config losing a
//! component.

mod common;

use casambi2mqtt::mqtt::{DiscoveryMode, Protocol};
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::*;
use std::collections::BTreeMap;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(15);

struct Rig {
    broker: Mosquitto,
    sim: Simulator,
    bridge: Bridge,
    home: String,
}

/// Broker + simulator + bridge with the demo site published.
async fn rig_with(broker: Mosquitto) -> (Rig, BTreeMap<String, String>) {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    let ids = demo_network_ids(&sim);
    for id in &ids {
        let view = view_of(&sim, id);
        bridge.updates.send(network_update(&view, Default::default())).await.unwrap();
    }
    let r = retained_until(broker.port(), SETTLE, |r| {
        r.contains_key("casambi/office/unit/window-lux/availability")
            && r.contains_key("casambi/home/scene/night-light")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = r.into_iter().chain(retained(broker.port()).await).collect();
    (Rig { broker, sim, bridge, home: ids[0].clone() }, r)
}

async fn rig() -> (Rig, BTreeMap<String, String>) {
    rig_with(Mosquitto::start()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_gets_everything_back() {
    let (mut rig, before) = rig().await;
    rig.broker.restart();
    let empty = retained(rig.broker.port()).await;
    assert!(empty.len() < before.len(), "the restarted broker starts empty");
    let after = retained_until(rig.broker.port(), Duration::from_secs(20), |r| r.len() >= before.len()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after2 = retained(rig.broker.port()).await;
    assert_eq!(render_golden(&after2), render_golden(&before), "retained state after the restart differs");
    assert_eq!(after.get("casambi/bridge/state").map(String::as_str), Some("online"));
    rig.bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_assistant_birth_republishes_discovery_availability_and_state() {
    let (rig, before) = rig().await;
    let mut w = Watcher::start(rig.broker.port(), "#").await;
    w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    w.publish("homeassistant/status", "online", false).await;
    let again = w.settle(Duration::from_millis(800), Duration::from_secs(10)).await;
    let topics: std::collections::BTreeSet<&str> =
        again.iter().filter(|s| !s.retain).map(|s| s.topic.as_str()).collect();
    for t in [
        "homeassistant/device/casambi2mqtt_bridge_casambi/config",
        "casambi/bridge/state",
        "casambi/home/unit/kitchen-ceiling",
        "casambi/home/unit/kitchen-ceiling/availability",
    ] {
        assert!(topics.contains(t), "{t} not republished after the birth message");
    }
    let configs = before.keys().filter(|t| t.ends_with("/config")).count();
    assert_eq!(again.iter().filter(|s| s.topic.ends_with("/config")).count(), configs, "every config once");
    // Discovery before state: the first republished message is a config.
    let first = again.iter().find(|s| s.topic == "casambi/home/unit/kitchen-ceiling").map(|s| s.topic.clone());
    let first_idx = again.iter().position(|s| Some(&s.topic) == first.as_ref()).unwrap();
    let cfg_idx =
        again.iter().position(|s| s.topic.ends_with("d0c0ffee0001/config") && s.topic.contains("7bd1f2a6")).unwrap();
    assert!(cfg_idx < first_idx, "config must come before state");
    rig.bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_and_renamed_things_lose_every_retained_topic() {
    let (rig, before) = rig().await;
    let home = rig.home.clone();
    let garden_cfg = "homeassistant/device/casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_d0c0ffee0005/config";
    assert!(before.contains_key(garden_cfg));
    assert!(before.contains_key("casambi/home/unit/garden-lux/illuminance"));
    {
        let mut world = rig.sim.shared().world();
        world.remove_unit(&home, 5).unwrap();
        world.rename(&home, "unit", 1, "Kitchen main").unwrap();
        world.rename(&home, "scene", 2, "Cooking time").unwrap();
        world.rename(&home, "group", 2, "Lounge").unwrap();
    }
    // The core refetches the network after `networkUpdated` and sends the new full view.
    let view = view_of(&rig.sim, &home);
    rig.bridge.updates.send(network_update(&view, Default::default())).await.unwrap();

    retained_until(rig.broker.port(), SETTLE, |r| {
        r.contains_key("casambi/home/unit/kitchen-main/state") && !r.contains_key(garden_cfg)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A fresh read alone: the read above may have caught the clears half-way (its condition holds
    // from the first clear on), and merging it in brought back topics cleared just after it.
    let after: BTreeMap<String, String> = retained(rig.broker.port()).await;
    for gone in [
        "casambi/home/unit/garden-lux",
        "casambi/home/unit/kitchen-ceiling",
        "casambi/home/scene/cooking",
        "casambi/home/group/living-room",
    ] {
        let left: Vec<&String> = after.keys().filter(|t| *t == gone || t.starts_with(&format!("{gone}/"))).collect();
        assert!(left.is_empty(), "topics of {gone} left behind: {left:?}");
    }
    assert!(!after.contains_key(garden_cfg), "discovery of the removed unit left behind");
    for present in [
        "casambi/home/unit/kitchen-main",
        "casambi/home/unit/kitchen-main/availability",
        "casambi/home/scene/cooking-time",
        "casambi/home/group/lounge",
    ] {
        assert!(after.contains_key(present), "{present} missing");
    }
    // The renamed unit keeps its config topic (identity), now pointing at the new topics.
    let cfg = &after["homeassistant/device/casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_d0c0ffee0001/config"];
    assert!(cfg.contains("casambi/home/unit/kitchen-main/set"), "{cfg}");
    let net_cfg = &after["homeassistant/device/casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b/config"];
    assert!(net_cfg.contains("\"Cooking time\"") && net_cfg.contains("casambi/home/group/lounge"), "{net_cfg}");
    rig.bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_command_is_ignored_and_cleared_while_live_ones_pass() {
    let broker = Mosquitto::start();
    // A stray retained command waiting on the broker before the bridge starts.
    let w = Watcher::start(broker.port(), "nothing/#").await;
    w.publish("casambi/home/unit/kitchen-ceiling/set", "ON", true).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (mut rig, _) = rig_with(broker).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rig.bridge.commands.try_recv().is_err(), "a retained command must not be forwarded");
    let r = retained(rig.broker.port()).await;
    assert!(!r.keys().any(|t| t.ends_with("/set")), "the stray retained command is cleared");

    w.publish("casambi/home/unit/kitchen-ceiling/set", "{\"state\":\"OFF\"}", false).await;
    w.publish("casambi/home/set", "{\"dim_level\":0.5}", false).await;
    let a = tokio::time::timeout(Duration::from_secs(5), rig.bridge.commands.recv()).await.unwrap().unwrap();
    assert_eq!(a.message.topic, "casambi/home/unit/kitchen-ceiling/set");
    assert_eq!(a.message.payload, b"{\"state\":\"OFF\"}");
    assert_eq!(a.network, "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b");
    assert_eq!(a.target, casambi2mqtt::commands::Target::Unit { id: 1, attr: None });
    let b = tokio::time::timeout(Duration::from_secs(5), rig.bridge.commands.recv()).await.unwrap().unwrap();
    assert_eq!(b.message.topic, "casambi/home/set");
    assert_eq!(b.target, casambi2mqtt::commands::Target::Network);
    // The commands above went out at QoS 1 and came in at QoS 0: the bridge subscribes at 0
    // (clean sessions keep nothing a higher QoS would protect, and each delivery would cost an
    // acknowledgement), whatever `mqtt.qos` is (1 here).
    for filter in ["casambi/+/set", "casambi/+/unit/+/set", "homeassistant/status"] {
        assert_eq!(rig.broker.subscription_qos(filter), vec![0], "{filter}: {}", rig.broker.log());
    }
    rig.bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_configs_and_topics_of_an_earlier_run_are_removed() {
    let broker = Mosquitto::start();
    let w = Watcher::start(broker.port(), "nothing/#").await;
    let home_key = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
    let ghost_cfg = format!("homeassistant/device/casambi2mqtt_{home_key}_deadbeef0000/config");
    let ghost_payload = r#"{"origin":{"name":"casambi2mqtt"},"device":{"identifiers":["x"]},"cmps":{"light":{"p":"light","unique_id":"x","state_topic":"casambi/home/unit/ghost","command_topic":"casambi/home/unit/ghost/set"}}}"#;
    let old_component = format!("homeassistant/light/casambi2mqtt_{home_key}_d0c0ffee0001_light/config");
    let old_component_payload = r#"{"origin":{"name":"casambi2mqtt"},"unique_id":"y","state_topic":"casambi/home/unit/kitchen-ceiling","command_topic":"casambi/home/unit/kitchen-ceiling/set"}"#;
    let unknown_net_cfg = "homeassistant/device/casambi2mqtt_0123456789abcdef_d0c0ffee0001/config";
    let unknown_net_payload = r#"{"origin":{"name":"casambi2mqtt"},"cmps":{"light":{"p":"light","unique_id":"z","state_topic":"casambi/elsewhere/unit/a"}}}"#;
    let foreign_cfg = "homeassistant/device/zigbee_lamp/config";
    let foreign_payload = r#"{"origin":{"name":"zigbee2mqtt"},"cmps":{"light":{"p":"light","unique_id":"q","state_topic":"zigbee2mqtt/lamp"}}}"#;
    for (t, p) in [
        (ghost_cfg.as_str(), ghost_payload),
        (old_component.as_str(), old_component_payload),
        (unknown_net_cfg, unknown_net_payload),
        (foreign_cfg, foreign_payload),
        ("casambi/home/unit/ghost", "{}"),
        ("casambi/home/unit/ghost/state", "ON"),
        ("casambi/elsewhere/unit/a", "{}"),
    ] {
        w.publish(t, p, true).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (rig, _) = rig_with(broker).await;
    let r = retained_until(rig.broker.port(), SETTLE, |r| {
        !r.contains_key(&ghost_cfg) && !r.contains_key("casambi/home/unit/ghost")
    })
    .await;
    assert!(!r.contains_key(&old_component), "the old per-component config of a live unit is stale in device mode");
    assert!(!r.contains_key("casambi/home/unit/ghost/state"));
    assert!(r.contains_key(unknown_net_cfg), "configs of networks not (yet) loaded are kept");
    assert!(r.contains_key("casambi/elsewhere/unit/a"), "topics of networks not (yet) loaded are kept");
    assert!(r.contains_key(foreign_cfg), "other integrations' configs are never touched");
    assert!(r.contains_key("casambi/home/unit/kitchen-ceiling"));
    rig.bridge.stop().await;
}

/// A scan lets go of the topics of a network that has not loaded; when that network loads later
/// (its credentials were failing, say), another scan clears what it no longer wants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_that_loads_after_the_scan_is_swept_when_it_loads() {
    let broker = Mosquitto::start();
    let w = Watcher::start(broker.port(), "nothing/#").await;
    for topic in ["casambi/home/unit/ghost", "casambi/office/unit/ghost", "casambi/office/unit/ghost/brightness"] {
        w.publish(topic, "{}", true).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    let ids = demo_network_ids(&sim);
    let (home, office) = (&ids[0], &ids[1]);
    bridge.updates.send(network_update(&view_of(&sim, home), Default::default())).await.unwrap();
    let r = retained_until(broker.port(), SETTLE, |r| !r.contains_key("casambi/home/unit/ghost")).await;
    assert!(!r.contains_key("casambi/home/unit/ghost"), "the loaded network's stale topic is cleared");
    // Well after the first scan: the other network's topics are still there.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let r = retained(broker.port()).await;
    assert!(r.contains_key("casambi/office/unit/ghost"), "topics of a network not loaded are kept");
    bridge.updates.send(network_update(&view_of(&sim, office), Default::default())).await.unwrap();
    let r = retained_until(broker.port(), SETTLE, |r| {
        !r.contains_key("casambi/office/unit/ghost") && !r.contains_key("casambi/office/unit/ghost/brightness")
    })
    .await;
    assert!(!r.contains_key("casambi/office/unit/ghost"), "swept once its network loaded");
    assert!(!r.contains_key("casambi/office/unit/ghost/brightness"));
    assert!(r.contains_key("casambi/office/unit/window-lux/availability"), "what it wants is kept");
    bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_will_marks_the_bridge_offline_when_it_dies() {
    let (rig, before) = rig().await;
    assert_eq!(before.get("casambi/bridge/state").map(String::as_str), Some("online"));
    rig.bridge.task.abort();
    let r = retained_until(rig.broker.port(), Duration::from_secs(10), |r| {
        r.get("casambi/bridge/state").map(String::as_str) == Some("offline")
    })
    .await;
    assert!(r.contains_key("casambi/home/unit/kitchen-ceiling"), "state stays retained");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn problems_raised_before_the_first_connection_are_published_once_connected() {
    let broker = Mosquitto::start();
    let mut w = Watcher::start(broker.port(), "casambi/bridge/error").await;
    // A frozen broker: the bridge's connection cannot complete while the problems are raised
    // (as at start-up, when the cloud answers before the broker does).
    broker.pause();
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    for message in ["credentials of a@example.com rejected (401)", "network n2 cannot be reached"] {
        let network = message.contains("n2").then(|| std::sync::Arc::from("n2"));
        bridge
            .updates
            .send(casambi2mqtt::bridge::update::Update::Problem { network, message: message.into() })
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    broker.resume();
    let first = w.wait_for(Duration::from_secs(15), |s| s.payload.contains("a@example.com")).await;
    let second = w.wait_for(Duration::from_secs(5), |s| s.payload.contains("cannot be reached")).await;
    assert!(!first.retain && !second.retain, "problems are not retained");
    let v: serde_json::Value = serde_json::from_str(&second.payload).unwrap();
    assert_eq!(v["network"], "n2");
    assert!(v["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{v}");
    bridge.stop().await;
}

/// `TCP_NODELAY` of every TCP socket of this process connected to `port`. The test binary's other
/// tests connect to brokers of their own, on other ports.
fn nodelay_of_sockets_to(port: u16) -> Vec<bool> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| {
            std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        })
        .collect();
    fds.into_iter()
        .filter_map(|fd| {
            // SAFETY: the descriptor is only read (getpeername, getsockopt) while the borrow lives;
            // should another thread close it meanwhile, both calls fail with EBADF and the
            // descriptor is skipped.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let socket = socket2::SockRef::from(&borrowed);
            let peer = socket.peer_addr().ok()?.as_socket()?;
            (peer.port() == port).then(|| socket.tcp_nodelay().ok()).flatten()
        })
        .collect()
}

/// The setting reaches the socket: with changes at QoS 1 (the default) the bridge's connections
/// leave `TCP_NODELAY` off, so Nagle's algorithm gathers their packets; at QoS 0 every packet
/// leaves at once; `mqtt.tcp_nodelay` overrides either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_nodelay_follows_the_qos_on_the_bridges_sockets() {
    for (qos, set, expected) in [(1, None, false), (0, None, true), (1, Some(true), true)] {
        let broker = Mosquitto::start();
        let mut c = config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
        (c.mqtt.qos, c.mqtt.tcp_nodelay) = (qos, set);
        let client_id = c.mqtt.client_id.clone();
        let bridge = start_bridge(c);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !broker.has_connected(&client_id) {
            assert!(std::time::Instant::now() < deadline, "the bridge did not connect: {}", broker.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let flags = nodelay_of_sockets_to(broker.port());
        assert!(!flags.is_empty(), "no socket of this process is connected to the broker");
        assert!(flags.iter().all(|f| *f == expected), "qos {qos}, tcp_nodelay {set:?}: TCP_NODELAY {flags:?}");
        bridge.stop().await;
    }
}

/// A unit named like an existing one, arriving by a live event (a unit the bridge has not seen)
/// and then by a full view after `networkUpdated`: the existing unit keeps its slug, so none of
/// its topics move or are cleared; each newcomer gets `-<id>` (docs/mqtt.md#slugs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_named_newcomer_moves_no_existing_topic() {
    use casambi2mqtt::bridge::update::Update;
    let (rig, before) = rig().await;
    let home = rig.home.clone();
    let existing: BTreeMap<&String, &String> =
        before.iter().filter(|(t, _)| t.starts_with("casambi/home/unit/kitchen-ceiling")).collect();
    assert!(existing.len() > 3, "{existing:?}");
    let mut w = Watcher::start(rig.broker.port(), "#").await;
    w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;

    let template = rig.sim.shared().config.site.networks[0].units[0].clone();
    assert_eq!(template.name, "Kitchen ceiling");
    let newcomer = |id: i64| {
        let mut unit = template.clone();
        unit.id = id;
        unit.address = format!("d0c0ffee{id:04x}");
        unit
    };
    // By event: the unit's state arrives before any configuration change.
    rig.sim.shared().world().add_unit(&home, newcomer(42)).unwrap();
    let unit = view_of(&rig.sim, &home).units[&42].clone();
    rig.bridge.updates.send(Update::Unit { network: home.as_str().into(), unit }).await.unwrap();
    retained_until(rig.broker.port(), SETTLE, |r| r.contains_key("casambi/home/unit/kitchen-ceiling-42")).await;
    // By `networkUpdated`: the full view with a second newcomer.
    rig.sim.shared().world().add_unit(&home, newcomer(43)).unwrap();
    let view = view_of(&rig.sim, &home);
    rig.bridge.updates.send(network_update(&view, Default::default())).await.unwrap();
    retained_until(rig.broker.port(), SETTLE, |r| r.contains_key("casambi/home/unit/kitchen-ceiling-43")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let after = retained(rig.broker.port()).await;
    for (topic, payload) in &existing {
        assert_eq!(after.get(*topic), Some(*payload), "{topic} moved or changed");
    }
    let missing: Vec<&String> = before.keys().filter(|t| !after.contains_key(*t)).collect();
    assert!(missing.is_empty(), "topics cleared by the newcomers: {missing:?}");
    let seen = w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    let cleared: Vec<&str> = seen
        .iter()
        .filter(|s| s.payload.is_empty() && s.topic.starts_with("casambi/home/unit/kitchen-ceiling"))
        .map(|s| s.topic.as_str())
        .collect();
    assert!(cleared.is_empty(), "cleared on the way: {cleared:?}");
    rig.bridge.stop().await;
}

/// A device config that loses a component goes out twice, in order: first with that component
/// cut down to its platform (Home Assistant removes the entity only so), then without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_config_that_loses_a_component_cuts_it_down_first() {
    use casambi2mqtt::bridge::update::Update;
    use casambi2mqtt::cloud::model::UnitState;
    const CONFIG: &str = "homeassistant/device/casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b_d0c0ffee0004/config";
    let (rig, before) = rig().await;
    let home = rig.home.clone();
    let original = before.get(CONFIG).expect("the hallway sensor's device config").clone();
    let cmps = |payload: &str| -> serde_json::Map<String, serde_json::Value> {
        let v: serde_json::Value = serde_json::from_str(payload).expect("a JSON config");
        v["cmps"].as_object().expect("cmps").clone()
    };
    let sensor =
        view_of(&rig.sim, &home).units.values().find(|u| u.address.as_deref() == Some("d0c0ffee0004")).cloned();
    let sensor = sensor.expect("the demo's hallway presence sensor");
    let mut grown = serde_json::to_value(&*sensor).expect("a unit serialises");
    grown["controls"].as_array_mut().expect("controls").push(serde_json::json!({"type": "Lux", "value": 12}));
    let grown: UnitState = serde_json::from_value(grown).expect("the unit with a lux reading");

    let mut w = Watcher::start(rig.broker.port(), CONFIG).await;
    w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    let send =
        |unit: UnitState| rig.bridge.updates.send(Update::Unit { network: home.as_str().into(), unit: unit.into() });
    send(grown).await.expect("the publisher runs");
    let two = w.wait_for(SETTLE, |s| cmps(&s.payload).len() > cmps(&original).len()).await;
    let added: Vec<String> = cmps(&two.payload).keys().filter(|k| !cmps(&original).contains_key(*k)).cloned().collect();
    assert_eq!(added.len(), 1, "one component added: {added:?}");
    let lux = &added[0];

    send(UnitState::clone(&sensor)).await.expect("the publisher runs");
    let step = w.wait_for(SETTLE, |_| true).await;
    let step_cmps = cmps(&step.payload);
    let platform = cmps(&two.payload)[lux]["p"].clone();
    assert_eq!(step_cmps.get(lux), Some(&serde_json::json!({ "p": platform })), "the step: {}", step.payload);
    let last = w.wait_for(SETTLE, |_| true).await;
    assert_eq!(last.payload, original, "then the config as before the lux reading");
    rig.bridge.stop().await;
}
