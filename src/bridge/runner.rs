//! Starts the bridge core: one REST client and quota guard per API key, one event channel per
//! key, a session manager per set of credentials, and one supervisor per network, all feeding
//! one queue of [`Update`]s.
//!
//! Credentials are handled apart: an entry the service rejects (401) is reported, tried again no
//! more often than the login lock allows (docs/cloud.md#logins-and-the-lockout-guard), and the
//! other entries keep running. The bridge never stops over rejected credentials: a process
//! supervisor restarting it would log in again at every start and trip the lock.

use super::fixtures::FixtureCache;
use super::network::{Outgoing, Supervisor, Timing};
use super::session_source::{OpenedNetwork, SessionSource};
use super::startup_gate::StartupGate;
use super::update::Update;
use crate::cloud::CloudError;
use crate::cloud::backoff::BackoffPolicy;
use crate::cloud::channel::{ChannelConfig, EventChannel};
use crate::cloud::model::{Credentials, Secret};
use crate::cloud::rest::RestClient;
use crate::cloud::session::LoginPolicy;
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
    /// Rejected by the service (401); the reason (without secrets). The login is tried again
    /// after the lock window, then ever less often.
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
    /// Asks the supervisor to fetch the network again (one request waits at most; more coalesce).
    pub reload: mpsc::Sender<()>,
    /// The credentials entry that bridges it (`credentials <email>` or `site credentials
    /// <email>`; no secret).
    pub via: String,
    /// Where its session comes from (for reads beside the supervisor's, like `check`'s).
    pub sessions: SessionSource,
}

/// A `sites:` entry and the networks its user session opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteListing {
    /// Login e-mail of the site user.
    pub email: String,
    /// The networks opened (filtered by the entry's `ids`).
    pub networks: Vec<OpenedNetwork>,
}

/// How long a site's networks wait for the `networks:` entries to log in, so that a network
/// both open is bridged with its network credentials. Past it (network logins still retrying,
/// e.g. a login lock), the site's networks start; a network credentials entry logging in later
/// finds them bridged already.
pub const SITE_WAIT: Duration = Duration::from_secs(60);

/// A running bridge core.
#[derive(Debug, Clone)]
pub struct Bridge {
    networks: Arc<Mutex<BTreeMap<String, NetworkHandle>>>,
    site_listings: Arc<Mutex<BTreeMap<usize, SiteListing>>>,
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
    /// Starts every task with network (admin) credentials only; see [`Bridge::start_with_sites`].
    pub fn start(
        cloud: &CloudSettings,
        credentials: &[CredentialSettings],
        updates: mpsc::Sender<Update>,
        timing: Timing,
        shutdown: CancellationToken,
    ) -> Result<Bridge, StartError> {
        Bridge::start_with_sites(cloud, credentials, &[], updates, timing, shutdown)
    }

    /// Starts every task; they run until `shutdown`. On a current-thread runtime (the bridge's
    /// own, [`crate::app::runtime`]) the bridge's wake-up batching is bound to the calling thread.
    ///
    /// `credentials` are the `networks:` entries, `sites` the `sites:` entries (site, or user,
    /// credentials). [`Bridge::credential_states`] lists the former, then the latter. A network
    /// both open is bridged once, with the network credentials: a site's networks start once
    /// every `networks:` entry has logged in or been rejected (or after [`SITE_WAIT`]).
    pub fn start_with_sites(
        cloud: &CloudSettings,
        credentials: &[CredentialSettings],
        sites: &[CredentialSettings],
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
        let site_listings = Arc::new(Mutex::new(BTreeMap::new()));
        let entries = credentials.len() + sites.len();
        let (states_tx, states_rx) = watch::channel(vec![CredentialState::Starting; entries]);
        let states_tx = Arc::new(states_tx);
        let gate = StartupGate::new(entries);
        let login = |creds: &CredentialSettings| Credentials::new(creds.email.clone(), creds.password.clone());
        let network_sources = credentials
            .iter()
            .map(|creds| SessionSource::network_login(&rest, login(creds), creds.ids.clone(), LoginPolicy::default()));
        let site_sources = sites
            .iter()
            .map(|creds| SessionSource::site_login(&rest, login(creds), creds.ids.clone(), LoginPolicy::default()));
        for (index, source) in network_sources.chain(site_sources).enumerate() {
            let task = CredentialTask {
                index,
                after_networks: (index >= credentials.len()).then_some(credentials.len()),
                source,
                rest: rest.clone(),
                channel: channel.clone(),
                fixtures: fixtures.clone(),
                updates: updates.clone(),
                timing: timing.clone(),
                networks: networks.clone(),
                site_listings: site_listings.clone(),
                states: states_tx.clone(),
                gate: gate.clone(),
            };
            tokio::spawn(task.run(shutdown.clone()));
        }
        Ok(Bridge { networks, site_listings, credentials: states_rx, rest, wake })
    }

