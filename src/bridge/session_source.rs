//! Where a supervised network's session comes from (docs/cloud.md#sessions): its own network
//! session, opened with network (admin) credentials, or the one user session of a site login,
//! which every network of the user shares. The supervisor asks for "the session of my network"
//! and "a new one after this generation was refused"; which kind answers is this module's
//! concern alone.

use crate::cloud::CloudError;
use crate::cloud::datapoints::SessionProvider;
use crate::cloud::model::Credentials;
use crate::cloud::model::Secret;
use crate::cloud::rest::RestClient;
use crate::cloud::session::{LoginPolicy, NetworkSession, SessionManager, UserSessionHandle, UserSessionManager};
use std::sync::Arc;

/// A session id usable for one network, and its generation (pass it back to
/// [`SessionSource::renew`] so concurrent renewals coalesce).
#[derive(Clone, Debug)]
pub struct Session {
    /// The session id (never printed).
    pub id: Secret,
    /// Grows with every new session of the source.
    pub generation: u64,
}

/// A network a login opened: its id and its name as the login reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenedNetwork {
    /// Network id.
    pub id: String,
    /// Network name.
    pub name: String,
}

/// What a login opened.
#[derive(Clone, Debug, Default)]
pub struct Opened {
    /// The networks to bridge.
    pub networks: Vec<OpenedNetwork>,
    /// Configured network ids the login did not open.
    pub inaccessible: Vec<String>,
}

/// The sessions of one credentials entry.
#[derive(Clone, Debug)]
pub enum SessionSource {
    /// Network (admin) credentials: one session per network.
    Network(Arc<SessionManager>),
    /// Site (user) credentials: one user session for every network of the user; `ids` empty =
    /// every network of the user.
    User {
        /// The user session.
        manager: Arc<UserSessionManager>,
        /// The network ids to bridge.
        ids: Vec<String>,
    },
}

impl SessionSource {
    /// The sessions of a `networks:` entry: one per network of `ids` (empty: every network the
    /// credentials open).
    pub fn network_login(rest: &RestClient, credentials: Credentials, ids: Vec<String>, policy: LoginPolicy) -> Self {
        SessionSource::Network(Arc::new(SessionManager::new(rest.clone(), credentials, ids, policy)))
    }

    /// The user session of a `sites:` entry, for the networks of `ids` (empty: every network of
    /// the user).
    pub fn site_login(rest: &RestClient, credentials: Credentials, ids: Vec<String>, policy: LoginPolicy) -> Self {
        SessionSource::User { manager: Arc::new(UserSessionManager::new(rest.clone(), credentials, policy)), ids }
    }

    /// Runs a REST call with the session of network `id`; after a 410 gets one new session and
    /// retries once.
    pub async fn with_session<T, F, Fut>(&self, id: &str, op: F) -> Result<T, CloudError>
    where
        F: Fn(Secret) -> Fut,
        Fut: std::future::Future<Output = Result<T, CloudError>>,
    {
        let session = self.current(id).await?;
        match op(session.id).await {
            Err(e) if e.is_session_expired() => {
                tracing::info!(network = %id, "session expired; renewing it");
                let session = self.renew(id, session.generation).await?;
                op(session.id).await
            }
            other => other,
        }
    }

    /// The e-mail of the credentials (fine to log).
    pub fn email(&self) -> &str {
        match self {
            SessionSource::Network(m) => m.email(),
            SessionSource::User { manager, .. } => manager.email(),
        }
    }

    /// How logs and problems name the credentials entry.
    pub fn label(&self) -> String {
        match self {
            SessionSource::Network(m) => format!("credentials {}", m.email()),
            SessionSource::User { manager, .. } => format!("site credentials {}", manager.email()),
        }
    }

    /// How long until the next login may start, when it must wait (after a rejection or a lock).
    pub fn next_login_in(&self) -> Option<std::time::Duration> {
        match self {
            SessionSource::Network(m) => m.next_login_in(),
            SessionSource::User { manager, .. } => manager.next_login_in(),
        }
    }

