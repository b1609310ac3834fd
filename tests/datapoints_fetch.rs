//! The datapoint fetcher against the simulated service: every page of a range, 416 splits,
//! `+` offsets, a session expiring mid-fetch, points of units the bridge never saw, and the
//! incremental tracker.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use casambi2mqtt::cloud::datapoints_fetch::tracker::Tracker;
use casambi2mqtt::cloud::datapoints_fetch::{Datapoint, FetchError, FetchOptions, Fetcher};
use casambi2mqtt::cloud::model::{Credentials, Secret};
use casambi2mqtt::cloud::quota::{QuotaConfig, QuotaGuard};
use casambi2mqtt::cloud::rest::{DataType, DatapointQuery};
use casambi2mqtt::cloud::session::LoginPolicy;
use casambi2mqtt::cloud::{RestClient, RestConfig, SessionManager};
use casambi2mqtt::sim::site::{DEMO_API_KEY, DEMO_NETWORK_EMAIL, DEMO_PASSWORD, Site, Unit};
use casambi2mqtt::sim::{SimConfig, Simulator};
use chrono::{DateTime, DurationRound, FixedOffset, TimeDelta, Utc};

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";

struct Harness {
    sim: Simulator,
    rest: RestClient,
    sessions: SessionManager,
}

impl Harness {
    async fn start(config: SimConfig) -> Harness {
        let sim = Simulator::start_local(config).await.unwrap();
        let limits = QuotaConfig {
            max_requests_per_minute: std::num::NonZeroU32::new(60_000).unwrap(),
            ..QuotaConfig::default()
        };
        let quota = Arc::new(QuotaGuard::new(&limits));
        let rest = RestClient::new(RestConfig::new(sim.base_url().parse().unwrap(), Secret::new(DEMO_API_KEY)), quota)
            .unwrap();
        let creds = Credentials::new(DEMO_NETWORK_EMAIL, DEMO_PASSWORD);
        let sessions = SessionManager::new(rest.clone(), creds, vec![HOME.into()], LoginPolicy::default());
        Harness { sim, rest, sessions }
    }

    async fn demo() -> Harness {
        Harness::start(SimConfig::new(Site::demo())).await
    }

    fn fetcher(&self, page_limit: u32) -> Fetcher<'_, RestClient, SessionManager> {
        let filter = DatapointQuery { data_types: all_types(), ..DatapointQuery::default() };
        let options = FetchOptions { filter, page_limit, ..FetchOptions::default() };
        Fetcher::new(&self.rest, &self.sessions, HOME, options)
    }

    /// The points of `[from, to)` asked directly, in pieces of at most `piece` and one page each.
    async fn reference(&self, from: DateTime<Utc>, to: DateTime<Utc>, piece: TimeDelta) -> Vec<Datapoint> {
        let sid = self.sessions.current(HOME).map(|s| s.session_id);
        let sid = match sid {
            Some(s) => s,
            None => self.sessions.open().await.unwrap().sessions[0].session_id.clone(),
        };
        let mut all = Vec::new();
        let mut start = from;
        while start < to {
            let end = (start + piece).min(to);
            let query = DatapointQuery {
                data_types: all_types(),
                limit: Some(100_000),
                ..DatapointQuery::between(&start, &end)
            };
            let page = self.rest.datapoints(&sid, HOME, &query).await.unwrap();
            assert!(!page.has_more_results);
            all.extend(page.data_points.into_iter().map(|p| Datapoint::from_wire(p).unwrap()));
            start = end;
        }
        all
    }

    fn statuses(&self) -> Vec<u16> {
        self.sim
            .shared()
            .log
            .requests()
            .iter()
            .filter(|r| r.path.starts_with("/datapoints"))
            .map(|r| r.status)
            .collect()
    }
}

/// A sink that keeps every point.
fn collect(into: &mut Vec<Datapoint>) -> impl FnMut(Vec<Datapoint>) -> ControlFlow<()> + '_ {
    |page| {
        into.extend(page);
        ControlFlow::Continue(())
    }
}

fn all_types() -> Vec<DataType> {
    use DataType::*;
    vec![Sensors, Vendor, Control, Energy, Details, Status]
}

/// A day ending on a whole hour two days ago: inside the retention, away from "now".
fn past_day() -> (DateTime<Utc>, DateTime<Utc>) {
    let to = (Utc::now() - TimeDelta::days(2)).duration_trunc(TimeDelta::hours(1)).unwrap();
    (to - TimeDelta::days(1), to)
}

