//! The retained topic tree and discovery for the simulator's demo site, against a real
//! mosquitto: compared with reviewed golden files, in both discovery layouts and both protocol
//! versions; no duplicate retained messages; events and problems non-retained.

mod common;

use casambi2mqtt::bridge::state::{Topology, UnitEvent};
use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::mqtt::{DiscoveryMode, Protocol};
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::*;
use std::collections::BTreeMap;
use std::time::Duration;

/// Starts broker, simulator and bridge, feeds every demo network, and waits until the retained
/// set is complete (both networks' discovery and state present).
async fn demo(mode: DiscoveryMode, protocol: Protocol) -> (Mosquitto, Simulator, Bridge, BTreeMap<String, String>) {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let bridge = start_bridge(config(&broker.url(), mode, protocol));
    for id in demo_network_ids(&sim) {
        let view = view_of(&sim, &id);
        bridge.updates.send(network_update(&view, Topology::default())).await.unwrap();
        // As the bridge core does: the gallery after the network's snapshot.
        bridge.updates.send(photos_update(&sim, &id)).await.unwrap();
    }
    let r = retained_until(broker.port(), Duration::from_secs(15), |r| {
        r.contains_key("casambi/office/unit/window-lux")
            && r.contains_key("casambi/home/scene/night-light")
            && r.contains_key("casambi/home/photo/ground-floor")
    })
    .await;
    // Let the rest settle, then read the final set.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r2 = retained(broker.port()).await;
    assert!(r2.len() >= r.len());
    (broker, sim, bridge, r2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_site_device_discovery_matches_golden() {
    let (broker, _sim, bridge, r) = demo(DiscoveryMode::Device, Protocol::V5).await;
    check_golden("demo_device.txt", &render_golden(&r));
    bridge.stop().await;
    let after = retained(broker.port()).await;
    assert_eq!(after.get("casambi/bridge/state").map(String::as_str), Some("offline"), "clean shutdown says offline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_site_component_discovery_over_mqtt311_matches_golden() {
    let (_broker, _sim, bridge, r) = demo(DiscoveryMode::Component, Protocol::V311).await;
    check_golden("demo_component.txt", &render_golden(&r));
    assert!(!r.keys().any(|t| t.starts_with("homeassistant/device/")), "no device configs in component mode");
    bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_state_is_not_republished_and_changes_are_minimal() {
    let (broker, sim, bridge, _) = demo(DiscoveryMode::Device, Protocol::V5).await;
    let mut w = Watcher::start(broker.port(), "#").await;
    w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    let home = demo_network_ids(&sim)[0].clone();

    // The same full view again: nothing to publish.
    let view = view_of(&sim, &home);
    bridge.updates.send(network_update(&view, Topology::default())).await.unwrap();
    let again = w.settle(Duration::from_millis(700), Duration::from_secs(5)).await;
    assert!(again.is_empty(), "identical state republished: {again:?}");

    // One unit dims: its JSON, its brightness, its group's JSON and nothing else.
    sim.shared().world().control_unit(&home, 1, &serde_json::json!({"Dimmer": {"value": 0.2}})).unwrap();
    let view = view_of(&sim, &home);
    let unit = view.units[&1].clone();
    bridge.updates.send(Update::Unit { network: home.as_str().into(), unit }).await.unwrap();
    let changed = w.settle(Duration::from_millis(700), Duration::from_secs(5)).await;
    let topics: Vec<&str> = changed.iter().map(|s| s.topic.as_str()).collect();
    assert!(topics.contains(&"casambi/home/unit/kitchen-ceiling"), "{topics:?}");
    assert!(topics.contains(&"casambi/home/unit/kitchen-ceiling/brightness"), "{topics:?}");
    assert!(topics.contains(&"casambi/home/group/kitchen"), "{topics:?}");
    assert!(!topics.iter().any(|t| t.starts_with("homeassistant/")), "no discovery for a state change: {topics:?}");
    assert!(!topics.contains(&"casambi/home/unit/kitchen-ceiling/state"), "state did not change: {topics:?}");
    let mut unique = topics.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), topics.len(), "a topic was published twice: {topics:?}");
    let bri = changed.iter().find(|s| s.topic == "casambi/home/unit/kitchen-ceiling/brightness").unwrap();
    assert_eq!(bri.payload, "51");
    bridge.stop().await;
}

/// Whole-network snapshots go at `mqtt.snapshot_qos`, changes at `mqtt.qos`: a QoS 1 subscriber
/// that is there before the bridge starts gets the demo site's topics at the snapshot's QoS and a
/// unit's change at QoS 1; with `snapshot_qos: 1` it gets both at 1. Both protocol versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_go_at_snapshot_qos_and_changes_at_qos() {
    for (snapshot_qos, protocol) in [(0u8, Protocol::V5), (0, Protocol::V311), (1, Protocol::V5)] {
        let broker = Mosquitto::start();
        let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
        let mut w = Watcher::start(broker.port(), "#").await;
        let mut c = config(&broker.url(), DiscoveryMode::Device, protocol);
        c.mqtt.snapshot_qos = snapshot_qos;
        let bridge = start_bridge(c);
        for id in demo_network_ids(&sim) {
            let view = view_of(&sim, &id);
            bridge.updates.send(network_update(&view, Topology::default())).await.unwrap();
        }
        w.wait_for(Duration::from_secs(15), |s| s.topic == "casambi/home/scene/night-light").await;
        w.settle(Duration::from_millis(500), Duration::from_secs(5)).await;
        let site: Vec<&Seen> = w
            .seen
            .iter()
            .filter(|s| s.topic.starts_with("casambi/home/") || s.topic.starts_with("homeassistant/device/"))
            .collect();
        assert!(site.len() > 20, "the snapshot arrived: {} messages", site.len());
        let off: Vec<_> = site.iter().filter(|s| s.qos != snapshot_qos).map(|s| (&s.topic, s.qos)).collect();
        assert!(
            off.is_empty(),
            "snapshot_qos {snapshot_qos} over {protocol:?}: {} of {} at another QoS, first {:?}",
            off.len(),
            site.len(),
            &off[..off.len().min(4)]
        );

        let home = demo_network_ids(&sim)[0].clone();
        sim.shared().world().control_unit(&home, 1, &serde_json::json!({"Dimmer": {"value": 0.3}})).unwrap();
        let unit = view_of(&sim, &home).units[&1].clone();
        bridge.updates.send(Update::Unit { network: home.as_str().into(), unit }).await.unwrap();
        let change = w.wait_for(Duration::from_secs(5), |s| s.topic == "casambi/home/unit/kitchen-ceiling").await;
        assert_eq!(change.qos, 1, "a change goes at mqtt.qos over {protocol:?}");
        bridge.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_problems_are_not_retained() {
    let (broker, sim, bridge, _) = demo(DiscoveryMode::Device, Protocol::V5).await;
    let home = demo_network_ids(&sim)[0].clone();
    let mut w = Watcher::start(broker.port(), "casambi/#").await;
    w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    let at = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05.678Z").unwrap().to_utc();
    bridge
        .updates
        .send(Update::Event { network: home.as_str().into(), unit: 4, event: UnitEvent::Occupancy(true), at })
        .await
        .unwrap();
    let ev = w.wait_for(Duration::from_secs(5), |s| s.topic == "casambi/home/unit/hallway-presence/event").await;
    assert!(!ev.retain);
    let v: serde_json::Value = serde_json::from_str(&ev.payload).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"type": "occupancy", "value": true, "unit": 4, "time": "2026-01-02T03:04:05.678Z"})
    );

    bridge
        .updates
        .send(Update::Event { network: home.as_str().into(), unit: 6, event: UnitEvent::Switch(vec![]), at })
        .await
        .unwrap();
    let ev = w.wait_for(Duration::from_secs(5), |s| s.topic == "casambi/home/unit/entrance-switch/event").await;
    let v: serde_json::Value = serde_json::from_str(&ev.payload).unwrap();
    assert_eq!(v["type"], "switch");
    assert_eq!(v["unit"], 6);

    bridge
        .updates
        .send(Update::Problem { network: Some(home.as_str().into()), message: "gateway went away".into() })
        .await
        .unwrap();
    let err = w.wait_for(Duration::from_secs(5), |s| s.topic == "casambi/bridge/error").await;
    assert!(!err.retain);
    let v: serde_json::Value = serde_json::from_str(&err.payload).unwrap();
    assert_eq!(v["reason"], "gateway went away");
    assert_eq!(v["topic"], "casambi/home");

    let r = retained(broker.port()).await;
    assert!(!r.keys().any(|t| t.ends_with("/event") || t.ends_with("/error")), "events must not be retained");
    bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_info_follows_a_burst_of_networks_once_not_per_network() {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::generate(30, 2))).await.unwrap();
    let mut watch = Watcher::start(broker.port(), "casambi/bridge/info").await;
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    // Every view made first, so the updates arrive as one burst (a start-up's snapshots).
    let views: Vec<_> = demo_network_ids(&sim).iter().map(|id| view_of(&sim, id)).collect();
    for view in &views {
        bridge.updates.send(network_update(view, Topology::default())).await.unwrap();
    }
    let listed = |s: &Seen| {
        serde_json::from_str::<serde_json::Value>(&s.payload).ok().and_then(|v| v["networks"].as_array().map(Vec::len))
    };
    watch.wait_for(Duration::from_secs(15), |s| listed(s) == Some(views.len())).await;
    watch.settle(Duration::from_millis(500), Duration::from_secs(5)).await;
    let infos: Vec<Option<usize>> = watch.seen.iter().filter(|s| !s.payload.is_empty()).map(listed).collect();
    // One info per network (and per status) before; now the first at connection, then one or a
    // few as the burst is taken in. Never fewer networks than the last one listed.
    assert!(infos.len() < views.len() / 3, "{} infos for {} networks: {infos:?}", infos.len(), views.len());
    assert_eq!(infos.last().copied().flatten(), Some(views.len()), "the last info lists every network");
    bridge.stop().await;
}

