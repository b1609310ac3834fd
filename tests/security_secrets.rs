//! Secrets never leave the process except to the party they belong to: the whole bridge
//! (`app::run`: cloud core, command layer, MQTT publisher) runs with known API key, passwords and
//! session ids through the failures that produce the most log output (a rejected password,
//! expired sessions and 410s, `invalidSession` on reopened wires, dropped sockets, 500s, 429s, a
//! broker refusing a wrong MQTT password), while every log event (TRACE for the crate) and every
//! MQTT message (`#`) is captured. None of the secrets may appear anywhere, nor in the `Debug`
//! output of the settings.

mod common;

use casambi2mqtt::app;
use casambi2mqtt::cloud::model::Credentials;
use casambi2mqtt::cloud::model::Secret;
use casambi2mqtt::cloud::quota::{QuotaConfig, QuotaGuard};
use casambi2mqtt::cloud::rest::{RestClient, RestConfig};
use casambi2mqtt::mqtt::{DiscoveryMode, Protocol};
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::logs::capture;
use common::*;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const API_KEY: &str = "apikey-SECRET-3c9e1b7a";
const PASSWORD: &str = "cloudpw-SECRET-d41f08";
const WRONG_PASSWORD: &str = "cloudpw-WRONG-77ac0e";
const USER_PASSWORD: &str = "sitepw-SECRET-0b9d5e";
const MQTT_USER: &str = "bridge";
const MQTT_PASSWORD: &str = "mqttpw-SECRET-a1b2c3";
const MQTT_WRONG_PASSWORD: &str = "mqttpw-WRONG-d4e5f6";

const SECRETS: [&str; 6] = [API_KEY, PASSWORD, WRONG_PASSWORD, USER_PASSWORD, MQTT_PASSWORD, MQTT_WRONG_PASSWORD];

/// Every place in `text` that looks like a session id of the service (and the simulator): 40
/// characters of `[A-Za-z0-9-]` followed by `__`.
fn session_ids_in(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let id_char = |c: u8| c.is_ascii_alphanumeric() || c == b'-';
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(pos) = text[i..].find("__") {
        let end = i + pos;
        if end >= 40 && b[end - 40..end].iter().all(|c| id_char(*c)) {
            found.push(text[end - 40..end + 2].to_string());
        }
        i = end + 2;
    }
    found
}

/// The names of secrets (or session ids) found in `text`.
fn leaks(text: &str) -> Vec<String> {
    let mut out: Vec<String> = SECRETS.iter().filter(|s| text.contains(**s)).map(|s| s.to_string()).collect();
    out.extend(session_ids_in(text).into_iter().map(|s| format!("session id {s}")));
    // Secrets cut in half still give them away.
    for s in SECRETS {
        let half = &s[s.len() / 2..];
        if text.contains(half) && !out.iter().any(|o| o == s) {
            out.push(format!("part of {s}"));
        }
    }
    out
}

fn site() -> Site {
    let mut site = Site::demo();
    for k in &mut site.api_keys {
        k.key = API_KEY.into();
    }
    for n in &mut site.networks {
        n.credentials.password = PASSWORD.into();
    }
    for u in &mut site.users {
        u.password = USER_PASSWORD.into();
    }
    site
}

/// The configuration file the user would write (JSON strings are valid YAML scalars).
fn config_yaml(sim: &Simulator, mqtt_url: &str, mqtt_password: &str) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: {}\n  poll_interval: 500ms\n  max_requests_per_minute: 600\n\
         networks:\n  - email: demo@example.com\n    password: {}\n  - email: demo@example.com\n    password: {}\n\
         mqtt:\n  url: {}\n  username: {}\n  password: {}\n  client_id: secrets-test\n\
         health:\n  listen: \"\"\nlog:\n  level: trace\n",
        q(&sim.base_url()),
        q(&sim.ws_url()),
        q(API_KEY),
        q(PASSWORD),
        q(WRONG_PASSWORD),
        q(mqtt_url),
        q(MQTT_USER),
        q(mqtt_password),
    )
}

