//! The broker matrix: the whole bridge on the simulator's demo site against every broker it is
//! tested with, each started by the test on free ports (docs/brokers.md): mosquitto over MQTT 5,
//! over 3.1.1 and with `mqtt.protocol: auto`, NATS's MQTT gateway (3.1.1 only, JetStream on)
//! and the demo's embedded broker. For each: the start-up snapshot retained, a change, a
//! command's round trip, Home Assistant's birth, and a broker restart after which everything is
//! retained again. Then what a bridge says about brokers that cannot serve it. A missing broker
//! binary fails the test.

mod common;
#[path = "common/matrix.rs"]
mod matrix;
#[path = "common/nats.rs"]
mod nats;

use casambi2mqtt::mqtt::client::{Client, Events};
use casambi2mqtt::mqtt::{MqttSettings, Protocol};
use common::{BrokerOptions, Mosquitto, logs};
use matrix::{all_retained, check_birth, check_change, check_command, start_site};
use nats::{Nats, NatsOptions};
use std::time::Duration;

const STATE: &str = "casambi/bridge/state";

/// Runs the checks of [`matrix`] on the broker at `url` (watched on `port`), with
/// `mqtt.protocol: protocol`; `spoken` is the `mqtt_protocol` bridge/info must report. `restart`
/// restarts the broker (none for one that cannot be restarted in the test's process).
async fn run_matrix(name: &str, url: &str, port: u16, protocol: &str, spoken: &str, restart: Option<&mut dyn FnMut()>) {
    let site = start_site(url, port, protocol).await;
    println!("broker matrix: {name}, mqtt.protocol {protocol}: start-up snapshot in {:?}", site.started_in);
    // A fresh subscriber sees the whole snapshot retained.
    let r = all_retained(port, STATE, Duration::from_secs(10)).await;
    let info: serde_json::Value =
        serde_json::from_str(r.get("casambi/bridge/info").map_or("{}", String::as_str)).expect("bridge/info is JSON");
    assert_eq!(info["mqtt_protocol"], spoken, "{name}: {info}");
    check_change(&site.sim, port).await;
    check_command(&site.sim, port).await;
    check_birth(port).await;
    if let Some(restart) = restart {
        let t0 = std::time::Instant::now();
        restart();
        all_retained(port, STATE, Duration::from_secs(30)).await;
        println!("broker matrix: {name}: everything retained again {:?} after the restart began", t0.elapsed());
    }
    site.stop().await;
}

/// The matrix on a fresh mosquitto. Without persistence the restarted broker has lost every
/// retained message: the bridge's reconnection publishes them again.
async fn on_mosquitto(protocol: &str, spoken: &str) {
    let mut broker = Mosquitto::start();
    let (url, port) = (broker.url(), broker.observer_port());
    run_matrix("mosquitto", &url, port, protocol, spoken, Some(&mut || broker.restart())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mosquitto_over_mqtt5() {
    on_mosquitto("v5", "5").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mosquitto_over_mqtt311() {
    on_mosquitto("v3", "3.1.1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mosquitto_with_protocol_auto_speaks_mqtt5() {
    on_mosquitto("auto", "5").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_with_protocol_auto_speaks_mqtt311() {
    let mut broker = Nats::start();
    nats::wait_mqtt_ready(broker.port(), Duration::from_secs(30)).await.unwrap_or_else(|e| panic!("{e}"));
    let (url, port) = (broker.url(), broker.port());
    // NATS keeps retained messages in JetStream: they survive the restart, and the bridge's
    // reconnection publishes them again anyway.
    run_matrix("nats", &url, port, "auto", "3.1.1", Some(&mut || broker.restart())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_over_mqtt311() {
    let broker = Nats::start();
    nats::wait_mqtt_ready(broker.port(), Duration::from_secs(30)).await.unwrap_or_else(|e| panic!("{e}"));
    run_matrix("nats", &broker.url(), broker.port(), "v3", "3.1.1", None).await;
}

/// rumqttd runs on threads of its own with no shutdown call, so it cannot be restarted within
/// the test's process: no restart check. Its front listener takes MQTT 5 and 3.1.1 on one port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demos_embedded_broker_with_protocol_auto() {
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], nats::free_port()));
    casambi2mqtt::broker::start(listen).await.expect("the embedded broker starts");
    run_matrix("embedded (rumqttd)", &format!("mqtt://{listen}"), listen.port(), "auto", "5", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demos_embedded_broker_with_mqtt_3_1_1() {
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], nats::free_port()));
    casambi2mqtt::broker::start(listen).await.expect("the embedded broker starts");
    run_matrix("embedded (rumqttd)", &format!("mqtt://{listen}"), listen.port(), "v3", "3.1.1", None).await;
}

// ---------------------------------------------------------------------------------------------
// Brokers that cannot serve the bridge: the log names the cause.
// ---------------------------------------------------------------------------------------------

/// Connects a client with `settings` and waits until a log line holds every one of `needles`;
/// returns that line (panics after `max` with the whole log). The client never reports
/// `Connected`.
async fn logged(settings: MqttSettings, needles: &[&str], max: Duration) -> String {
    let (buffer, _guard) = logs::capture("casambi2mqtt=debug");
    let (client, mut events, _task) = Client::start(&settings, "brokers-test", None, 16).expect("client starts");
    let deadline = tokio::time::Instant::now() + max;
    loop {
        if let Some(line) = buffer.text().lines().find(|l| needles.iter().all(|n| l.contains(n))) {
            println!("logged: {line}");
            assert_eq!(client.protocol().is_none(), settings.protocol == Protocol::Auto && !line.contains("rejected"));
            return line.to_string();
        }
        assert!(tokio::time::Instant::now() < deadline, "no log line with {needles:?}:\n{}", buffer.text());
        if let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(50), events_recv(&mut events)).await {
            assert_ne!(event, casambi2mqtt::mqtt::client::ClientEvent::Connected, "{}", buffer.text());
        }
    }
}

async fn events_recv(events: &mut Events) -> Option<casambi2mqtt::mqtt::client::ClientEvent> {
    events.recv().await
}

fn settings(url: &str, protocol: Protocol) -> MqttSettings {
    MqttSettings { url: url.into(), protocol, ..MqttSettings::default() }
}

/// A TCP listener that answers every connection with `answer` (possibly nothing) and closes it.
async fn not_a_broker(answer: &'static [u8]) -> String {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("mqtt://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let _ = socket.write_all(answer).await;
            let _ = socket.shutdown().await;
        }
    });
    url
}

