//! The MQTT connection's security against a real mosquitto: TLS with a CA made at test time
//! (`openssl`), an untrusted server certificate, and user name/password authentication with a
//! mosquitto password file (`mosquitto_passwd`). Failures must give a clear error in the log,
//! never crash, never log the password, and keep retrying (a fixed broker is picked up).
//!
//! Each test runs on a current-thread runtime so the log capture sees every task it spawns.

mod common;

use casambi2mqtt::cloud::model::Secret;
use casambi2mqtt::mqtt::{DiscoveryMode, Protocol};
use common::logs::{LogBuffer, capture};
use common::tls::Pki;
use common::*;
use std::time::Duration;

const USER: &str = "bridge-user";
const PASSWORD: &str = "mqtt-PASSWORD-5f0c1e";
const WRONG_PASSWORD: &str = "mqtt-WRONG-9a7d22";

fn tls_broker(pki: &Pki) -> Mosquitto {
    Mosquitto::start_with(BrokerOptions { tls: Some(pki.clone()), credentials: None })
}

fn password_broker() -> Mosquitto {
    Mosquitto::start_with(BrokerOptions { tls: None, credentials: Some((USER.into(), PASSWORD.into())) })
}

/// Waits until the bridge has published `online` (seen through the broker's observer port).
async fn wait_online(broker: &Mosquitto) {
    retained_until(broker.observer_port(), Duration::from_secs(15), |r| {
        r.get("casambi/bridge/state").map(String::as_str) == Some("online")
    })
    .await;
}

