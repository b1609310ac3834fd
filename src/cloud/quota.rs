//! The client-side guard per API key (the backoff policy for 429 / 5xx / transport errors is
//! [`super::backoff`]).
//!
//! The service enforces per-key quotas (requests per minute, concurrent requests, bytes) and
//! answers 429 when one is exceeded. [`QuotaGuard`] keeps this client under its own configured
//! limits so normal use never meets a 429: a GCRA rate limiter (governor) for requests per minute,
//! a semaphore for concurrent requests, and a pause that holds every request of the key after a
//! 429 until its `Retry-After` has passed, after which one request probes alone ([`pause`]).

use std::num::NonZeroU32;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Jitter, Quota, RateLimiter};
use rand::Rng;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

mod pause;

use pause::{PauseGate, Probe};

/// Limits of the client-side guard (from `cloud.max_requests_per_minute` and
/// `cloud.max_concurrent_requests`).
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaConfig {
    /// Most requests in any rolling minute (a hard limit, bursts included).
    pub max_requests_per_minute: NonZeroU32,
    /// Requests allowed back to back (part of the minute's budget, not on top of it); `None` = a
    /// sixth of the limit, between 1 and 10. The rest of the budget is spread evenly.
    pub burst: Option<NonZeroU32>,
    /// Requests in flight at the same time.
    pub max_concurrent_requests: usize,
    /// How long to hold all requests after the first 429 in a row that carried no `Retry-After`;
    /// each further 429 in a row doubles the ceiling of the pause (see [`QuotaGuard`]).
    pub pause_after_429: Duration,
    /// The ceiling the doubling stops at.
    pub max_pause_after_429: Duration,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        Self {
            max_requests_per_minute: NonZeroU32::new(60).unwrap_or(NonZeroU32::MIN),
            burst: None,
            max_concurrent_requests: 4,
            pause_after_429: Duration::from_secs(2),
            // A service that refuses for minutes is asked again within five, so the bridge
            // notices its return without a restart.
            max_pause_after_429: Duration::from_secs(300),
        }
    }
}

/// The guard every request to one API key passes through. Share it (`Arc`) between all clients
/// that use the same key.
///
/// After a 429 every request of the key waits. The pause grows while the service keeps refusing:
/// the n-th 429 in a row holds the key for `pause_after_429` plus a random share (full jitter)
/// of the doubling rest up to `pause_after_429 × 2ⁿ⁻¹`, at most `max_pause_after_429`, and never
/// less than the service's `Retry-After`. A successful answer ends the run. A 429 counts towards
/// the run only if its request left after the latest pause began: requests already in flight
/// when the first 429 came back meet the same wall and are not a second refusal. When a pause
/// ends, one request probes alone and the others wait for its answer ([`pause`]).
#[derive(Debug)]
pub struct QuotaGuard {
    limiter: DefaultDirectRateLimiter,
    concurrency: Arc<Semaphore>,
    pause: Arc<PauseGate>,
    pause_after_429: Duration,
    max_pause_after_429: Duration,
    /// Live requests waiting in [`QuotaGuard::acquire`]; background requests wait while any do.
    live_waiting: AtomicUsize,
    /// Woken when the last live request waiting got through.
    live_done: Notify,
}

/// Held while a request is in flight; dropping it frees a concurrency slot. Hand it back to
/// [`QuotaGuard::note_quota_exceeded`] or [`QuotaGuard::note_success`] with the request's answer.
#[derive(Debug)]
pub struct QuotaPermit {
    _slot: Option<OwnedSemaphorePermit>,
    generation: u64,
    /// Set when this request probes the end of a pause.
    probe: Option<Probe>,
}

impl QuotaGuard {
    /// Builds a guard with the given limits.
    pub fn new(config: &QuotaConfig) -> Self {
        // A strict limit over ANY rolling minute: `burst` requests may go back to back, and the
        // rest of the minute's budget is spread evenly, so burst + refills within 60 s never
        // exceed `max_requests_per_minute` (a plain per-minute GCRA with a burst would allow
        // burst + limit).
        let per_minute = config.max_requests_per_minute.get();
        let burst = config.burst.map_or_else(|| (per_minute / 6).clamp(1, 10), NonZeroU32::get).min(per_minute);
        let sustained = per_minute.saturating_sub(burst).max(1);
        let period = Duration::from_secs(60) / sustained;
        let quota = Quota::with_period(period)
            .unwrap_or_else(|| Quota::per_minute(NonZeroU32::MIN))
            .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
        Self {
            limiter: RateLimiter::direct(quota),
            concurrency: Arc::new(Semaphore::new(config.max_concurrent_requests.max(1))),
            pause: Arc::default(),
            pause_after_429: config.pause_after_429,
            max_pause_after_429: config.max_pause_after_429.max(config.pause_after_429),
            live_waiting: AtomicUsize::new(0),
            live_done: Notify::new(),
        }
    }

