//! The bridge core against the simulated cloud: start-up cost, fallback polling, session expiry,
//! login safety, quota safety, malformed frames, configuration changes and convergence.

mod bridge_support;

use bridge_support::*;
use casambi2mqtt::bridge::CredentialState;
use casambi2mqtt::bridge::network::Timing;
use casambi2mqtt::bridge::state::UnitEvent;
use casambi2mqtt::sim::SimConfig;
use casambi2mqtt::sim::log::RequestRecord;
use casambi2mqtt::sim::site::{Site, Unit};
use serde_json::json;
use std::time::Duration;

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";

fn count(log: &[RequestRecord], pred: impl Fn(&RequestRecord) -> bool) -> usize {
    log.iter().filter(|r| pred(r)).count()
}

#[tokio::test]
async fn startup_costs_sessions_plus_two_requests_per_network_plus_one_per_fixture() {
    let site = Site::generate(3, 25);
    let h = start(SimConfig::new(site.clone()), demo_credentials("demo"), 600).await;
    h.wait_all_live(20).await;
    assert_startup_cost(&h.sim.shared().log.requests(), &site);
}

#[tokio::test]
async fn dropped_wire_falls_back_to_polling_and_loses_no_change() {
    let h = start_demo().await;
    h.wait_all_live(20).await;
    h.wait_converged(5).await;
    let seen = h.mirror.lock().unwrap().connections.len();
    assert!(h.sim.drop_wire(HOME) > 0);
    // A change made while the wire is gone is not lost.
    h.sim.set_unit_state(HOME, 1, &json!({"controls": [{"type": "Dimmer", "value": 0.33}]})).unwrap();
    // The lost wire is noticed (its ping is refused), REST polling takes over, the wire reopens.
    h.wait(5, "Home polling then live", move |m| {
        let after: Vec<&str> = m.connections[seen..].iter().filter(|(n, _)| n == HOME).map(|(_, c)| *c).collect();
        after.windows(2).any(|w| w == ["polling", "live"])
    })
    .await;
    h.wait_converged(5).await;
    // The channel reconnects by itself; the wire is live again.
    h.sim.drop_sockets();
    h.wait_all_live(20).await;
    h.sim.set_unit_state(HOME, 2, &json!({"controls": [{"type": "Dimmer", "value": 0.44}]})).unwrap();
    h.wait_converged(5).await;
}

#[tokio::test]
async fn a_lost_wire_costs_one_state_read_then_one_per_poll_interval() {
    let poll_interval = Duration::from_secs(3);
    let sim = casambi2mqtt::sim::Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let timing = Timing { poll_interval, ..fast_timing() };
    let h = start_timed(sim, demo_credentials("demo"), Vec::new(), 600, timing);
    h.wait_all_live(20).await;
    // Live for longer than a poll interval: the poll's schedule has a tick long due.
    tokio::time::sleep(poll_interval + Duration::from_millis(500)).await;
    let seen = h.mirror.lock().unwrap().connections.len();
    h.sim.shared().log.clear();
    assert!(h.sim.drop_sockets() > 0);
    h.wait(10, "Home polling", move |m| m.connections[seen..].iter().any(|(n, c)| n == HOME && *c == "polling")).await;
    tokio::time::sleep(poll_interval / 2).await;
    let log = h.sim.shared().log.requests();
    let reads = count(&log, |r| r.method == "GET" && r.path == format!("/v1/networks/{HOME}/state"));
    assert_eq!(reads, 1, "one read when the wire goes, the next a poll interval later: {log:#?}");
}

