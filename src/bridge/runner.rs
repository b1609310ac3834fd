//! Starts the bridge core: one REST client and quota guard per API key, one event channel per
//! key, a session manager per set of credentials, and one supervisor per network, all feeding
//! one queue of [`Update`]s.
//!
//! Credentials are handled apart: an entry the service rejects for good (401) is reported and the
//! other entries keep running; [`Bridge::all_rejected`] tells the binary when none is left (exit
//! code 2).

use super::fixtures::FixtureCache;
use super::network::{Outgoing, Supervisor, Timing};
use super::update::Update;
use crate::cloud::CloudError;
use crate::cloud::channel::{ChannelConfig, EventChannel};
use crate::cloud::model::{Credentials, Secret};
use crate::cloud::quota::BackoffPolicy;
use crate::cloud::rest::RestClient;
use crate::cloud::session::{LoginPolicy, SessionManager};
use crate::wake_batch::WakeBatcher;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use url::Url;

/// Messages (commands from MQTT) queued for one network's wire. Bounded: senders wait when it
/// is full; the command layer in front of it keeps at most a few commands per target anyway.
pub const OUTGOING_QUEUE: usize = 256;

/// How to reach the cloud (the `cloud` section of the configuration).
#[derive(Debug, Clone)]
pub struct CloudSettings {
    /// REST base URL.
    pub base_url: Url,
    /// WebSocket URL.
    pub ws_url: String,
    /// API key.
    pub api_key: Secret,
    /// API key header name.
    pub key_header: String,
    /// Session header name.
    pub session_header: String,
    /// REST polling while a wire is down.
    pub poll_interval: Duration,
    /// Full resync while the wire is up.
    pub resync_interval: Duration,
    /// Client-side limit of requests per minute.
    pub max_requests_per_minute: u32,
    /// Client-side limit of concurrent requests.
    pub max_concurrent_requests: usize,
    /// App-level ping per wire (the service closes wires idle for about 5 minutes; 240 s).
    pub wire_ping_interval: Duration,
    /// How long the bridge's thread may wait after an event to take the next ones in with it
    /// (`cloud.event_batch_window`, [`crate::wake_batch`]); zero turns it off.
    pub event_batch_window: Duration,
}

/// One set of network (admin) credentials (an entry of `networks`).
#[derive(Debug, Clone)]
pub struct CredentialSettings {
    /// Login e-mail.
    pub email: String,
    /// Password.
    pub password: Secret,
    /// Network ids; empty = every network the credentials open.
    pub ids: Vec<String>,
}

/// What became of one credentials entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialState {
    /// Logging in, before the first attempt has failed.
    Starting,
    /// Retrying the login after a transient failure (the service or the network unreachable);
    /// the last failure, for `check` to name the cause.
    Retrying(String),
    /// Sessions open; its networks are supervised.
    Running,
    /// Rejected for good; the reason (without secrets).
    Rejected(String),
}

impl CredentialState {
    /// Whether the entry is still logging in ([`CredentialState::Starting`] or
    /// [`CredentialState::Retrying`]).
    pub fn is_logging_in(&self) -> bool {
        matches!(self, CredentialState::Starting | CredentialState::Retrying(_))
    }
}

/// Per-network handle: where to send wire messages (commands).
#[derive(Debug, Clone)]
pub struct NetworkHandle {
    /// Network id.
    pub id: String,
    /// Network name as reported at login.
    pub name: String,
    /// Messages for the network's wire.
    pub outgoing: mpsc::Sender<Outgoing>,
}

/// A running bridge core.
#[derive(Debug, Clone)]
pub struct Bridge {
    networks: Arc<Mutex<BTreeMap<String, NetworkHandle>>>,
    credentials: watch::Receiver<Vec<CredentialState>>,
    rest: RestClient,
    wake: WakeBatcher,
}

/// Why the bridge could not start at all.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A setting the cloud client cannot use (bad URL, bad header name).
    #[error("{0}")]
    Settings(#[from] CloudError),
}

impl Bridge {
    /// Starts every task; they run until `shutdown`. On a current-thread runtime (the bridge's
    /// own, [`crate::app::runtime`]) the bridge's wake-up batching is bound to the calling thread.
    pub fn start(
        cloud: &CloudSettings,
        credentials: &[CredentialSettings],
        updates: mpsc::Sender<Update>,
        timing: Timing,
        shutdown: CancellationToken,
    ) -> Result<Bridge, StartError> {
        let rest = cloud.rest_client()?;
        let mut channel_config = ChannelConfig::new(cloud.ws_url.clone(), cloud.api_key.clone());
        channel_config.ping_interval = cloud.wire_ping_interval;
        let wake = WakeBatcher::for_current_runtime(cloud.event_batch_window);
        let channel = EventChannel::spawn(channel_config, wake.clone(), shutdown.clone());
        let fixtures = Arc::new(FixtureCache::new());
        let networks = Arc::new(Mutex::new(BTreeMap::new()));
        let (states_tx, states_rx) = watch::channel(vec![CredentialState::Starting; credentials.len()]);
        let states_tx = Arc::new(states_tx);
        for (index, creds) in credentials.iter().enumerate() {
            let task = CredentialTask {
                index,
                manager: Arc::new(SessionManager::new(
                    rest.clone(),
                    Credentials::new(creds.email.clone(), creds.password.clone()),
                    creds.ids.clone(),
                    LoginPolicy::default(),
                )),
                rest: rest.clone(),
                channel: channel.clone(),
                fixtures: fixtures.clone(),
                updates: updates.clone(),
                timing: timing.clone(),
                networks: networks.clone(),
                states: states_tx.clone(),
            };
            tokio::spawn(task.run(shutdown.clone()));
        }
        Ok(Bridge { networks, credentials: states_rx, rest, wake })
    }