#[test]
fn the_session_id_detector_finds_real_session_ids() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let sim = Simulator::start_local(SimConfig::new(site())).await.unwrap();
        let rest = RestClient::new(
            RestConfig::new(sim.base_url().parse().unwrap(), Secret::new(API_KEY)),
            Arc::new(QuotaGuard::new(&QuotaConfig::default())),
        )
        .unwrap();
        let sessions = rest.create_network_sessions(&Credentials::new("demo@example.com", PASSWORD)).await.unwrap();
        for entry in sessions.0.values() {
            let text = format!("header X-Casambi-Session: {} sent", entry.session_id.expose());
            assert_eq!(session_ids_in(&text), vec![entry.session_id.expose().to_string()]);
            assert!(format!("{entry:?}").contains("***") && session_ids_in(&format!("{entry:?}")).is_empty());
        }
    });
}

#[tokio::test]
async fn no_secret_reaches_a_log_line_an_mqtt_message_or_debug_output() {
    let (logs, _guard) = capture("warn,casambi2mqtt=trace,casambi2mqtt::sim=off");
    let broker =
        Mosquitto::start_with(BrokerOptions { tls: None, credentials: Some((MQTT_USER.into(), MQTT_PASSWORD.into())) });
    let mut sim_config = SimConfig::new(site());
    // Sessions also expire on their own, besides the injected expiry.
    sim_config.session_lifetime = Some(Duration::from_secs(6));
    let sim = Simulator::start_local(sim_config).await.unwrap();
    let mut watcher = Watcher::start(broker.observer_port(), "#").await;

    let config = casambi2mqtt::config::parse(&config_yaml(&sim, &broker.url(), MQTT_PASSWORD), Vec::new())
        .unwrap_or_else(|e| panic!("config: {e}"));
    // Debug and the start-up summary of every settings struct.
    let debug = format!(
        "{config:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{}",
        config.cloud,
        config.networks,
        config.mqtt,
        config.mqtt_config(),
        config.summary()
    );
    assert!(leaks(&debug).is_empty(), "Debug output leaks {:?}:\n{debug}", leaks(&debug));

    let shutdown = CancellationToken::new();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let run = tokio::spawn(app::run(config, shutdown.clone(), Some(started_tx)));
    let running = tokio::time::timeout(Duration::from_secs(10), started_rx).await.unwrap().unwrap();
    let live = |r: &std::collections::BTreeMap<String, String>| {
        ["casambi/home", "casambi/office"]
            .iter()
            .all(|t| r.get(*t).is_some_and(|p| p.contains("\"connection\":\"live\"")))
    };
    retained_until(broker.observer_port(), Duration::from_secs(15), live).await;

    // A second bridge with the wrong MQTT password against the same broker.
    let mut wrong = common::config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
    wrong.mqtt.username = MQTT_USER.into();
    wrong.mqtt.password = Secret::new(MQTT_WRONG_PASSWORD);
    let wrong_bridge = start_bridge(wrong);

    // Faults, each followed by recovery.
    let home = sim.shared().config.site.networks[0].id.clone();
    sim.expire_sessions();
    sim.drop_sockets();
    retained_until(broker.observer_port(), Duration::from_secs(15), live).await;
    sim.fail_next_requests(3);
    sim.expire_sessions();
    sim.drop_wire(&home);
    tokio::time::sleep(Duration::from_secs(2)).await;
    sim.exhaust_quota(API_KEY, Duration::from_secs(2));
    sim.drop_sockets();
    tokio::time::sleep(Duration::from_secs(3)).await;
    sim.send_malformed(&home);
    sim.rename(&home, "unit", 1, "Kitchen ceiling 2").unwrap();
    retained_until(broker.observer_port(), Duration::from_secs(20), |r| {
        live(r) && r.contains_key("casambi/home/unit/kitchen-ceiling-2")
    })
    .await;
    // Let the natural session expiry pass once more.
    tokio::time::sleep(Duration::from_secs(2)).await;

    wrong_bridge.stop().await;
    shutdown.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(10), run).await.unwrap().unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");

    // The failures did happen.
    let text = logs.text();
    let requests = sim.shared().log.requests();
    assert!(requests.iter().any(|r| r.status == 410), "no 410 was served");
    assert!(requests.iter().any(|r| r.status == 401), "the wrong password was never tried");
    assert!(requests.iter().any(|r| r.status == 500), "no 500 was served");
    assert!(text.contains("MQTT connection failed"), "the wrong MQTT password was never refused");
    let states = running.bridge.credential_states();
    assert!(states.iter().any(|s| matches!(s, casambi2mqtt::bridge::CredentialState::Rejected(_))), "{states:?}");
    let states_debug = format!("{states:?}");

    // Nothing secret anywhere.
    watcher.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    let mqtt: String = watcher.seen.iter().map(|s| format!("{}\t{}\n", s.topic, s.payload)).collect();
    let retained_now = render_golden(&retained(broker.observer_port()).await);
    let log_lines = text.lines().count();
    println!(
        "captured {log_lines} log lines ({} bytes), {} MQTT messages ({} bytes), {} requests to the cloud \
         ({} answered 410, {} 401, {} 500, {} 429)",
        text.len(),
        watcher.seen.len(),
        mqtt.len(),
        requests.len(),
        requests.iter().filter(|r| r.status == 410).count(),
        requests.iter().filter(|r| r.status == 401).count(),
        requests.iter().filter(|r| r.status == 500).count(),
        requests.iter().filter(|r| r.status == 429).count(),
    );
    assert!(log_lines > 40, "suspiciously little was logged:\n{text}");
    assert!(watcher.seen.len() > 50, "suspiciously few MQTT messages");
    for (what, content) in [
        ("the log", &text),
        ("an MQTT message", &mqtt),
        ("the retained state", &retained_now),
        ("the credential states", &states_debug),
    ] {
        let found = leaks(content);
        assert!(found.is_empty(), "{what} leaks {found:?}");
    }
    // The errors users see name the problem without the secret.
    for line in text.lines().filter(|l| l.contains("rejected") || l.contains("MQTT connection failed")).take(2) {
        println!("  {line}");
    }
}

