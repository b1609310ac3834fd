//! Every logged datapoint of a time range, fetched page by page (docs/datapoints.md).
//!
//! The service answers `GET /datapoints/networks/{id}/datapoints` with at most `limit` points,
//! ordered by time, and `hasMoreResults` when the limit cut off more. There is no cursor, so the
//! next page is asked from the newest time of the page: a page cut in the middle of one time
//! would otherwise lose the rest of that time. Such a page hands on only its points *older* than
//! its newest time, and the next page starts at that time, so every time is delivered whole and
//! exactly once. A page whose points all share one time cannot move forward that way; it is
//! asked again with a larger limit (up to the service's 100 000), and past that it is a
//! [`FetchError::CrowdedTime`].
//!
//! A 416 (range longer than the service allows) splits the range in halves, recursively, down to
//! [`FetchOptions::min_span`]; a span that drew a 416 is split at once afterwards, without asking
//! again. A 410 renews the session once and asks the same page again. 429, 5xx and transport
//! errors are retried on [`FetchOptions::backoff`]. A body that does not parse (a truncated page)
//! ends the fetch with [`FetchError::Truncated`]: everything handed on before it is complete, so
//! the caller asks again from the newest time it received ([`tracker::Tracker`]).
//!
//! Nothing here knows MQTT: the points go to a sink the caller gives.

pub mod tracker;
mod value;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::ops::ControlFlow;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

pub use value::DatapointValue;

use super::backoff::{BackoffPolicy, retry};
use super::model::{DataPoint, DatapointResult, Secret};
use super::rest::{DatapointQuery, MAX_DATAPOINT_LIMIT as MAX_LIMIT};
use super::{CloudError, RestClient, SessionManager};

/// One datapoint as the fetcher hands it on: its time parsed, its value a number when it reads
/// as one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Datapoint {
    /// When it was logged (UTC).
    pub time: DateTime<Utc>,
    /// The unit, when the service named one; a unit the bridge does not know is kept.
    pub unit: Option<u32>,
    /// Key such as `lux` or `power`.
    pub key: String,
    /// The value.
    pub value: DatapointValue,
}

impl Datapoint {
    /// Converts a point of the service; `None` when its time is not RFC 3339.
    pub fn from_wire(point: DataPoint) -> Option<Datapoint> {
        let time = point.parsed_time()?.with_timezone(&Utc);
        Some(Datapoint { time, unit: point.unit, key: point.key, value: DatapointValue::parse(&point.value) })
    }
}

/// Why a fetch stopped before the end of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    /// The service refused even the smallest span with 416.
    #[error("the service refuses {from} .. {to} as too long (416) even split to {min_span_s} s")]
    RangeTooLong {
        /// Start of the refused span.
        from: DateTime<Utc>,
        /// End of the refused span.
        to: DateTime<Utc>,
        /// The smallest span the fetcher splits to, in seconds.
        min_span_s: i64,
    },
    /// A page's body did not parse (cut off or malformed); the points before it were complete.
    #[error("the page of datapoints from {from} could not be read ({cause}); ask again from the newest time received")]
    Truncated {
        /// Start of the page that failed.
        from: DateTime<Utc>,
        /// What the decoder said.
        cause: String,
    },
    /// More points share one time than the largest page holds.
    #[error("more than {limit} datapoints share the time {time}; the service cannot page past it")]
    CrowdedTime {
        /// The time.
        time: DateTime<Utc>,
        /// The largest page asked for.
        limit: u32,
    },
    /// The service said more points follow but returned none with a usable time.
    #[error("the service reported more datapoints from {from} but sent none with a readable time")]
    Stalled {
        /// Start of the page.
        from: DateTime<Utc>,
    },
    /// Any other refusal or failure of the service (after retries, or a second 410 in a row).
    #[error("datapoints from {from}: {source}")]
    Cloud {
        /// Start of the page that failed.
        from: DateTime<Utc>,
        /// The error.
        source: CloudError,
    },
}

/// Which points to fetch and how.
#[derive(Clone, Debug, PartialEq)]
pub struct FetchOptions {
    /// The filters (`dataType`, `keys`, `units`); its `from`, `to` and `limit` are set per page.
    pub filter: DatapointQuery,
    /// Points per page (1..=100 000).
    pub page_limit: u32,
    /// The smallest span a 416 splits a range to.
    pub min_span: TimeDelta,
    /// Retries of 429, 5xx and transport errors.
    pub backoff: BackoffPolicy,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            filter: DatapointQuery::default(),
            page_limit: 10_000,
            min_span: TimeDelta::minutes(1),
            backoff: BackoffPolicy { max_retries: Some(4), ..BackoffPolicy::default() },
        }
    }
}

