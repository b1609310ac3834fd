//! Shared set-up of the bridge core tests: a simulator, a bridge pointed at it, and a consumer that
//! mirrors the update stream (the state as a downstream consumer sees it).

#![allow(dead_code)]

use casambi2mqtt::bridge::network::Timing;
use casambi2mqtt::bridge::state::{NetworkStatus, Topology, UnitEvent};
use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::bridge::{Bridge, CloudSettings, CredentialSettings};
use casambi2mqtt::cloud::datapoints::Datapoint;
use casambi2mqtt::cloud::model::{Secret, UnitState};
use casambi2mqtt::sim::log::RequestRecord;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the consumer has seen.
#[derive(Debug, Default)]
pub struct Mirror {
    pub status: BTreeMap<String, NetworkStatus>,
    pub units: BTreeMap<String, BTreeMap<u32, Arc<UnitState>>>,
    pub topologies: Vec<(String, Topology)>,
    pub events: Vec<(String, u32, UnitEvent)>,
    pub problems: Vec<String>,
    pub full_views: usize,
    /// Every connection state each network went through, in order.
    pub connections: Vec<(String, &'static str)>,
    /// Every logged datapoint handed on, with its network, in the order received.
    pub datapoints: Vec<(String, Datapoint)>,
    /// How many `Update::Datapoints` pages arrived.
    pub datapoint_pages: usize,
}

impl Mirror {
    fn note_connection(&mut self, id: &str, status: &NetworkStatus) {
        let c = status.connection.as_str();
        if self.connections.iter().rev().find(|(n, _)| n == id).map(|(_, c)| *c) != Some(c) {
            self.connections.push((id.to_string(), c));
        }
    }
}

pub struct Harness {
    pub sim: Simulator,
    pub bridge: Bridge,
    pub mirror: Arc<Mutex<Mirror>>,
    pub shutdown: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub fn settings(sim: &Simulator, rpm: u32) -> CloudSettings {
    CloudSettings {
        base_url: sim.base_url().parse().unwrap(),
        ws_url: sim.ws_url(),
        api_key: Secret::new("demo-key"),
        key_header: "X-Casambi-Key".into(),
        session_header: "X-Casambi-Session".into(),
        poll_interval: Duration::from_millis(300),
        resync_interval: Duration::from_secs(600),
        max_requests_per_minute: rpm,
        max_concurrent_requests: 4,
        wire_ping_interval: Duration::from_millis(500),
        event_batch_window: casambi2mqtt::wake_batch::DEFAULT_WINDOW,
    }
}

pub fn fast_timing() -> Timing {
    Timing {
        poll_interval: Duration::from_millis(300),
        resync_interval: Duration::from_secs(600),
        scene_refresh_delay: Duration::from_millis(200),
        burst_window: Duration::from_millis(300),
        reopen_delay: Duration::from_millis(500),
        datapoints: None,
    }
}

pub fn demo_credentials(password: &str) -> Vec<CredentialSettings> {
    vec![CredentialSettings { email: "demo@example.com".into(), password: Secret::new(password), ids: vec![] }]
}

pub fn site_credentials(password: &str) -> Vec<CredentialSettings> {
    vec![CredentialSettings { email: "owner@example.com".into(), password: Secret::new(password), ids: vec![] }]
}

pub async fn start(config: SimConfig, credentials: Vec<CredentialSettings>, rpm: u32) -> Harness {
    start_with_sites(config, credentials, Vec::new(), rpm).await
}

/// [`start`] with `sites:` entries (site, or user, credentials) besides the `networks:` ones.
pub async fn start_with_sites(
    config: SimConfig,
    credentials: Vec<CredentialSettings>,
    sites: Vec<CredentialSettings>,
    rpm: u32,
) -> Harness {
    // `RUST_LOG=debug cargo test …` shows what the bridge did.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    start_on(Simulator::start_local(config).await.unwrap(), credentials, sites, rpm)
}

/// [`start_with_sites`] on a simulator the caller started (and perhaps primed with faults).
pub fn start_on(
    sim: Simulator,
    credentials: Vec<CredentialSettings>,
    sites: Vec<CredentialSettings>,
    rpm: u32,
) -> Harness {
    start_timed(sim, credentials, sites, rpm, fast_timing())
}

/// [`start_on`] with the caller's timing (its datapoint job, say).
pub fn start_timed(
    sim: Simulator,
    credentials: Vec<CredentialSettings>,
    sites: Vec<CredentialSettings>,
    rpm: u32,
    timing: Timing,
) -> Harness {
    let shutdown = CancellationToken::new();
    let (tx, rx) = mpsc::channel(4096);
    let mut cloud = settings(&sim, rpm);
    cloud.poll_interval = timing.poll_interval;
    let bridge = Bridge::start_with_sites(&cloud, &credentials, &sites, tx, timing, shutdown.clone()).unwrap();
    let mirror = Arc::new(Mutex::new(Mirror::default()));
    tokio::spawn(consume(rx, mirror.clone()));
    Harness { sim, bridge, mirror, shutdown }
}

pub async fn start_demo() -> Harness {
    start(SimConfig::new(Site::demo()), demo_credentials("demo"), 600).await
}

async fn consume(mut rx: mpsc::Receiver<Update>, mirror: Arc<Mutex<Mirror>>) {
    while let Some(update) = rx.recv().await {
        let mut m = mirror.lock().unwrap();
        match update {
            Update::Network { view, topology } => {
                let id = view.status.id.clone();
                m.full_views += 1;
                m.note_connection(&id, &view.status);
                m.status.insert(id.clone(), view.status.clone());
                m.units.insert(id.clone(), view.units.clone());
                if !topology.is_empty() {
                    m.topologies.push((id, *topology));
                }
            }
            Update::Status { network, status } => {
                m.note_connection(&network, &status);
                m.status.insert(network.to_string(), *status);
            }
            Update::Unit { network, unit } => {
                m.units.entry(network.to_string()).or_default().insert(unit.id, unit);
            }
            Update::Event { network, unit, event, .. } => m.events.push((network.to_string(), unit, event)),
            Update::Problem { message, .. } => m.problems.push(message),
            Update::Rejected { topic, reason, .. } => m.problems.push(format!("{topic}: {reason}")),
            Update::Photos { .. } => {}
            Update::Datapoints { network, points } => {
                m.datapoint_pages += 1;
                m.datapoints.extend(points.iter().map(|p| (network.to_string(), p.clone())));
            }
        }
    }
}

impl Harness {
    /// Waits (up to `secs`) until `pred` holds on the mirror.
    pub async fn wait(&self, secs: u64, what: &str, pred: impl Fn(&Mirror) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            if pred(&self.mirror.lock().unwrap()) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for: {what}\nconnections: {:?}", self.mirror.lock().unwrap().connections);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn network_ids(&self) -> Vec<String> {
        self.sim.shared().config.site.networks.iter().map(|n| n.id.clone()).collect()
    }

