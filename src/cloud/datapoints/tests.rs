//! The fetcher against a scripted service: paging, 416 splits, 410 renewals, truncated pages.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use super::tracker::Tracker;
use super::*;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn wire(time: DateTime<Utc>, unit: u32, key: &str, value: &str) -> DataPoint {
    DataPoint {
        unit: Some(unit),
        key: key.into(),
        value: value.into(),
        time: time.format("%Y-%m-%dT%H:%M:%S%.3f+00:00").to_string(),
    }
}

/// `units` points every 15 minutes from `start`, `slots` times.
fn grid(start: &str, slots: i32, units: u32) -> Vec<DataPoint> {
    let start = at(start);
    (0..slots)
        .flat_map(|s| {
            (1..=units).map(move |u| wire(start + TimeDelta::minutes(15 * i64::from(s)), u, "lux", &format!("{s}.5")))
        })
        .collect()
}

/// The range and limit of a request.
type Request = (DateTime<Utc>, DateTime<Utc>, u32);

/// What the scripted service does with a request, before answering from its points.
enum Fault {
    Expired,
    Truncated,
    /// `limit` points at one time and always more.
    Crowded,
    /// No points and yet more.
    EmptyWithMore,
    /// One point from the far future, past the range asked for.
    FromTheFuture,
}

/// A service holding `points` (in time order), with the real service's paging and 416 rule.
struct Service {
    points: Vec<DataPoint>,
    max_span: TimeDelta,
    /// Faults by request number (0-based).
    faults: Mutex<Vec<(usize, Fault)>>,
    requests: Mutex<Vec<Request>>,
}

impl Service {
    fn new(points: Vec<DataPoint>) -> Service {
        Service {
            points,
            max_span: TimeDelta::days(31),
            faults: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
        }
    }

    fn fault_at(self, n: usize, fault: Fault) -> Service {
        self.faults.lock().unwrap().push((n, fault));
        self
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    fn answer(&self, query: &DatapointQuery) -> Result<DatapointResult, CloudError> {
        let (from, to) = (at(&query.from), at(&query.to));
        let limit = query.limit.unwrap_or(10_000);
        let n = {
            let mut requests = self.requests.lock().unwrap();
            requests.push((from, to, limit));
            requests.len() - 1
        };
        let fault = {
            let mut faults = self.faults.lock().unwrap();
            faults.iter().position(|(at, _)| *at == n).map(|i| faults.remove(i).1)
        };
        match fault {
            Some(Fault::Expired) => return Err(CloudError::SessionExpired),
            Some(Fault::Truncated) => {
                return Err(CloudError::Decode { endpoint: "datapoints", message: "EOF at line 1 column 900".into() });
            }
            Some(Fault::Crowded) => {
                let points = (0..limit).map(|u| wire(from, u, "lux", "1")).collect();
                return Ok(DatapointResult { has_more_results: true, data_points: points, ..Default::default() });
            }
            Some(Fault::EmptyWithMore) => return Ok(DatapointResult { has_more_results: true, ..Default::default() }),
            Some(Fault::FromTheFuture) => {
                let points = vec![wire(at("9999-01-01T00:00:00Z"), 1, "lux", "1")];
                return Ok(DatapointResult { data_points: points, ..Default::default() });
            }
            None => {}
        }
        if to - from > self.max_span {
            return Err(CloudError::RangeTooLong);
        }
        let matching: Vec<&DataPoint> =
            self.points.iter().filter(|p| p.parsed_time().is_none_or(|t| t >= from && t < to)).collect();
        Ok(DatapointResult {
            has_more_results: matching.len() > limit as usize,
            data_points: matching.into_iter().take(limit as usize).cloned().collect(),
            ..Default::default()
        })
    }
}

impl PageSource for Service {
    async fn page(&self, _: &Secret, _: &str, query: &DatapointQuery) -> Result<DatapointResult, CloudError> {
        self.answer(query)
    }
}

/// Sessions numbered by generation; renewals are counted.
#[derive(Default)]
struct Sessions {
    renewed: Mutex<VecDeque<u64>>,
}

impl SessionProvider for Sessions {
    async fn session(&self, _: &str) -> Result<(Secret, u64), CloudError> {
        Ok((Secret::new("s1"), 1))
    }

    async fn renew(&self, _: &str, seen: u64) -> Result<(Secret, u64), CloudError> {
        self.renewed.lock().unwrap().push_back(seen);
        Ok((Secret::new(format!("s{}", seen + 1)), seen + 1))
    }
}

fn options(page_limit: u32) -> FetchOptions {
    FetchOptions {
        filter: DatapointQuery { keys: vec!["lux".into()], ..DatapointQuery::default() },
        page_limit,
        backoff: BackoffPolicy {
            min_delay: Duration::from_millis(1),
            max_retries: Some(1),
            ..BackoffPolicy::default()
        },
        ..FetchOptions::default()
    }
}

fn expected(service: &Service) -> Vec<Datapoint> {
    service.points.iter().cloned().filter_map(Datapoint::from_wire).collect()
}

/// A sink that keeps every point.
fn collect(into: &mut Vec<Datapoint>) -> impl FnMut(Vec<Datapoint>) -> ControlFlow<()> + '_ {
    |page| {
        into.extend(page);
        ControlFlow::Continue(())
    }
}