#[tokio::test]
async fn a_listener_that_hangs_up_is_named_for_both_protocols() {
    let url = not_a_broker(b"").await;
    let line = logged(
        settings(&url, Protocol::Auto),
        &[
            "speaks neither MQTT 5 nor MQTT 3.1.1",
            "MQTT 5 CONNECT: connection closed before CONNACK",
            "MQTT 3.1.1 CONNECT: connection closed before CONNACK",
        ],
        Duration::from_secs(10),
    )
    .await;
    assert!(line.contains("WARN"), "{line}");
}

#[tokio::test]
async fn a_listener_that_answers_garbage_is_named_for_both_protocols() {
    let url = not_a_broker(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
    logged(
        settings(&url, Protocol::Auto),
        &["speaks neither MQTT 5 nor MQTT 3.1.1", "MQTT 5 CONNECT: ", "MQTT 3.1.1 CONNECT: "],
        Duration::from_secs(10),
    )
    .await;
}

#[tokio::test]
async fn nothing_listening_is_named_and_not_taken_for_a_protocol_answer() {
    let url = format!("mqtt://127.0.0.1:{}", nats::free_port());
    let line =
        logged(settings(&url, Protocol::Auto), &["MQTT connection failed", "refused"], Duration::from_secs(10)).await;
    assert!(!line.contains("neither"), "no broker answered, so no protocol was ruled out: {line}");
}

#[tokio::test]
async fn a_refused_login_on_mosquitto_names_the_credentials() {
    let broker = Mosquitto::start_with(BrokerOptions {
        credentials: Some(("bridge".into(), "right".into())),
        ..Default::default()
    });
    let mut s = settings(&broker.url(), Protocol::Auto);
    (s.username, s.password) = ("bridge".into(), casambi2mqtt::cloud::model::Secret::new("wrong"));
    let line = logged(s, &["rejected the user name or password", "mqtt.username"], Duration::from_secs(10)).await;
    assert!(!line.contains("wrong"), "the password never reaches the log: {line}");
}

#[tokio::test]
async fn a_refused_login_on_nats_names_the_credentials_after_falling_back() {
    let options = NatsOptions { credentials: Some(("bridge".into(), "right".into())), ..NatsOptions::default() };
    let broker = Nats::start_with("n1", nats::free_port(), options);
    let mut s = settings(&broker.url(), Protocol::Auto);
    (s.username, s.password) = ("bridge".into(), casambi2mqtt::cloud::model::Secret::new("wrong"));
    logged(s, &["rejected the user name or password", "mqtt.password"], Duration::from_secs(20)).await;
}

#[tokio::test]
async fn mqtt5_forced_on_nats_says_the_broker_may_not_speak_it() {
    let broker = Nats::start();
    logged(
        settings(&broker.url(), Protocol::V5),
        &["connection closed before CONNACK", "may not speak MQTT 5", "mqtt.protocol: auto or v3"],
        Duration::from_secs(10),
    )
    .await;
}

#[test]
fn a_standalone_nats_without_jetstream_refuses_to_serve_mqtt() {
    let options = NatsOptions { jetstream: false, ..NatsOptions::default() };
    let mut node = Nats::spawn_only("n1", nats::free_port(), options);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while node.exited().is_none() {
        assert!(std::time::Instant::now() < deadline, "nats-server kept running: {}", node.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(node.log().contains("mqtt requires JetStream"), "{}", node.log());
}

/// A clustered node without JetStream starts, but cannot open MQTT sessions: it takes the
/// CONNECT and closes the connection without a CONNACK (after its JetStream request times out).
#[tokio::test]
async fn a_nats_node_without_jetstream_is_named_by_the_bridge() {
    let options = NatsOptions {
        jetstream: false,
        cluster: Some(("lonely".into(), nats::free_port(), vec![])),
        ..NatsOptions::default()
    };
    let broker = Nats::start_with("n1", nats::free_port(), options);
    let line = logged(
        settings(&broker.url(), Protocol::Auto),
        &["speaks neither MQTT 5 nor MQTT 3.1.1", "closed before CONNACK", "NATS server without JetStream"],
        Duration::from_secs(30),
    )
    .await;
    assert!(line.contains("see the broker's log"), "{line}");
    assert!(broker.log().contains("JetStream") || broker.log().contains("$JS.API"), "{}", broker.log());
}

/// A free port picked for a broker can be taken before the broker binds it (an outgoing
/// connection's source port, another test's server): the node moves to fresh ports instead of
/// failing the test that needed it.
#[test]
fn a_nats_node_given_a_taken_port_moves_to_a_free_one() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = taken.local_addr().expect("its address").port();
    let node = Nats::start_with("n1", port, NatsOptions::default());
    assert_ne!(node.port(), port, "the node cannot share the taken port");
    std::net::TcpStream::connect(("127.0.0.1", node.port())).expect("the node listens on its new port");
}