    /// Logs in: the network sessions, or the user session, and the networks they open.
    pub async fn open(&self) -> Result<Opened, CloudError> {
        match self {
            SessionSource::Network(m) => {
                let opened = m.open().await?;
                let networks =
                    opened.sessions.into_iter().map(|s| OpenedNetwork { id: s.network_id, name: s.name }).collect();
                Ok(Opened { networks, inaccessible: opened.inaccessible })
            }
            SessionSource::User { manager, ids } => {
                let handle = manager.open().await?;
                let mut networks: Vec<OpenedNetwork> =
                    user_networks(&handle).filter(|n| ids.is_empty() || ids.contains(&n.id)).collect();
                networks.sort_by(|a, b| a.id.cmp(&b.id));
                networks.dedup_by(|a, b| a.id == b.id);
                let inaccessible =
                    ids.iter().filter(|id| !networks.iter().any(|n| &n.id == *id)).cloned().collect::<Vec<_>>();
                tracing::info!(email = manager.email(), networks = networks.len(), "user session opened its networks");
                if !inaccessible.is_empty() {
                    tracing::warn!(email = manager.email(), ?inaccessible, "networks not among the user's networks");
                }
                Ok(Opened { networks, inaccessible })
            }
        }
    }

    /// The current session for `network`, or a new one when there is none.
    pub async fn current(&self, network: &str) -> Result<Session, CloudError> {
        match self {
            SessionSource::Network(m) => match m.current(network) {
                Some(session) => Ok(session.into()),
                None => network_login(m, network, 0).await.map(Session::from),
            },
            SessionSource::User { manager, .. } => manager.open().await.map(Session::from),
        }
    }

    /// A new session for `network` after the one of generation `seen` was refused (a 410, an
    /// `invalidSession`). A user session is renewed once for all its networks: a caller that
    /// saw an older generation gets the newer session without another login.
    pub async fn renew(&self, network: &str, seen: u64) -> Result<Session, CloudError> {
        match self {
            SessionSource::Network(m) => network_login(m, network, seen).await.map(Session::from),
            SessionSource::User { manager, .. } => {
                let handle = manager.renew(seen).await?;
                if !user_networks(&handle).any(|n| n.id == network) {
                    tracing::warn!(email = manager.email(), network, "the user no longer opens this network");
                    return Err(CloudError::NotFound);
                }
                Ok(handle.into())
            }
        }
    }
}

/// The datapoint fetcher asks the same source as the supervisor, so a 410 mid-fetch renews the
/// one session every reader of the network shares.
impl SessionProvider for SessionSource {
    async fn session(&self, network: &str) -> Result<(Secret, u64), CloudError> {
        self.current(network).await.map(|s| (s.id, s.generation))
    }

    async fn renew(&self, network: &str, seen_generation: u64) -> Result<(Secret, u64), CloudError> {
        SessionSource::renew(self, network, seen_generation).await.map(|s| (s.id, s.generation))
    }
}

/// Every network a user session lists, at the top level or under one of its sites.
fn user_networks(handle: &UserSessionHandle) -> impl Iterator<Item = OpenedNetwork> + '_ {
    let session = &handle.session;
    session.networks.iter().chain(session.sites.values().flat_map(|s| s.networks.iter())).map(|(key, n)| {
        OpenedNetwork { id: if n.id.is_empty() { key.clone() } else { n.id.clone() }, name: n.name.clone() }
    })
}

impl From<NetworkSession> for Session {
    fn from(s: NetworkSession) -> Self {
        Session { id: s.session_id, generation: s.generation }
    }
}

impl From<UserSessionHandle> for Session {
    fn from(h: UserSessionHandle) -> Self {
        Session { id: h.session.session_id, generation: h.generation }
    }
}

/// Renews the session of `network` in a task of its own, which runs to its end even when the
/// caller stops waiting (a poll raced against the wire's events is dropped when an event comes
/// first). The lockout guard counts a login as failed until it succeeds, so a login dropped
/// half-way would hold every further login of the credentials back for the guard's minute.
async fn network_login(manager: &Arc<SessionManager>, network: &str, seen: u64) -> Result<NetworkSession, CloudError> {
    let (manager, network) = (Arc::clone(manager), network.to_string());
    let login = tokio::spawn(async move { manager.renew(&network, seen).await });
    login.await.unwrap_or_else(|e| Err(CloudError::Transport(format!("the login task ended early: {e}"))))
}
