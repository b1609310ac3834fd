//! The HTTP listener against hostile clients on loopback (docs/web.md#limits and #security),
//! with the whole bridge (`app::run`), the simulator's demo site and a real mosquitto: slow and
//! idle connections are closed on time, connections beyond the cap get a `503` while an open one
//! still answers and MQTT still reconnects, open pages are capped, every answer guards its `Host`
//! and carries the security headers, and control bounds what it is sent and slows wrong tokens.
//! The bridge's binary under a limit of 300 open files takes a flood of 400 connections and
//! still reconnects MQTT after a broker restart. Every probe is bounded in count and time.

mod common;

use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::Mosquitto;
use common::web_rig::WebRig;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
const TOKEN: &str = "hostile-token-4c1e9a";

type Rig = WebRig;

async fn rig(http: &str) -> Rig {
    let rig = WebRig::start(http).await;
    // Healthy: MQTT connected and every network of the demo live.
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(rig.url("healthz")).await.map(|r| r.status().as_u16()).unwrap_or(0) != 200 {
        assert!(Instant::now() < deadline, "the bridge never became healthy");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig
}

/// Waits until the server closes `stream` (EOF or reset); how long that took, or `None` when it
/// is still open after `max`. Whatever the server answered before is discarded.
async fn closed_within(stream: &mut TcpStream, max: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + max;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// One answer read from a kept-alive connection: its head and body.
async fn read_answer(stream: &mut TcpStream) -> (String, String) {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return (head, String::from_utf8_lossy(&data[end + 4..end + 4 + length]).to_string());
            }
        }
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("an answer within 5 s")
            .expect("the connection stays open");
        assert!(n > 0, "the server closed the connection before answering: {}", String::from_utf8_lossy(&data));
        data.extend_from_slice(&buf[..n]);
    }
}

