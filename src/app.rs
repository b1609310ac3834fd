//! The running bridge: wires the layers together for `casambi2mqtt run` and `demo`.
//!
//! ```text
//! Bridge (cloud → updates) ──► MQTT publisher (health, commands' view, web page look first) ──► broker
//!        ▲                                                                      │
//!        └──────── CommandDispatcher ◄──── resolved `…/set` commands ◄──────────┘
//!                        ▲
//!                        └──── `POST /api/control` of the web page (its own thread)
//! ```
//!
//! Shutdown (SIGTERM/SIGINT) cancels one token: the wires are closed, the publisher publishes
//! `offline` (retained) and disconnects, and [`run`] returns within a bounded time.

use crate::bridge::network::Timing;
use crate::bridge::update::Update;
use crate::bridge::{Bridge, CredentialState};
use crate::commands::{CommandDispatcher, DispatchConfig, Request};
use crate::config::Config;
use crate::health::{Expectation, HealthState};
use crate::mqtt::render::Renderer;
use crate::mqtt::{self, ResolvedCommand};
use crate::web::{self, WebSettings, WebState};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The async runtime of the bridge process: one thread, which takes a stream of events in
/// batches ([`crate::wake_batch`]; that module relies on this runtime having one thread).
///
/// Every event passes through four tasks (WebSocket reader, network supervisor, publisher, MQTT
/// client); on one thread each hand-over is a queue push, on a worker-per-core runtime it is
/// often a wake-up of another thread (a futex call and a context switch), which costs more than
/// the work itself. One core carries far more than the cloud's quotas let through
/// (BENCHMARKS.md); blocking work (DNS, files) goes to tokio's blocking pool.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().on_thread_park(crate::wake_batch::before_park).build()
}

/// Updates in flight between the core and the publisher. Bounded: a slow broker slows the
/// core down (and with it the reading of the socket) instead of growing memory.
const UPDATE_QUEUE: usize = 4096;
/// How long shutdown may take before the tasks are abandoned (the contract allows 5 s).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(4);
/// How long shutdown waits for the updates already on their way (refused commands among them)
/// to reach the publisher before it says `offline`.
const SHUTDOWN_DRAIN: Duration = Duration::from_millis(500);

/// How a run ended. Rejected credentials do not end it: the bridge stays up, unhealthy, and
/// tries them again as the login lock allows (docs/cloud.md#logins-and-the-lockout-guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Shut down on request.
    Stopped,
}

