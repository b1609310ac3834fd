//! The pure parts of session handling: which session endpoints to call for a list of network
//! ids ([`plan`]), and the login-safety state machine ([`LoginGuard`]) that keeps failed logins
//! under the service's lockout threshold. Time is passed in, so both are tested without sleeping.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::cloud::CloudError;
use crate::cloud::backoff::BackoffPolicy;
use crate::cloud::rest::MAX_SESSION_SET;

/// Which session-creation requests open a set of networks (docs/cloud.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionPlan {
    /// No ids configured: `POST /v1/networks/session` opens every network of the credentials.
    All,
    /// One id: `POST /v1/networks/{id}/session` (the fastest kind).
    One(String),
    /// Several ids: one `POST /v1/networks/set/session` per chunk of at most 100.
    Sets(Vec<Vec<String>>),
}

/// Plans the session requests for `ids` (blank entries dropped, duplicates removed, order kept).
pub fn plan(ids: &[String]) -> SessionPlan {
    let mut unique: Vec<String> = Vec::with_capacity(ids.len());
    for id in ids.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if !unique.iter().any(|u| u == id) {
            unique.push(id.to_owned());
        }
    }
    match unique.len() {
        0 => SessionPlan::All,
        1 => SessionPlan::One(unique.remove(0)),
        _ => SessionPlan::Sets(unique.chunks(MAX_SESSION_SET).map(<[String]>::to_vec).collect()),
    }
}

/// How logins for one set of credentials are paced.
#[derive(Clone, Debug, PartialEq)]
pub struct LoginPolicy {
    /// The rolling window failed logins are counted in (the service: one minute).
    pub failure_window: Duration,
    /// Failed logins allowed per window (the service locks at 3, so at most 2).
    pub max_failures: usize,
    /// Wait after a 403 on login before trying again (the lock lasts one minute; at least 60 s).
    pub lockout_wait: Duration,
    /// Consecutive 403s on login after which it is reported as "API not enabled or login locked".
    pub locked_attempts: u32,
    /// First wait after that report; doubles on every further report up to `not_enabled_max`.
    pub not_enabled_backoff: Duration,
    /// Cap of the wait after repeated "API not enabled" reports.
    pub not_enabled_max: Duration,
    /// Cap of the wait between attempts with credentials the service rejected (401). The first
    /// wait is `lockout_wait`; it doubles on every further rejection up to this.
    pub rejected_max: Duration,
    /// Retry schedule for 429 / 5xx / transport errors during login.
    pub transient: BackoffPolicy,
}

impl Default for LoginPolicy {
    fn default() -> Self {
        Self {
            failure_window: Duration::from_secs(60),
            max_failures: 2,
            lockout_wait: Duration::from_secs(65),
            locked_attempts: 2,
            not_enabled_backoff: Duration::from_secs(600),
            not_enabled_max: Duration::from_secs(3600),
            rejected_max: Duration::from_secs(3600),
            transient: BackoffPolicy::default(),
        }
    }
}

/// What to do after a login attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum AfterLogin {
    /// It worked.
    Success,
    /// Try again once the guard allows it (a first 403: the lockout).
    Retry(CloudError),
    /// A transient error (429, 5xx, transport): retry on the transient backoff schedule.
    Transient(CloudError),
    /// Give up and report the error (final, or a persisting 403 now in its long backoff).
    Fail(CloudError),
}

/// Login safety for one set of credentials.
///
/// Every attempt is counted as a failure *before* it is sent and un-counted when it succeeds (or
/// the server clearly did not judge the credentials: 429 and 5xx), so a cancelled or timed-out
/// attempt can never let a third failure slip through. A 401 is not tried again before the lock
/// window has passed, then ever more slowly (`lockout_wait`, doubling up to `rejected_max`): the
/// credentials may be fixed at the service while the bridge runs, and a bridge that waits never
/// makes a supervisor restart it into a login storm. A configuration error is final.
#[derive(Debug)]
pub struct LoginGuard {
    policy: LoginPolicy,
    failures: VecDeque<Instant>,
    in_flight: bool,
    not_before: Option<Instant>,
    consecutive_locked: u32,
    not_enabled_reports: u32,
    rejected_reports: u32,
    final_error: Option<CloudError>,
}

