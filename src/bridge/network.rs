//! The supervisor of one network: start-up snapshot, live events while the wire is up, REST
//! polling of `/state` while it is down, a periodic resync, session renewal, and the debounced
//! `/state` refresh that brings `activeScenes` (which only comes over REST).
//!
//! It owns the network's [`NetworkView`] and is the only writer of it; what changed goes out as
//! [`Update`]s on a bounded queue (a slow consumer slows the supervisor, it never grows memory).

use super::fixtures::FixtureCache;
use super::session_source::{Session, SessionSource};
use super::startup_gate::{SnapshotToken, StartupGate};
use super::state::{Connection, NetworkView};
use super::update::Update;
use crate::cloud::CloudError;
use crate::cloud::backoff::BackoffPolicy;
use crate::cloud::channel::{ChannelError, EventChannel, WireEvent};
use crate::cloud::datapoints::Fetcher;
use crate::cloud::model::{ClientMessage, OptU32, Secret, ServerMessage, WireStatusKind};
use crate::cloud::rest::RestClient;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

mod snapshot;

/// Timing of a supervisor.
#[derive(Debug, Clone)]
pub struct Timing {
    /// REST polling of `/state` while the wire is down.
    pub poll_interval: Duration,
    /// Full REST resync while the wire is up.
    pub resync_interval: Duration,
    /// Delay of the `/state` refresh after a scene change (debounced: repeated triggers within
    /// the delay move it, up to three delays after the first).
    pub scene_refresh_delay: Duration,
    /// After a wire opens, the service resends every unit; switch reports in this window are
    /// resync, not presses.
    pub burst_window: Duration,
    /// How long to wait before reopening a wire the service refused for a reason other than the
    /// session.
    pub reopen_delay: Duration,
    /// The logged datapoints each network fetches (`None`: none).
    pub datapoints: Option<crate::bridge::datapoints::Job>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            poll_interval: Duration::from_secs(10),
            resync_interval: Duration::from_secs(15 * 60),
            scene_refresh_delay: Duration::from_secs(1),
            burst_window: Duration::from_secs(2),
            reopen_delay: Duration::from_secs(30),
            datapoints: None,
        }
    }
}

/// Wire events (parsed frames) queued between the event channel and this network's supervisor.
/// Bounded: when the supervisor (or, behind it, the MQTT side) is slower than the socket, the
/// channel task waits on this queue and stops reading the socket, so TCP flow control slows the
/// service down instead of memory growing. At most this many parsed frames (each under
/// [`crate::cloud::channel::MAX_FRAME_BYTES`]) wait per network.
pub const WIRE_QUEUE: usize = 1024;

/// Pages of datapoints queued between a network's datapoint fetch and the update stream. Small:
/// a page holds up to 10,000 points, and a full queue only pauses the fetch
/// ([`crate::bridge::datapoints`]).
const DATAPOINT_PAGES: usize = 2;

/// A message for the network's wire, built once the wire number is known, with the answer
/// channel of the caller (commands from MQTT).
pub struct Outgoing {
    /// Builds the message for the wire number.
    pub build: Box<dyn FnOnce(u32) -> ClientMessage + Send>,
    /// Refresh `/state` afterwards (scene and network commands change `activeScenes`).
    pub refresh_after: bool,
    /// Told whether the message went out.
    pub done: oneshot::Sender<Result<(), ChannelError>>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing").field("refresh_after", &self.refresh_after).finish_non_exhaustive()
    }
}

