//! Chaos: the whole bridge (`app::run`) against the simulated cloud with background activity and
//! faults injected at random (from one seeded generator): wires and sockets dropped, sessions
//! expired, the quota exhausted, gateways offline, units added, removed and renamed (scenes and
//! groups too, to colliding names), malformed and oversized frames, 500s, the MQTT link stalled
//! and cut, and the real mosquitto restarted on the way. When the chaos stops (activity paused,
//! gateways back online) the RETAINED state on the broker must settle to the simulator's truth:
//! every unit, group, scene and network, no topic of a removed unit or of an old name, discovery
//! exactly for what exists. Along the way the cloud must never have been pushed into a login
//! lockout or over the configured request rate, and 429s must be met with growing waits.
//!
//! The short version runs in the normal suite (25 s of chaos, under a minute in all). The long
//! version takes its parameters from the environment (see docs/reliability.md):
//!
//! ```text
//! CHAOS_SECONDS=600 CHAOS_SEED=7 cargo test --release --test chaos -- --nocapture
//! ```
//!
//! `CHAOS_RATE` (activity events/s, default 20), `CHAOS_RPM` (`cloud.max_requests_per_minute`,
//! default 120), `CHAOS_SETTLE` (seconds allowed to converge, default 40),
//! `CHAOS_BROKER_RESTARTS` (default 2, or one a minute in longer runs) tune it further;
//! `CHAOS_VERBOSE=1` prints the differences while it settles, `RUST_LOG=casambi2mqtt=debug`
//! what the bridge did.

mod common;

use casambi2mqtt::app::{self, Running};
use casambi2mqtt::cloud::model::UnitState;
use casambi2mqtt::config;
use casambi2mqtt::mqtt::render::{bridge_object_id, network_object_id, unit_object_id};
use casambi2mqtt::mqtt::topics;
use casambi2mqtt::mqtt::unit_json::{UNIT_KEYS, plain};
use casambi2mqtt::sim::log::RequestRecord;
use casambi2mqtt::sim::site::{SceneUnit, Site, Unit};
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::{Mosquitto, retained};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const BASE: &str = "casambi";
const PREFIX: &str = "homeassistant";
const KEY: &str = "demo-key";
const EMAIL: &str = "demo@example.com";

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

struct Params {
    seconds: f64,
    seed: u64,
    rate: f64,
    rpm: u32,
    settle: Duration,
    restarts: usize,
    verbose: bool,
}

fn env<T: FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a valid value")),
        Err(_) => default,
    }
}

impl Params {
    fn from_env() -> Params {
        let seconds: f64 = env("CHAOS_SECONDS", 25.0);
        Params {
            seconds,
            seed: env("CHAOS_SEED", 1),
            rate: env("CHAOS_RATE", 20.0),
            rpm: env("CHAOS_RPM", 120),
            // The longest legitimate wait at the end: a login that met five 500s in a row
            // backs off 1 + 2 + 4 + 8 + 16 s (full jitter), then a poll.
            settle: Duration::from_secs_f64(env("CHAOS_SETTLE", 40.0)),
            restarts: env("CHAOS_BROKER_RESTARTS", ((seconds / 60.0) as usize).max(2)),
            verbose: env("CHAOS_VERBOSE", 0u8) > 0,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The site
// ---------------------------------------------------------------------------------------------

/// The demo site, with one change: the "Night light" scene's only member is the offline Garage
/// light, so switching that scene changes `activeScenes` without any event, which no client can
/// notice before its next REST resync (15 min). A reachable member makes every scene change
/// observable, as the contract requires (DESIGN §4: refresh after an `activeSceneId` change).
fn site() -> Site {
    let mut site = Site::demo();
    for scene in &mut site.networks[0].scenes {
        if scene.units.iter().all(|m| m.id == 7) {
            scene.units.push(SceneUnit { id: 8, level: 1.0 });
        }
    }
    site
}

// ---------------------------------------------------------------------------------------------
// Fault injection
// ---------------------------------------------------------------------------------------------

const UNIT_NAMES: &[&str] = &[
    "Spot",
    "spot",
    "Spot!",
    "Lamp",
    "Küche Spots",
    "Kitchen ceiling",
    "Desk 1",
    "Reading light",
    "Ærø lamp",
    "!!!",
    "a/b+c#d",
    "Living room lamp",
    "Hallway presence",
    "Bridge",
];
const SCENE_NAMES: &[&str] = &["Evening", "Cooking", "Relax", "Night light", "Work", "Presentation", "Party!"];
const GROUP_NAMES: &[&str] = &["Kitchen", "Living room", "Meeting", "Upstairs", "Küche"];

/// Fault kinds and their weights.
const KINDS: &[(&str, u32)] = &[
    ("wire drops", 14),
    ("socket drops", 7),
    ("session expiries", 6),
    ("quota exhaustions", 3),
    ("gateway outages", 6),
    ("units added", 6),
    ("units removed", 4),
    ("renames", 8),
    ("malformed frames", 6),
    ("oversized frames", 4),
    ("500 bursts", 6),
    ("MQTT link cuts", 3),
];

/// Every fault kind once, in random order.
fn shuffled_kinds(rng: &mut SmallRng) -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = KINDS.iter().map(|(k, _)| *k).collect();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.random_range(0..=i));
    }
    kinds
}