/// A scene or group command changes a group's members together. Their changes taken in together
/// publish the group's JSON once or twice, with the last members' levels, not once per member
/// with the passing values in between. On one thread, as the bridge runs, so that the burst is
/// queued before the publisher takes any of it in.
#[tokio::test(flavor = "current_thread")]
async fn a_groups_json_follows_a_burst_of_its_members_once_not_per_member() {
    let broker = Mosquitto::start();
    // One network of ten units: group 1 holds the eight luminaires.
    let sim = Simulator::start_local(SimConfig::new(Site::generate(1, 10))).await.unwrap();
    let net = demo_network_ids(&sim)[0].clone();
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    bridge.updates.send(network_update(&view_of(&sim, &net), Topology::default())).await.unwrap();
    let topic = "casambi/site-1/group/group-1";
    let mut w = Watcher::start(broker.port(), topic).await;
    w.wait_for(Duration::from_secs(15), |s| s.topic == topic).await;
    w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    let before = w.seen.len();

    // Each member brighter than the last, so each change alone would change the group's JSON;
    // every update made first, so they arrive as one burst.
    let members: Vec<u32> = view_of(&sim, &net).groups[&1].units.clone();
    assert_eq!(members.len(), 8, "{members:?}");
    let mut updates = Vec::new();
    for (k, id) in members.iter().enumerate() {
        let level = 0.55 + 0.05 * k as f64;
        sim.shared()
            .world()
            .control_unit(&net, i64::from(*id), &serde_json::json!({"Dimmer": {"value": level}}))
            .unwrap();
        let unit = view_of(&sim, &net).units[id].clone();
        updates.push(Update::Unit { network: net.as_str().into(), unit });
    }
    for u in updates {
        bridge.updates.try_send(u).unwrap();
    }
    let brightness =
        |s: &Seen| serde_json::from_str::<serde_json::Value>(&s.payload).ok().map(|v| v["brightness"].clone());
    let last = (0.9_f64 * 255.0).round() as u64;
    w.wait_for(Duration::from_secs(10), |s| brightness(s) == Some(serde_json::json!(last))).await;
    w.settle(Duration::from_millis(500), Duration::from_secs(5)).await;
    let burst: Vec<_> = w.seen[before..].iter().filter_map(brightness).collect();
    assert!(burst.len() <= 2, "{} group messages for {} member changes: {burst:?}", burst.len(), members.len());
    assert_eq!(burst.last(), Some(&serde_json::json!(last)), "{burst:?}");
    bridge.stop().await;
}