/// Everything a supervisor needs; built by [`super::Bridge`].
pub struct Supervisor {
    /// Network id.
    pub id: Arc<str>,
    /// REST client of the network's API key.
    pub rest: RestClient,
    /// Where the network's session comes from (network or user session).
    pub sessions: SessionSource,
    /// The event channel of the API key.
    pub channel: EventChannel,
    /// Fixture cache shared by all networks.
    pub fixtures: Arc<FixtureCache>,
    /// Where changes go.
    pub updates: mpsc::Sender<Update>,
    /// Messages to send on the wire.
    pub outgoing: mpsc::Receiver<Outgoing>,
    /// Requests to fetch the network again ([`super::Bridge::reload`]).
    pub reload: mpsc::Receiver<()>,
    /// Timing.
    pub timing: Timing,
    /// Retry schedule for REST failures.
    pub backoff: BackoffPolicy,
    /// Background work (photos, datapoints) waits for it.
    pub gate: StartupGate,
    /// Handed in once the start-up snapshot is there.
    pub snapshot: SnapshotToken,
}

/// How a poll ended.
enum Polled {
    Done,
    /// A wire event came first; the poll was abandoned.
    Interrupted(Box<WireEvent>),
    /// The wire channel is gone (shutdown).
    WireGone,
}

/// The supervised network: its view, and the supervisor's bookkeeping of its wire, its refreshes
/// and its fixtures.
struct SupervisedNetwork {
    view: NetworkView,
    wire_tx: mpsc::Sender<WireEvent>,
    burst_until: Instant,
    scene_refresh: Option<(Instant, Instant)>,
    reopen_at: Option<Instant>,
    wire_live: bool,
    /// Generation of the session the wire was opened with; a refusal of it renews only if no
    /// newer session exists (a REST 410 may have renewed it meanwhile).
    wire_generation: u64,
    /// Fixture ids already looked up (found or not), so a missing fixture is not asked again.
    fixtures_asked: std::collections::BTreeSet<u32>,
    /// The revision the photos were last fetched for (`None`: not fetched yet).
    photos_revision: Option<Option<u64>>,
    /// The photo fetch running, if any ([`super::photo_fetch`]).
    photo_fetch: Option<tokio::task::AbortHandle>,
    /// The periodic datapoint fetch, once started ([`crate::bridge::datapoints`]).
    datapoints: Option<tokio::task::AbortHandle>,
}

impl Supervisor {
    /// Runs until `shutdown`; never returns an error (failures are retried and reported as
    /// [`Update::Problem`]s and connection states).
    pub async fn run(mut self, shutdown: CancellationToken) {
        let (wire_tx, mut wire_rx) = mpsc::channel(WIRE_QUEUE);
        let mut net = SupervisedNetwork {
            view: NetworkView::new(&self.id),
            wire_tx,
            burst_until: Instant::now(),
            scene_refresh: None,
            reopen_at: None,
            wire_live: false,
            fixtures_asked: Default::default(),
            wire_generation: 0,
            photos_revision: None,
            photo_fetch: None,
            datapoints: None,
        };
        // Start-up snapshot, retried until it works.
        let mut backoff = self.backoff.backoff();
        loop {
            match self.snapshot(&mut net, true).await {
                Ok(()) => break,
                Err(e) => {
                    self.report_rest_failure(&mut net, &e).await;
                    let delay = backoff.next_delay(Some(&e)).unwrap_or(self.timing.poll_interval);
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = sleep(delay) => {}
                    }
                }
            }
        }
        self.snapshot.done();
        net.datapoints = self.spawn_datapoints(&shutdown);
        self.open_wire(&mut net).await;