    /// Each `sites:` entry that logged in, in configuration order, with the networks its user
    /// session opened (some may be bridged through a `networks:` entry: see
    /// [`NetworkHandle::via`]).
    pub fn sites(&self) -> Vec<SiteListing> {
        self.site_listings.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// The networks supervised so far.
    pub fn networks(&self) -> Vec<NetworkHandle> {
        self.networks.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// Asks every network's supervisor to fetch its configuration and state again (a `Reload`
    /// from Home Assistant's button), each through the quota guard like any fetch. A network
    /// with a reload still waiting is not asked twice. `false` when every network had one
    /// waiting (or there is none yet).
    pub fn reload(&self) -> bool {
        let networks = self.networks.lock().unwrap_or_else(|p| p.into_inner());
        let asked = networks.values().filter(|h| h.reload.try_send(()).is_ok()).count();
        tracing::info!(networks = networks.len(), asked, "reload requested");
        asked > 0
    }

    /// The handle of one network.
    pub fn network(&self, id: &str) -> Option<NetworkHandle> {
        self.networks.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    /// What became of each credentials entry, in configuration order.
    pub fn credential_states(&self) -> Vec<CredentialState> {
        self.credentials.borrow().clone()
    }

    /// A receiver of the credentials entries' states, for waiting on their changes.
    pub fn credential_watch(&self) -> watch::Receiver<Vec<CredentialState>> {
        self.credentials.clone()
    }

    /// The REST client (its request counters feed `/metrics`).
    pub fn rest(&self) -> &RestClient {
        &self.rest
    }

    /// The window of the bridge's wake-up batching (`cloud.event_batch_window`).
    pub fn event_batch_window(&self) -> Duration {
        self.wake.window()
    }

    /// Resolves once every credentials entry is rejected at the same time (each is still tried
    /// again later). Never resolves while at least one entry runs or is logging in.
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

/// `d` to whole seconds, for messages.
fn round_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs_f64().round() as u64)
}

/// Logs one credentials entry in and starts its networks.
struct CredentialTask {
    index: usize,
    /// For a site entry: how many `networks:` entries come first (their networks win).
    after_networks: Option<usize>,
    source: SessionSource,
    rest: RestClient,
    channel: EventChannel,
    fixtures: Arc<FixtureCache>,
    updates: mpsc::Sender<Update>,
    timing: Timing,
    networks: Arc<Mutex<BTreeMap<String, NetworkHandle>>>,
    site_listings: Arc<Mutex<BTreeMap<usize, SiteListing>>>,
    states: Arc<watch::Sender<Vec<CredentialState>>>,
    gate: StartupGate,
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
        let label = self.source.label();
        let email = self.source.email().to_string();
        let mut backoff = BackoffPolicy { max_retries: None, ..BackoffPolicy::default() }.backoff();
        let mut settled = false;
        let opened = loop {
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.source.open() => r,
            };
            match attempt {
                Ok(opened) => break opened,
                Err(e) if e.is_final() => {
                    // The session manager's guard paces the next attempt (lock window, then
                    // doubling): the next `open` waits for it.
                    let retry = self.source.next_login_in().map(|d| humantime::format_duration(round_secs(d)));
                    let message = match &retry {
                        Some(after) => format!("{label}: {e}; next login attempt in {after}"),
                        None => format!("{label}: {e}"),
                    };
                    tracing::error!(%message, "credentials rejected; their networks are not bridged");
                    let _ = self.updates.send(Update::Problem { network: None, message: message.clone() }).await;
                    self.set_state(CredentialState::Rejected(message));
                    if !std::mem::replace(&mut settled, true) {
                        self.gate.login_settled();
                    }
                    if retry.is_none() {
                        // A final error the guard will not retry (settings the client cannot use).
                        return;
                    }
                }
                Err(e) => {
                    let delay = backoff.next_delay(Some(&e)).unwrap_or(Duration::from_secs(60));
                    tracing::warn!(%email, error = %e, retry_in = ?delay, "login failed; retrying");
                    let why = format!("{label}: {e}");
                    // Locked again and again: a setting at the service to change, so it is told
                    // where the user looks (docs/cloud.md#logins-and-the-lockout-guard).
                    if e == CloudError::ApiNotEnabled {
                        let _ = self.updates.send(Update::Problem { network: None, message: why.clone() }).await;
                    }
                    self.set_state(CredentialState::Retrying(why));
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        };
        for id in &opened.inaccessible {
            let message = format!("{label} do not open network {id}");
            let _ = self.updates.send(Update::Problem { network: Some(id.as_str().into()), message }).await;
        }
        if let Some(first) = self.after_networks {
            self.site_listings
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(self.index, SiteListing { email: email.clone(), networks: opened.networks.clone() });
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.network_logins_settled(first) => {}
            }
        }
        for network in opened.networks {
            let (outgoing_tx, outgoing_rx) = mpsc::channel(OUTGOING_QUEUE);
            let (reload_tx, reload_rx) = mpsc::channel(1);
            {
                let mut networks = self.networks.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(bridged) = networks.get(&network.id) {
                    tracing::info!(
                        network = %network.id,
                        bridged_with = %bridged.via,
                        also_open_to = %label,
                        "network reachable through several credentials entries; bridged once"
                    );
                    continue;
                }
                let handle = NetworkHandle {
                    id: network.id.clone(),
                    name: network.name,
                    outgoing: outgoing_tx,
                    reload: reload_tx,
                    via: label.clone(),
                    sessions: self.source.clone(),
                };
                networks.insert(network.id.clone(), handle);
            }
            let supervisor = Supervisor {
                id: network.id.as_str().into(),
                rest: self.rest.clone(),
                sessions: self.source.clone(),
                channel: self.channel.clone(),
                fixtures: self.fixtures.clone(),
                updates: self.updates.clone(),
                outgoing: outgoing_rx,
                reload: reload_rx,
                timing: self.timing.clone(),
                backoff: BackoffPolicy::default(),
                gate: self.gate.clone(),
                snapshot: self.gate.claim(),
            };
            tokio::spawn(supervisor.run(shutdown.clone()));
        }
        // Running only once its networks are claimed: a site entry waiting for it then sees
        // them, and the start-up gate counts them before it counts the login settled.
        self.set_state(CredentialState::Running);
        if !settled {
            self.gate.login_settled();
        }
    }

    /// Resolves when the first `count` entries (the `networks:` entries) have logged in or been
    /// rejected, or after [`SITE_WAIT`].
    async fn network_logins_settled(&self, count: usize) {
        let mut states = self.states.subscribe();
        let settled = states.wait_for(|s| s.iter().take(count).all(|state| !state.is_logging_in()));
        if tokio::time::timeout(SITE_WAIT, settled).await.is_err() {
            tracing::warn!(
                site = %self.source.email(),
                "network credentials still logging in; the site's networks start without waiting longer"
            );
        }
    }
}
