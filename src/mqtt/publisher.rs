//! The publisher: consumes the bridge core's [`Update`]s and keeps the broker in the state the
//! contract describes.
//!
//! It keeps a mirror of every network, renders the retained topics wanted for it, and publishes
//! only what changed. After every (re)connection it subscribes again and republishes everything
//! retained (the broker may have restarted without persistence); after Home Assistant's birth
//! message it republishes discovery, availability and state after a short random delay, so a
//! restarted HA never leaves entities unavailable. Events and problems are published
//! non-retained. While the connection is down nothing is sent: the next connection republishes
//! the current truth instead of a stale queue. Problems are the exception: the last
//! [`HELD_ERRORS`] raised while disconnected (typically at start-up, before the first connection:
//! rejected credentials, an unreachable network) are published on `bridge/error` once connected,
//! with the time they were raised.

mod connection;
mod data_queue;
mod inbox;
mod notices;
mod owed_attributes;
mod send;

use data_queue::{DATA_DELAY, DataQueue};
use owed_attributes::OwedAttributes;
use send::{Batch, publications};

use super::client::{Client, ClientEvent, Events, Message};
use super::command_intake::{self as intake, Intake, ResolvedCommand};
use super::devices;
use super::discovery;
use super::gc::{self, Scope};
use super::mirror::NetMirror;
use super::mirror::photos::{PhotoRef, PhotoSet};
use super::plan;
use super::render::Renderer;
use super::settings::{Config, DiscoveryMode};
use super::state_text::StateText;
use super::store::{Op, StaleCheck, Store};
use super::store::{Owner, Topics};
use crate::bridge::state::UnitEvent;
use crate::bridge::update::Update;
use crate::cloud::model::Control;
use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Problems kept while disconnected; older ones are dropped first.
pub const HELD_ERRORS: usize = 32;
/// Owners rendered and handed to the client together when a whole network is published: a
/// network's operations are never held all at once (every unit brings many topics and
/// payloads), only those of a few owners. The order of the topics is the same.
const OWNERS_PER_SEND: usize = 16;

/// Timings of the publisher; the defaults suit production, tests shorten them.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// How long the clean-up scan for retained topics of an earlier run waits after the
    /// connection and after the latest network to load before it starts ([`gc::Sweeper`]).
    pub scan_delay: Duration,
    /// How long that scan waits for more retained messages before it ends.
    pub scan: Duration,
    /// Shortest delay before republishing after HA's birth message.
    pub birth_delay_min: Duration,
    /// Longest such delay (the delay is random in between, to spread the load of many bridges).
    pub birth_delay_max: Duration,
    /// How long shutdown waits for the `offline` message and DISCONNECT to go out.
    pub shutdown_grace: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            scan_delay: Duration::from_secs(10),
            scan: Duration::from_secs(2),
            birth_delay_min: Duration::from_millis(500),
            birth_delay_max: Duration::from_millis(3000),
            shutdown_grace: Duration::from_secs(3),
        }
    }
}

/// How late the bridge's info may be while updates keep coming ([`Publisher::bridge_stale`]).
const BRIDGE_INFO_DELAY: Duration = Duration::from_secs(1);
/// How late a group's JSON may be while updates keep coming ([`Publisher::groups_stale`]).
const GROUP_DELAY: Duration = Duration::from_millis(20);