    /// Waits until every network is live.
    pub async fn wait_all_live(&self, secs: u64) {
        let ids = self.network_ids();
        self.wait(secs, "all networks live", move |m| {
            ids.iter().all(|id| m.status.get(id).is_some_and(|s| s.connection.as_str() == "live"))
        })
        .await;
    }

    /// Differences between the mirror and the simulator's truth (empty = converged).
    pub fn differences(&self) -> Vec<String> {
        let m = self.mirror.lock().unwrap();
        let mut out = Vec::new();
        for id in self.network_ids() {
            let truth = self.sim.network_state(&id).unwrap();
            let Some(status) = m.status.get(&id) else {
                out.push(format!("{id}: no status"));
                continue;
            };
            let active: Vec<u32> =
                truth["activeScenes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            if status.active_scenes.iter().copied().collect::<Vec<_>>() != active {
                out.push(format!("{id}: active scenes {:?} != {active:?}", status.active_scenes));
            }
            if status.dim_level != truth["dimLevel"].as_f64() {
                out.push(format!("{id}: dim level {:?} != {}", status.dim_level, truth["dimLevel"]));
            }
            let units = m.units.get(&id).cloned().unwrap_or_default();
            let truth_units = truth["units"].as_object().unwrap();
            if units.len() != truth_units.len() {
                out.push(format!("{id}: {} units != {}", units.len(), truth_units.len()));
            }
            for (key, tu) in truth_units {
                let uid: u32 = key.parse().unwrap();
                let Some(u) = units.get(&uid) else {
                    out.push(format!("{id}/{uid}: missing"));
                    continue;
                };
                if u.name.as_deref() != tu["name"].as_str() {
                    out.push(format!("{id}/{uid}: name {:?} != {}", u.name, tu["name"]));
                }
                let online = tu["online"].as_bool().unwrap();
                if u.online != Some(online) {
                    out.push(format!("{id}/{uid}: online {:?} != {online}", u.online));
                }
                if online {
                    if u.on != tu["on"].as_bool() {
                        out.push(format!("{id}/{uid}: on {:?} != {}", u.on, tu["on"]));
                    }
                    let mine: Vec<Value> = u
                        .controls
                        .as_ref()
                        .map(|c| c.iter().map(|c| numbers_as_floats(c.to_value())).collect())
                        .unwrap_or_default();
                    let theirs: Vec<Value> = tu["controls"][0]
                        .as_array()
                        .map(|a| a.iter().cloned().map(numbers_as_floats).collect())
                        .unwrap_or_default();
                    if mine != theirs {
                        out.push(format!("{id}/{uid}: controls {mine:?} != {theirs:?}"));
                    }
                }
            }
        }
        out
    }

