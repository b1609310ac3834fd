//! Site (user) logins against the simulated cloud: one user session bridges every network of the
//! user, costs one login at start-up, is renewed once for all its networks, is refused for good
//! on a 401, and yields to network (admin) credentials for a network both open.

mod bridge_support;
mod common;

use bridge_support::*;
use casambi2mqtt::bridge::{CredentialSettings, CredentialState};
use casambi2mqtt::cloud::model::Secret;
use casambi2mqtt::sim::log::RequestRecord;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use serde_json::json;
use std::time::Duration;

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
const OFFICE: &str = "c0ffee00aa11bb22cc33dd44ee55ff66";
const USER_SESSION: &str = "/v1/users/session";

fn count(log: &[RequestRecord], pred: impl Fn(&RequestRecord) -> bool) -> usize {
    log.iter().filter(|r| pred(r)).count()
}

#[tokio::test]
async fn a_site_login_bridges_every_network_of_the_user() {
    let h = start_with_sites(SimConfig::new(Site::demo()), Vec::new(), site_credentials("demo"), 600).await;
    h.wait_all_live(20).await;
    h.wait_converged(5).await;
    // Live events reach the bridge over wires opened with the user session.
    h.sim.set_unit_state(OFFICE, 1, &json!({"controls": [{"type": "Dimmer", "value": 0.37}]})).unwrap();
    h.wait_converged(5).await;
    let via: Vec<(String, String)> = h.bridge.networks().into_iter().map(|n| (n.id, n.via)).collect();
    let site = "site credentials owner@example.com".to_string();
    assert_eq!(via, [(HOME.to_string(), site.clone()), (OFFICE.to_string(), site)]);
    assert_eq!(h.bridge.credential_states(), [CredentialState::Running]);
    let listed = h.bridge.sites();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].email, "owner@example.com");
    assert_eq!(listed[0].networks.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["Home", "Office"]);
    let log = h.sim.shared().log.requests();
    assert_eq!(count(&log, |r| r.is_login()), 1, "one user session, no network session: {log:#?}");
    assert_eq!(count(&log, |r| r.path == USER_SESSION), 1);
}

#[tokio::test]
async fn site_startup_costs_one_session_plus_two_requests_per_network_plus_one_per_fixture() {
    let site = Site::generate(3, 25);
    let h = start_with_sites(SimConfig::new(site.clone()), Vec::new(), site_credentials("demo"), 600).await;
    h.wait_all_live(20).await;
    let log = h.sim.shared().log.requests();
    assert_startup_cost(&log, &site);
    assert_eq!(count(&log, |r| r.path == USER_SESSION), 1, "the one session is the user session: {log:#?}");
}

#[tokio::test]
async fn an_expired_user_session_is_renewed_once_for_all_its_networks() {
    let h = start_with_sites(SimConfig::new(Site::demo()), Vec::new(), site_credentials("demo"), 600).await;
    h.wait_all_live(20).await;
    h.sim.shared().log.clear();
    h.sim.expire_sessions();
    // Every wire reopens with the expired session: both networks meet `invalidSession` (or a 410
    // on REST) at about the same time.
    h.sim.drop_sockets();
    h.sim.set_unit_state(HOME, 1, &json!({"controls": [{"type": "Dimmer", "value": 0.21}]})).unwrap();
    h.sim.set_unit_state(OFFICE, 1, &json!({"controls": [{"type": "Dimmer", "value": 0.22}]})).unwrap();
    h.wait_all_live(20).await;
    h.wait_converged(10).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = h.sim.shared().log.requests();
    assert_eq!(count(&log, |r| r.is_login()), 1, "exactly one renewal, shared by both networks: {log:#?}");
    assert_eq!(count(&log, |r| r.path == USER_SESSION && r.status == 200), 1);
}

