//! The per-network datapoints task (docs/datapoints.md#only-what-is-new): every
//! `datapoints.interval` it fetches what the network logged since the newest datapoint it handed
//! on — the first time `datapoints.lookback` back — and hands each page to the publish path
//! through a bounded channel.
//!
//! The channel is the back-pressure: a page that does not fit stops the fetch without counting
//! as seen, the task waits for room and goes on from there, so a long first fetch neither piles
//! up in memory nor loses a page. A failed fetch is logged and the next interval resumes after
//! the newest time handed on.

use std::ops::ControlFlow;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_util::sync::CancellationToken;

use crate::cloud::datapoints::tracker::{RETENTION, Tracker};
use crate::cloud::datapoints::{Datapoint, FetchOptions, Fetcher, PageSource, SessionProvider};
use crate::cloud::rest::{DataType, DatapointQuery};

/// Default fetch interval per network.
pub const DEFAULT_DATAPOINTS_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// Default reach of the first fetch after start-up.
pub const DEFAULT_DATAPOINTS_LOOKBACK: Duration = Duration::from_secs(3600);
/// The default `dataType` filter.
pub const DEFAULT_DATA_TYPES: [DataType; 4] =
    [DataType::Energy, DataType::Sensors, DataType::Details, DataType::Vendor];
/// `datapoints:` — which logged datapoints the bridge fetches, and how often.
#[derive(Debug, Clone, PartialEq)]
pub struct DatapointSettings {
    /// Whether the bridge fetches datapoints at all.
    pub enabled: bool,
    /// How often each network's new datapoints are fetched (≥ 1 minute).
    pub interval: Duration,
    /// How far back the first fetch after start-up reaches (≤ 60 days).
    pub lookback: Duration,
    /// The `dataType` filter; never empty, no repeats.
    pub data_types: Vec<DataType>,
}

impl Default for DatapointSettings {
    fn default() -> Self {
        DatapointSettings {
            enabled: true,
            interval: DEFAULT_DATAPOINTS_INTERVAL,
            lookback: DEFAULT_DATAPOINTS_LOOKBACK,
            data_types: DEFAULT_DATA_TYPES.to_vec(),
        }
    }
}

/// One page of a network's new datapoints, oldest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// Network id.
    pub network: String,
    /// The points, in time order.
    pub points: Vec<Datapoint>,
}

/// When the task fetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Time between fetches.
    pub interval: Duration,
    /// Reach of the first fetch.
    pub lookback: Duration,
}

impl Schedule {
    /// The schedule of the `datapoints:` section.
    pub fn of(settings: &DatapointSettings) -> Schedule {
        Schedule { interval: settings.interval, lookback: settings.lookback }
    }
}

/// Networks fetching at the same time, across the bridge. A page holds up to 10,000 points
/// (about a megabyte parsed), and every network's first fetch falls due together once the
/// start-up gate opens: taking turns keeps a big site's memory to a few pages, and the publisher
/// renders one network's new sensors at a time.
pub const FETCHES_AT_ONCE: usize = 2;

/// The longest wait before a network's first fetch: the first fetches of all networks fall due
/// together when the start-up gate opens, and spread over a tenth of the interval (at most this)
/// they neither crowd the end of a big site's start-up nor reach the service at one instant.
pub const FIRST_FETCH_SPREAD: Duration = Duration::from_secs(30);

/// A random wait before a network's first fetch ([`FIRST_FETCH_SPREAD`]).
pub fn first_fetch_delay(schedule: &Schedule) -> Duration {
    let spread = (schedule.interval / 10).min(FIRST_FETCH_SPREAD);
    spread.mul_f64(rand::random::<f64>())
}

/// What the bridge's supervisors run per network: the schedule and the fetch options of the
/// `datapoints:` section, and the turns every network's fetch takes ([`FETCHES_AT_ONCE`]).
#[derive(Clone, Debug)]
pub struct Job {
    /// When.
    pub schedule: Schedule,
    /// What.
    pub options: FetchOptions,
    /// Shared by the clones of the job: one permit per fetch under way.
    pub turns: Arc<Semaphore>,
}