fn get(path: &str, host: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_are_closed_on_time() {
    let rig = rig("  listen: 127.0.0.1:0\n  header_timeout: 1s\n  idle_timeout: 2s\n").await;

    // Slowloris: 40 connections sending a header line every 300 ms, never finishing.
    let mut slow = Vec::new();
    for _ in 0..40 {
        let mut s = TcpStream::connect(rig.addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
        slow.push(s);
    }
    let started = Instant::now();
    let mut open = slow.len();
    while open > 0 && started.elapsed() < Duration::from_secs(6) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        open = 0;
        for s in &mut slow {
            if s.write_all(b"X-Slow: 1\r\n").await.is_ok() {
                open += 1;
            }
        }
    }
    for s in &mut slow {
        let closed = closed_within(s, Duration::from_secs(1)).await;
        assert!(closed.is_some(), "a slow connection outlived the 1 s header deadline by far");
    }
    assert!(started.elapsed() < Duration::from_secs(5), "the slow connections took {:?}", started.elapsed());

    // A connection that sends nothing, and one kept alive after its request.
    let mut silent = TcpStream::connect(rig.addr).await.unwrap();
    let took = closed_within(&mut silent, Duration::from_secs(4)).await.expect("a silent connection is closed");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    let mut kept = TcpStream::connect(rig.addr).await.unwrap();
    kept.write_all(get("/healthz", "127.0.0.1").as_bytes()).await.unwrap();
    let (head, _) = read_answer(&mut kept).await;
    assert!(head.starts_with("HTTP/1.1 "), "{head}");
    let took = closed_within(&mut kept, Duration::from_secs(4)).await.expect("an idle kept-alive connection is closed");
    assert!(took < Duration::from_secs(3), "took {took:?}");

    // A body announced and never sent: closed at the idle deadline.
    let mut stalled = TcpStream::connect(rig.addr).await.unwrap();
    let head = "POST /api/control HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                Content-Length: 100\r\n\r\n{\"network\":";
    stalled.write_all(head.as_bytes()).await.unwrap();
    let took = closed_within(&mut stalled, Duration::from_secs(6)).await.expect("a stalled body is closed");
    assert!(took < Duration::from_secs(4), "took {took:?}");

    // An open page is never idle: its stream writes within half the idle deadline.
    let mut page = reqwest::get(rig.url("api/events")).await.unwrap();
    let opened = Instant::now();
    while opened.elapsed() < Duration::from_secs(5) {
        let chunk = tokio::time::timeout(Duration::from_secs(2), page.chunk()).await;
        assert!(matches!(chunk, Ok(Ok(Some(_)))), "the open page's stream ended or went quiet: {chunk:?}");
    }

    // The listener still serves.
    assert_eq!(reqwest::get(rig.url("api/state")).await.unwrap().status(), 200);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_cap_a_503_while_open_connections_answer_and_mqtt_reconnects() {
    let mut rig = rig("  listen: 127.0.0.1:0\n  max_connections: 8\n  header_timeout: 60s\n").await;

    // One connection that keeps asking, taken before the flood.
    let mut kept = TcpStream::connect(rig.addr).await.unwrap();
    kept.write_all(get("/healthz", "127.0.0.1").as_bytes()).await.unwrap();
    let (head, _) = read_answer(&mut kept).await;
    assert!(head.starts_with("HTTP/1.1 "), "{head}");

    // Idle connections take the other 7 places and the 4 kept for loopback clients.
    let mut idle = Vec::new();
    for _ in 0..11 {
        idle.push(TcpStream::connect(rig.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Every further connection gets a 503 at once, with the security headers, and is closed.
    for _ in 0..20 {
        let mut extra = TcpStream::connect(rig.addr).await.unwrap();
        let _ = extra.write_all(get("/healthz", "127.0.0.1").as_bytes()).await;
        let mut answer = String::new();
        let read = tokio::time::timeout(Duration::from_secs(3), extra.read_to_string(&mut answer)).await;
        assert!(read.is_ok(), "a connection beyond the cap was held");
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        assert!(answer.contains("content-security-policy: "), "{answer}");
        assert!(answer.contains("too many connections"), "{answer}");
    }

    // The connection taken before still answers, and MQTT reconnects after a broker restart.
    kept.write_all(get("/healthz", "127.0.0.1").as_bytes()).await.unwrap();
    let (_, body) = read_answer(&mut kept).await;
    let report: Value = serde_json::from_str(&body).unwrap();
    assert!(report["status"].is_string(), "{body}");
    rig.broker.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        kept.write_all(get("/healthz", "127.0.0.1").as_bytes()).await.unwrap();
        let (_, body) = read_answer(&mut kept).await;
        let report: Value = serde_json::from_str(&body).unwrap();
        // The restarted broker's log is new: the bridge connected to it.
        if rig.broker.has_connected("casambi2mqtt") && report["mqtt_connected"] == json!(true) {
            break;
        }
        assert!(Instant::now() < deadline, "MQTT did not reconnect while the listener was full: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(idle);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_beyond_the_read_buffer_are_refused() {
    let rig = rig("  listen: 127.0.0.1:0\n").await;
    // Twice the 64 KiB read buffer and more (docs/web.md#limits): refused whatever the reads.
    let big = "a".repeat(2 * 64 * 1024 + 1);
    let answer = reqwest::Client::new().get(rig.url("healthz")).header("x-big", big).send().await.unwrap();
    assert_eq!(answer.status(), 431);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_pages_are_capped() {
    let rig = rig("  listen: 127.0.0.1:0\n  max_live_streams: 2\n").await;
    let client = reqwest::Client::new();
    let first = client.get(rig.url("api/events")).send().await.unwrap();
    let second = client.get(rig.url("api/events")).send().await.unwrap();
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    let third = client.get(rig.url("api/events")).send().await.unwrap();
    assert_eq!(third.status(), 503);
    assert!(third.headers().contains_key("retry-after"));
    assert!(third.headers().contains_key("content-security-policy"));
    // Other routes are not held by the open pages.
    assert_eq!(client.get(rig.url("api/state")).send().await.unwrap().status(), 200);
    drop((first, second));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_guards_its_host_and_carries_the_security_headers() {
    let rig = rig("  listen: 127.0.0.1:0\n  public_host: [bridge.example.com]\n").await;
    let client = reqwest::Client::new();
    let with_host = |path: &str, host: &str| client.get(rig.url(path)).header("host", host.to_string());

    // DNS rebinding: a site's own name reads nothing.
    for path in ["", "api/state", "api/events", "healthz", "metrics", "api/access", "icon/fixture/1"] {
        let r = with_host(path, "rebind.attacker.example:8099").send().await.unwrap();
        assert_eq!(r.status(), 421, "/{path}");
        assert!(r.headers().contains_key("content-security-policy"), "/{path}");
        let body = r.text().await.unwrap();
        assert!(body.contains("http.public_host"), "/{path}: {body}");
    }
    for host in ["127.0.0.1", "localhost:1", "Bridge.Example.com", "[::1]:8099"] {
        assert_eq!(with_host("api/state", host).send().await.unwrap().status(), 200, "{host}");
    }

    // Every answer, errors too, carries the headers.
    let answers = [
        client.get(rig.url("healthz")).send().await.unwrap(),
        client.get(rig.url("metrics")).send().await.unwrap(),
        client.get(rig.url("no/such/page")).send().await.unwrap(),
        client.post(rig.url("healthz")).send().await.unwrap(),
        client.get(rig.url("favicon.ico")).send().await.unwrap(),
    ];
    let statuses: Vec<u16> = answers.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(statuses[2..], [404, 405, 200]);
    for r in &answers {
        for header in ["content-security-policy", "x-content-type-options", "x-frame-options", "referrer-policy"] {
            assert!(r.headers().contains_key(header), "{} {}: no {header}", r.url(), r.status());
        }
    }
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_bounds_what_it_is_sent_and_slows_wrong_tokens() {
    let http = format!("  listen: 0.0.0.0:0\n  token: {TOKEN}\n  public_host: [bridge.example.com]\n");
    let rig = rig(&http).await;
    let client = reqwest::Client::new();
    let control = |body: Value| client.post(rig.url("api/control")).bearer_auth(TOKEN).json(&body);

    // Long strings are refused and never echoed, here or in what the bridge reports.
    let long = "n".repeat(10_000);
    for body in [
        json!({"network": long, "target": "unit", "id": 1, "payload": "ON"}),
        json!({"network": HOME, "target": "unit", "id": 1, "attr": long, "payload": 1}),
        json!({"network": HOME, "target": long, "id": 1, "payload": 1}),
    ] {
        let r = control(body).send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        assert_eq!(status, 400, "{}", &text[..text.len().min(200)]);
        assert!(text.len() < 300, "a refusal of {} bytes", text.len());
    }
    // A body over the limit is refused before it is read whole (413, or the connection closed).
    let huge = control(json!({"network": "n".repeat(1_000_000), "target": "unit", "id": 1, "payload": "ON"}));
    if let Ok(r) = huge.send().await {
        assert_eq!(r.status(), 413);
    }
    let unknown = control(json!({"network": "n".repeat(60), "target": "unit", "id": 1, "payload": "ON"}));
    assert_eq!(unknown.send().await.unwrap().status(), 422);
    for path in ["healthz", "api/state"] {
        let text = client.get(rig.url(path)).send().await.unwrap().text().await.unwrap();
        assert!(!text.contains(&"n".repeat(100)), "/{path} holds a long string");
    }

    // Behind a TLS proxy, with the token, the scheme in lower case.
    let proxied = client
        .post(rig.url("api/control"))
        .header("origin", "https://bridge.example.com")
        .header("authorization", format!("bearer {TOKEN}"))
        .json(&json!({"network": HOME, "target": "unit", "id": 1, "payload": "OFF"}));
    assert_eq!(proxied.send().await.unwrap().status(), 202);
    let elsewhere = client
        .post(rig.url("api/control"))
        .header("origin", "https://evil.example")
        .bearer_auth(TOKEN)
        .json(&json!({"network": HOME, "target": "unit", "id": 1, "payload": "OFF"}));
    assert_eq!(elsewhere.send().await.unwrap().status(), 403);

    // Wrong tokens: each answered after a second, one at a time.
    let started = Instant::now();
    let guesses = (0..3).map(|i| {
        client
            .post(rig.url("api/control"))
            .bearer_auth(format!("guess-{i}-0000000000"))
            .json(&json!({"network": HOME, "target": "unit", "id": 1, "payload": "ON"}))
            .send()
    });
    for r in futures_util::future::join_all(guesses).await {
        assert_eq!(r.unwrap().status(), 403);
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(3), "three wrong tokens answered in {took:?}");
    assert!(took < Duration::from_secs(6), "three wrong tokens took {took:?}");
    rig.stop().await;
}

/// The bridge's binary with a limit of `files` open files; its log goes to `log`.
fn spawn_limited(files: u32, config: &std::path::Path, log: &std::path::Path) -> std::process::Child {
    let log = std::fs::File::create(log).unwrap();
    std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("ulimit -n {files} && exec \"$0\" run -c \"$1\""))
        .arg(env!("CARGO_BIN_EXE_casambi2mqtt"))
        .arg(config)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start the bridge")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_never_takes_the_descriptors_mqtt_needs_to_reconnect() {
    const FILES: u32 = 300;
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let mut broker = Mosquitto::start();
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\nnetworks:\n  - email: demo@example.com\n    \
             password: demo\nmqtt:\n  url: {}\nhttp:\n  listen: 127.0.0.1:{port}\n",
            sim.base_url(),
            sim.ws_url(),
            broker.url()
        ),
    )
    .unwrap();
    let log = dir.path().join("bridge.log");
    let mut child = spawn_limited(FILES, &config, &log);
    let healthz = format!("http://127.0.0.1:{port}/healthz");
    let deadline = Instant::now() + Duration::from_secs(30);
    while reqwest::get(&healthz).await.map(|r| r.status().as_u16()).unwrap_or(0) != 200 {
        assert!(
            Instant::now() < deadline,
            "the bridge never became healthy:\n{}",
            std::fs::read_to_string(&log).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("http.max_connections lowered"), "the cap follows the limit of open files:\n{text}");

    // More connections than the process may open files, held open.
    let mut flood = Vec::new();
    for _ in 0..400 {
        flood.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = child.id();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    assert!(open < FILES as usize - 100, "the bridge holds {open} of its {FILES} files");

    // The broker restarts while the flood holds: MQTT reconnects.
    broker.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !broker.has_connected("casambi2mqtt") {
        assert!(
            Instant::now() < deadline,
            "MQTT did not reconnect during the flood:\n{}",
            std::fs::read_to_string(&log).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(flood);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("Too many open files"), "{text}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while reqwest::get(&healthz).await.map(|r| r.status().as_u16()).unwrap_or(0) != 200 {
        assert!(Instant::now() < deadline, "the bridge did not answer after the flood");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
    let _ = child.wait();
}