struct Chaos<'a> {
    sim: &'a Simulator,
    relay: &'a Relay,
    /// A stalled MQTT link, and when it is cut.
    link_cut_at: Option<Instant>,
    rng: SmallRng,
    networks: Vec<String>,
    templates: Vec<Unit>,
    next_unit: i64,
    next_name: u32,
    tally: BTreeMap<&'static str, usize>,
    journal: Vec<(Duration, String)>,
    /// Gateways taken offline, and when they come back.
    gateway_back: BTreeMap<String, Instant>,
    /// The running quota exhaustion, if any.
    quota_until: Option<Instant>,
    /// Exhaustions as (start, length), in simulator time (the request log's clock).
    exhaustions: Vec<(Duration, Duration)>,
    /// Kinds still to inject before the weighted draw resumes: every kind once at the start and
    /// after the last broker restart (so even a short run sees each of them).
    first_round: Vec<&'static str>,
}

impl<'a> Chaos<'a> {
    fn new(sim: &'a Simulator, relay: &'a Relay, seed: u64) -> Chaos<'a> {
        let networks: Vec<String> = sim.shared().config.site.networks.iter().map(|n| n.id.clone()).collect();
        let templates = sim.shared().config.site.networks.iter().flat_map(|n| n.units.iter().cloned()).collect();
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xC4A0_5EED);
        let first_round = shuffled_kinds(&mut rng);
        Chaos {
            sim,
            relay,
            link_cut_at: None,
            rng,
            first_round,
            networks,
            templates,
            next_unit: 100,
            next_name: 1,
            tally: BTreeMap::new(),
            journal: Vec::new(),
            gateway_back: BTreeMap::new(),
            quota_until: None,
            exhaustions: Vec::new(),
        }
    }

    fn now(&self) -> Duration {
        self.sim.shared().started.elapsed()
    }

    fn note(&mut self, kind: &'static str, what: String) {
        *self.tally.entry(kind).or_default() += 1;
        let at = self.now();
        self.journal.push((at, what));
    }

    fn network(&mut self) -> String {
        let i = self.rng.random_range(0..self.networks.len());
        self.networks[i].clone()
    }

    fn name(&mut self, pool: &[&str]) -> String {
        if self.rng.random_bool(0.5) {
            pool[self.rng.random_range(0..pool.len())].to_string()
        } else {
            self.next_name += 1;
            format!("Chaos {}", self.next_name)
        }
    }

    /// Brings back the gateways whose outage is over.
    fn restore_gateways(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self.gateway_back.iter().filter(|(_, t)| **t <= now).map(|(n, _)| n.clone()).collect();
        for net in due {
            self.gateway_back.remove(&net);
            self.sim.set_gateway(&net, true).unwrap();
            let at = self.now();
            self.journal.push((at, format!("gateway {net} back online")));
        }
    }

    /// Injects one fault of a kind drawn by weight.
    fn inject(&mut self) {
        let kind = self.draw();
        self.inject_kind(kind);
    }

    /// Cuts a stalled MQTT link when its time has come.
    fn cut_link(&mut self) {
        if self.link_cut_at.is_some_and(|t| t <= Instant::now()) {
            self.link_cut_at = None;
            self.relay.cut();
            self.relay.stall(false);
            let at = self.now();
            self.journal.push((at, "MQTT link cut".into()));
        }
    }

    /// The kind of the next fault.
    fn draw(&mut self) -> &'static str {
        match self.first_round.pop() {
            Some(kind) => kind,
            None => {
                let total: u32 = KINDS.iter().map(|(_, w)| w).sum();
                let mut roll = self.rng.random_range(0..total);
                let mut kind = KINDS[0].0;
                for (k, w) in KINDS {
                    if roll < *w {
                        kind = k;
                        break;
                    }
                    roll -= w;
                }
                kind
            }
        }
    }

    /// Injects one fault of `kind`.
    fn inject_kind(&mut self, kind: &'static str) {
        match kind {
            "wire drops" => {
                let net = self.network();
                let n = self.sim.drop_wire(&net);
                self.note(kind, format!("drop wire {net} ({n} connections)"));
            }
            "socket drops" => {
                let n = self.sim.drop_sockets();
                self.note(kind, format!("drop sockets ({n})"));
            }
            "session expiries" => {
                self.sim.expire_sessions();
                // Half the time the sockets go too, so the wires meet the expired session.
                let with_drop = self.rng.random_bool(0.5);
                if with_drop {
                    self.sim.drop_sockets();
                }
                self.note(kind, format!("expire sessions{}", if with_drop { " + drop sockets" } else { "" }));
            }
            "quota exhaustions" => {
                if self.quota_until.is_some_and(|t| t > Instant::now()) {
                    let net = self.network();
                    self.sim.drop_wire(&net);
                    self.note("wire drops", format!("drop wire {net} (quota already exhausted)"));
                    return;
                }
                let length = Duration::from_millis(self.rng.random_range(1000..4000));
                let start = self.now();
                self.sim.exhaust_quota(KEY, length);
                self.quota_until = Some(Instant::now() + length);
                self.exhaustions.push((start, length));
                self.note(kind, format!("exhaust quota for {length:?}"));
            }
            "gateway outages" => {
                let up: Vec<String> =
                    self.networks.iter().filter(|n| !self.gateway_back.contains_key(*n)).cloned().collect();
                if up.is_empty() {
                    return;
                }
                let net = up[self.rng.random_range(0..up.len())].clone();
                let outage = Duration::from_millis(self.rng.random_range(500..6000));
                self.sim.set_gateway(&net, false).unwrap();
                self.gateway_back.insert(net.clone(), Instant::now() + outage);
                self.note(kind, format!("gateway {net} offline for {outage:?}"));
            }
            "units added" => {
                let net = self.network();
                let mut unit = self.templates[self.rng.random_range(0..self.templates.len())].clone();
                unit.id = self.next_unit;
                self.next_unit += 1;
                unit.name = self.name(UNIT_NAMES);
                unit.address = format!("ca{:010x}", unit.id);
                unit.online = true;
                unit.image = None;
                let what = format!("add unit {} {:?} to {net}", unit.id, unit.name);
                self.sim.add_unit(&net, unit).unwrap();
                self.note(kind, what);
            }
            "units removed" => {
                let net = self.network();
                // Units that are not in a scene: removing a scene's last reachable member would
                // make later switches of that scene invisible (no event), as for the Night light.
                let candidates: Vec<i64> = {
                    let world = self.sim.shared().world();
                    let n = &world.networks[&net];
                    if n.units.len() <= 3 {
                        Vec::new()
                    } else {
                        n.units
                            .keys()
                            .copied()
                            .filter(|id| !n.scenes.iter().any(|s| s.units.iter().any(|m| m.id == *id)))
                            .collect()
                    }
                };
                if candidates.is_empty() {
                    return;
                }
                let unit = candidates[self.rng.random_range(0..candidates.len())];
                self.sim.remove_unit(&net, unit).unwrap();
                self.note(kind, format!("remove unit {unit} from {net}"));
            }
            "renames" => {
                let net = self.network();
                let roll = self.rng.random_range(0..10);
                let (what, ids, pool): (&str, Vec<i64>, &[&str]) = {
                    let world = self.sim.shared().world();
                    let n = &world.networks[&net];
                    match roll {
                        0..6 => ("unit", n.units.keys().copied().collect(), UNIT_NAMES),
                        6..8 => ("scene", n.scenes.iter().map(|s| s.id).collect(), SCENE_NAMES),
                        _ => ("group", n.groups.iter().map(|g| g.id).collect(), GROUP_NAMES),
                    }
                };
                if ids.is_empty() {
                    return;
                }
                let id = ids[self.rng.random_range(0..ids.len())];
                let name = self.name(pool);
                self.sim.rename(&net, what, id, &name).unwrap();
                self.note(kind, format!("rename {what} {id} of {net} to {name:?}"));
            }
            "malformed frames" => {
                let net = self.network();
                let n = self.sim.send_malformed(&net);
                self.note(kind, format!("malformed frame on {net} ({n})"));
            }
            "oversized frames" => {
                let net = self.network();
                // Below and above the channel's 1 MiB limit (above ends the socket).
                let bytes = [16 * 1024, 300 * 1024, 1536 * 1024][self.rng.random_range(0..3)];
                let n = self.sim.send_oversized(&net, bytes);
                self.note(kind, format!("oversized frame of {bytes} bytes on {net} ({n})"));
            }
            "500 bursts" => {
                let count = self.rng.random_range(1..=5);
                self.sim.fail_next_requests(count);
                self.note(kind, format!("next {count} requests answered 500"));
            }
            "MQTT link cuts" => {
                if self.link_cut_at.is_some() {
                    return;
                }
                // The link stalls, the network changes (so the bridge has topics to clear while
                // nothing gets through), then the link is cut.
                self.relay.stall(true);
                let stall = Duration::from_millis(self.rng.random_range(2000..4000));
                self.link_cut_at = Some(Instant::now() + stall);
                self.note(kind, format!("MQTT link stalled for {stall:?}, then cut"));
                let change = if self.rng.random_bool(0.5) { "renames" } else { "units removed" };
                self.inject_kind(change);
            }
            other => unreachable!("{other}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The link between the bridge and the broker
// ---------------------------------------------------------------------------------------------

/// A TCP relay between the bridge and the broker that can stall (stop forwarding, as a network
/// partition does) and cut every connection. What was in flight when the link is cut is lost,
/// but the broker keeps its retained messages: unlike a broker restart, anything the bridge
/// failed to clear stays visible.
struct Relay {
    port: u16,
    stalled: Arc<watch::Sender<bool>>,
    cut: Arc<Mutex<CancellationToken>>,
}

impl Relay {
    async fn start(broker_port: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let stalled = Arc::new(watch::channel(false).0);
        let cut = Arc::new(Mutex::new(CancellationToken::new()));
        let (s, c) = (stalled.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                // Broker away: the bridge's connection just ends.
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", broker_port)).await else { continue };
                let link = c.lock().unwrap().child_token();
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                tokio::spawn(pipe(ri, wo, s.subscribe(), link.clone()));
                tokio::spawn(pipe(ro, wi, s.subscribe(), link));
            }
        });
        Relay { port, stalled, cut }
    }

    fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// Stops (`true`) or resumes forwarding in both directions.
    fn stall(&self, on: bool) {
        self.stalled.send_replace(on);
    }

    /// Cuts every open connection; what the relay had not forwarded yet is lost.
    fn cut(&self) {
        let mut cut = self.cut.lock().unwrap();
        cut.cancel();
        *cut = CancellationToken::new();
    }
}

/// Forwards one direction of a connection until either side ends or the link is cut; while
/// stalled, reads nothing (the data waits in the socket buffers and dies with a cut).
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
    link: CancellationToken,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if *stalled.borrow_and_update() {
            tokio::select! {
                _ = link.cancelled() => break,
                r = stalled.changed() => if r.is_err() { break } else { continue },
            }
        }
        tokio::select! {
            _ = link.cancelled() => break,
            _ = stalled.changed() => {}
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => if to.write_all(&buf[..n]).await.is_err() { break },
            },
        }
    }
    // Either direction ending ends the connection.
    link.cancel();
}