const FROM: &str = "2026-11-01T00:00:00Z";
const TO: &str = "2026-11-21T00:00:00Z";

async fn fetch(service: &Service, limit: u32) -> (Result<FetchSummary, FetchError>, Vec<Datapoint>) {
    let sessions = Sessions::default();
    let fetcher = Fetcher::new(service, &sessions, "n1", options(limit));
    let mut got = Vec::new();
    let result = fetcher.fetch(at(FROM), at(TO), collect(&mut got)).await;
    (result, got)
}

#[tokio::test]
async fn pages_cut_inside_a_time_deliver_every_point_once() {
    let service = Service::new(grid("2026-11-20T00:00:00Z", 10, 3));
    // 7 is not a multiple of 3: every page ends inside a time.
    let (summary, got) = fetch(&service, 7).await;
    let summary = summary.unwrap();
    assert_eq!(got, expected(&service));
    assert_eq!(summary.points, 30);
    assert!(summary.pages >= 5, "{summary:?}");
    // Each page starts at the newest time of the one before.
    let requests = service.requests();
    assert_eq!(requests[1].0, at("2026-11-20T00:30:00Z"));
}

#[tokio::test]
async fn a_page_holding_one_time_asks_again_with_a_larger_limit() {
    let mut points = grid("2026-11-20T00:00:00Z", 1, 50);
    points.extend(grid("2026-11-20T01:00:00Z", 2, 2));
    let service = Service::new(points);
    let (summary, got) = fetch(&service, 10).await;
    summary.unwrap();
    assert_eq!(got, expected(&service));
    let limits: Vec<u32> = service.requests().iter().map(|r| r.2).collect();
    // The first page moves the start to the crowded time; there it grows until the time fits.
    assert_eq!(limits, [10, 10, 40, 160]);
}

#[tokio::test]
async fn a_time_fuller_than_the_largest_page_is_a_typed_error_not_a_loop() {
    let service = Service::new(Vec::new());
    for n in 0..10 {
        service.faults.lock().unwrap().push((n, Fault::Crowded));
    }
    let (result, got) = fetch(&service, 10_000).await;
    assert_eq!(result, Err(FetchError::CrowdedTime { time: at(FROM), limit: MAX_LIMIT }));
    assert!(got.is_empty());
    assert_eq!(service.requests().len(), 3, "10 000, 40 000, 100 000");

    let service = Service::new(Vec::new()).fault_at(0, Fault::EmptyWithMore);
    let (result, _) = fetch(&service, 100).await;
    assert_eq!(result, Err(FetchError::Stalled { from: at(FROM) }));
}

#[tokio::test]
async fn a_416_splits_the_range_until_the_service_accepts_it() {
    let mut points = grid("2026-11-01T00:00:00Z", 4, 2);
    points.extend(grid("2026-11-10T12:00:00Z", 4, 2));
    points.extend(grid("2026-11-20T23:00:00Z", 4, 2));
    let mut service = Service::new(points);
    service.max_span = TimeDelta::days(3);
    let (summary, got) = fetch(&service, 10_000).await;
    let summary = summary.unwrap();
    assert_eq!(got, expected(&service), "in time order, none lost at the seams");
    assert!(summary.splits >= 3, "{summary:?}");
    // 20 days: 416 at 20 and 10 days, then 5 days, then 2.5-day pieces; a span known to be
    // too long is split without asking again.
    let refused = service.requests().iter().filter(|r| r.1 - r.0 > TimeDelta::days(3)).count();
    assert_eq!(refused, 3, "{:?}", service.requests());
}

