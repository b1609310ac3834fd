//! REST requests of the last minute, from the REST client's running totals: the web thread
//! samples the total every few seconds and subtracts the sample of a minute ago.

use super::model::RestWindow;
use crate::cloud::rest::RequestStats;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Least time between two samples.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// The window.
const MINUTE: Duration = Duration::from_secs(60);

/// The sampler.
#[derive(Debug)]
pub struct RestRate {
    stats: Option<Arc<RequestStats>>,
    limit: u32,
    samples: Mutex<VecDeque<(Instant, u64)>>,
}

impl RestRate {
    /// A sampler of `stats` (none: always 0) against `limit` requests a minute.
    pub fn new(stats: Option<Arc<RequestStats>>, limit: u32) -> RestRate {
        let rate = RestRate { stats, limit, samples: Mutex::new(VecDeque::new()) };
        rate.sample();
        rate
    }

    fn total(&self) -> u64 {
        self.stats.as_ref().map_or(0, |s| s.snapshot().iter().map(|c| c.count).sum())
    }

    /// Takes a sample when the last one is [`SAMPLE_EVERY`] old; forgets those past a minute
    /// (keeping one at least a minute old).
    pub fn sample(&self) {
        let now = Instant::now();
        let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        if samples.back().is_some_and(|(at, _)| now.duration_since(*at) < SAMPLE_EVERY) {
            return;
        }
        samples.push_back((now, self.total()));
        while samples.get(1).is_some_and(|(at, _)| now.duration_since(*at) >= MINUTE) {
            samples.pop_front();
        }
    }

    /// Requests since the sample about a minute old (since start-up within the first minute).
    pub fn window(&self) -> RestWindow {
        let total = self.total();
        let samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let since = samples.front().map_or(total, |(_, t)| *t);
        RestWindow { last_minute: total.saturating_sub(since), limit: self.limit }
    }
}
