//! The simulated lighting cloud service (`casambi2mqtt sim`).
//!
//! It serves the service's REST interface (docs/simulator.md) and the WebSocket event channel
//! of the real service on one port, from a site (YAML file, built-in demo or generated), with the
//! real service's rules and failures: lockout, session expiry, quotas, gateway loss, configuration
//! changes, malformed frames. Tests, benchmarks and `casambi2mqtt demo` run against it, in-process
//! through [`Simulator`] or from outside through the `/_sim/` admin routes.
//!
//! Layout: [`site`] (static description), [`world`] (live truth and its events), [`render`] (JSON
//! shapes), [`auth`] (keys, logins, sessions, quotas), [`log`] (what clients did), and one module
//! per interface: `rest`, `channel` (WebSocket), `faults` (admin routes), `activity`.

pub mod activity;
pub mod auth;
pub mod channel;
pub mod datapoints;
pub mod faults;
pub mod images;
pub mod log;
pub mod render;
pub mod rest;
pub mod site;
pub mod world;

use auth::Auth;
use log::Log;
use serde_json::Value;
use site::Site;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use world::World;

/// Everything that shapes a simulator run.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The site to serve.
    pub site: Site,
    /// Seed of every random choice (activity, datapoint history), so runs repeat.
    pub seed: u64,
    /// Activity events per second (0 = quiet).
    pub activity_rate: f64,
    /// How long login stays locked after three failures (the real service: 60 s).
    pub lock_duration: Duration,
    /// Session lifetime; `None` = sessions live until expired by a fault.
    pub session_lifetime: Option<Duration>,
    /// Name of the API key header.
    pub key_header: String,
    /// Name of the session header.
    pub session_header: String,
    /// Send WebSocket frames as text instead of binary (the real service sends binary).
    pub text_frames: bool,
    /// A wire without any client message for this long is closed (the real service: ~300 s).
    pub idle_timeout: Duration,
    /// Wires one socket may carry before `tooManyWires`.
    pub max_wires_per_socket: usize,
    /// Longest datapoint retrieval interval before 416.
    pub max_datapoint_interval: Duration,
    /// Events each network buffers for wires that fall behind ([`world::EVENT_BUFFER`]); past it
    /// a wire skips them and resends the whole network ([`Shared::events_dropped`] counts them).
    /// Rounded up to a power of two.
    pub event_buffer: usize,
    /// Send `Retry-After` with a 429. The service's specification does not promise the header,
    /// so tests can take it away to see the client pace itself.
    pub quota_retry_after: bool,
}

impl SimConfig {
    /// Defaults of the real service for a site.
    pub fn new(site: Site) -> SimConfig {
        SimConfig {
            site,
            seed: 1,
            activity_rate: 0.0,
            lock_duration: Duration::from_secs(60),
            session_lifetime: None,
            key_header: "X-Casambi-Key".into(),
            session_header: "X-Casambi-Session".into(),
            text_frames: false,
            idle_timeout: Duration::from_secs(300),
            max_wires_per_socket: 128,
            max_datapoint_interval: Duration::from_secs(31 * 24 * 3600),
            event_buffer: world::EVENT_BUFFER,
            quota_retry_after: true,
        }
    }
}

/// A fault delivered to every open WebSocket connection; each connection acts on the ones that
/// concern it.
#[derive(Debug, Clone)]
pub enum WireFault {
    /// Close every socket abruptly (no close frame).
    DropSockets,
    /// Close the wire(s) of one network (a `wireStatus` `closed` is not sent; the wire just ends).
    DropWire {
        /// Network id.
        network: String,
    },
    /// Send a frame that is not valid JSON on the wires of a network.
    Malformed {
        /// Network id.
        network: String,
    },
    /// Send a frame of `bytes` bytes on the wires of a network.
    Oversized {
        /// Network id.
        network: String,
        /// Frame size.
        bytes: usize,
    },
}

/// State shared by every handler of one simulator.
#[derive(Debug)]
pub struct Shared {
    /// The run's configuration.
    pub config: SimConfig,
    /// The truth.
    pub world: Mutex<World>,
    /// Access rules and their state.
    pub auth: Mutex<Auth>,
    /// What clients did.
    pub log: Log,
    /// When the simulator started (log times are relative to it).
    pub started: Instant,
    /// The energy meters of the datapoint history (their origin is fixed at the start).
    pub energy: datapoints::EnergyLedger,
    /// Faults for the WebSocket connections.
    pub wire_faults: broadcast::Sender<WireFault>,
    /// Answer the next N REST requests with 500 (fault injection).
    pub fail_next: std::sync::atomic::AtomicU32,
    /// Cancelled when the simulator stops.
    pub shutdown: CancellationToken,
    /// While set, the activity generator makes no changes (tests stop it to compare the truth).
    pub activity_paused: std::sync::atomic::AtomicBool,
    /// Events that wires skipped because they fell more than [`SimConfig::event_buffer`] behind
    /// ([`Shared::events_dropped`]).
    dropped: std::sync::atomic::AtomicU64,
    /// How many times a wire fell behind ([`Shared::wire_lags`]).
    lags: std::sync::atomic::AtomicU64,
    /// Of those, how many with its client behind ([`Shared::wire_lags_client_behind`]).
    lags_client_behind: std::sync::atomic::AtomicU64,
}