/// What a fetch did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchSummary {
    /// Points the sink took.
    pub points: usize,
    /// Pages asked for (answered 200).
    pub pages: usize,
    /// Ranges split after a 416.
    pub splits: usize,
    /// Sessions renewed after a 410.
    pub renewals: usize,
    /// Points left out because their time did not parse.
    pub unreadable_times: usize,
    /// True when the sink asked to stop before the end of the range.
    pub stopped: bool,
}

/// Where pages come from: the REST client, or a scripted source in tests.
pub trait PageSource: Sync {
    /// One page of a datapoint query.
    fn page(
        &self,
        session: &Secret,
        network: &str,
        query: &DatapointQuery,
    ) -> impl Future<Output = Result<DatapointResult, CloudError>> + Send;
}

impl PageSource for RestClient {
    fn page(
        &self,
        session: &Secret,
        network: &str,
        query: &DatapointQuery,
    ) -> impl Future<Output = Result<DatapointResult, CloudError>> + Send {
        self.datapoints(session, network, query)
    }
}

/// The session of a network and its renewal after a 410.
pub trait SessionProvider: Sync {
    /// The current session and its generation (logging in when there is none).
    fn session(&self, network: &str) -> impl Future<Output = Result<(Secret, u64), CloudError>> + Send;
    /// A new session after the one of `seen_generation` answered 410.
    fn renew(
        &self,
        network: &str,
        seen_generation: u64,
    ) -> impl Future<Output = Result<(Secret, u64), CloudError>> + Send;
}

impl SessionProvider for SessionManager {
    async fn session(&self, network: &str) -> Result<(Secret, u64), CloudError> {
        match self.current(network) {
            Some(s) => Ok((s.session_id, s.generation)),
            // Generation 0 is older than any session, so this logs in.
            None => self.renew(network, 0).await.map(|s| (s.session_id, s.generation)),
        }
    }

    async fn renew(&self, network: &str, seen_generation: u64) -> Result<(Secret, u64), CloudError> {
        SessionManager::renew(self, network, seen_generation).await.map(|s| (s.session_id, s.generation))
    }
}

/// Fetches the datapoints of one network.
#[derive(Debug)]
pub struct Fetcher<'a, S, P> {
    source: &'a S,
    sessions: &'a P,
    network: &'a str,
    options: FetchOptions,
}

/// A half-open range of times, `[start, end)`.
type Span = (DateTime<Utc>, DateTime<Utc>);

/// The session in use and whether it was renewed since the last good page.
struct SessionState {
    id: Secret,
    generation: u64,
    renewed: bool,
}

impl<'a, S: PageSource, P: SessionProvider> Fetcher<'a, S, P> {
    /// A fetcher for `network`.
    pub fn new(source: &'a S, sessions: &'a P, network: &'a str, options: FetchOptions) -> Self {
        Self { source, sessions, network, options }
    }

    /// The network fetched.
    pub fn network(&self) -> &str {
        self.network
    }

    /// The options in use.
    pub fn options(&self) -> &FetchOptions {
        &self.options
    }

