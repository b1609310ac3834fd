//! Clean-up of retained topics this bridge left behind in an earlier run: discovery configs of
//! units, scenes or groups that no longer exist (ghost entities in HA) and state topics under
//! the base topic that nothing publishes any more.
//!
//! A scan is a short-lived second connection (`<client_id>-scan`) that subscribes to the
//! discovery configs and to `<base>/#`: the broker then sends it every retained message there.
//! Each is tied to a scope — the bridge, or a network by id (discovery object ids start with the
//! network id) or by slug (state topics) — and judged as it arrives, so a scan holds nothing: on a
//! big site the broker sends hundreds of thousands of messages, nearly all of them wanted.
//! That is why a scan waits for the networks ([`Sweeper`]): a message of a network without its
//! first full view cannot be judged (the bridge cannot know yet what it will want, and a network
//! whose credentials fail keeps its topics), so it is let go and its scope noted; when that network
//! loads, another scan judges it.
//!
//! A second connection keeps the main one free of duplicate deliveries of command topics.

use super::client::{Client, ClientEvent, Events, Message};
use super::discovery::{self, ORIGIN_NAME};
use super::mirror::NetMirror;
use super::render::instance_object_id;
use super::settings::{Config, MqttSettings};
use super::topics::Layout;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Which part of the bridge a retained topic belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The bridge itself.
    Bridge,
    /// A network, by the `key` of its id (from a discovery object id).
    NetworkKey(String),
    /// A network, by its slug (from a state topic).
    NetworkSlug(String),
}

/// The scope of a retained message, or `None` when it is not this bridge's (another bridge
/// instance's own topics included).
pub fn scope_of(msg: &Message, layout: &Layout, prefix: Option<&str>) -> Option<Scope> {
    let base = layout.base();
    if let Some(rest) = msg.topic.strip_prefix(base).and_then(|r| r.strip_prefix('/')) {
        let first = rest.split('/').next().unwrap_or_default();
        return match first {
            "" => None,
            "bridge" => layout.owns_bridge_topic(&msg.topic)?.then_some(Scope::Bridge),
            net => Some(Scope::NetworkSlug(net.to_string())),
        };
    }
    let rest = msg.topic.strip_prefix(prefix?)?.strip_prefix('/')?;
    let mut levels = rest.split('/');
    let (Some(_), Some(object_id), Some("config"), None) = (levels.next(), levels.next(), levels.next(), levels.next())
    else {
        return None;
    };
    // The object id first: the payload is only parsed for configs that may be ours.
    let id = object_id.strip_prefix(ORIGIN_NAME)?.strip_prefix('_')?;
    let payload: serde_json::Value = serde_json::from_slice(&msg.payload).ok()?;
    if !discovery::is_ours(&payload, base) {
        return None;
    }
    let first = id.split('_').next().unwrap_or_default();
    if first == "bridge" || first.starts_with("bridge-") {
        // A bridge's own config: this one's, or another instance's on the same base topic.
        let own = instance_object_id(layout);
        let ours = object_id.strip_prefix(own.as_str()).is_some_and(|r| r.is_empty() || r.starts_with('_'));
        return ours.then_some(Scope::Bridge);
    }
    Some(Scope::NetworkKey(id.split('_').next().unwrap_or_default().to_string()))
}

/// The filters of the clean-up scans: the base topic and, with discovery, the configs.
pub fn scan_filters(config: &Config) -> Vec<String> {
    let mut f = vec![format!("{}/#", config.mqtt.base_topic)];
    if config.homeassistant.enabled {
        f.push(format!("{}/+/+/config", config.homeassistant.discovery_prefix));
    }
    f
}

/// The scopes of the loaded networks, which a scan can judge: each by its id's key and by its
/// slug.
pub fn loaded_scopes(nets: &BTreeMap<String, NetMirror>) -> HashSet<Scope> {
    nets.iter()
        .flat_map(|(id, mirror)| [Scope::NetworkKey(discovery::key(id)), Scope::NetworkSlug(mirror.slug.clone())])
        .collect()
}

/// Messages a scan's connection reads ahead of the judging: beyond, it waits (and the broker
/// with it). Unbounded, a scan of a big site's retained messages runs tens of thousands ahead,
/// tens of megabytes of messages held for nothing.
const SCAN_BACKLOG: usize = 256;

/// The longest a scan lasts, however busy the broker keeps it.
const SCAN_LIMIT: Duration = Duration::from_secs(120);

/// What [`Sweeper::next`] has.
#[derive(Debug)]
pub enum Scanned {
    /// A retained message to judge.
    Found(Message),
    /// A scan is over.
    Done,
}

/// One scan's connection.
struct Scan {
    client: Client,
    events: Events,
    task: JoinHandle<()>,
    subscribed: bool,
    /// Ends when no retained message came for the sweeper's `quiet` (reset by each).
    idle_until: Instant,
    /// Ends at the latest here.
    limit: Instant,
    /// Retained messages received.
    found: usize,
}