impl Shared {
    /// Locks the truth. A panicked holder cannot leave it half-changed (mutations check first,
    /// then change), so a poisoned lock is taken over.
    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Events skipped so far by wires that fell behind their network's buffer, summed over every
    /// wire: those overwritten before the wire read them and those still buffered when it
    /// resent the network. They never went out on a wire (the resend carries the current truth,
    /// not each change). A benchmark tells with it the simulator's losses from its client's.
    pub fn events_dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many times so far a wire fell behind its network's buffer and resent the network.
    pub fn wire_lags(&self) -> u64 {
        self.lags.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Of [`Shared::wire_lags`], those in which the wire's client was behind: the wire's last
    /// frame before the lag had waited for room in the full queue to its socket, so the client
    /// had not read (the others: the simulator's own task that forwards the events did not get
    /// to run in time).
    pub fn wire_lags_client_behind(&self) -> u64 {
        self.lags_client_behind.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes that a wire fell behind and dropped `events`, with its client behind or not.
    pub(crate) fn note_lag(&self, events: u64, client_behind: bool) {
        self.lags.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lags_client_behind.fetch_add(u64::from(client_behind), std::sync::atomic::Ordering::Relaxed);
        self.dropped.fetch_add(events, std::sync::atomic::Ordering::Relaxed);
    }

    /// Pauses (`true`) or resumes the activity generator.
    pub fn pause_activity(&self, paused: bool) {
        self.activity_paused.store(paused, std::sync::atomic::Ordering::Relaxed);
    }

    /// Locks the access rules (poisoning handled as for [`Shared::world`]).
    pub fn auth(&self) -> MutexGuard<'_, Auth> {
        self.auth.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running simulator: its address, its shared state and the handle to stop it.
#[derive(Debug)]
pub struct Simulator {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Simulator {
    /// Starts serving on `listen` (port 0 = a free port).
    pub async fn start(config: SimConfig, listen: SocketAddr) -> std::io::Result<Simulator> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        // Events go out as soon as they happen: without TCP_NODELAY, Nagle's algorithm holds a
        // small frame back while the previous one is unacknowledged, and a client that only
        // reads (the bridge) acknowledges late, so frames would wait up to the delayed-ACK timeout
        // (40 ms on Linux).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
        });
        let auth = Auth::new(&config.site, config.lock_duration, config.session_lifetime);
        let (wire_faults, _) = broadcast::channel(64);
        let shared = Arc::new(Shared {
            world: Mutex::new(World::with_event_buffer(&config.site, config.event_buffer)),
            auth: Mutex::new(auth),
            log: Log::default(),
            started: Instant::now(),
            energy: datapoints::EnergyLedger::new(chrono::Utc::now().timestamp_millis()),
            wire_faults,
            fail_next: std::sync::atomic::AtomicU32::new(0),
            shutdown: CancellationToken::new(),
            activity_paused: std::sync::atomic::AtomicBool::new(false),
            dropped: std::sync::atomic::AtomicU64::new(0),
            lags: std::sync::atomic::AtomicU64::new(0),
            lags_client_behind: std::sync::atomic::AtomicU64::new(0),
            config,
        });
        let app = rest::router().merge(channel::router()).merge(faults::router()).with_state(shared.clone());
        let token = shared.shutdown.clone();
        let server = tokio::spawn(async move {
            let serve = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                .with_graceful_shutdown(async move { token.cancelled().await });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "simulator server stopped");
            }
        });
        if shared.config.activity_rate > 0.0 {
            activity::spawn(shared.clone());
        }
        Ok(Simulator { addr, shared, server: Some(server) })
    }

    /// Starts on a free loopback port: what tests want.
    pub async fn start_local(config: SimConfig) -> std::io::Result<Simulator> {
        Simulator::start(config, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// REST base URL (`http://127.0.0.1:PORT`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// WebSocket URL (`ws://127.0.0.1:PORT/v1/bridge/`).
    pub fn ws_url(&self) -> String {
        format!("ws://{}/v1/bridge/", self.addr)
    }

    /// The shared state, for tests and the in-process demo.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The current truth of a network in the shape of `GET /v1/networks/{id}/state`.
    pub fn network_state(&self, network: &str) -> Option<Value> {
        let world = self.shared.world();
        world.networks.get(network).map(|n| render::network(n, true))
    }

    /// Stops serving and closes every connection.
    pub async fn stop(mut self) {
        self.shared.shutdown.cancel();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}
