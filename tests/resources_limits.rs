//! Size limits on untrusted input: a WebSocket frame larger than `channel::MAX_FRAME_BYTES` ends
//! the socket (which reconnects and resyncs) while one at the limit is read; a REST response body
//! larger than `rest::MAX_BODY` is refused without being buffered whole; MQTT messages above the
//! client's packet limit on the topics the bridge subscribes to cannot knock it off the broker.
//! (Oversized command payloads are covered in `prop_commands.rs`.)

mod bridge_support;
mod common;

use casambi2mqtt::cloud::channel::MAX_FRAME_BYTES;
use casambi2mqtt::cloud::model::Secret;
use casambi2mqtt::cloud::quota::{QuotaConfig, QuotaGuard};
use casambi2mqtt::cloud::rest::{MAX_BODY, RestClient, RestConfig};
use casambi2mqtt::mqtt::{DiscoveryMode, Protocol};
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The process's peak resident set size in KiB (Linux `VmHWM`).
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A one-shot HTTP server answering every request with a 200 and `body_len` bytes of JSON-ish
/// filler, announced with `Content-Length` or sent chunked.
async fn huge_body_server(body_len: u64, chunked: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut req = [0u8; 4096];
                let _ = sock.read(&mut req).await;
                let head = if chunked {
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                        .to_string()
                } else {
                    format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n")
                };
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let block = vec![b' '; 1 << 20];
                let mut sent = 0u64;
                while sent < body_len {
                    let r = if chunked {
                        let mut c = format!("{:x}\r\n", block.len()).into_bytes();
                        c.extend_from_slice(&block);
                        c.extend_from_slice(b"\r\n");
                        sock.write_all(&c).await
                    } else {
                        sock.write_all(&block).await
                    };
                    if r.is_err() {
                        return;
                    }
                    sent += block.len() as u64;
                }
                let _ = sock.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    format!("http://{addr}")
}

fn client(base: &str) -> RestClient {
    RestClient::new(
        RestConfig::new(base.parse().unwrap(), Secret::new("key")),
        Arc::new(QuotaGuard::new(&QuotaConfig::default())),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_body_over_the_limit_is_refused_without_buffering_it() {
    // Announced: refused before reading.
    let base = huge_body_server(10 * 1024 * 1024 * 1024, false).await;
    let started = Instant::now();
    let err = client(&base).fixture(1).await.unwrap_err().to_string();
    println!("10 GiB announced: refused in {:.2} s: {err}", started.elapsed().as_secs_f64());
    assert!(err.contains("larger than 64 MiB"), "{err}");

    // Streamed without a length: refused once the limit is passed.
    let peak_before = peak_rss_kb();
    let offered = 4 * MAX_BODY as u64;
    let base = huge_body_server(offered, true).await;
    let started = Instant::now();
    let err = client(&base).fixture(1).await.unwrap_err().to_string();
    let grown = peak_rss_kb().saturating_sub(peak_before);
    println!(
        "{} MiB streamed chunked: refused after {:.2} s: {err}; peak RSS +{grown} kB",
        offered >> 20,
        started.elapsed().as_secs_f64()
    );
    assert!(err.contains("larger than 64 MiB"), "{err}");
    // The buffer stops at the limit (a Vec may double once past half of it).
    assert!(grown < 2 * (MAX_BODY as u64 >> 10) + 32 * 1024, "peak RSS grew by {grown} kB");
}

/// A server that answers every request with `head` (a status line and headers) and an empty
/// body, and counts the requests it was sent.
async fn answering_server(head: String) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let head = head.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut req = [0u8; 4096];
                if sock.read(&mut req).await.is_ok_and(|n| n > 0) {
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let _ = sock.write_all(format!("{head}Content-Length: 0\r\n\r\n").as_bytes()).await;
                }
            });
        }
    });
    (format!("http://{addr}/"), asked)
}

