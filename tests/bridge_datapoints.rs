//! The bridge core's periodic datapoint fetch against the simulated cloud
//! (docs/datapoints.md): one query per network per interval, only after every network's start-up
//! snapshot; a session that expires between fetches is renewed and nothing is lost; a site
//! login's user session serves it too; a service that refuses every range (416) costs a warning
//! per interval, never the bridge.

mod bridge_support;
mod common;

use bridge_support::*;
use casambi2mqtt::bridge::datapoints::DatapointSettings;
use casambi2mqtt::bridge::datapoints::{Job, Schedule, fetch_options};
use casambi2mqtt::bridge::network::Timing;
use casambi2mqtt::sim::log::RequestRecord;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use std::time::Duration;

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
const OFFICE: &str = "c0ffee00aa11bb22cc33dd44ee55ff66";

fn timing(interval: Duration) -> Timing {
    let settings = DatapointSettings::default();
    let job = Job::new(Schedule { interval, lookback: Duration::from_secs(3600) }, fetch_options(&settings));
    Timing { datapoints: Some(job), ..fast_timing() }
}

fn datapoint_requests<'l>(log: &'l [RequestRecord], network: &str) -> Vec<&'l RequestRecord> {
    let path = format!("/datapoints/networks/{network}/datapoints");
    log.iter().filter(|r| r.path == path).collect()
}

async fn demo(config: SimConfig, interval: Duration) -> Harness {
    let sim = Simulator::start_local(config).await.expect("simulator");
    start_timed(sim, demo_credentials("demo"), Vec::new(), 600, timing(interval))
}

#[tokio::test]
async fn one_query_per_network_per_interval_after_every_snapshot() {
    let h = demo(SimConfig::new(Site::demo()), Duration::from_millis(1000)).await;
    h.wait(20, "datapoints of both networks", |m| {
        [HOME, OFFICE].iter().all(|n| m.datapoints.iter().any(|(net, _)| net == n))
    })
    .await;
    let first = h.sim.shared().log.requests();
    let first_query = first.iter().position(|r| r.path.starts_with("/datapoints/")).expect("a query");
    for id in [HOME, OFFICE] {
        let snapshot = first.iter().position(|r| r.path == format!("/v1/networks/{id}/state")).expect("a snapshot");
        assert!(snapshot < first_query, "a datapoint query before {id}'s start-up snapshot");
    }
    let before: Vec<usize> = [HOME, OFFICE].map(|n| datapoint_requests(&first, n).len()).to_vec();
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    let log = h.sim.shared().log.requests();
    for (i, id) in [HOME, OFFICE].iter().enumerate() {
        let asked = datapoint_requests(&log, id);
        let new = asked.len() - before[i];
        // 4.5 intervals: four or five ticks, each one query (the demo's hour fits one page).
        assert!((4..=5).contains(&new), "{id}: {new} queries in 4.5 intervals");
        assert!(asked.iter().all(|r| r.status == 200), "{id}");
        // The log notes a query when it is answered, and the first (an hour back) takes longest
        // to answer: the gaps after it are the schedule's.
        let gaps: Vec<Duration> = asked.windows(2).skip(1).map(|w| w[1].at - w[0].at).collect();
        assert!(
            gaps.iter().all(|g| *g >= Duration::from_millis(800)),
            "{id}: queries closer than an interval: {gaps:?}"
        );
    }
    // Later fetches bring only what is new: no point is handed on twice.
    let m = h.mirror.lock().expect("mirror");
    let mut seen = std::collections::BTreeSet::new();
    for (net, p) in &m.datapoints {
        assert!(seen.insert((net.clone(), p.unit, p.key.clone(), p.time)), "{net} {p:?} handed on twice");
    }
}

#[tokio::test]
async fn a_session_expired_between_fetches_is_renewed_and_the_fetch_goes_on() {
    let h = demo(SimConfig::new(Site::demo()), Duration::from_millis(700)).await;
    h.wait(20, "first datapoints", |m| !m.datapoints.is_empty()).await;
    let pages_before = h.mirror.lock().expect("mirror").datapoint_pages;
    h.sim.expire_sessions();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let log = h.sim.shared().log.requests();
    let home = datapoint_requests(&log, HOME);
    let refused = home.iter().position(|r| r.status == 410);
    if let Some(i) = refused {
        assert!(home[i + 1..].iter().any(|r| r.status == 200), "a 410 was not followed by a successful query");
    }
    assert!(home.last().is_some_and(|r| r.status == 200), "the latest query failed: {:?}", home.last());
    assert!(h.mirror.lock().expect("mirror").problems.is_empty(), "{:?}", h.mirror.lock().expect("mirror").problems);
    // The service logs new points as time passes; the fetch keeps handing them on.
    h.wait(10, "datapoints after the renewal", |m| m.datapoint_pages > pages_before).await;
}

#[tokio::test]
async fn a_site_logins_user_session_serves_the_datapoints() {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.expect("simulator");
    let h = start_timed(sim, Vec::new(), site_credentials("demo"), 600, timing(Duration::from_secs(10)));
    h.wait(20, "datapoints of both networks", |m| {
        [HOME, OFFICE].iter().all(|n| m.datapoints.iter().any(|(net, _)| net == n))
    })
    .await;
    let log = h.sim.shared().log.requests();
    assert_eq!(log.iter().filter(|r| r.path == "/v1/users/session").count(), 1, "one login serves all");
}

#[tokio::test]
async fn a_service_that_refuses_every_range_costs_a_warning_not_the_bridge() {
    let mut config = SimConfig::new(Site::demo());
    config.max_datapoint_interval = Duration::from_secs(30);
    let h = demo(config, Duration::from_millis(1500)).await;
    h.wait_all_live(20).await;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let log = h.sim.shared().log.requests();
    let home = datapoint_requests(&log, HOME);
    assert!(!home.is_empty() && home.iter().all(|r| r.status == 416), "{:?}", home.len());
    // Each interval splits one hour down to a minute: 1 h, 30 min, …, under 2 min (7 queries),
    // and a span refused is not asked again within the fetch.
    assert!(home.len() <= 7 * 4, "{} queries in about three intervals", home.len());
    assert!(h.mirror.lock().expect("mirror").datapoints.is_empty());
    // The network is still bridged live.
    h.sim.set_unit_state(HOME, 1, &serde_json::json!({"controls": [{"type": "Dimmer", "value": 0.4}]})).expect("unit");
    h.wait_converged(10).await;
}