    /// Waits until the mirror equals the truth.
    pub async fn wait_converged(&self, secs: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let diff = self.differences();
            if diff.is_empty() {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("not converged after {secs} s:\n{}", diff.join("\n"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Asserts the start-up cost on `site` (docs/cloud.md#start-up-cost) with one credentials entry:
/// one session request, `GET /v1/networks/{id}` and its `/state` per network, one
/// `GET /v1/fixtures/{id}` per distinct fixture, and nothing else.
pub fn assert_startup_cost(log: &[RequestRecord], site: &Site) {
    let count = |pred: &dyn Fn(&RequestRecord) -> bool| log.iter().filter(|r| pred(r)).count();
    let networks = site.networks.len();
    let fixtures: std::collections::BTreeSet<i64> =
        site.networks.iter().flat_map(|n| n.units.iter().map(|u| u.fixture)).collect();
    let sessions = count(&|r| r.is_login());
    let network = count(&|r| !r.is_login() && r.path.starts_with("/v1/networks/") && r.path.matches('/').count() == 3);
    let state = count(&|r| r.path.ends_with("/state") && !r.path.contains("/units/"));
    let fixture = count(&|r| r.path.starts_with("/v1/fixtures/"));
    assert_eq!(sessions, 1, "one session request for all networks: {log:#?}");
    assert_eq!(network, networks);
    assert_eq!(state, networks);
    assert_eq!(fixture, fixtures.len());
    assert_eq!(log.len(), 1 + 2 * networks + fixtures.len(), "nothing else, never one request per unit: {log:#?}");
    assert!(log.iter().all(|r| r.status == 200));
}

/// JSON with every number as a float, so `0` and `0.0` compare equal.
pub fn numbers_as_floats(v: Value) -> Value {
    match v {
        Value::Number(n) => n.as_f64().map_or(Value::Number(n), |f| serde_json::json!(f)),
        Value::Array(a) => Value::Array(a.into_iter().map(numbers_as_floats).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, numbers_as_floats(v))).collect()),
        other => other,
    }
}