/// The unit JSON topics of a retained set (`casambi/<network>/unit/<unit>`).
fn unit_json_topics(r: &BTreeMap<String, String>) -> Vec<String> {
    r.keys()
        .filter(|t| {
            let parts: Vec<&str> = t.split('/').collect();
            parts.len() == 4 && parts[0] == "casambi" && parts[2] == "unit"
        })
        .cloned()
        .collect()
}

/// A network of more owners than the publisher renders at a time (it sends a network a few
/// owners at once) is published whole, and the units it then loses are cleared, every topic of
/// theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_bigger_than_one_send_is_published_whole_and_its_lost_units_cleared() {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::generate(1, 60))).await.unwrap();
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    let id = demo_network_ids(&sim)[0].clone();
    let mut view = view_of(&sim, &id);
    assert_eq!(view.units.len(), 60);
    bridge.updates.send(network_update(&view, Topology::default())).await.unwrap();
    retained_until(broker.port(), Duration::from_secs(15), |r| unit_json_topics(r).len() == 60).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = retained(broker.port()).await;
    let kinds = |r: &BTreeMap<String, String>, kind: &str| {
        r.keys().filter(|t| t.split('/').nth(2) == Some(kind) && t.split('/').count() == 4).count()
    };
    assert_eq!(kinds(&before, "group"), view.groups.len(), "every group");
    assert_eq!(kinds(&before, "scene"), view.scenes.len(), "every scene");
    let availability = before.keys().filter(|t| t.ends_with("/availability") && t.contains("/unit/")).count();
    assert_eq!(availability, 60, "every unit's availability");

    // Home Assistant's birth: every owner of the network again, each topic once.
    let mut w = Watcher::start(broker.port(), "#").await;
    w.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    w.publish("homeassistant/status", "online", false).await;
    let again = w.settle(Duration::from_millis(800), Duration::from_secs(10)).await;
    let republished: BTreeMap<&str, usize> = again.iter().filter(|s| !s.retain).fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.topic.as_str()).or_default() += 1;
        m
    });
    let wanted: Vec<&String> = before.keys().filter(|t| !t.starts_with("casambi/bridge/")).collect();
    let missing: Vec<&&String> = wanted.iter().filter(|t| !republished.contains_key(t.as_str())).collect();
    assert!(missing.is_empty(), "not republished after the birth: {missing:?}");
    assert!(republished.values().all(|n| *n == 1), "each topic once: {republished:?}");

    let lost: Vec<u32> = view.units.keys().copied().take(10).collect();
    for unit in &lost {
        view.units.remove(unit);
    }
    bridge.updates.send(network_update(&view, Topology::default())).await.unwrap();
    retained_until(broker.port(), Duration::from_secs(15), |r| unit_json_topics(r).len() == 50).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = retained(broker.port()).await;
    let gone: Vec<String> = unit_json_topics(&before).into_iter().filter(|t| !after.contains_key(t)).collect();
    assert_eq!(gone.len(), 10, "{gone:?}");
    for topic in &gone {
        let left: Vec<&String> = after.keys().filter(|k| k.starts_with(&format!("{topic}/"))).collect();
        assert!(left.is_empty(), "topics of a lost unit left: {left:?}");
    }
    bridge.stop().await;
}