#[tokio::test]
async fn every_page_of_a_range_arrives_once_in_time_order() {
    let h = Harness::demo().await;
    let (from, to) = past_day();
    let mut pages = Vec::new();
    let summary = h
        .fetcher(50)
        .fetch(from, to, |page| {
            pages.push(page.len());
            ControlFlow::Continue(())
        })
        .await
        .unwrap();
    let expected = h.reference(from, to, TimeDelta::days(1)).await;
    assert!(expected.len() > 1000, "{}", expected.len());
    let got = h.fetcher(50).fetch_all(from, to).await.unwrap();
    assert_eq!(got, expected);
    assert_eq!(summary.points, expected.len());
    assert!(pages.len() > expected.len() / 50, "{} pages", pages.len());
    assert!(pages.iter().all(|n| *n <= 50));
    assert!(got.windows(2).all(|w| w[0].time <= w[1].time));
    assert!(h.statuses().iter().all(|s| *s == 200), "{:?}", h.statuses());
}

#[tokio::test]
async fn a_short_maximum_range_is_split_for_every_range() {
    let mut config = SimConfig::new(Site::demo());
    config.max_datapoint_interval = Duration::from_secs(5 * 3600);
    let h = Harness::start(config).await;
    let (from, to) = past_day();
    let from = from - TimeDelta::days(1);
    let got = h.fetcher(10_000).fetch_all(from, to).await.unwrap();
    assert_eq!(got, h.reference(from, to, TimeDelta::hours(4)).await);
    let refused = h.statuses().iter().filter(|s| **s == 416).count();
    // 48 h, 24 h, 12 h and 6 h were refused once each; shorter pieces were never asked too long.
    assert_eq!(refused, 4, "{:?}", h.statuses());

    let mut config = SimConfig::new(Site::demo());
    config.max_datapoint_interval = Duration::from_secs(30);
    let h = Harness::start(config).await;
    let err = h.fetcher(100).fetch_all(from, to).await.unwrap_err();
    assert!(matches!(err, FetchError::RangeTooLong { min_span_s: 60, .. }), "{err:?}");
    assert!(err.to_string().contains("416"), "{err}");
}

#[tokio::test]
async fn ranges_given_with_plus_offsets_go_out_encoded() {
    let h = Harness::demo().await;
    let (from, to) = past_day();
    let east = FixedOffset::east_opt(2 * 3600).unwrap();
    let (local_from, local_to) = (from.with_timezone(&east), to.with_timezone(&east));
    assert!(local_from.to_rfc3339().contains('+'));
    let got = h.fetcher(500).fetch_all(local_from.to_utc(), local_to.to_utc()).await.unwrap();
    assert_eq!(got, h.reference(from, to, TimeDelta::days(1)).await);
    // The service refuses a literal '+' with 400; every query carried "+00:00".
    assert!(h.statuses().iter().all(|s| *s == 200), "{:?}", h.statuses());
}

#[tokio::test]
async fn a_session_expiring_mid_fetch_is_renewed_and_the_fetch_goes_on() {
    let h = Harness::demo().await;
    let (from, to) = past_day();
    let expected = h.reference(from, to, TimeDelta::days(1)).await;
    let mut got = Vec::new();
    let summary = h
        .fetcher(200)
        .fetch(from, to, |page| {
            if got.len() < 400 && got.len() + page.len() >= 400 {
                h.sim.expire_sessions();
            }
            got.extend(page);
            ControlFlow::Continue(())
        })
        .await
        .unwrap();
    assert_eq!(summary.renewals, 1);
    assert_eq!(got, expected);
    assert_eq!(h.statuses().iter().filter(|s| **s == 410).count(), 1);
    let logins = h.sim.shared().log.requests().iter().filter(|r| r.is_login()).count();
    assert_eq!(logins, 2, "the first session and its renewal");
}

#[tokio::test]
async fn points_of_a_unit_the_bridge_never_saw_pass_through() {
    let h = Harness::demo().await;
    let mut unit: Unit = h.sim.shared().config.site.networks[0].units[0].clone();
    unit.id = 4242;
    unit.name = "Added later".into();
    h.sim.add_unit(HOME, unit).unwrap();
    let (from, to) = past_day();
    let got = h.fetcher(10_000).fetch_all(from, to).await.unwrap();
    let added = got.iter().filter(|p| p.unit == Some(4242)).count();
    assert!(added >= 96, "a point per slot at least: {added}");
}

#[tokio::test]
async fn the_tracker_asks_only_for_what_is_new() {
    let h = Harness::demo().await;
    let fetcher = h.fetcher(10_000);
    let mut tracker = Tracker::new(TimeDelta::hours(1));
    let now = Utc::now();
    let mut first = Vec::new();
    tracker.fetch_new(&fetcher, now, collect(&mut first)).await.unwrap();
    // Four 15-minute slots in the hour before now (a slot on `now - 1h` itself counts too).
    let times: std::collections::BTreeSet<_> = first.iter().map(|p| p.time).collect();
    assert!((4..=5).contains(&times.len()), "{times:?}");
    assert!(first.iter().all(|p| p.time >= now - TimeDelta::hours(1)));
    let newest = tracker.newest().unwrap();
    let mut second = Vec::new();
    let later = now + TimeDelta::minutes(15);
    tracker.fetch_new(&fetcher, later, collect(&mut second)).await.unwrap();
    assert!(second.iter().all(|p| p.time > newest), "only points after {newest}");
}