/// When to scan, the scan under way, and the scopes a scan could not judge. The publisher polls
/// [`Sweeper::next`] and judges what it returns; it tells the sweeper when it connects
/// ([`Sweeper::connected`]) and when a network has its first full view ([`Sweeper::loaded`]).
///
/// The first scan starts `delay` after the connection, pushed back by every network that loads
/// meanwhile, so that on a normal start-up it runs once, after the last network. A later scan runs
/// only for a network that loads after a scan saw its topics and could not judge them.
pub struct Sweeper {
    settings: MqttSettings,
    filters: Vec<String>,
    /// How long the sweeper waits for more networks (and the start-up's publications) before a
    /// scan.
    delay: Duration,
    /// How long a scan waits for more messages before it ends.
    quiet: Duration,
    /// When the next scan starts.
    due: Option<Instant>,
    /// Whether a scan has started (before, each loaded network pushes the first one back).
    started: bool,
    scan: Option<Scan>,
    /// Scopes of messages a scan let go because their network had not loaded.
    undecided: HashSet<Scope>,
    /// A scan found stale topics while the main connection was down: the next connection
    /// scans again.
    retry: bool,
    /// Stale topics cleared by the scan under way.
    cleared: usize,
}

impl Sweeper {
    /// A sweeper that scans `filters` over its own connection with `settings`.
    pub fn new(settings: MqttSettings, filters: Vec<String>, delay: Duration, quiet: Duration) -> Sweeper {
        Sweeper {
            settings,
            filters,
            delay,
            quiet,
            due: None,
            started: false,
            scan: None,
            undecided: HashSet::new(),
            retry: false,
            cleared: 0,
        }
    }

    /// The main connection is up: the first scan is planned; one that could not clear what it
    /// found (disconnected meanwhile) is planned again.
    pub fn connected(&mut self) {
        if !self.started || std::mem::take(&mut self.retry) {
            self.plan();
        }
    }

    /// A network has its first full view. Before the first scan it pushes the scan back; after,
    /// it calls for another scan when one could not judge its topics (after the scan under way,
    /// if any).
    pub fn loaded(&mut self, key: &str, slug: &str) {
        let seen = self.undecided.remove(&Scope::NetworkKey(key.to_string()))
            | self.undecided.remove(&Scope::NetworkSlug(slug.to_string()));
        if !self.started || seen {
            self.plan();
        }
    }

    /// A message of `scope` could not be judged: its network has not loaded.
    pub fn undecided(&mut self, scope: Scope) {
        self.undecided.insert(scope);
    }

    /// What the scan under way found could not all be cleared (the main connection is down):
    /// the next connection scans again.
    pub fn retry(&mut self) {
        self.retry = true;
    }

    /// The protocol version the main connection settled on, for the scans' connections.
    pub fn speak(&mut self, protocol: super::Protocol) {
        self.settings.protocol = protocol;
    }

    /// A stale topic was cleared.
    pub fn cleared(&mut self) {
        self.cleared += 1;
    }

    fn plan(&mut self) {
        self.due = Some(Instant::now() + self.delay);
    }

    /// The next retained message to judge, or the end of a scan. Waits for the next scan when
    /// none is under way (for ever when none is planned), and ends a scan once it is quiet.
    /// Cancel-safe: every state change happens between awaits.
    pub async fn next(&mut self) -> Scanned {
        loop {
            let Some(scan) = &mut self.scan else {
                match self.due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
                self.start();
                continue;
            };
            let end = scan.idle_until.min(scan.limit);
            tokio::select! {
                _ = tokio::time::sleep_until(end) => {
                    self.finish();
                    return Scanned::Done;
                }
                ev = scan.events.recv() => match ev {
                    Some(ClientEvent::Connected) if !scan.subscribed => {
                        // Nothing else is queued on this connection: the request goes out at
                        // once, without waiting (so the event is not lost to a cancellation).
                        scan.subscribed = scan.client.subscribe(&self.filters).await.is_ok();
                        // Quiet is counted from the subscription on.
                        scan.idle_until = Instant::now() + self.quiet;
                    }
                    Some(ClientEvent::Message(msg)) if msg.retain && !msg.payload.is_empty() => {
                        scan.found += 1;
                        scan.idle_until = Instant::now() + self.quiet;
                        return Scanned::Found(msg);
                    }
                    Some(_) => {}
                    None => {
                        self.finish();
                        return Scanned::Done;
                    }
                },
            }
        }
    }