        let start = Instant::now();
        let mut poll = interval_at(start + self.timing.poll_interval, self.timing.poll_interval);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut resync = interval_at(start + self.timing.resync_interval, self.timing.resync_interval);
        resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let far = Duration::from_secs(365 * 24 * 3600);
        let mut commands_open = true;
        let mut reloads_open = true;
        loop {
            let refresh_at = net.scene_refresh.map_or(Instant::now() + far, |(at, _)| at);
            let reopen_at = net.reopen_at.unwrap_or(Instant::now() + far);
            // Biased: shutdown first, then wire events and commands, then timers. A poll waits
            // for a quota slot, and with a tight quota its tick is ready again at once; taken at
            // random, ticks could keep a wire's `Opened` waiting for many polls.
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                event = wire_rx.recv() => {
                    let Some(event) = event else { break };
                    self.on_wire(&mut net, event).await.apply(&mut poll);
                }
                out = self.outgoing.recv(), if commands_open => {
                    // Without senders (the bridge handle is gone) the branch would be ready forever.
                    let Some(out) = out else { commands_open = false; continue };
                    let result = self.channel.send(&self.id, out.build).await;
                    if result.is_ok() && out.refresh_after {
                        schedule_refresh(&mut net, self.timing.scene_refresh_delay);
                    }
                    let _ = out.done.send(result);
                }
                reload = self.reload.recv(), if reloads_open => {
                    if reload.is_none() {
                        reloads_open = false;
                        continue;
                    }
                    // The configuration too: a reload is asked for when names or members seem
                    // out of date. The fetch waits for quota slots like every other.
                    tracing::info!(network = %self.id, "reloading");
                    if let Err(e) = self.snapshot(&mut net, true).await {
                        self.report_rest_failure(&mut net, &e).await;
                    }
                }
                _ = poll.tick(), if !net.wire_live => match self.poll(&mut net, &mut wire_rx).await {
                    Polled::Done => {}
                    Polled::Interrupted(event) => {
                        self.on_wire(&mut net, *event).await.apply(&mut poll);
                    }
                    Polled::WireGone => break,
                },
                _ = resync.tick(), if net.wire_live => self.refresh(&mut net).await,
                _ = sleep_until(refresh_at), if net.scene_refresh.is_some() => {
                    net.scene_refresh = None;
                    self.refresh(&mut net).await;
                }
                _ = sleep_until(reopen_at), if net.reopen_at.is_some() => {
                    net.reopen_at = None;
                    self.open_wire(&mut net).await;
                }
            }
        }
        let _ = self.channel.close(&self.id);
        for task in [net.photo_fetch.take(), net.datapoints.take()].into_iter().flatten() {
            task.abort();
        }
    }

    /// Starts the network's periodic datapoint fetch, when configured: a task of its own behind
    /// the start-up gate, whose pages reach the consumers as [`Update::Datapoints`].
    fn spawn_datapoints(&self, shutdown: &CancellationToken) -> Option<tokio::task::AbortHandle> {
        let job = self.timing.datapoints.clone()?;
        let (rest, sessions, gate) = (self.rest.clone(), self.sessions.clone(), self.gate.clone());
        let (id, updates, shutdown) = (self.id.clone(), self.updates.clone(), shutdown.clone());
        let task = async move {
            gate.opened().await;
            tokio::time::sleep(crate::bridge::datapoints::first_fetch_delay(&job.schedule)).await;
            let fetcher = Fetcher::new(&rest, &sessions, &id, job.options);
            let (pages_tx, mut pages) = mpsc::channel::<crate::bridge::datapoints::Batch>(DATAPOINT_PAGES);
            let forward = async {
                while let Some(batch) = pages.recv().await {
                    let update = Update::Datapoints { network: id.clone(), points: batch.points.into() };
                    if updates.send(update).await.is_err() {
                        break;
                    }
                }
            };
            let fetch = crate::bridge::datapoints::run_in_turn(&fetcher, job.schedule, &job.turns, pages_tx, shutdown);
            tokio::join!(fetch, forward);
        };
        Some(tokio::spawn(task).abort_handle())
    }

    /// Starts fetching the photos when they were not fetched for the network's revision yet:
    /// after the first snapshot and after a revision change. A task of its own, so that images
    /// never hold up events, commands or polls; a fetch still running is replaced.
    fn fetch_photos_if_due(&self, net: &mut SupervisedNetwork) {
        let revision = net.view.status.revision;
        if net.photos_revision == Some(revision) {
            return;
        }
        net.photos_revision = Some(revision);
        if let Some(running) = net.photo_fetch.take() {
            running.abort();
        }
        let fetch = super::photo_fetch::PhotoFetch {
            id: self.id.clone(),
            rest: self.rest.clone(),
            sessions: self.sessions.clone(),
            updates: self.updates.clone(),
        };
        let gate = self.gate.clone();
        net.photo_fetch = Some(
            tokio::spawn(async move {
                gate.opened().await;
                fetch.run().await;
            })
            .abort_handle(),
        );
    }

    async fn open_wire(&self, net: &mut SupervisedNetwork) {
        match self.session().await {
            Ok(session) => {
                net.wire_generation = session.generation;
                if self.channel.open(&self.id, session.id, net.wire_tx.clone()).is_err() {
                    tracing::error!(network = %self.id, "event channel stopped; staying on REST polling");
                }
            }
            Err(e) => {
                tracing::warn!(network = %self.id, error = %e, "no session for the wire; trying again later");
                self.report_rest_failure(net, &e).await;
                net.reopen_at = Some(Instant::now() + self.timing.reopen_delay);
            }
        }
    }

    /// Handles one wire event; says when the next poll runs.
    async fn on_wire(&self, net: &mut SupervisedNetwork, event: WireEvent) -> NextPoll {
        match event {
            WireEvent::Opened => {
                tracing::info!(network = %self.id, "wire open");
                net.wire_live = true;
                net.burst_until = Instant::now() + self.timing.burst_window;
                self.set_connection(net, Connection::Live).await;
            }
            WireEvent::Down { reason } => {
                // Every failed reconnect reports the wire down again; only the first one counts.
                if net.wire_live {
                    tracing::warn!(network = %self.id, reason = %reason, "wire down; polling over REST");
                    net.wire_live = false;
                    // Poll at once, to the end even if the wire is back meanwhile: changes made
                    // while the wire was down are not lost. The next poll is an interval later,
                    // not the tick that fell due while the wire was live.
                    self.refresh(net).await;
                    return NextPoll::AfterInterval;
                }
            }
            WireEvent::Refused(WireStatusKind::InvalidSession) => {
                net.wire_live = false;
                tracing::info!(network = %self.id, "wire refused the session; renewing it");
                match self.sessions.renew(&self.id, net.wire_generation).await {
                    Ok(session) => {
                        net.wire_generation = session.generation;
                        if self.channel.open(&self.id, session.id, net.wire_tx.clone()).is_err() {
                            tracing::error!(network = %self.id, "event channel stopped");
                        }
                    }
                    Err(e) => {
                        self.report_rest_failure(net, &e).await;
                        net.reopen_at = Some(Instant::now() + self.timing.reopen_delay);
                    }
                }
                return NextPoll::Now;
            }
            WireEvent::Refused(status) => {
                net.wire_live = false;
                let message = format!("the service refused the wire: {}", status.as_str());
                tracing::warn!(network = %self.id, status = status.as_str(), "wire refused");
                self.problem(message).await;
                net.reopen_at = Some(Instant::now() + self.timing.reopen_delay);
                return NextPoll::Now;
            }
            WireEvent::Message(msg) => self.on_message(net, msg).await,
        }
        NextPoll::AsScheduled
    }

    async fn on_message(&self, net: &mut SupervisedNetwork, msg: ServerMessage) {
        if matches!(
            msg,
            ServerMessage::UnitChanged { .. }
                | ServerMessage::PeerChanged { .. }
                | ServerMessage::NetworkUpdated { .. }
        ) {
            crate::metrics::metrics().events_received.inc();
        }
        match msg {
            ServerMessage::UnitChanged { unit, .. } => {
                let id = unit.id;
                let old_scene = net.view.units.get(&id).map_or(OptU32::NONE, |u| u.active_scene_id);
                let live = Instant::now() >= net.burst_until;
                let delta = net.view.apply_unit(*unit, live);
                if delta.changed
                    && let Some(unit) = net.view.units.get(&id).cloned()
                {
                    if unit.active_scene_id.is_some() && unit.active_scene_id != old_scene {
                        schedule_refresh(net, self.timing.scene_refresh_delay);
                    }
                    self.send(Update::Unit { network: self.id.clone(), unit }).await;
                }
                for event in delta.events() {
                    self.send(Update::Event { network: self.id.clone(), unit: id, event, at: chrono::Utc::now() })
                        .await;
                }
            }
            ServerMessage::PeerChanged { online, .. } => {
                if net.view.set_gateway(online) {
                    tracing::info!(network = %self.id, online, "gateway presence changed");
                    self.send_status(net).await;
                }
            }
            ServerMessage::NetworkUpdated { .. } => {
                tracing::info!(network = %self.id, "network configuration changed; refetching");
                if let Err(e) = self.snapshot(net, true).await {
                    self.report_rest_failure(net, &e).await;
                }
            }
            ServerMessage::WireStatus { status, .. } => {
                // A refused control message.
                self.problem(format!("the service refused a message: {}", status.as_str())).await;
            }
            ServerMessage::NetworkLog { message, .. } => {
                tracing::debug!(network = %self.id, message = message.as_deref().unwrap_or(""), "network log");
            }
            ServerMessage::Unknown { method, .. } => tracing::debug!(network = %self.id, %method, "unknown event"),
            ServerMessage::Pong | ServerMessage::Response { .. } => {}
        }
    }

    /// Runs a REST call with the network's session; after a 410 gets one new session and retries
    /// once.
    async fn with_session<T, F, Fut>(&self, op: F) -> Result<T, CloudError>
    where
        F: Fn(Secret) -> Fut,
        Fut: std::future::Future<Output = Result<T, CloudError>>,
    {
        self.sessions.with_session(&self.id, op).await
    }

    /// The network's current session, or a new one when there is none.
    async fn session(&self) -> Result<Session, CloudError> {
        self.sessions.current(&self.id).await
    }

    async fn report_rest_failure(&self, net: &mut SupervisedNetwork, e: &CloudError) {
        tracing::warn!(network = %self.id, error = %e, "cloud request failed");
        if e.is_final() {
            self.problem(e.to_string()).await;
        }
        if !net.wire_live {
            self.set_connection(net, Connection::Down).await;
        }
    }

    async fn set_connection(&self, net: &mut SupervisedNetwork, connection: Connection) {
        if net.view.set_connection(connection) {
            self.send_status(net).await;
        }
    }

    async fn send_status(&self, net: &SupervisedNetwork) {
        self.send(Update::Status { network: self.id.clone(), status: Box::new(net.view.status.clone()) }).await;
    }

    async fn problem(&self, message: String) {
        self.send(Update::Problem { network: Some(self.id.clone()), message }).await;
    }

    async fn send(&self, update: Update) {
        // A closed receiver means the bridge is shutting down.
        let _ = self.updates.send(update).await;
    }
}

fn schedule_refresh(net: &mut SupervisedNetwork, delay: Duration) {
    let now = Instant::now();
    net.scene_refresh = Some(match net.scene_refresh {
        Some((_, first)) => ((now + delay).min(first + delay * 3), first),
        None => (now + delay, now),
    });
}

/// When a network's next `/state` poll runs, after a wire event.
#[must_use]
enum NextPoll {
    /// At its tick (the event changes nothing).
    AsScheduled,
    /// At once: the wire was refused.
    Now,
    /// A poll interval from now: a poll has just run.
    AfterInterval,
}

impl NextPoll {
    fn apply(self, poll: &mut tokio::time::Interval) {
        match self {
            NextPoll::AsScheduled => {}
            NextPoll::Now => poll.reset_immediately(),
            NextPoll::AfterInterval => poll.reset(),
        }
    }
}
