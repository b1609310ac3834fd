//! The retry schedule for 429 / 5xx / transport errors: exponential (backon) with *full jitter*
//! (a uniformly random delay between 0 and the exponential value, so many clients that failed
//! together do not retry together), honouring `Retry-After` when the server sends one.

use std::future::Future;
use std::time::{Duration, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder, Retryable};
use rand::Rng;

use super::CloudError;

/// The retry schedule for transient errors (429, 5xx, transport).
#[derive(Clone, Debug, PartialEq)]
pub struct BackoffPolicy {
    /// First delay (before jitter).
    pub min_delay: Duration,
    /// Cap of the exponential delay.
    pub max_delay: Duration,
    /// Growth factor per attempt.
    pub factor: f32,
    /// Retries after the first attempt; `None` = retry forever.
    pub max_retries: Option<usize>,
    /// Cap on a server's `Retry-After` (a broken header must not park the client for days).
    pub max_retry_after: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            factor: 2.0,
            max_retries: Some(6),
            max_retry_after: MAX_RETRY_AFTER,
        }
    }
}

impl BackoffPolicy {
    /// The exponential schedule without jitter (jitter is applied in [`Self::delay_for`]).
    pub fn builder(&self) -> ExponentialBuilder {
        let b = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(self.factor);
        match self.max_retries {
            Some(n) => b.with_max_times(n),
            None => b.without_max_times(),
        }
    }

    /// A fresh stateful schedule, for loops that are not a single retried call.
    pub fn backoff(&self) -> Backoff {
        Backoff { policy: self.clone(), schedule: self.builder().build() }
    }

    /// The delay to wait after `err`, given the schedule's current exponential value `base`:
    /// full jitter over `base`, but never less than the server's `Retry-After` (capped).
    pub fn delay_for(&self, base: Duration, err: Option<&CloudError>) -> Duration {
        let jittered = full_jitter(base);
        match err.and_then(CloudError::retry_after) {
            Some(after) => jittered.max(after.min(self.max_retry_after)),
            None => jittered,
        }
    }
}

/// A running backoff schedule (see [`BackoffPolicy::backoff`]).
#[derive(Debug)]
pub struct Backoff {
    policy: BackoffPolicy,
    schedule: <ExponentialBuilder as BackoffBuilder>::Backoff,
}

impl Backoff {
    /// The next delay after `err`, or `None` when the retries are used up.
    pub fn next_delay(&mut self, err: Option<&CloudError>) -> Option<Duration> {
        self.schedule.next().map(|base| self.policy.delay_for(base, err))
    }

    /// Starts over (after a success).
    pub fn reset(&mut self) {
        self.schedule = self.policy.builder().build();
    }
}

/// A uniformly random duration in `0..=d` ("full jitter").
pub fn full_jitter(d: Duration) -> Duration {
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::rng().random_range(0..=nanos))
}

/// The longest `Retry-After` taken (docs/cloud.md#quota-429): a 429's pause stops every request
/// of the API key (polls, logins, resyncs), and a broken header must not park them for days.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(15 * 60);

/// Parses a `Retry-After` header: delay-seconds or an HTTP date (relative to `now`), at most
/// [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let after = match value.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => {
            let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
            let now: chrono::DateTime<chrono::Utc> = now.into();
            (when.with_timezone(&chrono::Utc) - now).to_std().unwrap_or(Duration::ZERO)
        }
    };
    Some(after.min(MAX_RETRY_AFTER))
}

/// Runs `op`, retrying transient errors (429, 5xx, transport) on `policy`'s schedule. Other errors
/// (410, 401, 404, …) return at once: they need a decision, not a retry.
pub async fn retry<T, F, Fut>(policy: &BackoffPolicy, what: &str, op: F) -> Result<T, CloudError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CloudError>>,
{
    op.retry(policy.builder())
        .when(CloudError::is_transient)
        .adjust(|err, base| base.map(|b| policy.delay_for(b, Some(err))))
        .notify(|err, delay| tracing::warn!(what, error = %err, delay_ms = delay.as_millis() as u64, "retrying"))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn fast() -> BackoffPolicy {
        BackoffPolicy {
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            max_retries: Some(3),
            ..BackoffPolicy::default()
        }
    }

    #[test]
    fn full_jitter_stays_in_range() {
        let d = Duration::from_millis(500);
        for _ in 0..1000 {
            assert!(full_jitter(d) <= d);
        }
        assert_eq!(full_jitter(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 2015-10-21 07:28:00 UTC
        assert_eq!(parse_retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        // A day, or a date years ahead, pauses every request of the key: capped.
        assert_eq!(parse_retry_after("86400", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("Fri, 21 Oct 2033 07:28:00 GMT", now), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn delay_honours_retry_after_with_cap() {
        let p = BackoffPolicy { max_retry_after: Duration::from_secs(60), ..BackoffPolicy::default() };
        let e = CloudError::QuotaExceeded { retry_after: Some(Duration::from_secs(30)) };
        let d = p.delay_for(Duration::from_secs(1), Some(&e));
        assert!((Duration::from_secs(30)..=Duration::from_secs(31)).contains(&d));
        let huge = CloudError::QuotaExceeded { retry_after: Some(Duration::from_secs(86_400)) };
        assert!(p.delay_for(Duration::from_secs(1), Some(&huge)) <= Duration::from_secs(60));
        assert!(p.delay_for(Duration::from_secs(8), None) <= Duration::from_secs(8));
    }

    #[test]
    fn schedule_grows_caps_and_ends() {
        let p = BackoffPolicy {
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(4),
            factor: 2.0,
            max_retries: Some(5),
            max_retry_after: Duration::from_secs(60),
        };
        let bases: Vec<_> = p.builder().build().collect();
        assert_eq!(bases, [1, 2, 4, 4, 4].map(Duration::from_secs));
        let mut b = p.backoff();
        for _ in 0..5 {
            assert!(b.next_delay(None).is_some_and(|d| d <= Duration::from_secs(4)));
        }
        assert_eq!(b.next_delay(None), None);
        b.reset();
        assert!(b.next_delay(None).is_some());
    }

    #[tokio::test]
    async fn retry_retries_transient_errors_only() {
        let calls = AtomicUsize::new(0);
        let r = retry(&fast(), "test", || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(CloudError::Server { status: 503, message: String::new() }),
                1 => Err(CloudError::Transport("reset".into())),
                _ => Ok(7),
            }
        })
        .await;
        assert_eq!(r, Ok(7));
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        let calls = AtomicUsize::new(0);
        let r: Result<(), _> = retry(&fast(), "test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(CloudError::SessionExpired)
        })
        .await;
        assert_eq!(r, Err(CloudError::SessionExpired));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = AtomicUsize::new(0);
        let r: Result<(), _> = retry(&fast(), "test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(CloudError::QuotaExceeded { retry_after: None })
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 4, "first attempt + 3 retries");
    }
}