/// Waits until a log line containing `needle` appears; returns it.
async fn wait_log(logs: &LogBuffer, needle: &str, max: Duration) -> String {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        if let Some(line) = logs.lines_with(needle).into_iter().next() {
            return line;
        }
        assert!(tokio::time::Instant::now() < deadline, "no log line with {needle:?} in:\n{}", logs.text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Nothing was published on the broker (the bridge never got in).
async fn assert_nothing_published(broker: &Mosquitto) {
    let r = retained(broker.observer_port()).await;
    assert!(r.is_empty(), "the bridge published although it should not be connected: {r:?}");
}

#[tokio::test]
async fn tls_with_the_test_ca_connects_and_publishes() {
    let (logs, _guard) = capture("casambi2mqtt=trace");
    let pki = Pki::generate("casambi2mqtt test CA");
    let broker = tls_broker(&pki);
    assert!(broker.url().starts_with("mqtts://"));
    let mut cfg = config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
    cfg.mqtt.ca_file = Some(pki.ca_cert.clone());
    let bridge = start_bridge(cfg);
    wait_online(&broker).await;
    bridge.stop().await;
    assert!(!logs.lines_with("connected to the MQTT broker").is_empty(), "{}", logs.text());
    assert!(broker.log().contains("New client connected"), "{}", broker.log());
}

#[tokio::test]
async fn tls_with_mqtt_3_1_1_connects_too() {
    let pki = Pki::generate("casambi2mqtt test CA");
    let broker = tls_broker(&pki);
    let mut cfg = config(&broker.url(), DiscoveryMode::Device, Protocol::V311);
    cfg.mqtt.ca_file = Some(pki.ca_cert.clone());
    let bridge = start_bridge(cfg);
    wait_online(&broker).await;
    bridge.stop().await;
}

#[tokio::test]
async fn an_untrusted_server_certificate_is_a_clear_error_and_no_crash() {
    let (logs, _guard) = capture("casambi2mqtt=trace");
    let pki = Pki::generate("casambi2mqtt test CA");
    let broker = tls_broker(&pki);
    // No ca_file: only the system roots are trusted, and they do not know the test CA.
    let cfg = config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
    let bridge = start_bridge(cfg);
    let line = wait_log(&logs, "MQTT connection failed", Duration::from_secs(10)).await;
    println!("untrusted certificate, no ca_file:\n  {line}");
    let lower = line.to_lowercase();
    assert!(lower.contains("certificate"), "the error does not say it is about the certificate: {line}");
    assert!(line.contains("mqtt.ca_file"), "the error does not point at mqtt.ca_file: {line}");
    assert!(!bridge.task.is_finished(), "the MQTT task ended on a TLS failure");
    assert_nothing_published(&broker).await;
    bridge.stop().await;
}

#[tokio::test]
async fn a_certificate_of_another_ca_is_a_clear_error() {
    let (logs, _guard) = capture("casambi2mqtt=trace");
    let pki = Pki::generate("casambi2mqtt test CA");
    let other = Pki::generate("some other CA");
    let broker = tls_broker(&pki);
    let mut cfg = config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
    cfg.mqtt.ca_file = Some(other.ca_cert.clone());
    let bridge = start_bridge(cfg);
    let line = wait_log(&logs, "MQTT connection failed", Duration::from_secs(10)).await;
    println!("certificate of another CA:\n  {line}");
    assert!(line.to_lowercase().contains("certificate"), "{line}");
    assert!(!bridge.task.is_finished());
    assert_nothing_published(&broker).await;
    bridge.stop().await;
}

#[tokio::test]
async fn plain_mqtt_to_a_tls_port_fails_cleanly() {
    let (logs, _guard) = capture("casambi2mqtt=trace");
    let pki = Pki::generate("casambi2mqtt test CA");
    let broker = tls_broker(&pki);
    let url = broker.url().replace("mqtts://", "mqtt://");
    let bridge = start_bridge(config(&url, DiscoveryMode::Device, Protocol::V5));
    let line = wait_log(&logs, "MQTT connection failed", Duration::from_secs(10)).await;
    println!("plain MQTT to a TLS listener:\n  {line}");
    assert!(!bridge.task.is_finished());
    bridge.stop().await;
}

#[tokio::test]
async fn user_name_and_password_connect() {
    let (logs, _guard) = capture("casambi2mqtt=trace");
    let broker = password_broker();
    for protocol in [Protocol::V5, Protocol::V311] {
        let mut cfg = config(&broker.url(), DiscoveryMode::Device, protocol);
        cfg.mqtt.username = USER.into();
        cfg.mqtt.password = Secret::new(PASSWORD);
        let bridge = start_bridge(cfg);
        wait_online(&broker).await;
        bridge.stop().await;
    }
    assert!(!logs.text().contains(PASSWORD), "the MQTT password reached the log");
}

#[tokio::test]
async fn password_from_a_file_and_credentials_in_the_url_connect() {
    let broker = password_broker();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mqtt-password");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let mut cfg = config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
    cfg.mqtt.username = USER.into();
    cfg.mqtt.password_file = Some(file);
    cfg.mqtt.resolve_files().unwrap();
    let bridge = start_bridge(cfg);
    wait_online(&broker).await;
    bridge.stop().await;

    let (logs, _guard) = capture("casambi2mqtt=trace");
    let url = broker.url().replace("mqtt://", &format!("mqtt://{USER}:{PASSWORD}@"));
    let bridge = start_bridge(config(&url, DiscoveryMode::Device, Protocol::V5));
    wait_online(&broker).await;
    bridge.stop().await;
    assert!(!logs.text().contains(PASSWORD), "the password in the URL reached the log:\n{}", logs.text());
}

#[tokio::test]
async fn a_wrong_password_is_a_clear_error_and_no_crash() {
    let (logs, _guard) = capture("casambi2mqtt=trace");
    let broker = password_broker();
    for (protocol, password) in
        [(Protocol::V5, Some(WRONG_PASSWORD)), (Protocol::V311, Some(WRONG_PASSWORD)), (Protocol::V5, None)]
    {
        let mut cfg = config(&broker.url(), DiscoveryMode::Device, protocol);
        if let Some(p) = password {
            cfg.mqtt.username = USER.into();
            cfg.mqtt.password = Secret::new(p);
        }
        let bridge = start_bridge(cfg);
        let line = wait_log(&logs, "MQTT connection failed", Duration::from_secs(10)).await;
        println!("{protocol:?}, password {}:\n  {line}", if password.is_some() { "wrong" } else { "missing" });
        assert!(
            line.contains("mqtt.username") && line.contains("mqtt.password"),
            "the error does not name the keys: {line}"
        );
        assert!(!bridge.task.is_finished());
        bridge.stop().await;
        // The next round looks for its own line.
        let text = logs.text();
        assert!(!text.contains(WRONG_PASSWORD) && !text.contains(PASSWORD), "a password reached the log:\n{text}");
        logs_reset(&logs);
    }
    assert_nothing_published(&broker).await;
}

/// Forgets what was captured so far.
fn logs_reset(logs: &LogBuffer) {
    logs.clear();
}

#[tokio::test]
async fn a_fixed_password_is_picked_up_by_the_retry() {
    // The broker is restarted with the password the bridge has: the retrying client gets in
    // without a restart of the bridge.
    let (logs, _guard) = capture("casambi2mqtt=trace");
    let mut broker =
        Mosquitto::start_with(BrokerOptions { tls: None, credentials: Some((USER.into(), "old-password".into())) });
    let mut cfg = config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
    cfg.mqtt.username = USER.into();
    cfg.mqtt.password = Secret::new(PASSWORD);
    let bridge = start_bridge(cfg);
    wait_log(&logs, "MQTT connection failed", Duration::from_secs(10)).await;
    broker.reconfigure(BrokerOptions { tls: None, credentials: Some((USER.into(), PASSWORD.into())) });
    wait_online(&broker).await;
    bridge.stop().await;
}

/// Publishes a retained message of `bytes` bytes on `topic` with mosquitto_pub (whose packets
/// have no size limit of their own).
fn publish_big(broker: &Mosquitto, topic: &str, bytes: usize) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("payload");
    std::fs::write(&file, vec![b'x'; bytes]).unwrap();
    let bin = find_binary("mosquitto_pub", &["/usr/bin", "/usr/sbin", "/usr/local/bin"])
        .expect("mosquitto_pub (Debian: mosquitto-clients)");
    let status = std::process::Command::new(bin)
        .args(["-h", "127.0.0.1", "-p", &broker.observer_port().to_string(), "-t", topic, "-r", "-f"])
        .arg(&file)
        .status()
        .unwrap();
    assert!(status.success(), "mosquitto_pub failed");
}

#[tokio::test]
async fn an_oversized_retained_message_is_dropped_without_a_reconnect_loop() {
    let (logs, _guard) = capture("casambi2mqtt=debug");
    let broker = Mosquitto::start();
    // Over the 4 MiB a photo may take, on topics the bridge subscribes to.
    publish_big(&broker, "homeassistant/status", 5 << 20);
    publish_big(&broker, "casambi/home/unit/kitchen/set", 5 << 20);
    for protocol in [Protocol::V311, Protocol::V5] {
        logs.clear();
        let cfg = config(&broker.url(), DiscoveryMode::Device, protocol);
        let client_id = cfg.mqtt.client_id.clone();
        let connections = || {
            let own = format!(" as {client_id} ");
            broker.log().lines().filter(|l| l.contains("New client connected") && l.contains(&own)).count()
        };
        let before = connections();
        let bridge = start_bridge(cfg);
        // (The retained-state watcher would choke on the big messages itself.)
        wait_log(&logs, "connected to the MQTT broker", Duration::from_secs(15)).await;
        // A reconnect loop would connect again within a second or two (the backoff starts at 1 s).
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(connections() - before, 1, "{protocol:?}: the bridge connected more than once:\n{}", logs.text());
        assert!(!logs.text().contains("connection lost"), "{protocol:?}:\n{}", logs.text());
        if protocol == Protocol::V311 {
            // MQTT 5 tells the broker its limit, and the broker never sends such a message. The
            // start-up clean-up's own connection reads the retained topics under the base once.
            let dropped = logs.lines_with("too big to take").len();
            assert!(dropped >= 2, "one line per message:\n{}", logs.text());
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert_eq!(logs.lines_with("too big to take").len(), dropped, "no more:\n{}", logs.text());
        }
        bridge.stop().await;
    }
}