#[tokio::test]
async fn a_refused_site_login_is_named_and_waits_out_the_lock_window() {
    let h =
        start_with_sites(SimConfig::new(Site::demo()), Vec::new(), site_credentials("Not-The-Password-42"), 600).await;
    if tokio::time::timeout(Duration::from_secs(10), h.bridge.all_rejected()).await.is_err() {
        panic!("not rejected: {:?}\n{:#?}", h.bridge.credential_states(), h.sim.shared().log.requests());
    }
    match &h.bridge.credential_states()[0] {
        CredentialState::Rejected(why) => {
            assert_eq!(
                why,
                "site credentials owner@example.com: user not found / wrong password for owner@example.com; \
                 next login attempt in 1m 5s"
            );
        }
        other => panic!("{other:?}"),
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = h.sim.shared().log.requests();
    let failed: Vec<_> = log.iter().filter(|r| r.is_login() && r.status != 200).collect();
    assert_eq!(failed.len(), 1, "after a 401 the next login waits out the lock window: {failed:#?}");
    assert!(h.bridge.networks().is_empty());
    assert!(h.mirror.lock().unwrap().problems.iter().any(|p| p.contains("site credentials owner@example.com")));
}

#[tokio::test]
async fn a_refused_site_leaves_the_network_credentials_running() {
    let h = start_with_sites(
        SimConfig::new(Site::demo()),
        demo_credentials("demo"),
        site_credentials("Not-The-Password-42"),
        600,
    )
    .await;
    h.wait_all_live(20).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !matches!(h.bridge.credential_states()[1], CredentialState::Rejected(_)) {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", h.bridge.credential_states());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(h.bridge.credential_states()[0], CredentialState::Running);
    assert!(tokio::time::timeout(Duration::from_millis(300), h.bridge.all_rejected()).await.is_err());
}

#[tokio::test]
async fn a_network_open_to_both_lists_is_bridged_once_with_the_network_credentials() {
    let (logs, _guard) = common::logs::capture("casambi2mqtt=info");
    let networks = vec![CredentialSettings {
        email: "demo@example.com".into(),
        password: Secret::new("demo"),
        ids: vec![HOME.into()],
    }];
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    // The first login (the network credentials', started first) meets a 500 and is retried
    // after a backoff: the site's login, meanwhile, succeeds and must leave Home alone.
    sim.fail_next_requests(1);
    let h = start_on(sim, networks, site_credentials("demo"), 600);
    h.wait_all_live(20).await;
    h.wait_converged(5).await;
    let via: Vec<(String, String)> = h.bridge.networks().into_iter().map(|n| (n.id, n.via)).collect();
    assert_eq!(
        via,
        [
            (HOME.to_string(), "credentials demo@example.com".to_string()),
            (OFFICE.to_string(), "site credentials owner@example.com".to_string())
        ]
    );
    let log = h.sim.shared().log.requests();
    assert_eq!(count(&log, |r| r.path == format!("/v1/networks/{HOME}")), 1, "Home read once: {log:#?}");
    assert_eq!(count(&log, |r| r.path == format!("/v1/networks/{HOME}/state")), 1, "{log:#?}");
    assert_eq!(count(&log, |r| r.is_login() && r.status == 200), 2, "one network session, one user session: {log:#?}");
    let lines = logs.lines_with("bridged once");
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert!(lines[0].contains(HOME) && lines[0].contains("credentials demo@example.com"), "{}", lines[0]);
}

#[tokio::test]
async fn site_ids_narrow_the_networks_and_name_the_missing_ones() {
    let sites = vec![CredentialSettings {
        email: "owner@example.com".into(),
        password: Secret::new("demo"),
        ids: vec![OFFICE.into(), "0000feedfeedfeedfeedfeedfeedfeed".into()],
    }];
    let h = start_with_sites(SimConfig::new(Site::demo()), Vec::new(), sites, 600).await;
    h.wait(10, "a problem naming the missing network", |m| {
        m.problems
            .iter()
            .any(|p| p == "site credentials owner@example.com do not open network 0000feedfeedfeedfeedfeedfeedfeed")
    })
    .await;
    h.wait(20, "Office live", |m| m.status.get(OFFICE).is_some_and(|s| s.connection.as_str() == "live")).await;
    let ids: Vec<String> = h.bridge.networks().into_iter().map(|n| n.id).collect();
    assert_eq!(ids, [OFFICE], "Home is not bridged");
    assert!(h.sim.shared().log.requests().iter().all(|r| !r.path.contains(HOME)), "Home is never read");
}
