//! The simulated service's access rules: API keys (enabled or not), logins with the lockout after
//! three failures, sessions of both kinds with a lifetime, and per-key quotas (requests per rolling
//! minute, concurrent requests, and an injectable "quota exhausted until").
//!
//! Time is passed in (`now`) rather than read, so the rules can be tested without sleeping.

use super::site::{ApiKey, Site, User};
use rand::Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How a request's API key fares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// Unknown key: 401 with reason phrase `Api authorization failed.`.
    Rejected,
    /// The API is not enabled for this key: 403.
    NotEnabled,
}

/// Why a login failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginError {
    /// Wrong e-mail or password: 401 (counts toward the lockout).
    BadCredentials,
    /// Login is locked after three failures: 403 (does not count).
    Locked,
    /// More than 100 networks in a session set: 400.
    TooManyNetworks,
    /// The network in the path does not exist: 404.
    UnknownNetwork,
}

/// Why a session was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    /// Unknown, expired or not valid for this network: 410.
    Invalid,
}

/// What a session opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionScope {
    /// A user (site) session: every network of the user's site.
    User(Vec<String>),
    /// A network session: one network.
    Network(String),
}

#[derive(Debug, Clone)]
struct Session {
    scope: SessionScope,
    created: Instant,
}

#[derive(Debug, Default, Clone)]
struct Failures {
    count: u32,
    locked_until: Option<Instant>,
}

/// Quota state of one API key.
#[derive(Debug)]
struct KeyState {
    key: ApiKey,
    window: VecDeque<Instant>,
    in_flight: Arc<AtomicU32>,
    exhausted_until: Option<Instant>,
}