impl Job {
    /// A job with its own turns.
    pub fn new(schedule: Schedule, options: FetchOptions) -> Job {
        Job { schedule, options, turns: Arc::new(Semaphore::new(FETCHES_AT_ONCE)) }
    }

    /// The job of the `datapoints:` section; `None` when it is turned off.
    pub fn of(settings: &DatapointSettings) -> Option<Job> {
        settings.enabled.then(|| Job::new(Schedule::of(settings), fetch_options(settings)))
    }
}

/// The fetch options of the `datapoints:` section: its `dataType` filter, every unit.
pub fn fetch_options(settings: &DatapointSettings) -> FetchOptions {
    let filter = DatapointQuery { data_types: settings.data_types.clone(), ..DatapointQuery::default() };
    FetchOptions { filter, ..FetchOptions::default() }
}

/// Why the task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskEnd {
    /// The shutdown token was cancelled.
    Shutdown,
    /// The receiving end of the channel is gone.
    ReceiverGone,
}

/// Runs the task of one network until `shutdown` or until `out` is closed.
pub async fn run<S: PageSource, P: SessionProvider>(
    fetcher: &Fetcher<'_, S, P>,
    schedule: Schedule,
    out: mpsc::Sender<Batch>,
    shutdown: CancellationToken,
) -> TaskEnd {
    run_in_turn(fetcher, schedule, &Semaphore::new(1), out, shutdown).await
}

/// [`run`], each fetch waiting for a permit of `turns`, held until the fetch ends.
pub async fn run_in_turn<S: PageSource, P: SessionProvider>(
    fetcher: &Fetcher<'_, S, P>,
    schedule: Schedule,
    turns: &Semaphore,
    out: mpsc::Sender<Batch>,
    shutdown: CancellationToken,
) -> TaskEnd {
    let network = fetcher.network();
    let mut tracker = Tracker::new(TimeDelta::from_std(schedule.lookback).unwrap_or(RETENTION));
    let mut ticks = tokio::time::interval(schedule.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return TaskEnd::Shutdown,
            () = out.closed() => return TaskEnd::ReceiverGone,
            _ = ticks.tick() => {}
        }
        let _turn = tokio::select! {
            () = shutdown.cancelled() => return TaskEnd::Shutdown,
            turn = turns.acquire() => turn.ok(),
        };
        // One interval: fetch, and while the channel was full, wait for room and go on.
        loop {
            let (mut full, mut closed) = (false, false);
            let fetch = tracker.fetch_new(fetcher, Utc::now(), |points| {
                match out.try_send(Batch { network: network.to_string(), points }) {
                    Ok(()) => return ControlFlow::Continue(()),
                    Err(TrySendError::Full(_)) => full = true,
                    Err(TrySendError::Closed(_)) => closed = true,
                }
                ControlFlow::Break(())
            });
            let result = tokio::select! {
                () = shutdown.cancelled() => return TaskEnd::Shutdown,
                result = fetch => result,
            };
            match result {
                Ok(summary) => tracing::debug!(
                    network,
                    points = summary.points,
                    pages = summary.pages,
                    unreadable_times = summary.unreadable_times,
                    "datapoints fetched"
                ),
                Err(e) => tracing::warn!(network, error = %e, "datapoint fetch failed; the next interval resumes"),
            }
            if closed {
                return TaskEnd::ReceiverGone;
            }
            if !full {
                break;
            }
            tokio::select! {
                () = shutdown.cancelled() => return TaskEnd::Shutdown,
                permit = out.reserve() => match permit {
                    // The room is for the next page the fetch hands on; the permit itself is not needed.
                    Ok(permit) => drop(permit),
                    Err(_) => return TaskEnd::ReceiverGone,
                },
            }
        }
    }
}