// ---------------------------------------------------------------------------------------------
// The retained state against the truth
// ---------------------------------------------------------------------------------------------

/// Numbers compare as floats (`1` = `1.0`); everything else as JSON.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() < 1e-9,
        _ => a == b,
    }
}

fn check(out: &mut Vec<String>, what: &str, actual: &Value, expected: &Value) {
    if !same(actual, expected) {
        out.push(format!("{what}: published {actual}, truth {expected}"));
    }
}

fn json_at(r: &BTreeMap<String, String>, topic: &str, out: &mut Vec<String>) -> Option<Value> {
    let Some(payload) = r.get(topic) else {
        out.push(format!("missing {topic}"));
        return None;
    };
    match serde_json::from_str(payload) {
        Ok(v) => Some(v),
        Err(e) => {
            out.push(format!("{topic}: not JSON ({e}): {payload}"));
            None
        }
    }
}

fn control<'v>(controls: &'v [Value], kind: &str) -> Option<&'v Value> {
    controls.iter().find(|c| c["type"] == kind)
}

/// Every `…topic` string a discovery config refers to.
fn referenced_topics(v: &Value, key: Option<&str>, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, v)| referenced_topics(v, Some(k), out)),
        Value::Array(a) => a.iter().for_each(|v| referenced_topics(v, key, out)),
        Value::String(s) if key.is_some_and(|k| k == "topic" || k.ends_with("_topic")) => out.push(s.clone()),
        _ => {}
    }
}