/// The publishing side of the MQTT layer (owned by [`super::run`]'s task).
pub(crate) struct Publisher {
    config: Config,
    renderer: Renderer,
    client: Client,
    store: Store,
    /// The reused buffer of state payloads (see [`StateText`]).
    text: StateText,
    nets: BTreeMap<String, NetMirror>,
    connected: bool,
    started_at: DateTime<Utc>,
    commands: mpsc::Sender<ResolvedCommand>,
    /// The scans for retained topics of earlier runs.
    sweeper: gc::Sweeper,
    /// The scopes of loaded networks, for judging what a scan finds (`None`: to be worked out
    /// again, after the networks or their slugs changed).
    scopes: Option<HashSet<Scope>>,
    /// The index the scan under way judges its topics with (dropped when the scan ends).
    stale_check: Option<StaleCheck>,
    tuning: Tuning,
    birth_at: Option<Instant>,
    /// `bridge/error` payloads raised while disconnected, sent on the next connection.
    held_errors: VecDeque<Value>,
    /// Since when the bridge's info is out of date. It lists every network, so it is rendered
    /// once the updates waiting are all taken in, not after each: rendered after each, a
    /// start-up of many networks would render it twice per network, each longer than the last.
    /// Under a load that never lets the queue empty, at most [`BRIDGE_INFO_DELAY`] late.
    bridge_stale: Option<Instant>,
    /// Since when some network has stale groups ([`NetMirror::stale_groups`]). They are rendered
    /// once the updates waiting are all taken in: a scene moving 250 units of 25 groups renders
    /// 25 group JSONs, not 250, and publishes none of the values the groups pass through on the
    /// way. Under a load that never lets the queue empty, at most [`GROUP_DELAY`] late.
    groups_stale: Option<Instant>,
    /// The `devices:` keys already warned of as matching nothing.
    devices_warned: HashSet<String>,
    /// Units whose new datapoints are taken in but not yet published ([`DataQueue`]).
    data: DataQueue,
    /// Units whose attribute topics a whole render left for later ([`OwedAttributes`]).
    owed: OwedAttributes,
}

impl Publisher {
    pub(crate) fn new(
        config: Config,
        client: Client,
        commands: mpsc::Sender<ResolvedCommand>,
        tuning: Tuning,
    ) -> Publisher {
        let renderer = Renderer::of(&config);
        let filters = gc::scan_filters(&config);
        let config_scan = config.mqtt.clone();
        let mut p = Publisher {
            config,
            renderer,
            client,
            store: Store::default(),
            text: StateText::default(),
            nets: BTreeMap::new(),
            connected: false,
            started_at: Utc::now(),
            commands,
            sweeper: gc::Sweeper::new(config_scan, filters, tuning.scan_delay, tuning.scan),
            scopes: None,
            stale_check: None,
            tuning,
            birth_at: None,
            held_errors: VecDeque::new(),
            bridge_stale: None,
            groups_stale: None,
            devices_warned: HashSet::new(),
            data: DataQueue::default(),
            owed: OwedAttributes::default(),
        };
        let topics = p.renderer.bridge(&p.info());
        let _ = p.store.set(Owner::Bridge, topics);
        p
    }