/// Keeps one request counted as in flight until dropped.
#[derive(Debug)]
pub struct InFlight(Arc<AtomicU32>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The access rules and their state.
#[derive(Debug)]
pub struct Auth {
    keys: HashMap<String, KeyState>,
    users: Vec<User>,
    /// (network id, e-mail, password) of every network's admin credentials.
    network_credentials: Vec<(String, String, String)>,
    all_networks: Vec<String>,
    sessions: HashMap<String, Session>,
    failures: HashMap<String, Failures>,
    lock_duration: Duration,
    session_lifetime: Option<Duration>,
}

impl Auth {
    /// Builds the rules from a site. `session_lifetime` `None` = sessions never expire by age.
    pub fn new(site: &Site, lock_duration: Duration, session_lifetime: Option<Duration>) -> Auth {
        Auth {
            keys: site
                .api_keys
                .iter()
                .map(|k| {
                    let state = KeyState {
                        key: k.clone(),
                        window: VecDeque::new(),
                        in_flight: Arc::new(AtomicU32::new(0)),
                        exhausted_until: None,
                    };
                    (k.key.clone(), state)
                })
                .collect(),
            users: site.users.clone(),
            network_credentials: site
                .networks
                .iter()
                .map(|n| (n.id.clone(), n.credentials.email.clone(), n.credentials.password.clone()))
                .collect(),
            all_networks: site.networks.iter().map(|n| n.id.clone()).collect(),
            sessions: HashMap::new(),
            failures: HashMap::new(),
            lock_duration,
            session_lifetime,
        }
    }

    /// Checks an API key (every request, and the WebSocket subprotocol).
    pub fn check_key(&self, key: Option<&str>) -> Result<&ApiKey, KeyError> {
        let state = key.and_then(|k| self.keys.get(k)).ok_or(KeyError::Rejected)?;
        if state.key.enabled { Ok(&state.key) } else { Err(KeyError::NotEnabled) }
    }

    /// The key's socket limit (WebSocket connections at once).
    pub fn max_sockets(&self, key: &str) -> u32 {
        self.keys.get(key).map_or(0, |k| k.key.max_sockets)
    }

    /// Admits one request under the key's quotas, or refuses it (429). The returned guard keeps it
    /// counted as concurrent until dropped.
    pub fn admit(&mut self, key: &str, now: Instant) -> Option<InFlight> {
        let state = self.keys.get_mut(key)?;
        if state.exhausted_until.is_some_and(|t| now < t) {
            return None;
        }
        while state.window.front().is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60)) {
            state.window.pop_front();
        }
        if state.window.len() >= state.key.requests_per_minute as usize {
            return None;
        }
        if state.in_flight.load(Ordering::SeqCst) >= state.key.concurrent_requests {
            return None;
        }
        state.window.push_back(now);
        state.in_flight.fetch_add(1, Ordering::SeqCst);
        Some(InFlight(state.in_flight.clone()))
    }

    /// How long a refused key should wait before its next request can be admitted: until the
    /// injected exhaustion ends, or the oldest request leaves the rolling minute, or (for the
    /// concurrency limit) a short moment. At least one second, for the `Retry-After` header.
    pub fn retry_after(&self, key: &str, now: Instant) -> Duration {
        let Some(state) = self.keys.get(key) else { return Duration::from_secs(60) };
        let mut wait = Duration::ZERO;
        if let Some(until) = state.exhausted_until.filter(|t| now < *t) {
            wait = wait.max(until - now);
        }
        if state.window.len() >= state.key.requests_per_minute as usize {
            let oldest = state.window.front().copied().unwrap_or(now);
            wait = wait.max(Duration::from_secs(60).saturating_sub(now.duration_since(oldest)));
        }
        wait.max(Duration::from_secs(1))
    }

    /// Makes every request of a key fail with 429 until `until` (fault injection).
    pub fn exhaust_quota(&mut self, key: &str, until: Instant) {
        if let Some(state) = self.keys.get_mut(key) {
            state.exhausted_until = Some(until);
        }
    }

    /// Refuses logins during the lock; the lock is answered with 403 and does not count.
    fn check_lock(&mut self, email: &str, now: Instant) -> Result<(), LoginError> {
        let f = self.failures.entry(email.to_ascii_lowercase()).or_default();
        match f.locked_until {
            Some(t) if now < t => Err(LoginError::Locked),
            Some(_) => {
                f.locked_until = None;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn record(&mut self, email: &str, ok: bool, now: Instant) {
        let f = self.failures.entry(email.to_ascii_lowercase()).or_default();
        if ok {
            f.count = 0;
            return;
        }
        f.count += 1;
        if f.count >= 3 {
            f.count = 0;
            f.locked_until = Some(now + self.lock_duration);
        }
    }

    fn new_session(&mut self, scope: SessionScope, now: Instant) -> String {
        let mut rng = rand::rng();
        let id: String = (0..40)
            .map(|_| {
                const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-";
                ALPHABET[rng.random_range(0..ALPHABET.len())] as char
            })
            .chain("__".chars())
            .collect();
        self.sessions.insert(id.clone(), Session { scope, created: now });
        id
    }

    /// `POST /v1/users/session`: site credentials → one user session and the user's networks.
    pub fn login_user(&mut self, email: &str, password: &str, now: Instant) -> Result<(String, User), LoginError> {
        self.check_lock(email, now)?;
        let user = self.users.iter().find(|u| u.email.eq_ignore_ascii_case(email) && u.password == password).cloned();
        self.record(email, user.is_some(), now);
        let mut user = user.ok_or(LoginError::BadCredentials)?;
        if user.networks.is_empty() {
            user.networks = self.all_networks.clone();
        }
        let id = self.new_session(SessionScope::User(user.networks.clone()), now);
        Ok((id, user))
    }

    /// Network session creation. `wanted`: `None` = every network of the credentials (the
    /// all-networks endpoint); `Some(ids)` = only those (the set endpoint or a single id).
    /// Returns (network id, session id) for each accessible network, in site order.
    pub fn login_networks(
        &mut self,
        email: &str,
        password: &str,
        wanted: Option<&[String]>,
        now: Instant,
    ) -> Result<Vec<(String, String)>, LoginError> {
        if wanted.is_some_and(|w| w.len() > 100) {
            return Err(LoginError::TooManyNetworks);
        }
        self.check_lock(email, now)?;
        let opened: Vec<String> = self
            .network_credentials
            .iter()
            .filter(|(_, e, p)| e.eq_ignore_ascii_case(email) && p == password)
            .map(|(id, _, _)| id.clone())
            .collect();
        self.record(email, !opened.is_empty(), now);
        if opened.is_empty() {
            return Err(LoginError::BadCredentials);
        }
        let chosen: Vec<String> = match wanted {
            None => opened,
            Some(w) => opened.into_iter().filter(|id| w.contains(id)).collect(),
        };
        Ok(chosen
            .into_iter()
            .map(|net| {
                let sid = self.new_session(SessionScope::Network(net.clone()), now);
                (net, sid)
            })
            .collect())
    }

    /// `POST /v1/networks/{id}/session`: a session for one network, opened only by that
    /// network's own credentials (credentials of another network count as a failed login).
    /// An unknown network is refused before the credentials are looked at.
    pub fn login_network(
        &mut self,
        email: &str,
        password: &str,
        network: &str,
        now: Instant,
    ) -> Result<String, LoginError> {
        if !self.network_exists(network) {
            return Err(LoginError::UnknownNetwork);
        }
        self.check_lock(email, now)?;
        let ok = self
            .network_credentials
            .iter()
            .any(|(id, e, p)| id == network && e.eq_ignore_ascii_case(email) && p == password);
        self.record(email, ok, now);
        if !ok {
            return Err(LoginError::BadCredentials);
        }
        Ok(self.new_session(SessionScope::Network(network.to_string()), now))
    }

    /// Whether a network exists (for 404 on a session by network id).
    pub fn network_exists(&self, id: &str) -> bool {
        self.all_networks.iter().any(|n| n == id)
    }

    /// Checks a session for a network (`None` = any network, e.g. a user-level read).
    pub fn check_session(
        &self,
        session: Option<&str>,
        network: Option<&str>,
        now: Instant,
    ) -> Result<(), SessionError> {
        let s = session.and_then(|id| self.sessions.get(id)).ok_or(SessionError::Invalid)?;
        if self.session_lifetime.is_some_and(|life| now.duration_since(s.created) >= life) {
            return Err(SessionError::Invalid);
        }
        let allowed = match (&s.scope, network) {
            (_, None) => true,
            (SessionScope::Network(n), Some(net)) => n == net,
            (SessionScope::User(nets), Some(net)) => nets.iter().any(|n| n == net),
        };
        if allowed { Ok(()) } else { Err(SessionError::Invalid) }
    }

    /// Expires every session (fault injection): the next use of any gives 410.
    pub fn expire_sessions(&mut self) {
        self.sessions.clear();
    }

    /// Number of live sessions (for tests).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::site::{DEMO_API_KEY, DEMO_NETWORK_EMAIL, DEMO_PASSWORD, DEMO_USER_EMAIL};

    fn auth() -> Auth {
        Auth::new(&Site::demo(), Duration::from_secs(60), Some(Duration::from_secs(3600)))
    }

    #[test]
    fn third_failure_locks_for_the_lock_duration() {
        let mut a = auth();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(a.login_networks(DEMO_NETWORK_EMAIL, "bad", None, t0), Err(LoginError::BadCredentials));
        }
        // Locked, even with the right password.
        assert_eq!(a.login_networks(DEMO_NETWORK_EMAIL, DEMO_PASSWORD, None, t0), Err(LoginError::Locked));
        let later = t0 + Duration::from_secs(60);
        assert_eq!(a.login_networks(DEMO_NETWORK_EMAIL, DEMO_PASSWORD, None, later).unwrap().len(), 2);
    }

    #[test]
    fn sessions_expire_after_their_lifetime_and_are_scoped() {
        let mut a = auth();
        let t0 = Instant::now();
        let sessions = a.login_networks(DEMO_NETWORK_EMAIL, DEMO_PASSWORD, None, t0).unwrap();
        let (net, sid) = &sessions[0];
        let other = &sessions[1].0;
        assert_eq!(a.check_session(Some(sid), Some(net), t0), Ok(()));
        assert_eq!(a.check_session(Some(sid), Some(other), t0), Err(SessionError::Invalid));
        let late = t0 + Duration::from_secs(3600);
        assert_eq!(a.check_session(Some(sid), Some(net), late), Err(SessionError::Invalid));
        let (user_sid, _) = a.login_user(DEMO_USER_EMAIL, DEMO_PASSWORD, t0).unwrap();
        assert_eq!(a.check_session(Some(&user_sid), Some(other), t0), Ok(()));
        a.expire_sessions();
        assert_eq!(a.check_session(Some(&user_sid), Some(other), t0), Err(SessionError::Invalid));
    }

    #[test]
    fn user_credentials_do_not_open_network_sessions() {
        let mut a = auth();
        let t0 = Instant::now();
        assert_eq!(a.login_networks(DEMO_USER_EMAIL, DEMO_PASSWORD, None, t0), Err(LoginError::BadCredentials));
        assert_eq!(a.login_user(DEMO_NETWORK_EMAIL, DEMO_PASSWORD, t0).map(|_| ()), Err(LoginError::BadCredentials));
    }

    #[test]
    fn quota_limits_rate_and_concurrency() {
        let mut site = Site::demo();
        site.api_keys[0].requests_per_minute = 3;
        site.api_keys[0].concurrent_requests = 2;
        let mut a = Auth::new(&site, Duration::from_secs(60), None);
        let t0 = Instant::now();
        let g1 = a.admit(DEMO_API_KEY, t0).unwrap();
        let g2 = a.admit(DEMO_API_KEY, t0).unwrap();
        assert!(a.admit(DEMO_API_KEY, t0).is_none(), "third concurrent request refused");
        drop((g1, g2));
        assert!(a.admit(DEMO_API_KEY, t0).is_some());
        assert!(a.admit(DEMO_API_KEY, t0).is_none(), "fourth request in a minute refused");
        assert!(a.admit(DEMO_API_KEY, t0 + Duration::from_secs(60)).is_some());
        a.exhaust_quota(DEMO_API_KEY, t0 + Duration::from_secs(120));
        assert!(a.admit(DEMO_API_KEY, t0 + Duration::from_secs(119)).is_none());
    }

    #[test]
    fn single_network_login_checks_that_network() {
        let mut site = Site::demo();
        site.networks[1].credentials.password = "other".into();
        let home = site.networks[0].id.clone();
        let office = site.networks[1].id.clone();
        let mut a = Auth::new(&site, Duration::from_secs(60), None);
        let t0 = Instant::now();
        let sid = a.login_network(DEMO_NETWORK_EMAIL, DEMO_PASSWORD, &home, t0).unwrap();
        assert_eq!(a.check_session(Some(&sid), Some(&home), t0), Ok(()));
        assert_eq!(a.check_session(Some(&sid), Some(&office), t0), Err(SessionError::Invalid));
        assert_eq!(a.login_network(DEMO_NETWORK_EMAIL, DEMO_PASSWORD, &office, t0), Err(LoginError::BadCredentials));
        assert_eq!(a.login_network(DEMO_NETWORK_EMAIL, DEMO_PASSWORD, "nope", t0), Err(LoginError::UnknownNetwork));
    }

    #[test]
    fn retry_after_follows_the_window() {
        let mut site = Site::demo();
        site.api_keys[0].requests_per_minute = 1;
        let mut a = Auth::new(&site, Duration::from_secs(60), None);
        let t0 = Instant::now();
        drop(a.admit(DEMO_API_KEY, t0));
        assert!(a.admit(DEMO_API_KEY, t0 + Duration::from_secs(20)).is_none());
        assert_eq!(a.retry_after(DEMO_API_KEY, t0 + Duration::from_secs(20)), Duration::from_secs(40));
        a.exhaust_quota(DEMO_API_KEY, t0 + Duration::from_secs(300));
        assert_eq!(a.retry_after(DEMO_API_KEY, t0 + Duration::from_secs(20)), Duration::from_secs(280));
    }

    #[test]
    fn keys() {
        let mut site = Site::demo();
        site.api_keys.push(ApiKey { key: "off".into(), enabled: false, ..site.api_keys[0].clone() });
        let a = Auth::new(&site, Duration::from_secs(60), None);
        assert!(a.check_key(Some(DEMO_API_KEY)).is_ok());
        assert_eq!(a.check_key(Some("nope")).err(), Some(KeyError::Rejected));
        assert_eq!(a.check_key(None).err(), Some(KeyError::Rejected));
        assert_eq!(a.check_key(Some("off")).err(), Some(KeyError::NotEnabled));
    }
}