/// Why the bridge could not run.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The cloud settings cannot work.
    #[error("cloud settings: {0}")]
    Cloud(#[from] crate::bridge::runner::StartError),
    /// The MQTT settings cannot work.
    #[error("MQTT settings: {0}")]
    Mqtt(#[from] mqtt::MqttError),
    /// The MQTT side stopped before the shutdown (its event loop ended, or its task failed).
    #[error("the MQTT task ended unexpectedly: {0}")]
    MqttEnded(String),
    /// The HTTP listener (web page, health endpoints) could not listen.
    #[error("HTTP listener on {addr}: {source}")]
    Http {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

/// Logs one start-up summary line once every network has its first snapshot. Its entity count
/// is what Home Assistant lists: the bridge's own entities and every network's, counted on the
/// devices discovery publishes.
struct StartupSummary {
    renderer: Renderer,
    seen: std::collections::BTreeMap<String, (usize, usize)>,
    done: bool,
}

impl StartupSummary {
    fn new(renderer: Renderer) -> StartupSummary {
        StartupSummary { renderer, seen: Default::default(), done: false }
    }

    fn observe(&mut self, update: &Update, bridge: &Bridge) {
        if self.done {
            return;
        }
        if let Update::Network { view, .. } = update {
            let entities = self.renderer.view_entity_count(view);
            self.seen.insert(view.status.id.clone(), (view.units.len(), entities));
        }
        let starting = bridge.credential_states().iter().any(|s| s.is_logging_in());
        let expected = bridge.networks().len();
        if !starting && expected > 0 && self.seen.len() >= expected {
            self.done = true;
            let units: usize = self.seen.values().map(|(u, _)| u).sum();
            let entities = self.renderer.bridge_entity_count() + self.seen.values().map(|(_, e)| e).sum::<usize>();
            tracing::info!(
                version = env!("CARGO_PKG_VERSION"),
                networks = self.seen.len(),
                units,
                entities,
                "bridging"
            );
        }
    }
}

/// Handles of a started bridge, for callers that need them (tests, the demo).
#[derive(Debug, Clone)]
pub struct Running {
    /// The bridge core.
    pub bridge: Bridge,
    /// Health state.
    pub health: Arc<HealthState>,
    /// Where the HTTP listener (the web page, `/healthz`, `/metrics`) listens, when enabled.
    pub health_addr: Option<SocketAddr>,
    /// The web page's state, when the listener is enabled.
    pub web: Option<Arc<WebState>>,
}

/// Runs the bridge until `shutdown` is cancelled.
/// `started` receives the handles once everything is up.
pub async fn run(
    config: Config,
    shutdown: CancellationToken,
    started: Option<tokio::sync::oneshot::Sender<Running>>,
) -> Result<Outcome, AppError> {
    let health = HealthState::new();
    let inner = CancellationToken::new();
    // Bound before anything starts: a taken address fails the run before any login.
    let listener = match config.http.listen {
        Some(addr) => Some((addr, web::bind(addr).map_err(|source| AppError::Http { addr, source })?)),
        None => None,
    };

    let timing = Timing {
        poll_interval: config.cloud.poll_interval,
        resync_interval: config.cloud.resync_interval,
        datapoints: crate::bridge::datapoints::Job::of(&config.datapoints),
        ..Timing::default()
    };
    let (updates_tx, updates_rx) = mpsc::channel::<Update>(UPDATE_QUEUE);
    let bridge = Bridge::start_with_sites(
        &config.cloud,
        &config.networks,
        &config.sites,
        updates_tx.clone(),
        timing,
        inner.clone(),
    )?;
    health.set_rest_stats(bridge.rest().stats());
    let expected = bridge.clone();
    health.set_expected(Box::new(move || {
        let networks = expected.networks().into_iter().map(|n| (n.id, n.name)).collect();
        let states = expected.credential_states();
        let logging_in = states.iter().filter(|s| s.is_logging_in()).count();
        let (mut rejected, mut retrying) = (Vec::new(), Vec::new());
        for state in states {
            match state {
                CredentialState::Rejected(why) => rejected.push(why),
                CredentialState::Retrying(why) => retrying.push(why),
                _ => {}
            }
        }
        Expectation { networks, logging_in, rejected, retrying }
    }));

    let (dispatcher, mut rejections) = CommandDispatcher::new(bridge.clone(), DispatchConfig::default());
    let (commands_tx, mut commands_rx) = mpsc::channel::<ResolvedCommand>(1024);
    let (requests_tx, requests_rx) = mpsc::channel::<Request>(1024);

    let (web, health_addr) = match listener {
        Some((addr, listener)) => {
            let web = Arc::new(web_state(&config, addr, &bridge, &dispatcher, &health, &inner));
            let bound = match web::serve(listener, web.clone(), health.clone()) {
                Ok(bound) => bound,
                Err(source) => {
                    // The bridge runs already: stop it before giving up.
                    inner.cancel();
                    return Err(AppError::Http { addr, source });
                }
            };
            (Some(web), Some(bound))
        }
        None => (None, None),
    };

    // Health, the command layer and the web page see every update just before the publisher
    // handles it, on the publisher's task.
    let mut summary = StartupSummary::new(Renderer::of(&config.mqtt_config()));
    let (web_seen, health_seen, dispatcher_seen, bridge_seen) =
        (web.clone(), health.clone(), dispatcher.clone(), bridge.clone());
    let updates = mqtt::Updates::observed(updates_rx, move |update| {
        summary.observe(update, &bridge_seen);
        health_seen.observe(update);
        dispatcher_seen.observe(update);
        if let Some(web) = &web_seen {
            if let Update::Datapoints { network, points } = update {
                web.note_datapoints(network, points);
            }
            web.mirror.observe(update);
        }
    });
    // Resolved command topics become dispatcher requests.
    tokio::spawn(async move {
        while let Some(cmd) = commands_rx.recv().await {
            let request = Request {
                topic: cmd.message.topic,
                network: cmd.network,
                target: cmd.target,
                payload: cmd.message.payload,
            };
            if requests_tx.send(request).await.is_err() {
                break;
            }
        }
    });
    // Rejections go out on `<base>/bridge/error` through the publisher.
    let rejection_updates = updates_tx.clone();
    tokio::spawn(async move {
        while let Some(r) = rejections.recv().await {
            let update = Update::Rejected { network: r.network.map(Into::into), topic: r.topic, reason: r.reason };
            if rejection_updates.send(update).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(dispatcher.clone().run(requests_rx, inner.clone()));
    let drain = Drain { updates: updates_tx.downgrade() };
    drop(updates_tx);

    let mqtt_token = CancellationToken::new();
    let mut mqtt_task = tokio::spawn(mqtt::run(config.mqtt_config(), updates, commands_tx, mqtt_token.clone()));

    tracing::info!(summary = %config.summary(), "bridge started");
    if let Some(started) = started {
        let _ = started.send(Running { bridge: bridge.clone(), health: health.clone(), health_addr, web });
    }

    let outcome = tokio::select! {
        _ = shutdown.cancelled() => Outcome::Stopped,
        result = &mut mqtt_task => {
            inner.cancel();
            // Nothing but the shutdown ends the MQTT side in order, so this is a failure: the
            // exit code says so, and a supervisor restarts the bridge (docs/cli.md#exit-codes).
            return match result {
                Ok(Ok(())) => Err(AppError::MqttEnded("its event loop stopped".into())),
                Ok(Err(e)) => Err(e.into()),
                Err(e) => Err(AppError::MqttEnded(e.to_string())),
            };
        }
    };
    // Orderly stop (docs/cli.md#signals): commands still queued are refused, the wires and the
    // web page's live streams close, what is on its way to the broker goes out, then the
    // publisher says `offline` and disconnects.
    let refused = dispatcher.abandon_pending();
    inner.cancel();
    drain.wait(SHUTDOWN_DRAIN).await;
    tracing::info!(refused_commands = refused, "stopping");
    mqtt_token.cancel();
    match tokio::time::timeout(SHUTDOWN_GRACE, mqtt_task).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "MQTT stopped with an error"),
        Ok(_) => {}
        Err(_) => tracing::warn!("MQTT did not stop in time; exiting anyway"),
    }
    Ok(outcome)
}

/// Watches the queue in front of the publisher (without keeping it open).
struct Drain {
    updates: mpsc::WeakSender<Update>,
}

impl Drain {
    /// Waits until the queue is empty (or closed), at most `limit`. The publisher handles an
    /// update it took before it looks at the shutdown token again.
    async fn wait(&self, limit: Duration) {
        let empty = || self.updates.upgrade().is_none_or(|tx| tx.capacity() == tx.max_capacity());
        let deadline = tokio::time::Instant::now() + limit;
        while !empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The web page's state: its settings from `config`, control through `dispatcher` (on this
/// runtime), icons through the bridge's REST client.
fn web_state(
    config: &Config,
    listen: SocketAddr,
    bridge: &Bridge,
    dispatcher: &CommandDispatcher,
    health: &Arc<HealthState>,
    shutdown: &CancellationToken,
) -> WebState {
    let protocol = match config.mqtt.protocol {
        mqtt::Protocol::Auto => "auto",
        mqtt::Protocol::V5 => "v5",
        mqtt::Protocol::V311 => "v3",
    };
    let settings = WebSettings {
        listen,
        token: config.http.token.clone(),
        broker: mqtt::broker_url::redact_url(&config.mqtt.url),
        protocol: protocol.into(),
        rest_limit: config.cloud.max_requests_per_minute,
        public_host: config.http.public_host.clone(),
        limits: config.http.limits,
        max_live_streams: config.http.max_live_streams,
    };
    let runtime = tokio::runtime::Handle::current();
    WebState::new(settings, health.clone(), shutdown.clone())
        .with_rest_stats(bridge.rest().stats())
        .with_control(web::control::Controller::new(dispatcher.clone(), runtime.clone()))
        .with_icons(web::icons::Icons::new(bridge.rest().clone(), runtime).with_sessions(bridge.clone()))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    /// Waits on the bridge's runtime for a wake-up another thread sends within the window, after
    /// a frame was noted in a batcher of its own; returns how long the wait took.
    fn wait_after_a_frame() -> Duration {
        let runtime = super::runtime().expect("runtime");
        runtime.block_on(async {
            let batcher = crate::wake_batch::WakeBatcher::for_current_runtime(crate::wake_batch::DEFAULT_WINDOW);
            batcher.frame_arrived();
            let start = Instant::now();
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_micros(200));
                let _ = tx.send(());
            });
            let _ = rx.await;
            start.elapsed()
        })
    }

    /// The runtime pauses when it runs out of work after a frame, so that what arrives meanwhile
    /// is taken in one wake-up: a wake-up sent within the window is seen only a window after the
    /// frame. (Tried three times: had the sender been quicker than the runtime going idle, no
    /// pause is due, and without the pause every try ends as soon as the wake-up is sent.)
    #[test]
    fn the_bridge_runtime_takes_a_burst_in_after_a_window() {
        let waits: Vec<Duration> = (0..3).map(|_| wait_after_a_frame()).collect();
        let window = crate::wake_batch::DEFAULT_WINDOW;
        assert!(waits.iter().any(|w| *w >= window * 9 / 10), "no pause of {window:?} after a frame: {waits:?}");
    }
}