    /// Runs until `shutdown` or until the update stream ends; then publishes `offline` and
    /// disconnects. Returns whether it was connected then (whether those went anywhere).
    pub(crate) async fn run(
        mut self,
        updates: super::Updates,
        mut events: Events,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> bool {
        let super::Updates { rx: mut updates, mut observer } = updates;
        loop {
            let birth = self.birth_at;
            tokio::select! {
                _ = shutdown.cancelled() => break,
                u = updates.recv() => match u {
                    Some(u) => {
                        if let Some(observe) = &mut observer {
                            observe(&u);
                        }
                        if matches!(u, Update::Unit { .. } | Update::Status { .. } | Update::Event { .. }) {
                            self.data.live_change();
                        }
                        self.on_update(u).await;
                    }
                    None => {
                        tracing::debug!("update stream ended");
                        break;
                    }
                },
                ev = events.recv() => match ev {
                    Some(ClientEvent::Connected) => self.on_connected().await,
                    Some(ClientEvent::Disconnected) => self.connected = false,
                    Some(ClientEvent::Message(msg)) => self.on_message(msg).await,
                    None => {
                        tracing::error!("the MQTT event loop stopped unexpectedly");
                        break;
                    }
                },
                s = self.sweeper.next() => match s {
                    gc::Scanned::Found(msg) => self.judge_scanned(msg).await,
                    gc::Scanned::Done => self.stale_check = None,
                },
                () = std::future::ready(()), if due(self.groups_stale, &updates, GROUP_DELAY) => self.render_groups().await,
                () = std::future::ready(()), if due(self.bridge_stale, &updates, BRIDGE_INFO_DELAY) => self.render_bridge().await,
                () = tokio::time::sleep_until(self.data.next_at()), if self.owed.since().is_none() && due(self.data.since(), &updates, DATA_DELAY) => {
                    self.render_data().await;
                }
                () = std::future::ready(()), if due(self.owed.since(), &updates, DATA_DELAY) => self.render_owed().await,
                _ = tokio::time::sleep_until(birth.unwrap_or_else(Instant::now)), if birth.is_some() => {
                    self.birth_at = None;
                    tracing::info!("republishing discovery and state after Home Assistant's birth message");
                    self.republish().await;
                }
            }
        }
        // The last member changes taken in still owe their groups' JSON.
        self.render_groups().await;
        self.stop().await;
        self.connected
    }

    async fn on_update(&mut self, update: Update) {
        match update {
            Update::Network { view, .. } => {
                let id = view.status.id.clone();
                let first = !self.nets.contains_key(&id);
                let view = std::sync::Arc::unwrap_or_clone(view);
                let (slug, key_slug) =
                    self.nets.get(&id).map(|mirror| (mirror.slug.clone(), mirror.key_slug.clone())).unwrap_or_default();
                // The discovery configs this network had, for HA's removal steps (the store
                // keeps no payloads).
                let old = self.nets.get(&id).map(|mirror| self.device_configs(mirror)).unwrap_or_default();
                // Photos and datapoints come apart from the view ([`Update::Photos`],
                // [`Update::Datapoints`]) and stay until replaced: moved from the mirror the new
                // one replaces.
                let (photos, data) = self
                    .nets
                    .get_mut(&id)
                    .map(|mirror| (mirror.photos.clone(), std::mem::take(&mut mirror.data)))
                    .unwrap_or_default();
                let devices = self.config.devices.clone();
                let mut mirror = NetMirror::with_devices(view, slug, key_slug, devices);
                mirror.photos = photos;
                mirror.data = data;
                self.nets.insert(id.clone(), mirror);
                self.reslug_networks(Some(&id), &old).await;
                if first && let Some(mirror) = self.nets.get(&id) {
                    self.sweeper.loaded(&discovery::key(&id), &mirror.slug);
                }
            }
            Update::Status { network, status } => {
                let Some(mirror) = self.nets.get_mut(&*network) else {
                    tracing::debug!(%network, "status of an unknown network");
                    return;
                };
                let renamed = mirror.view.status.name != status.name;
                let availability_changed = mirror.view.status.available() != status.available();
                mirror.view.status = *status;
                if renamed {
                    self.reslug_networks(Some(&network), &[]).await;
                } else {
                    let ops =
                        plan::status_ops(&self.renderer, &mut self.store, mirror, &mut self.text, availability_changed);
                    self.send(ops, Batch::Change).await;
                    self.bridge_stale.get_or_insert_with(Instant::now);
                }
            }
            Update::Unit { network, unit } => {
                let Some(mirror) = self.nets.get_mut(&*network) else {
                    tracing::debug!(%network, unit = unit.id, "unit of an unknown network");
                    return;
                };
                let ops = plan::unit_ops(&self.renderer, &mut self.store, mirror, &mut self.text, unit);
                if !mirror.stale_groups.is_empty() {
                    self.groups_stale.get_or_insert_with(Instant::now);
                }
                self.send(ops, Batch::Change).await;
            }
            Update::Photos { network, photos } => self.photos_changed(&network, photos).await,
            Update::Datapoints { network, points } => self.datapoints_changed(&network, &points),
            Update::Event { network, unit, event, at } => self.publish_event(&network, unit, event, at).await,
            Update::Problem { network, message } => {
                let topic = network
                    .as_deref()
                    .and_then(|n| self.nets.get(n))
                    .map(|mirror| self.renderer.layout.network(&mirror.slug));
                self.publish_error(notices::error_payload(topic.as_deref(), network.as_deref(), &message)).await;
            }
            Update::Rejected { network, topic, reason } => {
                self.publish_error(notices::error_payload(Some(&topic), network.as_deref(), &reason)).await;
            }
        }
    }

    /// Recomputes the network slugs (site-wide unique, `bridge` reserved) and re-renders every
    /// network whose slug changed, plus `force` (and the bridge info).
    /// `previous`: device configs as they were before the change (for HA's removal steps).
    async fn reslug_networks(&mut self, force: Option<&str>, previous: &[(String, String)]) {
        self.scopes = None;
        let devices = self.config.devices.clone();
        let names = self.nets.values().map(|mirror| (mirror.view.status.id.clone(), mirror.view.status.name.clone()));
        let slugs = devices::network_slugs(&devices, names.collect());
        let mut changed = Vec::new();
        for (id, (slug, key_slug)) in slugs {
            if let Some(mirror) = self.nets.get_mut(&id)
                && (mirror.slug != slug || mirror.key_slug != key_slug || force == Some(id.as_str()))
            {
                mirror.slug = slug;
                mirror.key_slug = key_slug;
                if !devices.is_empty() {
                    // The settings of units, groups and scenes are matched by the network's slug.
                    mirror.reslug();
                }
                changed.push(id);
            }
        }
        for id in changed {
            self.render_network(&id, previous).await;
        }
        if !devices.is_empty() {
            let loaded: Vec<(&str, &devices::Resolved)> =
                self.nets.values().map(|mirror| (mirror.key_slug.as_str(), &mirror.settings)).collect();
            for key in devices::unmatched(&devices, &loaded) {
                if self.devices_warned.insert(key.to_string()) {
                    tracing::warn!(key, "devices: this key matches no unit, group, scene or network (loaded so far)");
                }
            }
            for unit in self.nets.values().flat_map(NetMirror::switches_refused) {
                if self.devices_warned.insert(unit.clone()) {
                    tracing::warn!(%unit, "devices: platform switch is for on/off units; this one dims, so it stays a light");
                }
            }
        }
        self.bridge_stale.get_or_insert_with(Instant::now);
    }

    /// Renders the stale groups of every network ([`Publisher::groups_stale`]).
    async fn render_groups(&mut self) {
        if self.groups_stale.take().is_none() {
            return;
        }
        let mut ops = Vec::new();
        for mirror in self.nets.values_mut().filter(|mirror| !mirror.stale_groups.is_empty()) {
            ops.extend(plan::stale_group_ops(&self.renderer, &mut self.store, mirror, &mut self.text));
        }
        self.send(ops, Batch::Change).await;
    }

    async fn render_bridge(&mut self) {
        self.bridge_stale = None;
        let topics = self.renderer.bridge(&self.info());
        let ops = self.store.set(Owner::Bridge, topics);
        self.send(ops, Batch::Change).await;
    }

    /// Renders every owner of a network, [`OWNERS_PER_SEND`] at a time; owners that no longer
    /// exist lose their topics. A device config among `previous` that was published is handed on
    /// as the text replaced.
    async fn render_network(&mut self, network: &str, previous: &[(String, String)]) {
        // Rendered whole, with the latest datapoints: none of its units waits any more.
        self.data.forget_network(network);
        let Some(owners) = self.nets.get(network).map(NetMirror::owners) else { return };
        let mut owed = Vec::new();
        for chunk in owners.chunks(OWNERS_PER_SEND) {
            let Some(mirror) = self.nets.get(network) else { return };
            let mut ops = plan::owner_ops_owing(&self.renderer, &mut self.store, mirror, chunk, &mut owed);
            plan::attach_previous(&self.store, &mut ops, previous);
            self.send(ops, Batch::Snapshot).await;
        }
        if let Some(mirror) = self.nets.get(network) {
            self.owed.push(&mirror.key, &owed);
        }
        let gone = plan::removed_ops(&mut self.store, network, &owners);
        self.send(gone, Batch::Snapshot).await;
    }

    /// Replaces a network's photos and publishes what changed: its own topics and device only
    /// (the photos' topics and image entities belong to the network).
    async fn photos_changed(&mut self, network: &str, photos: std::sync::Arc<[crate::bridge::photos::NetPhoto]>) {
        let Some(mirror) = self.nets.get(network) else {
            tracing::debug!(%network, "photos of an unknown network");
            return;
        };
        // Only the network's own device changes: its configs alone, not its units' too.
        let old: Topics = match self.device_prefix() {
            Some(prefix) => self.renderer.network(mirror).into_iter().filter(|(t, _)| t.starts_with(&prefix)).collect(),
            None => Vec::new(),
        };
        let Some(mirror) = self.nets.get_mut(network) else { return };
        mirror.photos = PhotoSet::new(photos);
        let mut ops = plan::owner_ops(&self.renderer, &mut self.store, mirror, &[Owner::Network(mirror.key.clone())]);
        plan::attach_previous(&self.store, &mut ops, &old);
        self.send(ops, Batch::Change).await;
    }

    /// Takes in new datapoints of a network and queues the units whose latest values changed, to
    /// be published a few at a time between live updates ([`Publisher::render_data`]). A unit the
    /// mirror does not know yet keeps its data for when it appears.
    fn datapoints_changed(&mut self, network: &str, points: &[crate::cloud::datapoints::Datapoint]) {
        let Some(mirror) = self.nets.get_mut(network) else {
            tracing::debug!(%network, "datapoints of an unknown network");
            return;
        };
        for id in mirror.data.take(points) {
            if mirror.view.units.contains_key(&id) {
                self.data.push(mirror.key.clone(), id);
            }
        }
    }

    /// Publishes the next few units of [`Publisher::data`]: their data topics, and their device
    /// configs when a key with a sensor is new.
    async fn render_data(&mut self) {
        let Some((network, units)) = self.data.next_turn() else { return };
        let Some(mirror) = self.nets.get(&*network) else { return };
        let ops = plan::data_ops(&self.renderer, &mut self.store, mirror, &units);
        self.send(ops, Batch::Change).await;
    }

    /// Publishes the attribute topics of the next few units a whole render left for later.
    async fn render_owed(&mut self) {
        let Some((network, units)) = self.owed.next_turn() else { return };
        let Some(mirror) = self.nets.get(&*network) else { return };
        let ops = plan::attribute_ops(&self.renderer, mirror, &units, &mut self.text);
        self.send(ops, Batch::Snapshot).await;
    }

    /// The device discovery configs of `mirror`'s network and units (empty unless discovery is per
    /// device); groups and scenes are components of the network's device.
    fn device_configs(&self, mirror: &NetMirror) -> Topics {
        let Some(prefix) = self.device_prefix() else { return Vec::new() };
        let units = mirror.view.units.keys().flat_map(|id| self.renderer.unit_discovery(mirror, *id));
        self.renderer.network(mirror).into_iter().chain(units).filter(|(t, _)| t.starts_with(prefix.as_str())).collect()
    }

    /// `<discovery prefix>/device/`, when discovery is on and per device.
    fn device_prefix(&self) -> Option<String> {
        self.renderer
            .discovery
            .as_ref()
            .filter(|d| d.mode == DiscoveryMode::Device)
            .map(|d| format!("{}/device/", d.prefix))
    }
}

/// Whether something stale since `since` is to be rendered now: no update is waiting, or it has
/// waited `delay`.
fn due(since: Option<Instant>, updates: &mpsc::Receiver<Update>, delay: Duration) -> bool {
    since.is_some_and(|since| updates.is_empty() || since.elapsed() >= delay)
}

#[cfg(test)]
#[path = "publisher_tests.rs"]
mod tests;