    /// The networks supervised so far.
    pub fn networks(&self) -> Vec<NetworkHandle> {
        self.networks.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// The handle of one network.
    pub fn network(&self, id: &str) -> Option<NetworkHandle> {
        self.networks.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    /// What became of each credentials entry, in configuration order.
    pub fn credential_states(&self) -> Vec<CredentialState> {
        self.credentials.borrow().clone()
    }

    /// The REST client (its request counters feed `/metrics`).
    pub fn rest(&self) -> &RestClient {
        &self.rest
    }

    /// The window of the bridge's wake-up batching (`cloud.event_batch_window`).
    pub fn event_batch_window(&self) -> Duration {
        self.wake.window()
    }

    /// Resolves when every credentials entry has been rejected for good (the binary exits 2).
    /// Never resolves while at least one entry runs or may still run.
    pub async fn all_rejected(&self) {
        let mut rx = self.credentials.clone();
        let all = rx
            .wait_for(|states| !states.is_empty() && states.iter().all(|s| matches!(s, CredentialState::Rejected(_))))
            .await
            .is_ok();
        if !all {
            // Every task ended without all being rejected (shutdown): never resolve.
            std::future::pending::<()>().await;
        }
    }
}

/// Logs one credentials entry in and starts its networks.
struct CredentialTask {
    index: usize,
    manager: Arc<SessionManager>,
    rest: RestClient,
    channel: EventChannel,
    fixtures: Arc<FixtureCache>,
    updates: mpsc::Sender<Update>,
    timing: Timing,
    networks: Arc<Mutex<BTreeMap<String, NetworkHandle>>>,
    states: Arc<watch::Sender<Vec<CredentialState>>>,
}

impl CredentialTask {
    fn set_state(&self, state: CredentialState) {
        self.states.send_modify(|s| {
            if let Some(slot) = s.get_mut(self.index) {
                *slot = state;
            }
        });
    }

    async fn run(self, shutdown: CancellationToken) {
        let email = self.manager.email().to_string();
        let mut backoff = BackoffPolicy { max_retries: None, ..BackoffPolicy::default() }.backoff();
        let opened = loop {
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.manager.open() => r,
            };
            match attempt {
                Ok(opened) => break opened,
                Err(e) if e.is_final() => {
                    let message = format!("credentials {email}: {e}");
                    tracing::error!(%message, "credentials rejected; their networks are not bridged");
                    let _ = self.updates.send(Update::Problem { network: None, message: message.clone() }).await;
                    self.set_state(CredentialState::Rejected(message));
                    return;
                }
                Err(e) => {
                    let delay = backoff.next_delay(Some(&e)).unwrap_or(Duration::from_secs(60));
                    tracing::warn!(%email, error = %e, retry_in = ?delay, "login failed; retrying");
                    self.set_state(CredentialState::Retrying(format!("credentials {email}: {e}")));
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        };
        for id in &opened.inaccessible {
            let message = format!("credentials {email} do not open network {id}");
            let _ = self.updates.send(Update::Problem { network: Some(id.as_str().into()), message }).await;
        }
        self.set_state(CredentialState::Running);
        for session in opened.sessions {
            let (outgoing_tx, outgoing_rx) = mpsc::channel(OUTGOING_QUEUE);
            {
                let mut networks = self.networks.lock().unwrap_or_else(|p| p.into_inner());
                if networks.contains_key(&session.network_id) {
                    tracing::warn!(network = %session.network_id, "network listed by several credentials; bridged once");
                    continue;
                }
                networks.insert(
                    session.network_id.clone(),
                    NetworkHandle { id: session.network_id.clone(), name: session.name.clone(), outgoing: outgoing_tx },
                );
            }
            let supervisor = Supervisor {
                id: session.network_id.as_str().into(),
                rest: self.rest.clone(),
                sessions: self.manager.clone(),
                channel: self.channel.clone(),
                fixtures: self.fixtures.clone(),
                updates: self.updates.clone(),
                outgoing: outgoing_rx,
                timing: self.timing.clone(),
                backoff: BackoffPolicy::default(),
            };
            tokio::spawn(supervisor.run(shutdown.clone()));
        }
    }
}
