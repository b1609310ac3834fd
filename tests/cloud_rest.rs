//! The cloud client (REST, sessions, quota guard) against the simulated cloud service.

use std::sync::Arc;
use std::time::Duration;

use casambi2mqtt::cloud::backoff::{BackoffPolicy, retry};
use casambi2mqtt::cloud::model::{Control, Credentials, Secret};
use casambi2mqtt::cloud::quota::{QuotaConfig, QuotaGuard};
use casambi2mqtt::cloud::rest::{DataType, DatapointQuery, Endpoint, Outcome};
use casambi2mqtt::cloud::session::LoginPolicy;
use casambi2mqtt::cloud::{CloudError, RestClient, RestConfig, SessionManager, UserSessionManager};
use casambi2mqtt::sim::site::{DEMO_API_KEY, DEMO_NETWORK_EMAIL, DEMO_PASSWORD, DEMO_USER_EMAIL, Site};
use casambi2mqtt::sim::{SimConfig, Simulator};

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
const OFFICE: &str = "c0ffee00aa11bb22cc33dd44ee55ff66";

async fn sim() -> Simulator {
    let mut config = SimConfig::new(Site::demo());
    config.lock_duration = Duration::from_millis(300);
    Simulator::start_local(config).await.unwrap()
}

fn client(sim: &Simulator, key: &str) -> RestClient {
    // Generous limits: these tests are about the service's answers, not about pacing.
    let limits =
        QuotaConfig { max_requests_per_minute: std::num::NonZeroU32::new(6000).unwrap(), ..QuotaConfig::default() };
    let quota = Arc::new(QuotaGuard::new(&limits));
    RestClient::new(RestConfig::new(sim.base_url().parse().unwrap(), Secret::new(key)), quota).unwrap()
}

fn fast_policy() -> LoginPolicy {
    LoginPolicy {
        failure_window: Duration::from_millis(400),
        lockout_wait: Duration::from_millis(350),
        not_enabled_backoff: Duration::from_millis(100),
        not_enabled_max: Duration::from_millis(200),
        transient: fast_backoff(),
        ..LoginPolicy::default()
    }
}

fn fast_backoff() -> BackoffPolicy {
    BackoffPolicy {
        min_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        max_retries: Some(5),
        max_retry_after: Duration::from_secs(2),
        ..BackoffPolicy::default()
    }
}

fn network_creds() -> Credentials {
    Credentials::new(DEMO_NETWORK_EMAIL, DEMO_PASSWORD)
}

#[tokio::test]
async fn every_read_endpoint_parses() {
    let sim = sim().await;
    let rest = client(&sim, DEMO_API_KEY);
    let sessions = SessionManager::new(rest.clone(), network_creds(), vec![HOME.into()], fast_policy());
    let opened = sessions.open().await.unwrap();
    assert_eq!(opened.sessions.len(), 1);
    let sid = sessions.current(HOME).unwrap().session_id;

    let network = rest.network(&sid, HOME).await.unwrap();
    assert_eq!(network.name, "Home");
    assert_eq!(network.units.len(), 8);
    let state = rest.network_state(&sid, HOME).await.unwrap();
    assert_eq!(state.units.len(), 8);
    assert!(
        state
            .units
            .values()
            .any(|u| u.controls.as_ref().is_some_and(|c| c.iter().any(|c| matches!(c, Control::Cct(_)))))
    );
    assert!(
        state.scenes.iter().any(|(key, scene)| key != &scene.id.to_string()),
        "demo has a scene whose key is not its id"
    );
    let units = rest.units(&sid, HOME).await.unwrap();
    assert_eq!(units.len(), 8);
    let unit = rest.unit_state(&sid, HOME, 2).await.unwrap();
    assert_eq!(unit.id, 2);
    assert!(!rest.groups(&sid, HOME).await.unwrap().is_empty());
    assert!(!rest.scenes(&sid, HOME).await.unwrap().is_empty());
    let gallery = rest.gallery(&sid, HOME).await.unwrap();
    let image_id = gallery[0].image.clone().unwrap();
    let image = rest.image(&sid, HOME, &image_id).await.unwrap();
    assert!(image.bytes.starts_with(b"\x89PNG"));
    assert!(rest.unit_icon(&sid, HOME, 1).await.unwrap().bytes.starts_with(b"\x89PNG"));
    let fixture_id = units["2"].fixture_id.unwrap();
    let fixture = rest.fixture(fixture_id).await.unwrap();
    assert_eq!(fixture.id, fixture_id);
    let _ = rest.fixture_icon(fixture_id).await;
    assert_eq!(rest.image(&sid, HOME, "no-such-image").await.unwrap_err(), CloudError::NotFound);

    let now = chrono::Utc::now().with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).unwrap());
    let mut query = DatapointQuery::between(&(now - chrono::Duration::hours(2)), &now);
    query.data_types = vec![DataType::Sensors];
    query.limit = Some(5);
    let points = rest.datapoints(&sid, HOME, &query).await.unwrap();
    assert_eq!(points.data_points.len(), 5);
    assert!(points.has_more_results);
    let long = DatapointQuery { from: "20200101".into(), to: "20300101".into(), ..query.clone() };
    assert_eq!(rest.datapoints(&sid, HOME, &long).await.unwrap_err(), CloudError::RangeTooLong);
    let bad = DatapointQuery { from: "yesterday".into(), ..query };
    assert!(matches!(rest.datapoints(&sid, HOME, &bad).await.unwrap_err(), CloudError::BadRequest { .. }));

    let stats = rest.stats();
    assert_eq!(stats.count(Endpoint::NetworkSession, Outcome::Status(200)), 1);
    assert_eq!(stats.count(Endpoint::NetworkState, Outcome::Status(200)), 1);
    assert_eq!(stats.count(Endpoint::Image, Outcome::Status(404)), 1);
}