#[tokio::test]
async fn a_416_below_the_smallest_span_is_a_typed_error() {
    let mut service = Service::new(grid("2026-11-20T00:00:00Z", 2, 1));
    service.max_span = TimeDelta::seconds(30);
    let (result, _) = fetch(&service, 100).await;
    match result {
        Err(FetchError::RangeTooLong { min_span_s: 60, to, from }) => assert!(to - from < TimeDelta::minutes(2)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_expired_session_is_renewed_once_and_the_fetch_goes_on() {
    let service = Service::new(grid("2026-11-20T00:00:00Z", 10, 3)).fault_at(2, Fault::Expired);
    let sessions = Sessions::default();
    let fetcher = Fetcher::new(&service, &sessions, "n1", options(7));
    let all = fetcher.fetch_all(at(FROM), at(TO)).await.unwrap();
    assert_eq!(all, expected(&service));
    assert_eq!(sessions.renewed.lock().unwrap().iter().copied().collect::<Vec<_>>(), vec![1]);
    // The page that drew the 410 is asked again from the same time.
    let requests = service.requests();
    assert_eq!(requests[2].0, requests[3].0);

    // A second 410 right after a renewal is an error, not a loop.
    let service =
        Service::new(grid("2026-11-20T00:00:00Z", 2, 1)).fault_at(0, Fault::Expired).fault_at(1, Fault::Expired);
    let (result, _) = fetch(&service, 100).await;
    assert_eq!(result, Err(FetchError::Cloud { from: at(FROM), source: CloudError::SessionExpired }));
}

#[tokio::test]
async fn a_truncated_page_stops_with_a_typed_error_and_the_tracker_loses_nothing() {
    let service = Service::new(grid("2026-11-20T00:00:00Z", 10, 3)).fault_at(2, Fault::Truncated);
    let sessions = Sessions::default();
    let fetcher = Fetcher::new(&service, &sessions, "n1", options(7));
    let mut tracker = Tracker::new(TimeDelta::days(30));
    let now = at("2026-11-21T00:00:00Z");
    let mut got = Vec::new();
    let err = tracker.fetch_new(&fetcher, now, collect(&mut got)).await.unwrap_err();
    assert!(matches!(&err, FetchError::Truncated { cause, .. } if cause.contains("EOF")), "{err:?}");
    assert!(err.to_string().contains("could not be read"), "{err}");
    assert!(!got.is_empty() && got.len() < 30);
    // The next interval resumes after the newest time received.
    tracker.fetch_new(&fetcher, now, collect(&mut got)).await.unwrap();
    assert_eq!(got, expected(&service));
}

#[tokio::test]
async fn a_point_from_the_future_does_not_stop_the_next_fetches() {
    let service = Service::new(grid("2026-11-20T00:00:00Z", 4, 1)).fault_at(0, Fault::FromTheFuture);
    let sessions = Sessions::default();
    let fetcher = Fetcher::new(&service, &sessions, "n1", options(7));
    let mut tracker = Tracker::new(TimeDelta::days(30));
    let now = at("2026-11-21T00:00:00Z");
    let mut got = Vec::new();
    tracker.fetch_new(&fetcher, now, collect(&mut got)).await.unwrap();
    let later = now + TimeDelta::hours(1);
    assert_eq!(tracker.range(later), Some((now, later)), "the next fetch starts where this one ended");
}

#[tokio::test]
async fn values_that_are_not_numbers_stay_text_and_unreadable_times_are_counted() {
    let t = at("2026-11-20T00:00:00Z");
    let mut odd = wire(t, 9, "presence", "present");
    odd.unit = None;
    let service = Service::new(vec![
        wire(t, 1, "lux", "12.5"),
        wire(t, 2, "lux", "n/a"),
        odd,
        DataPoint { time: "yesterday".into(), ..wire(t, 3, "lux", "1") },
    ]);
    let (summary, got) = fetch(&service, 100).await;
    assert_eq!(summary.unwrap().unreadable_times, 1);
    let values: Vec<String> = got.iter().map(|p| serde_json::to_string(&p.value).unwrap()).collect();
    assert_eq!(values, ["12.5", "\"n/a\"", "\"present\""]);
    assert_eq!(got[2].unit, None);
}

#[tokio::test]
async fn the_sink_can_stop_the_fetch() {
    let service = Service::new(grid("2026-11-20T00:00:00Z", 10, 3));
    let sessions = Sessions::default();
    let fetcher = Fetcher::new(&service, &sessions, "n1", options(7));
    let mut pages = 0;
    let summary = fetcher
        .fetch(at(FROM), at(TO), |_| {
            pages += 1;
            ControlFlow::Break(())
        })
        .await
        .unwrap();
    assert!(summary.stopped);
    assert_eq!((pages, service.requests().len()), (1, 1));
}

#[tokio::test]
async fn a_page_the_sink_refuses_is_asked_again_next_time() {
    let service = Service::new(grid("2026-11-20T00:00:00Z", 10, 3));
    let sessions = Sessions::default();
    let fetcher = Fetcher::new(&service, &sessions, "n1", options(7));
    let mut tracker = Tracker::new(TimeDelta::days(30));
    let now = at("2026-11-21T00:00:00Z");
    let mut got = Vec::new();
    let mut room = 2;
    while got.len() < 30 {
        room += 1;
        let mut taken = 0;
        let summary = tracker
            .fetch_new(&fetcher, now, |page| {
                if taken == room {
                    return ControlFlow::Break(());
                }
                taken += 1;
                got.extend(page);
                ControlFlow::Continue(())
            })
            .await
            .unwrap();
        assert!(summary.stopped || got.len() == 30, "{summary:?}");
    }
    assert_eq!(got, expected(&service), "nothing lost, nothing twice");
}