/// Where a message of a unit falls in a snapshot's order (docs/mqtt.md#publishing-order): what
/// Home Assistant reads, or a plain attribute topic.
#[derive(Debug, PartialEq)]
enum Pass {
    HomeAssistant,
    Attribute,
}

fn pass_of(topic: &str) -> Option<Pass> {
    match topic.split('/').collect::<Vec<_>>().as_slice() {
        ["homeassistant", ..] | ["casambi", _, "unit", _] | ["casambi", _, "unit", _, "availability"] => {
            Some(Pass::HomeAssistant)
        }
        ["casambi", _, "unit", _, _] => Some(Pass::Attribute),
        _ => None,
    }
}

/// Checks that `seen` has every topic Home Assistant reads before the first attribute topic, and
/// that the attribute topics are those of `retained` (its values included); returns how many.
fn check_two_passes(seen: &[Seen], retained: &BTreeMap<String, String>) -> usize {
    let passes: Vec<(usize, Pass)> =
        seen.iter().enumerate().filter_map(|(i, s)| pass_of(&s.topic).map(|p| (i, p))).collect();
    let first_attribute = passes.iter().find(|(_, p)| *p == Pass::Attribute).map(|(i, _)| *i);
    let last_ha = passes.iter().rev().find(|(_, p)| *p == Pass::HomeAssistant).map(|(i, _)| *i);
    let (Some(first_attribute), Some(last_ha)) = (first_attribute, last_ha) else {
        panic!("both passes expected: {passes:?}");
    };
    assert!(
        last_ha < first_attribute,
        "{} came after the first attribute topic {}",
        seen[last_ha].topic,
        seen[first_attribute].topic
    );
    let sent: BTreeMap<&str, &str> = seen
        .iter()
        .filter(|s| pass_of(&s.topic) == Some(Pass::Attribute))
        .map(|s| (s.topic.as_str(), s.payload.as_str()))
        .collect();
    let wanted: BTreeMap<&str, &str> = retained
        .iter()
        .filter(|(t, _)| pass_of(t) == Some(Pass::Attribute))
        .map(|(t, p)| (t.as_str(), p.as_str()))
        .collect();
    assert_eq!(sent, wanted);
    sent.len()
}