#[tokio::test]
async fn session_kinds() {
    let sim = sim().await;
    let rest = client(&sim, DEMO_API_KEY);
    let all = SessionManager::new(rest.clone(), network_creds(), vec![], fast_policy());
    let opened = all.open().await.unwrap();
    let mut ids: Vec<_> = opened.sessions.iter().map(|s| s.network_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [HOME, OFFICE]);

    let set = SessionManager::new(
        rest.clone(),
        network_creds(),
        vec![HOME.into(), OFFICE.into(), "ffffffffffffffffffffffffffffffff".into()],
        fast_policy(),
    );
    let opened = set.open().await.unwrap();
    assert_eq!(opened.sessions.len(), 2);
    assert_eq!(opened.inaccessible, ["ffffffffffffffffffffffffffffffff"]);
    assert_eq!(rest.stats().total(Endpoint::NetworkSessionSet), 1);

    let user = UserSessionManager::new(rest.clone(), Credentials::new(DEMO_USER_EMAIL, DEMO_PASSWORD), fast_policy());
    let handle = user.open().await.unwrap();
    assert!(handle.session.networks.contains_key(HOME));
    assert!(rest.network_state(&handle.session.session_id, HOME).await.is_ok());
}

#[tokio::test]
async fn rejected_key_and_wrong_password_are_told_apart_and_retried_after_the_lock_window() {
    let sim = sim().await;
    let bad_key = SessionManager::new(client(&sim, "not-a-key"), network_creds(), vec![HOME.into()], fast_policy());
    let err = bad_key.open().await.unwrap_err();
    assert_eq!(err, CloudError::ApiKeyRejected);
    assert_eq!(err.to_string(), "API key rejected (Api authorization failed.)");

    let rest = client(&sim, DEMO_API_KEY);
    let wrong = SessionManager::new(
        rest.clone(),
        Credentials::new(DEMO_NETWORK_EMAIL, "wrong"),
        vec![HOME.into()],
        fast_policy(),
    );
    let err = wrong.open().await.unwrap_err();
    assert_eq!(err, CloudError::UserNotFound { email: DEMO_NETWORK_EMAIL.into() });
    assert_eq!(rest.stats().total(Endpoint::NetworkSession), 1);
    // The next attempt waits out the lock window (350 ms here) first.
    let start = std::time::Instant::now();
    assert_eq!(wrong.open().await.unwrap_err(), err);
    assert!(start.elapsed() >= Duration::from_millis(350), "{:?}", start.elapsed());
    // Two failed logins: the account never got near the lockout.
    assert_eq!(rest.stats().total(Endpoint::NetworkSession), 2);
    let fine = SessionManager::new(rest, network_creds(), vec![HOME.into()], fast_policy());
    assert!(fine.open().await.is_ok());
}