    /// Waits until a request may go out: after any 429 pause and its probe, within the rate,
    /// with a free concurrency slot. Cancel-safe: dropping the future gives nothing back because it took
    /// nothing yet, except a rate token that is simply spent.
    pub async fn acquire(&self) -> QuotaPermit {
        let _waiting = LiveWaiting::enter(self);
        self.take().await
    }

    /// [`QuotaGuard::acquire`] for a request that yields to live work (logged datapoints,
    /// photos, icons): it takes a rate token only at a moment no live request waits, so it uses
    /// only the budget live work leaves (docs/cloud.md#quota-429). Cancel-safe like `acquire`.
    pub async fn acquire_background(&self) -> QuotaPermit {
        loop {
            self.no_live_waiting().await;
            self.pause.wait(false).await;
            if self.live_waiting.load(Ordering::Acquire) > 0 {
                continue;
            }
            // Polled, not queued: a background request queued for a slot or a token would hold
            // its place ahead of live requests that come after it.
            let Ok(slot) = Arc::clone(&self.concurrency).try_acquire_owned() else {
                tokio::time::sleep(BACKGROUND_POLL_MIN).await;
                continue;
            };
            match self.limiter.check() {
                Ok(()) => match self.pause.try_pass() {
                    Some(turn) => {
                        return QuotaPermit { _slot: Some(slot), generation: turn.generation, probe: turn.probe };
                    }
                    // A pause or a probe began meanwhile: wait for it without holding the slot.
                    None => drop(slot),
                },
                Err(not_until) => {
                    drop(slot);
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    tokio::time::sleep(wait.clamp(BACKGROUND_POLL_MIN, BACKGROUND_POLL_MAX)).await;
                }
            }
        }
    }

    /// Resolves once no live request waits.
    async fn no_live_waiting(&self) {
        loop {
            let mut done = pin!(self.live_done.notified());
            // Registered before the count is read, so a wake between the two is not missed.
            done.as_mut().enable();
            if self.live_waiting.load(Ordering::Acquire) == 0 {
                return;
            }
            done.await;
        }
    }

    /// The waits every request goes through: the 429 pause and its probe, the rate, a
    /// concurrency slot.
    async fn take(&self) -> QuotaPermit {
        self.pause.wait(false).await;
        self.limiter.until_ready_with_jitter(Jitter::up_to(Duration::from_millis(20))).await;
        // The semaphore is never closed, so this cannot fail; if it ever did, go without a slot
        // rather than stall every request.
        let slot = Arc::clone(&self.concurrency).acquire_owned().await.ok();
        // A pause may have begun while this request waited for its slot: wait that one out too,
        // and leave with the generation it ended in, as the probe if one is due.
        let turn = self.pause.wait(true).await;
        QuotaPermit { _slot: slot, generation: turn.generation, probe: turn.probe }
    }

    /// Holds every request of this key after a 429 to the request `permit` was taken for, so the
    /// other tasks sharing the key do not run into the same wall, for longer with each 429 in a
    /// row (see [`QuotaGuard`]).
    pub fn note_quota_exceeded(&self, permit: &QuotaPermit, retry_after: Option<Duration>) {
        self.pause.note_quota_exceeded(permit.generation, permit.probe.as_ref(), retry_after, |strikes| {
            self.pause_for(strikes)
        });
    }

    /// Ends a run of 429s: the requests waiting for a probe go, and the next 429 pauses for
    /// `pause_after_429` again.
    pub fn note_success(&self) {
        self.pause.note_success();
    }

    /// The pause after the `strikes`-th 429 in a row: the floor, plus full jitter over the rest
    /// of the doubled ceiling.
    fn pause_for(&self, strikes: u32) -> Duration {
        let floor = self.pause_after_429;
        let doubling = 2u32.saturating_pow(strikes.saturating_sub(1).min(31));
        let ceiling = floor.saturating_mul(doubling).min(self.max_pause_after_429);
        let spread = ceiling.saturating_sub(floor);
        floor + spread.mul_f64(rand::rng().random::<f64>())
    }

    /// Free concurrency slots right now (for health reporting).
    pub fn available_slots(&self) -> usize {
        self.concurrency.available_permits()
    }
}