    /// Every point of `[from, to)`, oldest first, handed to `sink` a page at a time; the sink
    /// may stop the fetch with `ControlFlow::Break`.
    pub async fn fetch<F>(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        mut sink: F,
    ) -> Result<FetchSummary, FetchError>
    where
        F: FnMut(Vec<Datapoint>) -> ControlFlow<()>,
    {
        let mut summary = FetchSummary::default();
        let (id, generation) =
            self.sessions.session(self.network).await.map_err(|source| FetchError::Cloud { from, source })?;
        let mut session = SessionState { id, generation, renewed: false };
        // Ranges still to fetch, the next one last.
        let mut pending: Vec<Span> = vec![(from, to)];
        // The shortest span the service refused: longer ones are split without asking.
        let mut too_long: Option<TimeDelta> = None;
        while let Some((start, end)) = pending.pop() {
            if too_long.is_some_and(|t| end - start >= t) {
                pending.extend(self.halves(start, end)?);
                summary.splits += 1;
                continue;
            }
            match self.range(start, end, &mut session, &mut summary, &mut sink).await {
                Ok(ControlFlow::Continue(())) => {}
                Ok(ControlFlow::Break(())) => {
                    summary.stopped = true;
                    break;
                }
                Err(FetchError::Cloud { source: CloudError::RangeTooLong, from: at }) => {
                    // `at` is where the refused page started: what came before it is handed on.
                    tracing::debug!(network = self.network, %at, %end, "datapoint range too long (416); splitting");
                    too_long = Some(end - at);
                    pending.extend(self.halves(at, end)?);
                    summary.splits += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(summary)
    }

    /// Every point of `[from, to)`, collected.
    pub async fn fetch_all(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Vec<Datapoint>, FetchError> {
        let mut all = Vec::new();
        self.fetch(from, to, |page| {
            all.extend(page);
            ControlFlow::Continue(())
        })
        .await?;
        Ok(all)
    }

    /// `[start, end)` as two halves in the order [`Vec::pop`] takes them (the older half last).
    fn halves(&self, start: DateTime<Utc>, end: DateTime<Utc>) -> Result<[Span; 2], FetchError> {
        let half = (end - start) / 2;
        if half < self.options.min_span {
            return Err(FetchError::RangeTooLong {
                from: start,
                to: end,
                min_span_s: self.options.min_span.num_seconds(),
            });
        }
        let mid = start + half;
        Ok([(mid, end), (start, mid)])
    }

    /// Pages through one range; a 416 comes back as the error to split on.
    async fn range<F>(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        session: &mut SessionState,
        summary: &mut FetchSummary,
        sink: &mut F,
    ) -> Result<ControlFlow<()>, FetchError>
    where
        F: FnMut(Vec<Datapoint>) -> ControlFlow<()>,
    {
        let mut cursor = start;
        let mut limit = self.options.page_limit;
        loop {
            let page = self.page(cursor, end, limit, session, summary).await?;
            let more = page.has_more_results;
            let mut points = Vec::with_capacity(page.data_points.len());
            for point in page.data_points {
                match Datapoint::from_wire(point) {
                    Some(p) => points.push(p),
                    None => summary.unreadable_times += 1,
                }
            }
            let newest = points.iter().map(|p| p.time).max();
            if !more {
                return Ok(self.hand_on(points, summary, sink));
            }
            match newest {
                Some(newest) if newest > cursor => {
                    // The newest time may continue on the next page: hand it on from there.
                    points.retain(|p| p.time < newest);
                    cursor = newest;
                    limit = self.options.page_limit;
                    if self.hand_on(points, summary, sink).is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Some(time) if limit < MAX_LIMIT => {
                    tracing::debug!(network = self.network, %time, limit, "a page holds one time only; asking for more");
                    limit = limit.saturating_mul(4).min(MAX_LIMIT);
                }
                Some(time) => return Err(FetchError::CrowdedTime { time, limit }),
                None => return Err(FetchError::Stalled { from: cursor }),
            }
        }
    }

    fn hand_on<F>(&self, points: Vec<Datapoint>, summary: &mut FetchSummary, sink: &mut F) -> ControlFlow<()>
    where
        F: FnMut(Vec<Datapoint>) -> ControlFlow<()>,
    {
        if points.is_empty() {
            return ControlFlow::Continue(());
        }
        let count = points.len();
        let flow = sink(points);
        if flow.is_continue() {
            summary.points += count;
        }
        flow
    }

    /// One page, retried on transient errors, with one session renewal after a 410.
    async fn page(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
        session: &mut SessionState,
        summary: &mut FetchSummary,
    ) -> Result<DatapointResult, FetchError> {
        let between = DatapointQuery::between(&from, &to);
        let query =
            DatapointQuery { from: between.from, to: between.to, limit: Some(limit), ..self.options.filter.clone() };
        loop {
            let id = &session.id;
            let result =
                retry(&self.options.backoff, "datapoints", || self.source.page(id, self.network, &query)).await;
            match result {
                Ok(page) => {
                    summary.pages += 1;
                    session.renewed = false;
                    return Ok(page);
                }
                Err(CloudError::SessionExpired) if !session.renewed => {
                    let (id, generation) = self
                        .sessions
                        .renew(self.network, session.generation)
                        .await
                        .map_err(|source| FetchError::Cloud { from, source })?;
                    *session = SessionState { id, generation, renewed: true };
                    summary.renewals += 1;
                }
                Err(CloudError::Decode { message, .. }) => return Err(FetchError::Truncated { from, cause: message }),
                Err(source) => return Err(FetchError::Cloud { from, source }),
            }
        }
    }
}