impl LoginGuard {
    /// A guard with no history.
    pub fn new(policy: LoginPolicy) -> Self {
        Self {
            policy,
            failures: VecDeque::new(),
            in_flight: false,
            not_before: None,
            consecutive_locked: 0,
            not_enabled_reports: 0,
            rejected_reports: 0,
            final_error: None,
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> &LoginPolicy {
        &self.policy
    }

    /// How long from `now` until the next attempt may start, when it must wait (after a 401 or
    /// a 403); for telling the operator.
    pub fn wait_at(&self, now: Instant) -> Option<Duration> {
        self.not_before.map(|t| t.saturating_duration_since(now)).filter(|d| !d.is_zero())
    }

    /// Whether an attempt may start at `now`: `Ok(None)` = go, `Ok(Some(d))` = wait `d` first,
    /// `Err` = never (a final error: settings the client cannot use).
    pub fn check(&mut self, now: Instant) -> Result<Option<Duration>, CloudError> {
        if let Some(err) = &self.final_error {
            return Err(err.clone());
        }
        let window = self.policy.failure_window;
        // A failure leaves the window only once it is strictly older than the window, so three
        // attempts never fit in one closed window of that length.
        while self.failures.front().is_some_and(|t| now.saturating_duration_since(*t) > window) {
            self.failures.pop_front();
        }
        let mut wait = self.not_before.map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
        let max = self.policy.max_failures.max(1);
        if let Some(oldest) = self.failures.len().checked_sub(max).and_then(|i| self.failures.get(i)) {
            let leaves = *oldest + window + Duration::from_millis(1);
            wait = wait.max(leaves.saturating_duration_since(now));
        }
        Ok((!wait.is_zero()).then_some(wait))
    }

    /// Records the start of an attempt at `now` (counted as a failure until it succeeds).
    pub fn start(&mut self, now: Instant) {
        self.failures.push_back(now);
        self.in_flight = true;
    }

    /// Records how the attempt started by [`Self::start`] ended at `now`, and says what to do.
    pub fn finish(&mut self, now: Instant, result: Result<(), &CloudError>) -> AfterLogin {
        let was_in_flight = std::mem::take(&mut self.in_flight);
        let uncount = |failures: &mut VecDeque<Instant>| {
            if was_in_flight {
                failures.pop_back();
            }
        };
        let err = match result {
            Ok(()) => {
                uncount(&mut self.failures);
                self.consecutive_locked = 0;
                self.not_enabled_reports = 0;
                self.rejected_reports = 0;
                self.not_before = None;
                return AfterLogin::Success;
            }
            Err(err) => err.clone(),
        };
        // Keep the failure, stamped with when the server answered (the later, the safer).
        if was_in_flight && let Some(last) = self.failures.back_mut() {
            *last = now;
        }
        match &err {
            CloudError::Config(_) => {
                self.final_error = Some(err.clone());
                AfterLogin::Fail(err)
            }
            CloudError::ApiKeyRejected | CloudError::UserNotFound { .. } => {
                let factor = 2u32.saturating_pow(self.rejected_reports.min(16));
                let wait = self.policy.lockout_wait.saturating_mul(factor).min(self.policy.rejected_max);
                self.rejected_reports += 1;
                self.not_before = Some(now + wait);
                AfterLogin::Fail(err)
            }
            CloudError::LoginLocked => {
                self.consecutive_locked += 1;
                if self.consecutive_locked < self.policy.locked_attempts.max(1) {
                    self.not_before = Some(now + self.policy.lockout_wait);
                    AfterLogin::Retry(err)
                } else {
                    self.consecutive_locked = 0;
                    let factor = 2u32.saturating_pow(self.not_enabled_reports.min(16));
                    let wait = self.policy.not_enabled_backoff.saturating_mul(factor).min(self.policy.not_enabled_max);
                    self.not_enabled_reports += 1;
                    self.not_before = Some(now + wait);
                    AfterLogin::Fail(CloudError::ApiNotEnabled)
                }
            }
            CloudError::QuotaExceeded { .. } | CloudError::Server { .. } => {
                // The server answered without judging the credentials.
                uncount(&mut self.failures);
                AfterLogin::Transient(err)
            }
            CloudError::Transport(_) => AfterLogin::Transient(err),
            _ => AfterLogin::Fail(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("net{i:03}")).collect()
    }

    #[test]
    fn plan_picks_the_right_endpoint() {
        assert_eq!(plan(&[]), SessionPlan::All);
        assert_eq!(plan(&[" ".into()]), SessionPlan::All);
        assert_eq!(plan(&["a".into(), "a".into()]), SessionPlan::One("a".into()));
        assert_eq!(plan(&["a".into(), "b".into()]), SessionPlan::Sets(vec![vec!["a".into(), "b".into()]]));
        let SessionPlan::Sets(chunks) = plan(&ids(250)) else { panic!() };
        assert_eq!(chunks.iter().map(Vec::len).collect::<Vec<_>>(), [100, 100, 50]);
        assert_eq!(chunks[2][49], "net249");
        let SessionPlan::Sets(chunks) = plan(&ids(100)) else { panic!() };
        assert_eq!(chunks.len(), 1);
    }

    fn policy() -> LoginPolicy {
        LoginPolicy {
            failure_window: Duration::from_secs(60),
            lockout_wait: Duration::from_secs(65),
            ..LoginPolicy::default()
        }
    }

    fn user_not_found() -> CloudError {
        CloudError::UserNotFound { email: "a@example.com".into() }
    }

    /// Runs one attempt at `at` with `result`.
    fn attempt(g: &mut LoginGuard, at: Instant, result: Result<(), CloudError>) -> AfterLogin {
        g.start(at);
        g.finish(at, result.as_ref().map(|_| ()))
    }

    #[test]
    fn never_more_than_two_failures_per_rolling_minute() {
        let t0 = Instant::now();
        let mut g = LoginGuard::new(policy());
        let transport = || Err(CloudError::Transport("timed out".into()));
        assert_eq!(g.check(t0), Ok(None));
        assert!(matches!(attempt(&mut g, t0, transport()), AfterLogin::Transient(_)));
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(g.check(t1), Ok(None));
        assert!(matches!(attempt(&mut g, t1, transport()), AfterLogin::Transient(_)));
        // Two failures in the window: the third must wait until the first leaves it.
        let ms = Duration::from_millis;
        let t2 = t0 + Duration::from_secs(20);
        assert_eq!(g.check(t2), Ok(Some(Duration::from_secs(40) + ms(1))));
        assert_eq!(g.check(t0 + Duration::from_secs(60)), Ok(Some(ms(1))));
        assert_eq!(g.check(t0 + Duration::from_secs(60) + ms(1)), Ok(None));
    }

    #[test]
    fn rolling_window_over_many_attempts() {
        let t0 = Instant::now();
        let mut g = LoginGuard::new(policy());
        let mut now = t0;
        let mut starts = Vec::new();
        for _ in 0..10 {
            if let Ok(Some(wait)) = g.check(now) {
                now += wait;
            }
            assert_eq!(g.check(now), Ok(None));
            starts.push(now);
            let _ = attempt(&mut g, now, Err(CloudError::Transport("x".into())));
            now += Duration::from_secs(1);
        }
        for w in starts.windows(3) {
            assert!(w[2] - w[0] > Duration::from_secs(60), "{starts:?}");
        }
    }

    #[test]
    fn success_and_server_errors_do_not_count() {
        let t0 = Instant::now();
        let mut g = LoginGuard::new(policy());
        assert_eq!(attempt(&mut g, t0, Ok(())), AfterLogin::Success);
        let e503 = CloudError::Server { status: 503, message: String::new() };
        assert!(matches!(attempt(&mut g, t0, Err(e503)), AfterLogin::Transient(_)));
        let e429 = CloudError::QuotaExceeded { retry_after: None };
        assert!(matches!(attempt(&mut g, t0, Err(e429)), AfterLogin::Transient(_)));
        assert_eq!(g.check(t0), Ok(None));
    }

    #[test]
    fn an_unfinished_attempt_counts_as_failed() {
        let t0 = Instant::now();
        let mut g = LoginGuard::new(policy());
        g.start(t0); // cancelled: never finished
        g.start(t0); // cancelled again
        assert!(g.check(t0).unwrap().is_some());
    }

    #[test]
    fn a_401_waits_out_the_lock_window_then_ever_longer() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut g = LoginGuard::new(policy());
        assert_eq!(attempt(&mut g, t0, Err(user_not_found())), AfterLogin::Fail(user_not_found()));
        assert_eq!(g.check(t0), Ok(Some(s(65))));
        // Each further rejection doubles the wait, up to an hour.
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..8 {
            let wait = g.check(now).unwrap().unwrap();
            waits.push(wait.as_secs());
            now += wait;
            assert_eq!(g.check(now), Ok(None));
            assert_eq!(
                attempt(&mut g, now, Err(CloudError::ApiKeyRejected)),
                AfterLogin::Fail(CloudError::ApiKeyRejected)
            );
        }
        assert_eq!(waits, [65, 130, 260, 520, 1040, 2080, 3600, 3600]);
        // Credentials fixed at the service: a success clears it all.
        now += g.check(now).unwrap().unwrap();
        assert_eq!(attempt(&mut g, now, Ok(())), AfterLogin::Success);
        assert_eq!(g.check(now), Ok(None));
        assert_eq!(attempt(&mut g, now, Err(user_not_found())), AfterLogin::Fail(user_not_found()));
        assert_eq!(g.check(now), Ok(Some(s(65))));
    }

    #[test]
    fn a_configuration_error_is_final() {
        let t0 = Instant::now();
        let mut g = LoginGuard::new(policy());
        let bad = CloudError::Config("bad header".into());
        assert_eq!(attempt(&mut g, t0, Err(bad.clone())), AfterLogin::Fail(bad.clone()));
        assert_eq!(g.check(t0 + Duration::from_secs(3600)), Err(bad));
    }

    #[test]
    fn a_403_waits_then_escalates_with_long_backoff() {
        let t0 = Instant::now();
        let mut g = LoginGuard::new(policy());
        assert_eq!(attempt(&mut g, t0, Err(CloudError::LoginLocked)), AfterLogin::Retry(CloudError::LoginLocked));
        assert_eq!(g.check(t0), Ok(Some(Duration::from_secs(65))));
        let t1 = t0 + Duration::from_secs(65);
        assert_eq!(g.check(t1), Ok(None));
        assert_eq!(attempt(&mut g, t1, Err(CloudError::LoginLocked)), AfterLogin::Fail(CloudError::ApiNotEnabled));
        assert_eq!(g.check(t1), Ok(Some(Duration::from_secs(600))));
        // Persisting: the next report waits twice as long, capped at an hour.
        let t2 = t1 + Duration::from_secs(600);
        assert!(matches!(attempt(&mut g, t2, Err(CloudError::LoginLocked)), AfterLogin::Retry(_)));
        let t3 = t2 + Duration::from_secs(65);
        assert_eq!(attempt(&mut g, t3, Err(CloudError::LoginLocked)), AfterLogin::Fail(CloudError::ApiNotEnabled));
        assert_eq!(g.check(t3), Ok(Some(Duration::from_secs(1200))));
        // A success clears it all.
        let t4 = t3 + Duration::from_secs(1200);
        assert_eq!(attempt(&mut g, t4, Ok(())), AfterLogin::Success);
        assert_eq!(g.check(t4 + Duration::from_secs(60)), Ok(None));
    }
}