#[tokio::test]
async fn expired_sessions_cost_exactly_one_login_per_network() {
    let h = start_demo().await;
    h.wait_all_live(20).await;
    h.sim.shared().log.clear();
    h.sim.expire_sessions();
    // The socket drop makes every wire reopen with its (now invalid) session.
    h.sim.drop_sockets();
    h.sim.set_unit_state(HOME, 1, &json!({"controls": [{"type": "Dimmer", "value": 0.21}]})).unwrap();
    // Every network must notice (wire refused or REST 410) and log in again; then nothing more.
    let ids = h.network_ids();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let log = h.sim.shared().log.requests();
        let done =
            ids.iter().all(|id| log.iter().any(|r| r.is_login() && r.status == 200 && r.path.contains(id.as_str())));
        if done {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not every network logged in again: {log:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.wait_converged(10).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = h.sim.shared().log.requests();
    let logins = count(&log, |r| r.is_login());
    assert_eq!(logins, ids.len(), "exactly one re-login per network: {log:#?}");
}

#[tokio::test]
async fn rejected_password_is_reported_and_never_locks_the_account() {
    let h = start(SimConfig::new(Site::demo()), demo_credentials("Not-The-Password-42"), 600).await;
    if tokio::time::timeout(Duration::from_secs(10), h.bridge.all_rejected()).await.is_err() {
        panic!("not rejected: {:?}\n{:#?}", h.bridge.credential_states(), h.sim.shared().log.requests());
    }
    let states = h.bridge.credential_states();
    match &states[0] {
        CredentialState::Rejected(why) => {
            assert!(why.contains("demo@example.com"), "{why}");
            assert!(!why.contains("Not-The-Password-42"), "no password in messages: {why}");
        }
        other => panic!("{other:?}"),
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = h.sim.shared().log.requests();
    let failed: Vec<_> = log.iter().filter(|r| r.is_login() && r.status != 200).collect();
    assert!(!failed.is_empty() && failed.len() <= 2, "at most 2 failed logins per minute: {failed:#?}");
    assert!(log.iter().all(|r| r.status != 403), "never locked out");
    assert!(h.mirror.lock().unwrap().problems.iter().any(|p| p.contains("demo@example.com")));
}

#[tokio::test]
async fn quota_storm_backs_off_and_keeps_under_the_limit() {
    let rpm = 30;
    let h = start(SimConfig::new(Site::demo()), demo_credentials("demo"), rpm).await;
    h.wait_all_live(20).await;
    // Wires down → polling every 300 ms; the quota is exhausted for 3 s.
    h.sim.exhaust_quota("demo-key", Duration::from_secs(3));
    h.sim.drop_sockets();
    tokio::time::sleep(Duration::from_secs(6)).await;
    h.wait_all_live(20).await;
    let log = h.sim.shared().log.requests();
    // Never more than the configured limit in any rolling minute.
    for (i, r) in log.iter().enumerate() {
        let in_window = log[i..].iter().take_while(|o| o.at - r.at < Duration::from_secs(60)).count();
        assert!(in_window <= rpm as usize, "{in_window} requests within 60 s of {:?}", r.at);
    }
    let refused: Vec<_> = log.iter().filter(|r| r.status == 429).collect();
    assert!(!refused.is_empty(), "the storm was seen");
    // Waits after consecutive 429s grow (no hammering).
    let gaps: Vec<Duration> = refused.windows(2).map(|w| w[1].at - w[0].at).collect();
    if gaps.len() >= 2 {
        assert!(gaps.last() >= gaps.first(), "waits grow: {gaps:?}");
    }
    h.wait_converged(10).await;
}

#[tokio::test]
async fn malformed_and_oversized_frames_are_skipped_without_losing_the_socket() {
    let h = start_demo().await;
    h.wait_all_live(20).await;
    let sockets_before = h.sim.shared().log.ws_records().len();
    assert!(h.sim.send_malformed(HOME) > 0);
    h.sim.set_unit_state(HOME, 1, &json!({"controls": [{"type": "Dimmer", "value": 0.12}]})).unwrap();
    h.wait_converged(5).await;
    let opened_again = h.sim.shared().log.ws_records()[sockets_before..]
        .iter()
        .any(|r| matches!(r, casambi2mqtt::sim::log::WsRecord::SocketOpened { .. }));
    assert!(!opened_again, "the socket stayed up");
}

/// A wire that keeps receiving frames is still pinged: the service closes a wire that sends
/// nothing for a while, however much it receives (the simulator after `idle_timeout`).
#[tokio::test]
async fn busy_wires_are_still_pinged_and_stay_open() {
    use casambi2mqtt::sim::log::WsRecord;
    let mut config = SimConfig::new(Site::demo());
    config.idle_timeout = Duration::from_millis(2000);
    let h = start(config, demo_credentials("demo"), 600).await;
    h.wait_all_live(20).await;
    let records_before = h.sim.shared().log.ws_records().len();
    let connections_before = h.mirror.lock().unwrap().connections.len();
    // A frame every 100 ms for 4 s: more often than the channel's ping check (500 ms here), for
    // twice the idle timeout.
    for i in 0..40 {
        let value = 0.2 + f64::from(i % 2) * 0.1;
        h.sim.set_unit_state(HOME, 1, &json!({"controls": [{"type": "Dimmer", "value": value}]})).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let records = h.sim.shared().log.ws_records();
    let pinged = |id: &str| {
        records[records_before..]
            .iter()
            .filter(|r| match r {
                WsRecord::Message { network, message, .. } => {
                    network.as_deref() == Some(id) && message["method"] == "ping"
                }
                _ => false,
            })
            .count()
    };
    for id in h.network_ids() {
        assert!(pinged(&id) >= 3, "network {id} pinged {} times in 4 s of frames: {records:#?}", pinged(&id));
    }
    let reopened = records[records_before..].iter().any(|r| matches!(r, WsRecord::Open { .. }));
    let connections = h.mirror.lock().unwrap().connections[connections_before..].to_vec();
    assert!(!reopened && connections.is_empty(), "no wire was closed for idling: {connections:?}");
}

#[tokio::test]
async fn network_updated_reports_added_and_removed_units() {
    let h = start_demo().await;
    h.wait_all_live(20).await;
    let mut unit: Unit = h.sim.shared().config.site.networks[0].units[0].clone();
    unit.id = 42;
    unit.name = "Porch".into();
    h.sim.add_unit(HOME, unit).unwrap();
    h.sim.remove_unit(HOME, 8).unwrap();
    h.wait(10, "added and removed reported", |m| {
        let added = m.topologies.iter().any(|(n, t)| n == HOME && t.units.added.contains(&42));
        let removed = m.topologies.iter().any(|(n, t)| n == HOME && t.units.removed.contains(&8));
        added && removed
    })
    .await;
    h.wait_converged(5).await;
}

#[tokio::test]
async fn gateway_loss_and_presence_events_are_reported() {
    let h = start_demo().await;
    h.wait_all_live(20).await;
    h.sim.set_gateway(HOME, false).unwrap();
    h.wait(5, "gateway offline", |m| !m.status[HOME].gateway_online && !m.status[HOME].available()).await;
    h.sim.set_gateway(HOME, true).unwrap();
    h.wait(5, "gateway online", |m| m.status[HOME].gateway_online).await;
    tokio::time::sleep(Duration::from_millis(400)).await; // past the resync burst
    h.sim.set_unit_state(HOME, 4, &json!({"controls": [{"type": "Presence", "status": "present"}]})).unwrap();
    h.wait(5, "occupancy event", |m| {
        m.events.iter().any(|(n, u, e)| n == HOME && *u == 4 && *e == UnitEvent::Occupancy(true))
    })
    .await;
}

#[tokio::test]
async fn presence_seen_by_polling_is_an_occupancy_event() {
    let mut config = SimConfig::new(Site::demo());
    // Every wire is refused, so the bridge learns of changes by polling `/state` only.
    config.max_wires_per_socket = 0;
    let h = start(config, demo_credentials("demo"), 600).await;
    h.wait(10, "Home polling", |m| m.connections.iter().any(|(n, c)| n == HOME && *c == "polling")).await;
    h.wait_converged(5).await;
    let occupancy = |m: &Mirror, value: bool| {
        m.events.iter().filter(|(n, u, e)| n == HOME && *u == 4 && *e == UnitEvent::Occupancy(value)).count()
    };
    assert_eq!(occupancy(&h.mirror.lock().unwrap(), true), 0, "the first snapshot tells, it reports no change");
    for (status, present) in [("present", true), ("absent", false)] {
        h.sim.set_unit_state(HOME, 4, &json!({"controls": [{"type": "Presence", "status": status}]})).unwrap();
        h.wait(5, "occupancy event from a poll", move |m| occupancy(m, present) == 1).await;
    }
    assert!(h.mirror.lock().unwrap().connections.iter().all(|(n, c)| n != HOME || *c != "live"), "polled only");
}

#[tokio::test]
async fn converges_under_activity_and_faults() {
    let mut config = SimConfig::new(Site::demo());
    config.activity_rate = 40.0;
    config.seed = 7;
    let h = start(config, demo_credentials("demo"), 600).await;
    h.wait_all_live(20).await;
    let mut faults = 0;
    for round in 0..12u32 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match round % 6 {
            0 => {
                h.sim.drop_wire(HOME);
            }
            1 => {
                h.sim.drop_sockets();
            }
            2 => h.sim.expire_sessions(),
            3 => {
                h.sim.send_malformed(HOME);
            }
            4 => h.sim.set_gateway(HOME, round % 12 < 6).unwrap(),
            _ => h.sim.rename(HOME, "unit", 1, &format!("Kitchen {round}")).unwrap(),
        }
        faults += 1;
    }
    h.sim.set_gateway(HOME, true).unwrap();
    // Stop the activity, then the bridge must equal the truth.
    h.sim.shared().pause_activity(true);
    h.wait_all_live(30).await;
    h.wait_converged(15).await;
    println!("convergence: {faults} faults injected and survived");
}
