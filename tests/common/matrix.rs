//! The checks every broker of the matrix passes (tests/brokers.rs, and the container images of
//! tests/brokers_containers.rs): the whole bridge (`app::run`) on the simulator's demo site
//! publishes its start-up snapshot retained, follows a change, carries a command's round trip,
//! and answers Home Assistant's birth message by republishing discovery. Each check watches the
//! broker through a plain anonymous MQTT 3.1.1 client on `port`, which every broker here takes.
#![allow(dead_code)]

use crate::common::Watcher;
use casambi2mqtt::app::{self, Running};
use casambi2mqtt::config;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The demo site's Home network.
pub const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
/// A dimmable unit of Home (id 1).
pub const CEILING: &str = "casambi/home/unit/kitchen-ceiling";

/// Every topic of the demo site's start-up snapshot with the default settings: the names of the
/// device-discovery golden file, whose payloads the golden tests check.
pub fn snapshot_topics() -> BTreeSet<String> {
    let golden = include_str!("../golden/demo_device.txt");
    golden.lines().filter_map(|l| l.split_once('\t')).map(|(topic, _)| topic.to_string()).collect()
}

/// The snapshot's discovery configs.
pub fn discovery_topics() -> BTreeSet<String> {
    snapshot_topics().into_iter().filter(|t| t.starts_with("homeassistant/")).collect()
}

/// A running bridge on the demo site.
pub struct DemoBridge {
    pub sim: Simulator,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<app::Outcome, app::AppError>>,
    /// From `app::run` to the whole snapshot seen on the broker.
    pub started_in: Duration,
}

/// The configuration of a bridge on `sim` publishing to `url` with `mqtt.protocol: protocol`;
/// `mqtt_extra` are more `mqtt:` keys (indented lines), `networks` the credentials entries.
pub fn yaml(sim: &Simulator, url: &str, protocol: &str, mqtt_extra: &str, networks: &str) -> String {
    format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\nnetworks:\n{networks}\
         mqtt:\n  url: {url}\n  protocol: {protocol}\n{mqtt_extra}health:\n  listen: 127.0.0.1:0\n",
        sim.base_url(),
        sim.ws_url(),
    )
}

/// The demo site's network credentials entry.
pub const DEMO_NETWORKS: &str = "  - email: demo@example.com\n    password: demo\n";

/// Starts `app::run` with `yaml`; panics if it does not start.
pub async fn run_bridge(
    yaml: &str,
) -> (CancellationToken, tokio::task::JoinHandle<Result<app::Outcome, app::AppError>>) {
    let config = config::parse(yaml, Vec::<(String, String)>::new()).expect("configuration parses");
    let shutdown = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel::<Running>();
    let mut task = tokio::spawn(app::run(config, shutdown.clone(), Some(tx)));
    if rx.await.is_err() {
        panic!("the bridge did not start: {:?}", (&mut task).await);
    }
    (shutdown, task)
}

/// Follows `filter` on `port` until every topic of `wanted` has arrived with a payload; returns
/// the latest payload of each topic seen (panics after `max`, naming what is missing).
pub async fn seen_all(w: &mut Watcher, wanted: &BTreeSet<String>, max: Duration) -> BTreeMap<String, String> {
    let deadline = Instant::now() + max;
    let mut seen = BTreeMap::new();
    loop {
        for s in w.settle(Duration::from_millis(20), Duration::from_millis(100)).await {
            seen.insert(s.topic, s.payload);
        }
        let missing: Vec<&String> = wanted.iter().filter(|t| !seen.contains_key(*t)).collect();
        if missing.is_empty() {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "{} topics never arrived, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
    }
}

/// Starts the simulator and a bridge on it publishing to `url`, and times the start-up: from
/// `app::run` until a subscriber on `port` has seen the whole snapshot.
pub async fn start_site(url: &str, port: u16, protocol: &str) -> DemoBridge {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.expect("simulator");
    let mut w = Watcher::start(port, "#").await;
    let t0 = Instant::now();
    let (shutdown, task) = run_bridge(&yaml(&sim, url, protocol, "", DEMO_NETWORKS)).await;
    seen_all(&mut w, &snapshot_topics(), Duration::from_secs(30)).await;
    let started_in = t0.elapsed();
    let _ = w.client.disconnect().await;
    DemoBridge { sim, shutdown, task, started_in }
}

impl DemoBridge {
    /// Stops the bridge cleanly.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let outcome = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        let outcome = outcome.expect("the bridge stops in time").expect("task").expect("run");
        assert_eq!(outcome, app::Outcome::Stopped);
    }
}

static SUBSCRIBERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Every retained message on the broker (topic → payload), read by a fresh subscriber to `#` at
/// QoS 0. At QoS 1 the demo's embedded broker
/// (rumqttd) sends a new subscription no more retained messages than its in-flight window (100),
/// and drops the rest.
pub async fn retained_now(port: u16) -> BTreeMap<String, String> {
    use rumqttc::{Event, Packet};
    let n = SUBSCRIBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut o = rumqttc::MqttOptions::new(format!("matrix-{}-{n}", std::process::id()), "127.0.0.1", port);
    o.set_max_packet_size(1 << 20, 1 << 20);
    let (client, mut el) = rumqttc::AsyncClient::new(o, 16);
    let (mut out, mut subscribed, mut last_error) = (BTreeMap::new(), false, String::from("no SUBACK"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    client.subscribe("#", rumqttc::QoS::AtMostOnce).await.expect("subscribe queued");
    while tokio::time::Instant::now() < deadline {
        // Quiet for 400 ms once subscribed ends the read. Before, the poll is not cut short: that
        // would drop a connection attempt under way (NATS answers a CONNECT only once JetStream
        // has looked the session up) and start another with the same client id.
        let wait = if subscribed { Duration::from_millis(400) } else { deadline - tokio::time::Instant::now() };
        match tokio::time::timeout(wait, el.poll()).await {
            Ok(Ok(Event::Incoming(Packet::Publish(p)))) if p.retain => {
                out.insert(p.topic.clone(), crate::common::payload_text(&p.payload));
            }
            Ok(Ok(Event::Incoming(Packet::SubAck(_)))) => subscribed = true,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                // A busy NATS node can drop a connection while JetStream is slow to answer it:
                // read the whole set again on the next one (sessions are clean).
                last_error = e.to_string();
                println!("retained set on port {port}: {last_error}; reading it again");
                (subscribed, out) = (false, BTreeMap::new());
                tokio::time::sleep(Duration::from_millis(200)).await;
                client.subscribe("#", rumqttc::QoS::AtMostOnce).await.expect("subscribe queued");
            }
            Err(_) if subscribed => {
                let _ = client.disconnect().await;
                return out;
            }
            Err(_) => {}
        }
    }
    panic!("no retained set read on port {port} within 20 s: {last_error}");
}

/// Polls the broker's retained set until it holds every snapshot topic with `bridge/state`
/// `online` at `state_topic` (panics after `max`, naming what is missing); returns it.
pub async fn all_retained(port: u16, state_topic: &str, max: Duration) -> BTreeMap<String, String> {
    let wanted = snapshot_topics();
    let deadline = Instant::now() + max;
    loop {
        let r = retained_now(port).await;
        let missing: Vec<&String> = wanted.iter().filter(|t| !r.contains_key(*t)).collect();
        if missing.is_empty() && r.get(state_topic).is_some_and(|s| s == "online") {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} snapshot topics retained (e.g. missing {:?}), {state_topic} = {:?}",
            wanted.len() - missing.len(),
            wanted.len(),
            &missing[..missing.len().min(5)],
            r.get(state_topic)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the retained `topic` is `want` (panics after `max` with the last value).
pub async fn retained_is(port: u16, topic: &str, want: &str, max: Duration) {
    let deadline = Instant::now() + max;
    loop {
        let last = retained_now(port).await.remove(topic);
        if last.as_deref() == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{topic} retained {last:?}, wanted {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A change on the cloud reaches the broker: the ceiling's dimmer to 0.2 shows as brightness
/// 51 on its retained attribute topic.
pub async fn check_change(sim: &Simulator, port: u16) {
    let dimmer = serde_json::json!({"controls": [{"type": "Dimmer", "value": 0.2}]});
    sim.set_unit_state(HOME, 1, &dimmer).expect("unit 1 exists");
    retained_is(port, &format!("{CEILING}/brightness"), "51", Duration::from_secs(10)).await;
}

/// A command's round trip: brightness 64 published on the ceiling's attribute command topic
/// becomes the simulator's dimmer value, and the state comes back retained.
pub async fn check_command(sim: &Simulator, port: u16) {
    let client = Watcher::start(port, "casambi/bridge/error").await;
    client.publish(&format!("{CEILING}/set/brightness"), "64", false).await;
    retained_is(port, &format!("{CEILING}/brightness"), "64", Duration::from_secs(10)).await;
    let want = serde_json::json!({"method": "controlUnit", "id": 1, "targetControls": {"Dimmer": {"value": 0.251}}});
    let controls = sim.shared().log.controls();
    assert!(controls.iter().any(|c| c["targetControls"] == want["targetControls"] && c["id"] == 1), "{controls:?}");
    let _ = client.client.disconnect().await;
}

/// Home Assistant's birth message (`homeassistant/status` `online`, not retained) is answered
/// with every discovery config again.
pub async fn check_birth(port: u16) {
    let mut w = Watcher::start(port, "homeassistant/#").await;
    // The retained configs arrive with the subscription; only what follows the birth counts.
    w.settle(Duration::from_millis(300), Duration::from_secs(10)).await;
    w.publish("homeassistant/status", "online", false).await;
    seen_all(&mut w, &discovery_topics(), Duration::from_secs(10)).await;
    let _ = w.client.disconnect().await;
}