/// A snapshot publishes every unit's discovery, JSON and availability before any unit's plain
/// attribute topics (Home Assistant reads none of them), at start-up and after Home Assistant's
/// birth; the attribute topics then all follow, with the units' values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_publishes_what_home_assistant_reads_before_the_attribute_topics() {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::generate(2, 60))).await.unwrap();
    let mut w = Watcher::start(broker.port(), "#").await;
    let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, Protocol::V5));
    let views: Vec<_> = demo_network_ids(&sim).iter().map(|id| view_of(&sim, id)).collect();
    for view in &views {
        bridge.updates.send(network_update(view, Topology::default())).await.unwrap();
    }
    w.wait_for(Duration::from_secs(15), |s| s.topic.ends_with("/unit/unit-60/name")).await;
    w.settle(Duration::from_millis(800), Duration::from_secs(10)).await;
    let retained = retained(broker.port()).await;
    let units = unit_json_topics(&retained).len();
    assert_eq!(units, 120);
    let attributes = check_two_passes(&w.seen, &retained);
    assert!(attributes >= units * 5, "{attributes} attribute topics for {units} units");

    let mut again = Watcher::start(broker.port(), "#").await;
    again.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    again.seen.clear();
    again.publish("homeassistant/status", "online", false).await;
    again.settle(Duration::from_millis(800), Duration::from_secs(10)).await;
    let live: Vec<Seen> = again.seen.iter().filter(|s| !s.retain).cloned().collect();
    assert_eq!(check_two_passes(&live, &retained), attributes, "every attribute topic again after the birth");
    bridge.stop().await;
}