/// What a device's discovery config must satisfy.
struct DeviceWant {
    /// The device name.
    name: Option<String>,
    /// Topics its entities must name (each of them).
    mentions: Vec<String>,
    /// A topic its entities must name, or one below it (a unit's state or, for a switch, its
    /// `event` topic).
    under: Option<String>,
}

/// The differences between the retained topics `r` and the simulator's truth (empty = equal).
fn differences(sim: &Simulator, r: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    // Retained topics that must exist (and no others), and topics discovery may also name.
    let mut want: BTreeSet<String> = BTreeSet::new();
    let mut referable: BTreeSet<String> = BTreeSet::new();
    let mut devices: BTreeMap<String, DeviceWant> = BTreeMap::new();

    let nets: Vec<(String, String, bool)> = {
        let world = sim.shared().world();
        world.networks.values().map(|n| (n.def.id.clone(), n.def.name.clone(), n.gateway_online)).collect()
    };
    let net_slugs = topics::assign(nets.iter().map(|(id, name, _)| (id.clone(), name.as_str())), &["bridge"]);

    // The bridge.
    let state_topic = format!("{BASE}/bridge/state");
    let info_topic = format!("{BASE}/bridge/info");
    want.extend([state_topic.clone(), info_topic.clone()]);
    if r.get(&state_topic).map(String::as_str) != Some("online") {
        out.push(format!("{state_topic}: {:?}", r.get(&state_topic)));
    }
    if let Some(info) = json_at(r, &info_topic, &mut out) {
        let listed: BTreeMap<String, (String, String)> = info["networks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
                (s("id"), (s("name"), s("slug")))
            })
            .collect();
        let expected: BTreeMap<String, (String, String)> =
            nets.iter().map(|(id, name, _)| (id.clone(), (name.clone(), net_slugs[id].clone()))).collect();
        if listed != expected {
            out.push(format!("bridge/info networks {listed:?} != {expected:?}"));
        }
    }
    devices.insert(bridge_object_id(BASE), DeviceWant { name: None, mentions: vec![state_topic.clone()], under: None });

    for (id, _, gateway_online) in &nets {
        let truth = sim.network_state(id).unwrap();
        let net = &net_slugs[id];
        let root = format!("{BASE}/{net}");
        referable.insert(format!("{root}/set"));

        // Scenes.
        let scenes: BTreeMap<u32, String> = truth["scenes"]
            .as_object()
            .unwrap()
            .values()
            .map(|s| (s["id"].as_u64().unwrap() as u32, s["name"].as_str().unwrap().to_string()))
            .collect();
        let scene_slugs = topics::assign(scenes.iter().map(|(id, n)| (*id, n.as_str())), &[]);
        let active: Vec<u32> =
            truth["activeScenes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let mut network_mentions = Vec::new();
        for (sid, slug) in &scene_slugs {
            let topic = format!("{root}/scene/{slug}");
            let expected = if active.contains(sid) { "ON" } else { "OFF" };
            match r.get(&topic) {
                Some(p) if p == expected => {}
                other => {
                    out.push(format!("{topic} (scene {sid} {:?}): published {other:?}, truth {expected}", scenes[sid]))
                }
            }
            want.insert(topic.clone());
            referable.insert(format!("{topic}/set"));
            network_mentions.push(topic);
        }

        // The network.
        if let Some(j) = json_at(r, &root, &mut out) {
            check(&mut out, &format!("{root} id"), &j["id"], &json!(id));
            check(&mut out, &format!("{root} name"), &j["name"], &truth["name"]);
            check(&mut out, &format!("{root} gateway_online"), &j["gateway_online"], &json!(gateway_online));
            check(&mut out, &format!("{root} dim_level"), &j["dim_level"], &truth["dimLevel"]);
            let expected: Vec<Value> = active.iter().map(|s| json!({"id": s, "name": scenes.get(s)})).collect();
            check(&mut out, &format!("{root} active_scenes"), &j["active_scenes"], &json!(expected));
        }
        let available = if *gateway_online { "online" } else { "offline" };
        let topic = format!("{root}/availability");
        if r.get(&topic).map(String::as_str) != Some(available) {
            out.push(format!("{topic}: published {:?}, truth {available}", r.get(&topic)));
        }
        want.extend([root.clone(), topic]);

        // Units.
        let units = truth["units"].as_object().unwrap();
        let unit_slugs = topics::assign(
            units.values().map(|u| (u["id"].as_u64().unwrap() as u32, u["name"].as_str().unwrap_or_default())),
            &[],
        );
        // Expected (state, brightness) of reachable units, for their groups.
        let mut readings: BTreeMap<u32, (Value, Value)> = BTreeMap::new();
        for tu in units.values() {
            let uid = tu["id"].as_u64().unwrap() as u32;
            let topic = format!("{root}/unit/{}", unit_slugs[&uid]);
            let online = tu["online"].as_bool() == Some(true);
            let name = tu["name"].as_str().unwrap_or_default().to_string();
            want.insert(topic.clone());
            referable.extend([format!("{topic}/set"), format!("{topic}/event")]);
            let availability = format!("{topic}/availability");
            let expected = if online && *gateway_online { "online" } else { "offline" };
            if r.get(&availability).map(String::as_str) != Some(expected) {
                out.push(format!("{availability}: published {:?}, truth {expected}", r.get(&availability)));
            }
            want.insert(availability);
            let state: UnitState = serde_json::from_value(tu.clone()).unwrap();
            devices.insert(
                unit_object_id(id, &state),
                DeviceWant { name: Some(name.clone()), mentions: Vec::new(), under: Some(topic.clone()) },
            );
            let Some(j) = json_at(r, &topic, &mut out) else { continue };
            let what = |k: &str| format!("{topic} (unit {uid}) {k}");
            check(&mut out, &what("id"), &j["id"], &json!(uid));
            check(&mut out, &what("name"), &j["name"], &json!(name));
            check(&mut out, &what("online"), &j["online"], &json!(online));
            if online {
                let controls = tu["controls"][0].as_array().cloned().unwrap_or_default();
                let level = |kind: &str| control(&controls, kind).and_then(|c| c["value"].as_f64());
                let (dimmer, onoff) = (level("Dimmer"), level("OnOff"));
                let on = tu["on"].as_bool() == Some(true);
                // ON when on and its Dimmer (and OnOff, if any) is above 0; sensors have none.
                let light_state = if tu["type"] == "Luminaire" {
                    let lit = on && dimmer.is_none_or(|d| d > 0.0) && onoff.is_none_or(|o| o > 0.0);
                    json!(if lit { "ON" } else { "OFF" })
                } else {
                    Value::Null
                };
                let brightness = dimmer.map_or(Value::Null, |d| json!((d * 255.0).round()));
                check(&mut out, &what("state"), &j["state"], &light_state);
                check(&mut out, &what("brightness"), &j["brightness"], &brightness);
                let kelvin = level("CCT").map_or(Value::Null, |k| json!(k.round()));
                check(&mut out, &what("color_temp"), &j["color_temp"], &kelvin);
                let occupancy = control(&controls, "Presence").map_or(Value::Null, |p| json!(p["status"] != "absent"));
                check(&mut out, &what("occupancy"), &j["occupancy"], &occupancy);
                check(
                    &mut out,
                    &what("illuminance"),
                    &j["illuminance"],
                    &level("Lux").map_or(Value::Null, |l| json!(l)),
                );
                check(&mut out, &what("dim_level"), &j["dim_level"], &tu["dimLevel"]);
                check(&mut out, &what("active_scene_id"), &j["active_scene_id"], &tu["activeSceneId"]);
                readings.insert(uid, (light_state, brightness));
            }
            // The plain attribute topics follow the JSON.
            for key in UNIT_KEYS {
                let Some(text) = j.get(key).and_then(plain) else { continue };
                let leaf = format!("{topic}/{key}");
                if r.get(&leaf) != Some(&text) {
                    out.push(format!("{leaf}: published {:?}, JSON says {text:?}", r.get(&leaf)));
                }
                want.insert(leaf);
            }
        }

        // Groups.
        let groups: Vec<&Value> = truth["groups"].as_object().unwrap().values().collect();
        let group_slugs = topics::assign(
            groups.iter().map(|g| (g["id"].as_u64().unwrap() as u32, g["name"].as_str().unwrap_or_default())),
            &[],
        );
        for g in groups {
            let gid = g["id"].as_u64().unwrap() as u32;
            let topic = format!("{root}/group/{}", group_slugs[&gid]);
            want.insert(topic.clone());
            referable.insert(format!("{topic}/set"));
            network_mentions.push(topic.clone());
            let members: Vec<u64> = g["units"].as_array().unwrap().iter().map(|m| m["0"].as_u64().unwrap()).collect();
            let Some(j) = json_at(r, &topic, &mut out) else { continue };
            check(&mut out, &format!("{topic} name"), &j["name"], &g["name"]);
            check(&mut out, &format!("{topic} members"), &j["members"], &json!(members));
            // State and brightness summarise the members (when every member is reachable).
            let known: Vec<&(Value, Value)> = members.iter().filter_map(|m| readings.get(&(*m as u32))).collect();
            if known.len() == members.len() {
                let state = if known.iter().any(|(s, _)| s == "ON") {
                    json!("ON")
                } else if known.iter().any(|(s, _)| s == "OFF") {
                    json!("OFF")
                } else {
                    Value::Null
                };
                let brightness =
                    known.iter().filter_map(|(_, b)| b.as_f64()).reduce(f64::max).map_or(Value::Null, |b| json!(b));
                check(&mut out, &format!("{topic} state"), &j["state"], &state);
                check(&mut out, &format!("{topic} brightness"), &j["brightness"], &brightness);
            }
        }
        devices.insert(
            network_object_id(id),
            DeviceWant { name: Some(truth["name"].as_str().unwrap().into()), mentions: network_mentions, under: None },
        );
    }

    // Discovery: one device config per bridge, network and unit; each names only live topics.
    for (oid, device) in &devices {
        let topic = format!("{PREFIX}/device/{oid}/config");
        want.insert(topic.clone());
        let Some(config) = json_at(r, &topic, &mut out) else { continue };
        if let Some(name) = &device.name
            && config["device"]["name"] != json!(name)
        {
            out.push(format!("{topic}: device name {} != {name:?}", config["device"]["name"]));
        }
        let mut named = Vec::new();
        referenced_topics(&config, None, &mut named);
        for t in &device.mentions {
            if !named.contains(t) {
                out.push(format!("{topic}: does not name {t}"));
            }
        }
        if let Some(u) = &device.under
            && !named.iter().any(|t| t == u || t.starts_with(&format!("{u}/")))
        {
            out.push(format!("{topic}: names nothing of {u}"));
        }
        for t in &named {
            let command = t.rsplit_once("/set/").is_some_and(|(unit, _)| referable.contains(&format!("{unit}/set")));
            if !want.contains(t) && !referable.contains(t) && !command {
                out.push(format!("{topic}: names {t}, which is not a live topic"));
            }
        }
    }

    // Exactly these retained topics, no stale ones.
    for (topic, payload) in r {
        let ours = topic.starts_with(&format!("{BASE}/")) || topic.starts_with(&format!("{PREFIX}/"));
        if ours && !want.contains(topic) {
            let shown: String = payload.chars().take(120).collect();
            out.push(format!("stale retained topic {topic} = {shown}"));
        }
    }
    for topic in &want {
        if !r.contains_key(topic) && !out.iter().any(|o| o.contains(topic.as_str())) {
            out.push(format!("missing {topic}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Cloud safety from the simulator's request log
// ---------------------------------------------------------------------------------------------

/// A login the service judged and refused (401 wrong credentials, 403 locked). 429 and 5xx are
/// answers without a judgement and do not count toward the lockout.
fn failed_login(r: &RequestRecord) -> bool {
    r.is_login() && matches!(r.status, 401 | 403)
}

fn check_login_safety(log: &[RequestRecord]) -> Vec<String> {
    let mut out = Vec::new();
    let mut by_email: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    for r in log.iter().filter(|r| failed_login(r)) {
        by_email.entry(r.login_email.clone().unwrap_or_default()).or_default().push(r.at);
    }
    for (email, times) in by_email {
        for (i, t) in times.iter().enumerate() {
            let within = times[i..].iter().take_while(|o| **o - *t < Duration::from_secs(60)).count();
            if within > 2 {
                out.push(format!("{within} failed logins of {email} within 60 s from {t:?}"));
            }
        }
    }
    if let Some(r) = log.iter().find(|r| r.status == 403) {
        out.push(format!("403 (lockout) on {} {} at {:?}", r.method, r.path, r.at));
    }
    out
}

/// The most requests in any rolling 60 s window, and when that window starts.
fn peak_per_minute(log: &[RequestRecord]) -> (usize, Duration) {
    let mut best = (0, Duration::ZERO);
    for (i, r) in log.iter().enumerate() {
        let within = log[i..].iter().take_while(|o| o.at - r.at < Duration::from_secs(60)).count();
        if within > best.0 {
            best = (within, r.at);
        }
    }
    best
}

/// After a 429 the client waits, and the waits between successive refusals of one exhaustion
/// grow: no hammering. Refusals less than 250 ms apart are one wave (requests already in
/// flight together).
fn check_backoff(log: &[RequestRecord], exhaustions: &[(Duration, Duration)]) -> Vec<String> {
    let mut out = Vec::new();
    for (start, length) in exhaustions {
        let end = *start + *length + Duration::from_millis(500);
        let refused: Vec<Duration> =
            log.iter().filter(|r| r.status == 429 && r.at >= *start && r.at <= end).map(|r| r.at).collect();
        let mut waves: Vec<Duration> = Vec::new();
        for at in refused {
            if waves.last().is_none_or(|w| at - *w > Duration::from_millis(250)) {
                waves.push(at);
            }
        }
        let gaps: Vec<Duration> = waves.windows(2).map(|w| w[1] - w[0]).collect();
        if gaps.windows(2).any(|g| g[1] + Duration::from_millis(100) < g[0]) {
            out.push(format!("waits after 429 shrink in the exhaustion at {start:?} ({length:?}): {gaps:?}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

fn config_yaml(sim: &Simulator, mqtt_url: &str, rpm: u32) -> String {
    format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: {KEY}\n  poll_interval: 2s\n  resync_interval: 15m\n  \
         max_requests_per_minute: {rpm}\n  max_concurrent_requests: 4\n  wire_ping_interval: 1s\n\
         networks:\n  - email: {EMAIL}\n    password: demo\n\
         mqtt:\n  url: {}\n  base_topic: {BASE}\n  client_id: chaos-bridge\n\
         homeassistant:\n  enabled: true\n  discovery_prefix: {PREFIX}\n\
         health:\n  listen: \"\"\n",
        sim.base_url(),
        sim.ws_url(),
        mqtt_url
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retained_state_converges_to_the_truth_after_chaos() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let p = Params::from_env();
    let mut sim_config = SimConfig::new(site());
    sim_config.activity_rate = p.rate;
    sim_config.seed = p.seed;
    let sim = Simulator::start_local(sim_config).await.unwrap();
    let mut broker = Mosquitto::start();
    let port = broker.port();
    // The bridge reaches the broker through a relay that can stall and cut the link.
    let relay = Relay::start(port).await;
    let config = config::parse(&config_yaml(&sim, &relay.url(), p.rpm), Vec::<(String, String)>::new()).unwrap();
    let shutdown = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel::<Running>();
    let task = tokio::spawn(app::run(config, shutdown.clone(), Some(tx)));
    let _running = rx.await.unwrap();

    // Up: every network published once.
    common::retained_until(port, Duration::from_secs(20), |r| {
        r.contains_key(&format!("{BASE}/home")) && r.contains_key(&format!("{BASE}/office"))
    })
    .await;

    // Chaos.
    let mut chaos = Chaos::new(&sim, &relay, p.seed);
    let started = Instant::now();
    let length = Duration::from_secs_f64(p.seconds);
    let mut restarts: Vec<Duration> =
        (1..=p.restarts).map(|i| length.mul_f64(i as f64 / (p.restarts as f64 + 0.5))).collect();
    restarts.reverse();
    let mut broker_restarts = 0;
    while started.elapsed() < length {
        tokio::time::sleep(Duration::from_millis(chaos.rng.random_range(150..900))).await;
        chaos.restore_gateways();
        chaos.cut_link();
        assert!(!task.is_finished(), "the bridge stopped during the chaos: {:?}", task.await);
        if restarts.last().is_some_and(|at| started.elapsed() >= *at) {
            restarts.pop();
            // Every other restart leaves the broker away for a moment.
            let down = if broker_restarts % 2 == 1 {
                Duration::from_millis(chaos.rng.random_range(500..3000))
            } else {
                Duration::ZERO
            };
            tokio::task::block_in_place(|| {
                broker.stop();
                std::thread::sleep(down);
                broker.restart();
            });
            broker_restarts += 1;
            let at = chaos.now();
            chaos.journal.push((at, format!("broker restarted (down {down:?})")));
            if restarts.is_empty() {
                // A restart wipes the retained store, and with it any stale topic: every kind of
                // fault once more after the last one.
                chaos.first_round = shuffled_kinds(&mut chaos.rng);
            }
            continue;
        }
        chaos.inject();
    }

    // Quiet: no activity, every gateway back; the retained state must settle to the truth.
    sim.shared().pause_activity(true);
    if chaos.link_cut_at.is_some() {
        chaos.link_cut_at = Some(Instant::now());
        chaos.cut_link();
    }
    for net in chaos.networks.clone() {
        sim.set_gateway(&net, true).unwrap();
    }
    chaos.gateway_back.clear();
    let quiet = Instant::now();
    if p.verbose {
        eprintln!("chaos: quiet from {}", chrono::Utc::now().format("%H:%M:%S%.3f"));
    }
    let mut stable_since: Option<Instant> = None;
    let converged = loop {
        let r = retained(port).await;
        let diff = differences(&sim, &r);
        if diff.is_empty() {
            // Equal twice, a second apart: settled, not passing through.
            match stable_since {
                Some(t) => break t.duration_since(quiet),
                None => stable_since = Some(Instant::now()),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        stable_since = None;
        if p.verbose {
            eprintln!(
                "chaos: {:.1} s after the chaos, {} differences:\n  {}",
                quiet.elapsed().as_secs_f64(),
                diff.len(),
                diff.join("\n  ")
            );
        }
        if quiet.elapsed() > p.settle {
            let journal: Vec<String> =
                chaos.journal.iter().rev().take(40).rev().map(|(at, w)| format!("  {at:>10.3?}  {w}")).collect();
            panic!(
                "the retained state did not converge within {:?} (seed {}):\n{}\n\nlast faults:\n{}",
                p.settle,
                p.seed,
                diff.join("\n"),
                journal.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(!task.is_finished(), "the bridge stopped: {:?}", task.await);

    // The cloud was treated with care all along.
    let mut log = sim.shared().log.requests();
    log.sort_by_key(|r| r.at);
    let problems = check_login_safety(&log);
    assert!(problems.is_empty(), "login safety:\n{}", problems.join("\n"));
    let (peak, peak_at) = peak_per_minute(&log);
    assert!(peak <= p.rpm as usize, "{peak} requests within 60 s from {peak_at:?}; the limit is {}", p.rpm);
    let problems = check_backoff(&log, &chaos.exhaustions);
    assert!(problems.is_empty(), "backoff after 429:\n{}", problems.join("\n"));

    let count = |f: &dyn Fn(&RequestRecord) -> bool| log.iter().filter(|r| f(r)).count();
    let faults: Vec<String> = chaos.tally.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let injected: usize = chaos.tally.values().sum();
    println!(
        "chaos: seed {}, {:.0} s at {} events/s: {}, {broker_restarts} broker restarts ({} faults, all survived); \
         converged in {:.1} s",
        p.seed,
        p.seconds,
        p.rate,
        faults.join(", "),
        injected + broker_restarts,
        converged.as_secs_f64()
    );
    println!(
        "chaos: {} REST requests (peak {peak} in 60 s, limit {}), {} logins ({} refused with 429/5xx, {} failed), \
         {} answered 429, {} answered 500",
        log.len(),
        p.rpm,
        count(&|r| r.is_login()),
        count(&|r| r.is_login() && (r.status == 429 || r.status >= 500)),
        count(&|r| failed_login(r)),
        count(&|r| r.status == 429),
        count(&|r| r.status == 500),
    );

    shutdown.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap().unwrap();
    assert_eq!(outcome, app::Outcome::Stopped);
}
