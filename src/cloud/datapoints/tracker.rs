//! The newest datapoint time seen per network, so each interval asks only for what is new
//! (docs/datapoints.md#only-what-is-new).

use std::ops::ControlFlow;

use chrono::{DateTime, TimeDelta, Utc};

use super::{Datapoint, FetchError, FetchSummary, Fetcher, PageSource, SessionProvider};

/// How long the service keeps datapoints: nothing older is ever asked for.
pub const RETENTION: TimeDelta = TimeDelta::days(60);

/// Where the next fetch of one network starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracker {
    lookback: TimeDelta,
    newest: Option<DateTime<Utc>>,
}

impl Tracker {
    /// A tracker whose first range reaches `lookback` back (at most the 60-day retention).
    pub fn new(lookback: TimeDelta) -> Tracker {
        Tracker { lookback: lookback.min(RETENTION), newest: None }
    }

    /// The newest time handed on so far.
    pub fn newest(&self) -> Option<DateTime<Utc>> {
        self.newest
    }

    /// The range to ask for at `now`: just after the newest time seen, or `lookback` before
    /// `now` the first time; never older than the retention. `None` when it would be empty.
    pub fn range(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        // Times of a point are whole milliseconds (the service's resolution).
        let start = self.newest.map_or(now - self.lookback, |t| t + TimeDelta::milliseconds(1));
        let start = start.max(now - RETENTION);
        (start < now).then_some((start, now))
    }

    /// Notes points handed on.
    pub fn observe(&mut self, points: &[Datapoint]) {
        // `None` orders before every time, so an empty batch changes nothing.
        self.newest = self.newest.max(points.iter().map(|p| p.time).max());
    }

    /// Fetches what is new at `now` into `sink`. Pages the sink took count as seen, also before
    /// an error: the fetcher hands on only whole times, so the next call resumes after them and
    /// loses nothing. A page the sink refuses (`ControlFlow::Break`, e.g. a full channel) stops
    /// the fetch and does not count: the next call asks for it again.
    pub async fn fetch_new<S, P, F>(
        &mut self,
        fetcher: &Fetcher<'_, S, P>,
        now: DateTime<Utc>,
        mut sink: F,
    ) -> Result<FetchSummary, FetchError>
    where
        S: PageSource,
        P: SessionProvider,
        F: FnMut(Vec<Datapoint>) -> ControlFlow<()>,
    {
        let Some((from, to)) = self.range(now) else {
            return Ok(FetchSummary::default());
        };
        fetcher
            .fetch(from, to, |points| {
                // A point past the range asked for (a service clock far ahead) must not move the
                // next start beyond the present: fetching would stop until it got there.
                let newest = points.iter().map(|p| p.time).max().map(|t| t.min(to - TimeDelta::milliseconds(1)));
                let flow = sink(points);
                if flow.is_continue() {
                    self.newest = self.newest.max(newest);
                }
                flow
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::datapoints::DatapointValue;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn point(time: &str) -> Datapoint {
        Datapoint { time: at(time), unit: Some(1), key: "lux".into(), value: DatapointValue::parse("1") }
    }

    #[test]
    fn first_range_reaches_lookback_then_only_what_is_new() {
        let now = at("2026-11-20T10:00:00Z");
        let mut t = Tracker::new(TimeDelta::hours(1));
        assert_eq!(t.range(now), Some((at("2026-11-20T09:00:00Z"), now)));
        t.observe(&[point("2026-11-20T09:30:00Z"), point("2026-11-20T09:45:00Z"), point("2026-11-20T09:15:00Z")]);
        assert_eq!(t.newest(), Some(at("2026-11-20T09:45:00Z")));
        let later = at("2026-11-20T10:15:00Z");
        assert_eq!(t.range(later), Some((at("2026-11-20T09:45:00.001Z"), later)));
        // An older batch never moves the mark back.
        t.observe(&[point("2026-11-20T08:00:00Z")]);
        assert_eq!(t.newest(), Some(at("2026-11-20T09:45:00Z")));
        t.observe(&[]);
        assert_eq!(t.newest(), Some(at("2026-11-20T09:45:00Z")));
    }

    #[test]
    fn ranges_stay_inside_the_retention_and_are_never_empty() {
        let now = at("2026-11-20T10:00:00Z");
        let t = Tracker::new(TimeDelta::days(90));
        assert_eq!(t.range(now), Some((now - RETENTION, now)));
        let mut t = Tracker::new(TimeDelta::hours(1));
        t.observe(&[point("2026-08-01T00:00:00Z")]);
        assert_eq!(t.range(now), Some((now - RETENTION, now)));
        t.observe(&[point("2026-11-20T10:00:00Z")]);
        assert_eq!(t.range(now), None);
    }
}