/// Runs the bridge against the simulator until both networks are live, logging into the
/// capture the caller set up; returns the captured text.
async fn run_until_live(logs: &common::logs::LogBuffer) -> String {
    let broker =
        Mosquitto::start_with(BrokerOptions { tls: None, credentials: Some((MQTT_USER.into(), MQTT_PASSWORD.into())) });
    let sim = Simulator::start_local(SimConfig::new(site())).await.unwrap();
    let config = casambi2mqtt::config::parse(&config_yaml(&sim, &broker.url(), MQTT_PASSWORD), Vec::new()).unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(app::run(config, shutdown.clone(), None));
    let live = |r: &std::collections::BTreeMap<String, String>| {
        ["casambi/home", "casambi/office"]
            .iter()
            .all(|t| r.get(*t).is_some_and(|p| p.contains("\"connection\":\"live\"")))
    };
    retained_until(broker.observer_port(), Duration::from_secs(15), live).await;
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    logs.text()
}

#[tokio::test]
async fn at_trace_level_the_websocket_library_s_dump_is_held_back() {
    // The library logs through `log`: routed into tracing, as the binary's logging does.
    let _ = tracing_log::LogTracer::init();
    let filter = |text: &str| tracing_subscriber::EnvFilter::new(text);

    // Without the hold, the handshake dump and the frames give the secrets away: the check
    // below can fail.
    let (logs, guard) = common::logs::capture_with(filter("trace,casambi2mqtt::sim=off"));
    let raw = run_until_live(&logs).await;
    drop(guard);
    assert!(!leaks(&raw).is_empty(), "the unfiltered trace log leaks nothing: this test proves nothing");

    let held = casambi2mqtt::log_filter::without_secrets(filter("trace,casambi2mqtt::sim=off"));
    let (logs, _guard) = common::logs::capture_with(held);
    let text = run_until_live(&logs).await;
    assert!(text.contains("tungstenite::handshake::client"), "the library's debug lines stay");
    assert!(leaks(&text).is_empty(), "the trace log leaks {:?}", leaks(&text));
}