#[tokio::test]
async fn expired_sessions_are_renewed_once() {
    let sim = sim().await;
    let rest = client(&sim, DEMO_API_KEY);
    let sessions = Arc::new(SessionManager::new(rest.clone(), network_creds(), vec![HOME.into()], fast_policy()));
    sessions.open().await.unwrap();
    let old = sessions.current(HOME).unwrap();
    sim.expire_sessions();
    assert_eq!(rest.network_state(&old.session_id, HOME).await.unwrap_err(), CloudError::SessionExpired);

    let renewals: Vec<_> = (0..4)
        .map(|_| {
            let (sessions, seen) = (sessions.clone(), old.generation);
            tokio::spawn(async move { sessions.renew(HOME, seen).await })
        })
        .collect();
    for r in renewals {
        assert_eq!(r.await.unwrap().unwrap().generation, old.generation + 1);
    }
    assert_eq!(rest.stats().total(Endpoint::NetworkSession), 2, "open + one renewal");
    let new = sessions.current(HOME).unwrap();
    assert!(rest.network_state(&new.session_id, HOME).await.is_ok());
}

#[tokio::test]
async fn quota_and_server_errors_are_retried() {
    let sim = sim().await;
    let rest = client(&sim, DEMO_API_KEY);
    let sessions = SessionManager::new(rest.clone(), network_creds(), vec![HOME.into()], fast_policy());
    sessions.open().await.unwrap();
    let sid = sessions.current(HOME).unwrap().session_id;

    sim.exhaust_quota(DEMO_API_KEY, Duration::from_millis(300));
    let err = rest.network(&sid, HOME).await.unwrap_err();
    assert!(matches!(err, CloudError::QuotaExceeded { .. }), "{err}");
    let net = retry(&fast_backoff(), "network", || rest.network(&sid, HOME)).await.unwrap();
    assert_eq!(net.id, HOME);

    sim.fail_next_requests(2);
    let state = retry(&fast_backoff(), "network_state", || rest.network_state(&sid, HOME)).await.unwrap();
    assert_eq!(state.id, HOME);
    assert_eq!(rest.stats().count(Endpoint::NetworkState, Outcome::Status(500)), 2);
}

/// A client of `sim` under `limits`, with a session to Home, and `count` pollers asking for
/// Home's state again `every` after each answer (as networks whose wires are down).
async fn pollers(
    sim: &Simulator,
    limits: &QuotaConfig,
    count: usize,
    every: Duration,
) -> (RestClient, Vec<tokio::task::JoinHandle<()>>) {
    let rest = RestClient::new(
        RestConfig::new(sim.base_url().parse().unwrap(), Secret::new(DEMO_API_KEY)),
        Arc::new(QuotaGuard::new(limits)),
    )
    .unwrap();
    let sessions = SessionManager::new(rest.clone(), network_creds(), vec![HOME.into()], fast_policy());
    sessions.open().await.unwrap();
    let sid = sessions.current(HOME).unwrap().session_id;
    let handles = (0..count)
        .map(|_| {
            let (rest, sid) = (rest.clone(), sid.clone());
            tokio::spawn(async move {
                loop {
                    let _ = rest.network_state(&sid, HOME).await;
                    tokio::time::sleep(every).await;
                }
            })
        })
        .collect();
    (rest, handles)
}

