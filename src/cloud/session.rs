//! Sessions: [`SessionManager`] opens and renews the network sessions of one set of network
//! (admin) credentials, [`UserSessionManager`] the optional user (site) session.
//!
//! Rules (docs/cloud.md):
//! - one configured network id → `POST /v1/networks/{id}/session`; several → `POST
//!   /v1/networks/set/session` in chunks of at most 100; none → `POST /v1/networks/session`;
//! - a session is renewed after a 410 or an `invalidSession` wire status, once: concurrent renewals
//!   of the same network are coalesced (callers pass the generation they saw; if a renewal already
//!   happened since, they get the new session without another login);
//! - logins never trip the service's lockout (three failures lock for a minute): at most two
//!   failed logins per credentials per rolling minute ([`LoginGuard`]); after a 401 the next
//!   attempt waits out the lock window, and each further one waits twice as long; a 403
//!   waits out the lock, and if it persists is reported as "API not enabled or login locked" with
//!   a long backoff; 429 / 5xx / transport errors are retried with backoff.
//!
//! Logins of one manager are serialised; a caller that must not wait long wraps the call in a
//! timeout (every await point is safe to cancel: an attempt that never finished counts as failed).

mod guard;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};

use tokio::time::Instant;

pub use guard::{AfterLogin, LoginGuard, LoginPolicy, SessionPlan, plan};

use super::CloudError;
use super::model::{Credentials, NetworkSessionEntry, NetworkSessions, Secret, UserSession};
use super::rest::RestClient;

/// The current session of one network.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkSession {
    /// Network id.
    pub network_id: String,
    /// Network name as reported at login.
    pub name: String,
    /// The session id for this network (never printed).
    pub session_id: Secret,
    /// Starts at 1 and grows with every new session for this network; pass it to
    /// [`SessionManager::renew`] so concurrent renewals coalesce.
    pub generation: u64,
}

/// What [`SessionManager::open`] achieved.
#[derive(Clone, Debug, PartialEq)]
pub struct Opened {
    /// The sessions opened.
    pub sessions: Vec<NetworkSession>,
    /// Configured network ids the credentials did not open.
    pub inaccessible: Vec<String>,
}

/// Network sessions for one set of network credentials.
#[derive(Debug)]
pub struct SessionManager {
    rest: RestClient,
    creds: Credentials,
    ids: Vec<String>,
    gate: tokio::sync::Mutex<LoginGuard>,
    sessions: Mutex<BTreeMap<String, NetworkSession>>,
}

impl SessionManager {
    /// A manager for `creds`; `network_ids` empty = every network the credentials open.
    pub fn new(rest: RestClient, creds: Credentials, network_ids: Vec<String>, policy: LoginPolicy) -> Self {
        Self {
            rest,
            creds,
            ids: network_ids,
            gate: tokio::sync::Mutex::new(LoginGuard::new(policy)),
            sessions: Mutex::new(BTreeMap::new()),
        }
    }

    /// The e-mail of the credentials (fine to log).
    pub fn email(&self) -> &str {
        &self.creds.email
    }

    /// Creates the sessions of every configured network (see the module rules).
    ///
    /// With several chunks, the sessions of chunks that succeeded are kept even when a later
    /// chunk fails (and that error is returned).
    pub async fn open(&self) -> Result<Opened, CloudError> {
        let mut guard = self.gate.lock().await;
        let email = self.creds.email.as_str();
        let requested = plan(&self.ids);
        let mut received: Vec<NetworkSessions> = Vec::new();
        let mut failure = None;
        match &requested {
            SessionPlan::All => {
                match guarded_login(&mut guard, email, || self.rest.create_network_sessions(&self.creds)).await {
                    Ok(s) => received.push(s),
                    Err(e) => failure = Some(e),
                }
            }
            SessionPlan::One(id) => {
                match guarded_login(&mut guard, email, || self.rest.create_network_session(&self.creds, id)).await {
                    Ok(s) => received.push(s),
                    Err(e) => failure = Some(e),
                }
            }
            SessionPlan::Sets(chunks) => {
                for chunk in chunks {
                    let login = || self.rest.create_network_session_set(&self.creds, chunk);
                    match guarded_login(&mut guard, email, login).await {
                        Ok(s) => received.push(s),
                        Err(e) => {
                            failure = Some(e);
                            break;
                        }
                    }
                }
            }
        }
        let sessions: Vec<NetworkSession> =
            received.into_iter().flat_map(|s| s.0).filter_map(|(key, entry)| self.store(key, entry)).collect();
        if let Some(err) = failure {
            return Err(err);
        }
        let inaccessible: Vec<String> = match requested {
            SessionPlan::All => Vec::new(),
            SessionPlan::One(id) => vec![id],
            SessionPlan::Sets(chunks) => chunks.into_iter().flatten().collect(),
        }
        .into_iter()
        .filter(|id| !sessions.iter().any(|s| &s.network_id == id))
        .collect();
        tracing::info!(email, networks = sessions.len(), "network sessions opened");
        if !inaccessible.is_empty() {
            tracing::warn!(email, ?inaccessible, "networks not accessible with these credentials");
        }
        Ok(Opened { sessions, inaccessible })
    }

    /// How long until the next login may start, when it must wait (after a rejection or a
    /// lock); `None` while a login runs.
    pub fn next_login_in(&self) -> Option<std::time::Duration> {
        self.gate.try_lock().ok().and_then(|g| g.wait_at(Instant::now()))
    }