#[tokio::test]
async fn a_redirect_is_not_followed_so_the_key_stays_with_the_service() {
    let (elsewhere, asked_elsewhere) = answering_server("HTTP/1.1 200 OK\r\n".into()).await;
    let (base, _) = answering_server(format!("HTTP/1.1 302 Found\r\nLocation: {elsewhere}v1/fixtures/1\r\n")).await;
    let err = client(&base).fixture(1).await.unwrap_err();
    assert_eq!(err.status(), Some(302), "{err}");
    assert_eq!(asked_elsewhere.load(std::sync::atomic::Ordering::Relaxed), 0, "the key went to another host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_mqtt_messages_on_subscribed_topics_do_not_knock_the_bridge_off() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    for protocol in [Protocol::V5, Protocol::V311] {
        let broker = Mosquitto::start();
        let bridge = start_bridge(config(&broker.url(), DiscoveryMode::Device, protocol));
        for id in demo_network_ids(&sim) {
            bridge.updates.send(network_update(&view_of(&sim, &id), Default::default())).await.unwrap();
        }
        let mut w = Watcher::start(broker.port(), "#").await;
        w.wait_for(Duration::from_secs(10), |s| s.topic == "casambi/home/unit/kitchen-ceiling/brightness").await;
        // Above the client's packet limit (the largest photo and room for its topic): a
        // command, HA's status topic, and a retained one, which a client that dropped the
        // connection on it would be sent again with every reconnection. MQTT 5 tells the broker
        // the limit, so the broker drops them; the MQTT 3.1.1 client reads and drops them
        // (docs/reliability.md, "Bounded resources").
        let big = "x".repeat(casambi2mqtt::bridge::photos::MAX_PHOTO_BYTES + 128 * 1024);
        w.publish("casambi/home/unit/kitchen-ceiling/set", &big, false).await;
        w.publish("homeassistant/status", &big, false).await;
        w.publish("casambi/home/unit/kitchen-ceiling/set/brightness", &big, true).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        // Still (or again) connected and working: a normal command is forwarded.
        let mut bridge = bridge;
        w.publish("casambi/home/unit/kitchen-ceiling/set", "ON", false).await;
        let cmd = tokio::time::timeout(Duration::from_secs(15), bridge.commands.recv()).await;
        println!("{protocol:?}: after oversized messages, a command arrived: {}", matches!(cmd, Ok(Some(_))));
        assert!(
            matches!(cmd, Ok(Some(_))),
            "{protocol:?}: the bridge stopped taking commands after an oversized message"
        );
        assert!(!bridge.task.is_finished());
        // Clean up the oversized retained message for the next round.
        w.publish("casambi/home/unit/kitchen-ceiling/set/brightness", "", true).await;
        bridge.stop().await;
    }
}

fn sockets_opened(sim: &Simulator) -> usize {
    sim.shared()
        .log
        .ws_records()
        .iter()
        .filter(|r| matches!(r, casambi2mqtt::sim::log::WsRecord::SocketOpened { .. }))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_the_limit_ends_the_socket_and_the_bridge_resyncs() {
    let h = bridge_support::start_demo().await;
    h.wait_all_live(20).await;
    let home = h.network_ids()[0].clone();
    let opened = sockets_opened(&h.sim);
    // At the limit: read (a networkLog frame), the socket stays.
    assert!(h.sim.send_oversized(&home, MAX_FRAME_BYTES) > 0);
    h.sim.set_unit_state(&home, 1, &serde_json::json!({"controls": [{"type": "Dimmer", "value": 0.21}]})).unwrap();
    h.wait_converged(10).await;
    assert_eq!(sockets_opened(&h.sim), opened, "a frame of exactly MAX_FRAME_BYTES ended the socket");
    // One byte more: the socket is dropped, reopened, and the state resynced.
    let started = Instant::now();
    assert!(h.sim.send_oversized(&home, MAX_FRAME_BYTES + 1) > 0);
    let deadline = Instant::now() + Duration::from_secs(15);
    while sockets_opened(&h.sim) == opened {
        assert!(Instant::now() < deadline, "the oversized frame did not end the socket");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.sim.set_unit_state(&home, 1, &serde_json::json!({"controls": [{"type": "Dimmer", "value": 0.77}]})).unwrap();
    h.wait_all_live(20).await;
    h.wait_converged(10).await;
    println!(
        "frame of {} bytes: socket reopened and state converged after {:.2} s",
        MAX_FRAME_BYTES + 1,
        started.elapsed().as_secs_f64()
    );
}