/// Bounds of a background request's wait between two looks at the rate: short enough to take
/// a token soon after it is free, long enough not to spin.
const BACKGROUND_POLL_MIN: Duration = Duration::from_millis(10);
const BACKGROUND_POLL_MAX: Duration = Duration::from_secs(1);

/// Counts a live request as waiting while it lives (dropped when `acquire` returns or is
/// cancelled).
struct LiveWaiting<'a>(&'a QuotaGuard);

impl<'a> LiveWaiting<'a> {
    fn enter(guard: &'a QuotaGuard) -> Self {
        guard.live_waiting.fetch_add(1, Ordering::AcqRel);
        LiveWaiting(guard)
    }
}

impl Drop for LiveWaiting<'_> {
    fn drop(&mut self) {
        if self.0.live_waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.live_done.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::time::Instant;

    use super::*;

    #[tokio::test]
    async fn guard_limits_concurrency() {
        let guard = Arc::new(QuotaGuard::new(&QuotaConfig {
            max_requests_per_minute: NonZeroU32::new(60_000).unwrap(),
            burst: NonZeroU32::new(100),
            max_concurrent_requests: 2,
            pause_after_429: Duration::from_millis(1),
            max_pause_after_429: Duration::from_millis(1),
        }));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (guard, in_flight, peak) = (guard.clone(), in_flight.clone(), peak.clone());
                tokio::spawn(async move {
                    let _permit = guard.acquire().await;
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2);
        assert_eq!(guard.available_slots(), 2);
    }

    #[tokio::test]
    async fn guard_paces_requests_and_pauses_after_429() {
        // 600/min = one every 100 ms after a burst of 1.
        let guard = QuotaGuard::new(&QuotaConfig {
            max_requests_per_minute: NonZeroU32::new(600).unwrap(),
            burst: NonZeroU32::new(1),
            max_concurrent_requests: 4,
            pause_after_429: Duration::from_millis(150),
            max_pause_after_429: Duration::from_secs(1),
        });
        let start = std::time::Instant::now();
        drop(guard.acquire().await);
        let permit = guard.acquire().await;
        assert!(start.elapsed() >= Duration::from_millis(80), "{:?}", start.elapsed());

        guard.note_quota_exceeded(&permit, None);
        drop(permit);
        let start = std::time::Instant::now();
        drop(guard.acquire().await);
        assert!(start.elapsed() >= Duration::from_millis(140), "{:?}", start.elapsed());
    }

    fn pausing_guard(pause: Duration, max: Duration) -> QuotaGuard {
        QuotaGuard::new(&QuotaConfig {
            max_requests_per_minute: NonZeroU32::new(60_000).unwrap(),
            burst: NonZeroU32::new(100),
            max_concurrent_requests: 4,
            pause_after_429: pause,
            max_pause_after_429: max,
        })
    }

    /// The pause set by the latest 429, measured from now.
    fn pause_left(guard: &QuotaGuard) -> Duration {
        let until = guard.pause.until().unwrap();
        until.saturating_duration_since(Instant::now())
    }

    #[tokio::test(start_paused = true)]
    async fn each_429_in_a_row_doubles_the_ceiling_until_a_success() {
        let pause = Duration::from_secs(2);
        let max = Duration::from_secs(300);
        let guard = pausing_guard(pause, max);
        let mut ceilings = Vec::new();
        for strike in 1..=10u32 {
            let permit = guard.acquire().await;
            guard.note_quota_exceeded(&permit, None);
            let left = pause_left(&guard);
            let ceiling = (pause * 2u32.pow(strike - 1)).min(max);
            assert!(left >= pause && left <= ceiling, "strike {strike}: {left:?} not in [{pause:?}, {ceiling:?}]");
            ceilings.push(ceiling);
        }
        assert_eq!(ceilings.last(), Some(&max), "the doubling stops at the ceiling");

        // Full jitter: over many runs of four strikes the fourth pause spreads over [2 s, 16 s].
        let fourth: Vec<Duration> = (0..64)
            .map(|_| {
                let guard = pausing_guard(pause, max);
                for _ in 0..4 {
                    let generation = guard.pause.generation();
                    guard.note_quota_exceeded(&QuotaPermit { _slot: None, generation, probe: None }, None);
                }
                pause_left(&guard)
            })
            .collect();
        let (low, high) = (fourth.iter().min().unwrap(), fourth.iter().max().unwrap());
        assert!(*high - *low > Duration::from_secs(6), "no spread: {low:?}..{high:?}");

        // A success ends the run: the next 429 pauses for the floor again.
        let permit = guard.acquire().await;
        guard.note_success();
        guard.note_quota_exceeded(&permit, None);
        assert_eq!(pause_left(&guard), pause);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_in_flight_at_the_first_429_do_not_double_the_pause() {
        let pause = Duration::from_secs(2);
        let guard = pausing_guard(pause, Duration::from_secs(300));
        let permits = [guard.acquire().await, guard.acquire().await, guard.acquire().await];
        for permit in &permits {
            guard.note_quota_exceeded(permit, None);
        }
        assert_eq!(pause_left(&guard), pause, "one wall, one strike");
        assert_eq!(guard.pause.strikes(), 1);
    }

    /// Requests that ask for a permit during a pause, each sending its permit to `out`.
    fn waiters(guard: &Arc<QuotaGuard>, n: usize) -> tokio::sync::mpsc::UnboundedReceiver<QuotaPermit> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..n {
            let (guard, tx) = (Arc::clone(guard), tx.clone());
            tokio::spawn(async move {
                let _ = tx.send(guard.acquire().await);
            });
        }
        rx
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_pause_one_request_probes_and_the_others_wait_for_its_answer() {
        let pause = Duration::from_secs(2);
        let guard = Arc::new(pausing_guard(pause, Duration::from_secs(300)));
        let first = guard.acquire().await;
        guard.note_quota_exceeded(&first, None);
        drop(first);
        let mut permits = waiters(&guard, 3);

        // The pause ends: one request goes, the other two wait as long as it is out.
        let probe = permits.recv().await.unwrap();
        assert!(probe.probe.is_some(), "the first request after the pause probes");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(permits.try_recv().is_err(), "nobody goes while the probe is out");

        // A 429 again: a longer pause, then one probe again.
        guard.note_quota_exceeded(&probe, None);
        drop(probe);
        assert_eq!(guard.pause.strikes(), 2);
        let probe = permits.recv().await.unwrap();
        assert!(probe.probe.is_some());
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(permits.try_recv().is_err(), "nobody goes while the second probe is out");

        // A success: the last one goes at once, as a plain request.
        guard.note_success();
        let last = permits.recv().await.unwrap();
        assert!(last.probe.is_none());
        drop((probe, last));
        assert!(guard.acquire().await.probe.is_none(), "no probe once the key is answered");
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_ends_without_an_answer_passes_the_role_on() {
        let guard = Arc::new(pausing_guard(Duration::from_secs(2), Duration::from_secs(300)));
        let first = guard.acquire().await;
        guard.note_quota_exceeded(&first, None);
        drop(first);
        let mut permits = waiters(&guard, 2);
        let probe = permits.recv().await.unwrap();
        assert!(probe.probe.is_some());
        // A transport error or a 5xx: neither a success nor a 429. The next request probes alone.
        drop(probe);
        let next = permits.recv().await.unwrap();
        assert!(next.probe.is_some(), "the role passes on");
        assert_eq!(guard.pause.strikes(), 1, "no strike without a 429");
    }

    #[tokio::test(start_paused = true)]
    async fn a_longer_retry_after_is_honoured() {
        let guard = pausing_guard(Duration::from_secs(2), Duration::from_secs(300));
        let permit = guard.acquire().await;
        guard.note_quota_exceeded(&permit, Some(Duration::from_secs(40)));
        assert_eq!(pause_left(&guard), Duration::from_secs(40));
        // A late 429 of an older request still honours its own Retry-After.
        guard.note_quota_exceeded(&permit, Some(Duration::from_secs(90)));
        assert_eq!(pause_left(&guard), Duration::from_secs(90));
    }

    #[tokio::test]
    async fn a_background_request_waits_while_a_live_one_does() {
        let guard = Arc::new(QuotaGuard::new(&QuotaConfig {
            max_requests_per_minute: NonZeroU32::new(6000).unwrap_or(NonZeroU32::MIN),
            burst: NonZeroU32::new(100),
            max_concurrent_requests: 1,
            ..QuotaConfig::default()
        }));
        let held = guard.acquire().await;
        let (order_tx, mut order) = tokio::sync::mpsc::unbounded_channel();
        let spawn = |name: &'static str, background: bool| {
            let (guard, order_tx) = (guard.clone(), order_tx.clone());
            tokio::spawn(async move {
                let permit = if background { guard.acquire_background().await } else { guard.acquire().await };
                let _ = order_tx.send(name);
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(permit);
            })
        };
        // The background request asks first, while the slot is taken; a live one comes after it.
        let background = spawn("background", true);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let live = spawn("live", false);
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        let _ = (live.await, background.await);
        assert_eq!(order.recv().await, Some("live"));
        assert_eq!(order.recv().await, Some("background"));
    }
}
