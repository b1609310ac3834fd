//! Fault injection for the chaos test: the weighted draw of faults against the simulator, and
//! the relay between the bridge and the broker that can stall and cut the MQTT link.

use super::*;

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
pub(super) fn shuffled_kinds(rng: &mut SmallRng) -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = KINDS.iter().map(|(k, _)| *k).collect();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.random_range(0..=i));
    }
    kinds
}

pub(super) struct Chaos<'a> {
    sim: &'a Simulator,
    relay: &'a Relay,
    /// A stalled MQTT link, and when it is cut.
    pub(super) link_cut_at: Option<Instant>,
    pub(super) rng: SmallRng,
    pub(super) networks: Vec<String>,
    templates: Vec<Unit>,
    next_unit: i64,
    next_name: u32,
    pub(super) tally: BTreeMap<&'static str, usize>,
    pub(super) journal: Vec<(Duration, String)>,
    /// Gateways taken offline, and when they come back.
    pub(super) gateway_back: BTreeMap<String, Instant>,
    /// The running quota exhaustion, if any.
    quota_until: Option<Instant>,
    /// Exhaustions as (start, length), in simulator time (the request log's clock).
    pub(super) exhaustions: Vec<(Duration, Duration)>,
    /// Kinds still to inject before the weighted draw resumes: every kind once at the start and
    /// after the last broker restart (so even a short run sees each of them).
    pub(super) first_round: Vec<&'static str>,
}

impl<'a> Chaos<'a> {
    pub(super) fn new(sim: &'a Simulator, relay: &'a Relay, seed: u64) -> Chaos<'a> {
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

    pub(super) fn now(&self) -> Duration {
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
    pub(super) fn restore_gateways(&mut self) {
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
    pub(super) fn inject(&mut self) {
        let kind = self.draw();
        self.inject_kind(kind);
    }

    /// Cuts a stalled MQTT link when its time has come.
    pub(super) fn cut_link(&mut self) {
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
pub(super) struct Relay {
    port: u16,
    stalled: Arc<watch::Sender<bool>>,
    cut: Arc<Mutex<CancellationToken>>,
}

impl Relay {
    pub(super) async fn start(broker_port: u16) -> Relay {
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

    pub(super) fn url(&self) -> String {
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