    /// Opens a scan's connection.
    fn start(&mut self) {
        self.due = None;
        self.started = true;
        self.cleared = 0;
        let id = format!("{}-scan", self.settings.client_id);
        match Client::start_paced(&self.settings, &id, super::client::QUIET_INFLIGHT, SCAN_BACKLOG) {
            Ok((client, events, task)) => {
                let now = Instant::now();
                self.scan = Some(Scan {
                    client,
                    events,
                    task,
                    subscribed: false,
                    idle_until: now + self.quiet,
                    limit: now + SCAN_LIMIT,
                    found: 0,
                });
            }
            Err(e) => tracing::warn!(error = %e, "cannot scan for stale retained topics"),
        }
    }

    /// Closes the scan under way (in the background).
    fn finish(&mut self) {
        let Some(scan) = self.scan.take() else { return };
        tracing::debug!(found = scan.found, "scan for stale retained topics done");
        if self.cleared > 0 {
            tracing::info!(count = self.cleared, "cleared retained topics left by an earlier run");
        }
        tokio::spawn(async move {
            let _ = scan.client.disconnect().await;
            let _ = tokio::time::timeout(Duration::from_secs(2), scan.task).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(topic: &str, payload: &str) -> Message {
        Message { topic: topic.into(), payload: payload.as_bytes().to_vec(), retain: true }
    }

    #[test]
    fn scopes() {
        let p = Some("homeassistant");
        let casambi = &Layout::new("casambi");
        assert_eq!(scope_of(&msg("casambi/bridge/info", "{}"), casambi, p), Some(Scope::Bridge));
        assert_eq!(scope_of(&msg("casambi/home/unit/x", "{}"), casambi, p), Some(Scope::NetworkSlug("home".into())));
        let ours = r#"{"origin":{"name":"casambi2mqtt"},"cmps":{"a":{"state_topic":"casambi/home/unit/x"}}}"#;
        assert_eq!(
            scope_of(&msg("homeassistant/device/casambi2mqtt_abc123_d0c0ffee0001/config", ours), casambi, p),
            Some(Scope::NetworkKey("abc123".into()))
        );
        assert_eq!(
            scope_of(&msg("homeassistant/light/casambi2mqtt_abc123_d0c0ffee0001_light/config", ours), casambi, p),
            Some(Scope::NetworkKey("abc123".into()))
        );
        // Another bridge's base topic, or another origin: not ours.
        assert_eq!(
            scope_of(&msg("homeassistant/device/casambi2mqtt_abc/config", ours), &Layout::new("other"), p),
            None
        );
        let theirs = r#"{"origin":{"name":"zigbee2mqtt"},"state_topic":"casambi/x"}"#;
        assert_eq!(scope_of(&msg("homeassistant/device/casambi2mqtt_abc/config", theirs), casambi, p), None);
        // A device trigger carries no origin: its object id and event topic mark it.
        let trigger = r#"{"automation_type":"trigger","topic":"casambi/home/unit/x/event","type":"t","subtype":"s"}"#;
        let topic = "homeassistant/device_automation/casambi2mqtt_abc123_d0c0ffee0006_trigger/config";
        assert_eq!(scope_of(&msg(topic, trigger), casambi, p), Some(Scope::NetworkKey("abc123".into())));
        assert_eq!(scope_of(&msg(topic, trigger), &Layout::new("other"), p), None);
        assert_eq!(scope_of(&msg("homeassistant/device_automation/z2m_trigger/config", trigger), casambi, p), None);
    }

    #[test]
    fn instances_on_one_base_topic_leave_each_other_alone() {
        let p = Some("homeassistant");
        let settings = |id: &str| MqttSettings { client_id: id.into(), instance_topics: true, ..Default::default() };
        let (alone, east, west) =
            (Layout::new("casambi"), Layout::of(&settings("east")), Layout::of(&settings("west")));
        let config = |l: &Layout| {
            let topic = l.bridge_state();
            (
                format!("homeassistant/device/{}/config", instance_object_id(l)),
                format!(r#"{{"origin":{{"name":"casambi2mqtt"}},"cmps":{{"c":{{"state_topic":"{topic}"}}}}}}"#),
            )
        };
        let component = |l: &Layout| format!("homeassistant/sensor/{}_version/config", instance_object_id(l));
        for (mine, others) in [(&alone, [&east, &west]), (&east, [&alone, &west]), (&west, [&alone, &east])] {
            let (topic, payload) = config(mine);
            assert_eq!(scope_of(&msg(&topic, &payload), mine, p), Some(Scope::Bridge), "{topic}");
            assert_eq!(scope_of(&msg(&component(mine), &payload), mine, p), Some(Scope::Bridge));
            assert_eq!(scope_of(&msg(&mine.bridge_info(), "{}"), mine, p), Some(Scope::Bridge));
            for other in others {
                let (topic, payload) = config(other);
                assert_eq!(scope_of(&msg(&topic, &payload), mine, p), None, "{topic} judged by {mine:?}");
                assert_eq!(scope_of(&msg(&component(other), &payload), mine, p), None);
                assert_eq!(scope_of(&msg(&other.bridge_state(), "online"), mine, p), None);
            }
        }
    }
}