    /// The current session of a network, if one is open.
    pub fn current(&self, network_id: &str) -> Option<NetworkSession> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner).get(network_id).cloned()
    }

    /// Every open session.
    pub fn all(&self) -> Vec<NetworkSession> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect()
    }

    /// Replaces the session of `network_id` after a 410 or an `invalidSession`, where the caller
    /// used the session of generation `seen_generation`. If a newer session exists already
    /// (another task renewed it meanwhile) that one is returned without logging in again.
    pub async fn renew(&self, network_id: &str, seen_generation: u64) -> Result<NetworkSession, CloudError> {
        let mut guard = self.gate.lock().await;
        if let Some(current) = self.current(network_id)
            && current.generation > seen_generation
        {
            tracing::debug!(network_id, generation = current.generation, "session renewal coalesced");
            return Ok(current);
        }
        let email = self.creds.email.as_str();
        let sessions =
            guarded_login(&mut guard, email, || self.rest.create_network_session(&self.creds, network_id)).await?;
        let entry = sessions.0.into_iter().find(|(key, e)| key == network_id || e.id == network_id);
        let session = entry.and_then(|(key, e)| self.store(key, e)).ok_or_else(|| {
            tracing::warn!(email, network_id, "the credentials no longer open this network");
            CloudError::NotFound
        })?;
        tracing::info!(network_id, generation = session.generation, "network session renewed");
        Ok(session)
    }

    /// Records a session from a response entry; entries without a session id are skipped.
    fn store(&self, key: String, entry: NetworkSessionEntry) -> Option<NetworkSession> {
        let id = if entry.id.is_empty() { key } else { entry.id };
        if entry.session_id.is_empty() {
            tracing::warn!(network_id = %id, "session response without a session id; skipped");
            return None;
        }
        let mut map = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = map.get(&id).map_or(1, |s| s.generation + 1);
        let session =
            NetworkSession { network_id: id.clone(), name: entry.name, session_id: entry.session_id, generation };
        map.insert(id, session.clone());
        Some(session)
    }
}

/// A user session and its generation.
#[derive(Clone, Debug)]
pub struct UserSessionHandle {
    /// The session response (session id, sites, networks).
    pub session: UserSession,
    /// Grows with every new session; pass it to [`UserSessionManager::renew`].
    pub generation: u64,
}

/// The optional user (site) session for site credentials, with the same login safety.
#[derive(Debug)]
pub struct UserSessionManager {
    rest: RestClient,
    creds: Credentials,
    gate: tokio::sync::Mutex<LoginGuard>,
    current: Mutex<Option<UserSessionHandle>>,
}

impl UserSessionManager {
    /// A manager for site (user) credentials.
    pub fn new(rest: RestClient, creds: Credentials, policy: LoginPolicy) -> Self {
        Self { rest, creds, gate: tokio::sync::Mutex::new(LoginGuard::new(policy)), current: Mutex::new(None) }
    }

    /// The e-mail of the credentials (fine to log).
    pub fn email(&self) -> &str {
        &self.creds.email
    }

    /// How long until the next login may start; see [`SessionManager::next_login_in`].
    pub fn next_login_in(&self) -> Option<std::time::Duration> {
        self.gate.try_lock().ok().and_then(|g| g.wait_at(Instant::now()))
    }

    /// The current user session, if any.
    pub fn current(&self) -> Option<UserSessionHandle> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Creates a user session (or returns the current one if there is one).
    pub async fn open(&self) -> Result<UserSessionHandle, CloudError> {
        match self.current() {
            Some(handle) => Ok(handle),
            None => self.renew(0).await,
        }
    }

    /// Replaces the user session after a 410, coalesced like [`SessionManager::renew`].
    pub async fn renew(&self, seen_generation: u64) -> Result<UserSessionHandle, CloudError> {
        let mut guard = self.gate.lock().await;
        if let Some(current) = self.current().filter(|c| c.generation > seen_generation) {
            return Ok(current);
        }
        let session =
            guarded_login(&mut guard, &self.creds.email, || self.rest.create_user_session(&self.creds)).await?;
        let mut slot = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = slot.as_ref().map_or(1, |c| c.generation + 1);
        let handle = UserSessionHandle { session, generation };
        *slot = Some(handle.clone());
        tracing::info!(email = %self.creds.email, generation, "user session opened");
        Ok(handle)
    }
}

/// Runs the login `op` under the guard's rules: waits as long as the guard says, retries a first
/// 403 after the lockout and transient errors on the backoff schedule, gives up on the rest.
async fn guarded_login<T, F, Fut>(guard: &mut LoginGuard, email: &str, mut op: F) -> Result<T, CloudError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CloudError>>,
{
    let mut transient = guard.policy().transient.backoff();
    loop {
        while let Some(wait) = guard.check(Instant::now())? {
            tracing::info!(email, wait_ms = wait.as_millis() as u64, "waiting before the next login attempt");
            tokio::time::sleep(wait).await;
        }
        guard.start(Instant::now());
        let result = op().await;
        match guard.finish(Instant::now(), result.as_ref().map(|_| ())) {
            AfterLogin::Success => return result,
            AfterLogin::Retry(err) => {
                tracing::warn!(email, error = %err, "login refused; waiting for the lock to pass");
            }
            AfterLogin::Transient(err) => match transient.next_delay(Some(&err)) {
                Some(delay) => {
                    tracing::warn!(email, error = %err, delay_ms = delay.as_millis() as u64, "login failed; retrying");
                    tokio::time::sleep(delay).await;
                }
                None => return Err(err),
            },
            AfterLogin::Fail(err) => {
                tracing::error!(email, error = %err, "login failed");
                return Err(err);
            }
        }
    }
}
