//! The datapoint fetcher against the simulated service: every page of a range, 416 splits,
//! `+` offsets, a session expiring mid-fetch, points of units the bridge never saw, the
//! incremental tracker, and a body cut off mid-JSON.

mod datapoints_support;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use casambi2mqtt::cloud::datapoints::tracker::Tracker;
use casambi2mqtt::cloud::datapoints::{FetchError, FetchOptions, Fetcher, SessionProvider};
use casambi2mqtt::cloud::model::Secret;
use casambi2mqtt::cloud::quota::{QuotaConfig, QuotaGuard};
use casambi2mqtt::cloud::rest::DatapointQuery;
use casambi2mqtt::cloud::{CloudError, RestClient, RestConfig};
use casambi2mqtt::sim::SimConfig;
use casambi2mqtt::sim::site::{Site, Unit};
use chrono::{FixedOffset, TimeDelta, Utc};
use datapoints_support::{HOME, Harness, collect, past_day};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// A session that never expires, for a server that does not check it.
struct FixedSession;

impl SessionProvider for FixedSession {
    async fn session(&self, _: &str) -> Result<(Secret, u64), CloudError> {
        Ok((Secret::new("s"), 1))
    }

    async fn renew(&self, _: &str, seen: u64) -> Result<(Secret, u64), CloudError> {
        Ok((Secret::new("s"), seen + 1))
    }
}

#[tokio::test]
async fn a_body_cut_off_mid_json_is_a_typed_error_naming_the_cause() {
    // A server whose answer ends inside the JSON (a proxy that cut the body short).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = vec![0; 4096];
            let _ = socket.read(&mut buf).await;
            let body = r#"{"resultCount":2,"hasMoreResults":false,"dataPoints":[{"unit":1,"key":"lux","val"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(format!("{head}{body}").as_bytes()).await;
        }
    });
    let quota = Arc::new(QuotaGuard::new(&QuotaConfig::default()));
    let rest =
        RestClient::new(RestConfig::new(format!("http://{addr}").parse().unwrap(), Secret::new("k")), quota).unwrap();
    let options = FetchOptions {
        filter: DatapointQuery { keys: vec!["lux".into()], ..DatapointQuery::default() },
        ..FetchOptions::default()
    };
    let fetcher = Fetcher::new(&rest, &FixedSession, HOME, options);
    let (from, to) = past_day();
    let err = fetcher.fetch_all(from, to).await.unwrap_err();
    match &err {
        FetchError::Truncated { from: at, cause } => {
            assert_eq!(*at, from);
            assert!(cause.contains("EOF"), "{cause}");
        }
        other => panic!("{other:?}"),
    }
}