/// Under a sustained 429 the client asks less and less often, and after it as often as before:
/// each 429 in a row doubles the key-wide pause, a success ends the run.
#[tokio::test]
async fn a_sustained_429_slows_the_requests_and_they_recover_after_it() {
    // A service that says nothing of when to come back: the client's own pause is all there is.
    let mut config = SimConfig::new(Site::demo());
    config.quota_retry_after = false;
    let sim = Simulator::start_local(config).await.unwrap();
    let limits = QuotaConfig {
        max_requests_per_minute: std::num::NonZeroU32::new(6000).unwrap(),
        pause_after_429: Duration::from_millis(100),
        max_pause_after_429: Duration::from_millis(1600),
        ..QuotaConfig::default()
    };
    // Two pollers, as two networks whose wires are down, each asking every 50 ms.
    let (rest, pollers) = pollers(&sim, &limits, 2, Duration::from_millis(50)).await;
    let stats = rest.stats();
    let asked = || {
        stats.count(Endpoint::NetworkState, Outcome::Status(200))
            + stats.count(Endpoint::NetworkState, Outcome::Status(429))
    };
    let asked_during = |span: Duration| {
        let before = asked();
        async move {
            tokio::time::sleep(span).await;
            asked() - before
        }
    };

    let normal = asked_during(Duration::from_secs(2)).await;
    sim.exhaust_quota(DEMO_API_KEY, Duration::from_secs(7));
    let refused_early = asked_during(Duration::from_secs(2)).await;
    let refused_late = asked_during(Duration::from_secs(4)).await;
    // The service answers again; the longest pause (1.6 s) may still be running.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let recovered = asked_during(Duration::from_secs(2)).await;
    for p in pollers {
        p.abort();
    }

    // Per two seconds: `normal` ~ 2 × 2 s / 50 ms; with a fixed 100 ms pause `refused_late` would
    // be ~40 per two seconds, with the growing pause it is a handful.
    let late_per_two_seconds = refused_late / 2;
    assert!(normal >= 30, "normal polling asked {normal} times in 2 s");
    assert!(
        late_per_two_seconds * 5 < normal && late_per_two_seconds <= 8,
        "requests per 2 s: {normal} before, {refused_early} then {late_per_two_seconds} during the 429s"
    );
    assert!(late_per_two_seconds <= refused_early, "the rate falls: {refused_early} then {late_per_two_seconds}");
    assert!(recovered * 2 >= normal, "requests per 2 s: {normal} before, {recovered} after the 429s");
    assert!(stats.count(Endpoint::NetworkState, Outcome::Status(429)) > 0);
}

/// After a 429 pause one request probes alone and the others wait for its answer: a key the
/// service keeps refusing meets one request per pause however many wait, and when the probe
/// succeeds the others go (docs/cloud.md#quota-429).
#[tokio::test]
async fn after_a_429_pause_one_request_probes_and_the_others_wait() {
    let mut config = SimConfig::new(Site::demo());
    config.quota_retry_after = false;
    let sim = Simulator::start_local(config).await.unwrap();
    let pause = Duration::from_millis(200);
    let limits = QuotaConfig {
        max_requests_per_minute: std::num::NonZeroU32::new(6000).unwrap(),
        max_concurrent_requests: 4,
        pause_after_429: pause,
        max_pause_after_429: Duration::from_millis(400),
        ..QuotaConfig::default()
    };
    // Four pollers, as four networks whose wires are down, each asking again soon after.
    let (_, pollers) = pollers(&sim, &limits, 4, Duration::from_millis(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let storm = Duration::from_secs(3);
    sim.exhaust_quota(DEMO_API_KEY, storm);
    let storm_end = sim.shared().started.elapsed() + storm;
    tokio::time::sleep(storm + Duration::from_secs(1)).await;
    for p in pollers {
        p.abort();
    }

    // Requests at once: each within 50 ms of the one before (a pause is at least 200 ms). The
    // first group is what was in flight as the storm began; every later one follows a pause.
    let log = sim.shared().log.requests();
    let refused: Vec<Duration> = log.iter().filter(|r| r.status == 429).map(|r| r.at).collect();
    let mut groups: Vec<usize> = Vec::new();
    for (i, at) in refused.iter().enumerate() {
        match i.checked_sub(1).map(|j| *at - refused[j]) {
            Some(gap) if gap < Duration::from_millis(50) => *groups.last_mut().unwrap() += 1,
            _ => groups.push(1),
        }
    }
    assert!(groups.len() >= 4, "a pause at least every 400 ms for 3 s: {groups:?}");
    assert!(groups[1..].iter().all(|&n| n == 1), "refused requests at once after each pause: {groups:?}");
    // After the storm the probe succeeds and every poller asks again.
    let answered = log.iter().filter(|r| r.status == 200 && r.at > storm_end).count();
    assert!(answered >= 20, "{answered} answers in the second after the storm");
}
