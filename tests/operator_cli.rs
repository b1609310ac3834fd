//! The binary as an operator meets it: `run` with a config against the simulator and a real
//! mosquitto (SIGTERM and SIGINT publish `offline` and disconnect cleanly within 5 s), exit code 2
//! for a bad config, `check`, and the zero-setup `demo` with its embedded broker. Rejected
//! credentials: tests/run_credentials.rs.

mod common;
#[path = "common/nats.rs"]
mod nats;

use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::process::{BIN, Proc, output_of, sigterm, spawn, spawn_env, wait_exit, write_config, write_config_with};
use common::{Mosquitto, free_port, retained_until};
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs the bridge until it is online, sends `signal`, and checks the orderly stop from the
/// broker's side: the bridge's own `offline` (retained) and a clean DISCONNECT, so the broker
/// never sends the last will; exit 0 within 5 s.
async fn stops_in_order_on(signal: &str) {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let broker = Mosquitto::start();
    let config = write_config(&sim, &broker.url(), "demo");
    let mut child = spawn(&["run", "-c", config.path().to_str().unwrap()]);
    let port = broker.port();
    retained_until(port, Duration::from_secs(20), |r| {
        r.get("casambi/bridge/state").map(String::as_str) == Some("online")
            && r.contains_key("casambi/home/unit/kitchen-ceiling")
    })
    .await;
    let sent = Instant::now();
    common::process::signal(&mut child, signal);
    let status = wait_exit(&mut child, Duration::from_secs(5)).expect("exited within 5 s");
    let took = sent.elapsed();
    assert!(status.success(), "exit code {status:?}");
    let r = retained_until(port, Duration::from_secs(2), |r| r.contains_key("casambi/bridge/state")).await;
    assert_eq!(r["casambi/bridge/state"], "offline");
    // mosquitto logs `Client <id> disconnected.` after a DISCONNECT, and `closed its connection`
    // (then sends the will) when the socket just goes.
    let log = broker.log();
    assert!(log.contains("Client casambi2mqtt disconnected."), "no clean DISCONNECT: {log}");
    assert!(!log.contains("Client casambi2mqtt closed its connection"), "the will was sent: {log}");
    println!("SIG{signal} to exit: {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_publishes_offline_disconnects_and_exits_zero_within_five_seconds() {
    stops_in_order_on("TERM").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_stops_the_same_way() {
    stops_in_order_on("INT").await;
}

#[test]
fn bad_config_exits_two_naming_the_key() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "cloud:\n  api_key: k\n  poll_intervall: 5s\nnetworks:\n  - email: a@b.c\n    password: p").unwrap();
    let child = spawn(&["run", "-c", f.path().to_str().unwrap()]);
    let out = child.take().wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("cloud.poll_intervall"), "{text}");
}

#[test]
fn the_config_variable_names_the_file_and_c_wins_over_it() {
    let mut bad = tempfile::NamedTempFile::new().unwrap();
    writeln!(bad, "cloud:\n  api_key: k\n  poll_intervall: 5s\nnetworks:\n  - email: a@b.c\n    password: p").unwrap();
    let mut other = tempfile::NamedTempFile::new().unwrap();
    writeln!(other, "mqtt:\n  qos: 7\nnetworks:\n  - email: a@b.c\n    password: p").unwrap();
    let config = ("CASAMBI2MQTT_CONFIG", bad.path().to_str().unwrap());
    let stderr = |args: &[&str]| {
        let out = spawn_env(args, &[config]).take().wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for command in [&["run"][..], &["check"], &[]] {
        let text = stderr(command);
        assert!(text.contains("cloud.poll_intervall"), "{command:?}: {text}");
    }
    let text = stderr(&["run", "-c", other.path().to_str().unwrap()]);
    assert!(text.contains("mqtt.qos") && !text.contains("poll_intervall"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_lists_each_site_with_its_networks() {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let broker = Mosquitto::start();
    let home = &Site::demo().networks[0].id;
    let logins = format!(
        "networks:\n  - email: demo@example.com\n    password: demo\n    ids: [{home}]\n\
         sites:\n  - email: owner@example.com\n    password: demo\n"
    );
    let config = write_config_with(&sim, &broker.url(), &logins);
    let text = check_succeeds(&config, &[]).await;
    assert!(text.contains("site owner@example.com: 2 networks\n"), "{text}");
    assert!(text.contains(&format!("  network Home ({home}), bridged with credentials demo@example.com\n")), "{text}");
    assert!(text.contains("  network Office (c0ffee00aa11bb22cc33dd44ee55ff66)\n"), "{text}");
    assert!(text.contains("Home Assistant: 62 entities (3 of the bridge itself), 2 networks, 13 units"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_lists_networks_units_and_entities_without_publishing() {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let broker = Mosquitto::start();
    let config = write_config(&sim, &broker.url(), "demo");
    let text = check_succeeds(&config, &[]).await;
    assert!(text.contains("network Home"), "{text}");
    assert!(text.contains("light (color_temp)"), "{text}");
    assert!(text.contains("binary_sensor (occupancy)"), "{text}");
    assert!(text.contains("scene   1 Evening"), "{text}");
    assert!(!text.contains("warning:"), "the default settings draw no warning: {text}");
    // The keys the demo site logged in the last hour, with the units that logged each.
    assert!(
        text.contains(
            "  datapoints with a sensor or a live value: battery_level (2 units), driver_temperature (4 units), \
             energy (5 units), lux (1 unit), operating_hours (5 units), power (5 units), presence (1 unit)\n"
        ),
        "{text}"
    );
    // What Home Assistant lists: the bridge's own 3 entities, the demo site's 25 live ones, and
    // one sensor per unit and logged key with a sensor (21 on Home, 13 on Office).
    assert!(text.contains("Home Assistant: 62 entities (3 of the bridge itself), 2 networks, 13 units"), "{text}");
    let r = common::retained(broker.port()).await;
    assert!(r.is_empty(), "check publishes nothing: {r:?}");
}

/// Runs `check -c config` with `env` set, asserts that it succeeds, and returns its output.
async fn check_succeeds(config: &tempfile::NamedTempFile, env: &[(&str, &str)]) -> String {
    let child = spawn_env(&["check", "-c", config.path().to_str().unwrap()], env).take();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// Nagle's algorithm with changes at QoS 0 is valid but delays every change: `check` says so,
/// naming both keys, and still succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn check_warns_when_nagle_meets_qos_0() {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let broker = Mosquitto::start();
    let config = write_config(&sim, &broker.url(), "demo");
    let env = [("CASAMBI2MQTT_MQTT__TCP_NODELAY", "false"), ("CASAMBI2MQTT_MQTT__QOS", "0")];
    let text = check_succeeds(&config, &env).await;
    let warning = text.lines().find(|l| l.starts_with("warning: ")).unwrap_or_default();
    assert!(warning.contains("mqtt.tcp_nodelay is false with mqtt.qos 0"), "{text}");
    assert!(text.contains("network Home"), "the check still runs: {text}");
}

/// Retained topics of a 3.1.1 broker, read with mosquitto_sub (the embedded broker speaks 3.1.1).
fn retained_topics_v311(port: u16) -> Vec<String> {
    let out = Command::new("mosquitto_sub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-V",
            "mqttv311",
            "-t",
            "#",
            "-v",
            "--retained-only",
            "-W",
            "2",
        ])
        .output()
        .expect("mosquitto_sub (package mosquitto-clients) is needed by this test");
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split(' ').next()).map(str::to_string).collect()
}

#[test]
fn demo_serves_retained_topics_on_its_embedded_broker() {
    let port = free_port();
    let mut child = spawn(&["demo", "--mqtt-port", &port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let wanted = ["casambi/bridge/state", "casambi/home/unit/kitchen-ceiling", "casambi/office/unit/desk-1"];
    let topics = loop {
        let topics = retained_topics_v311(port);
        if wanted.iter().all(|w| topics.iter().any(|t| t == w))
            && topics.iter().any(|t| t.starts_with("homeassistant/device/"))
        {
            break topics;
        }
        assert!(Instant::now() < deadline, "demo topics never appeared: {topics:?}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(topics.len() > 100, "{} retained topics", topics.len());
    sigterm(&mut child);
    let status = wait_exit(&mut child, Duration::from_secs(5)).expect("demo exits within 5 s");
    assert!(status.success());
    let text = output_of(child);
    assert!(text.contains(&format!("mosquitto_sub -h 127.0.0.1 -p {port}")), "{text}");
}

/// A running `demo` with its banner read from stdout; its stderr is collected as it comes.
struct Demo {
    child: Proc,
    banner: Vec<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Demo {
    /// Starts `demo` with `args` and `env`, and waits (at most 30 s) for its banner.
    fn start(args: &[&str], env: &[(&str, &str)]) -> Demo {
        use std::io::BufRead;
        let mut all = vec!["demo"];
        all.extend_from_slice(args);
        let mut child = spawn_env(&all, env);
        let stdout = child.child().stdout.take().unwrap();
        let stderr_pipe = child.child().stderr.take().unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut banner = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !banner.last().is_some_and(|l: &String| l.trim_start().starts_with("stop")) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => banner.push(line),
                Err(_) => panic!("no banner within 30 s: {banner:?}\n{}", stderr.lock().unwrap()),
            }
        }
        Demo { child, banner, stderr }
    }

    /// The banner line whose label is `label` (`MQTT broker`, `health`), without the label.
    fn line(&self, label: &str) -> String {
        let found = self.banner.iter().find_map(|l| l.trim_start().strip_prefix(label));
        found.unwrap_or_else(|| panic!("no {label} line: {:#?}", self.banner)).trim().to_string()
    }

    /// The broker's port, from the `MQTT broker mqtt://IP:PORT (…)` line.
    fn mqtt_port(&self) -> u16 {
        let url = self.line("MQTT broker");
        let addr = url.trim_start_matches("mqtt://").split(' ').next().unwrap().to_string();
        addr.parse::<std::net::SocketAddr>().unwrap_or_else(|e| panic!("{url}: {e}")).port()
    }

    /// Waits until stderr holds `text` (at most `limit`); returns stderr.
    fn stderr_until(&self, text: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let now = self.stderr.lock().unwrap().clone();
            if now.contains(text) {
                return now;
            }
            assert!(Instant::now() < deadline, "{text:?} never logged:\n{now}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The printed web page address answers with the page (docs/web.md).
    fn printed_web_page_answers(&self) {
        use std::io::Read;
        let page = self.line("web page");
        let addr = page.trim_start_matches("http://").split('/').next().unwrap().to_string();
        let mut stream = std::net::TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{page}: {e}"));
        stream.write_all(format!("GET / HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.contains(" 200 OK") && answer.contains("<title>casambi2mqtt</title>"), "{page}: {answer}");
    }

    /// Runs the `healthcheck` command the banner prints, until it succeeds (healthy once every
    /// network is live, which may follow the bridge's `online` by a moment; at most 15 s).
    fn printed_healthcheck_succeeds(&self) {
        let health = self.line("health");
        let command = health.split_once("(casambi2mqtt ").map(|(_, c)| c.trim_end_matches(')')).unwrap();
        let args: Vec<&str> = command.split(' ').collect();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let out = Command::new(BIN).args(&args).output().unwrap();
            if out.status.success() {
                return;
            }
            let said = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(Instant::now() < deadline, "`casambi2mqtt {command}` next to the demo: {said}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// SIGTERM; asserts a clean exit within 5 s.
    fn stop(mut self) {
        sigterm(&mut self.child);
        let status = wait_exit(&mut self.child, Duration::from_secs(5)).expect("demo exits within 5 s");
        assert!(status.success(), "{status:?}");
    }
}

/// `mosquitto_sub` with `version` (`mqttv5`, `mqttv311`): the first message on `topic`, or "".
fn first_message(port: u16, version: &str, topic: &str, wait_s: u32) -> String {
    let out = Command::new("mosquitto_sub")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-V", version, "-t", topic, "-C", "1"])
        .args(["-W", &wait_s.to_string()])
        .output()
        .expect("mosquitto_sub (package mosquitto-clients) is needed by this test");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Every discovery component on the broker but device triggers: the entities Home Assistant lists.
fn discovered_entities(port: u16) -> usize {
    let out = Command::new("mosquitto_sub")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-t", "homeassistant/#", "--retained-only", "-W", "2"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        // A device trigger is a component but no entity: Home Assistant lists none for it.
        .map(|v| v["cmps"].as_object().map_or(0, |c| c.values().filter(|c| c["p"] != "device_automation").count()))
        .sum()
}

/// The demo as printed: an MQTT 5 client and an MQTT 3.1.1 client both read the bridge on the
/// printed address, a command from an MQTT 5 client arrives, the health address answers
/// `healthcheck`, the start-up summary counts what Home Assistant lists, and logs to a pipe carry
/// no colour codes.
#[test]
fn demo_serves_mqtt_5_and_3_1_1_on_the_printed_address() {
    let demo = Demo::start(&["--mqtt-port", "0"], &[]);
    let port = demo.mqtt_port();
    assert!(demo.line("MQTT broker").contains("MQTT 3.1.1 and 5"), "{:#?}", demo.banner);
    assert!(demo.banner.iter().any(|l| l.contains("--mqtt-listen 0.0.0.0")), "the container hint: {:#?}", demo.banner);
    assert_eq!(first_message(port, "mqttv5", "casambi/bridge/state", 20), "online");
    assert_eq!(first_message(port, "mqttv311", "casambi/bridge/state", 20), "online");

    demo.printed_healthcheck_succeeds();
    demo.printed_web_page_answers();

    // A command from an MQTT 5 client reaches the bridge: the offline garage light is refused
    // on bridge/error (read by a 3.1.1 client) and in the log.
    let errors = std::thread::spawn(move || first_message(port, "mqttv311", "casambi/bridge/error", 15));
    std::thread::sleep(Duration::from_millis(500));
    let sent = Command::new("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-V", "mqttv5", "-t", "casambi/home/unit/garage-light/set"])
        .args(["-m", "ON"])
        .status()
        .unwrap();
    assert!(sent.success());
    let error: serde_json::Value = serde_json::from_str(&errors.join().unwrap()).expect("a bridge/error message");
    assert_eq!(error["reason"], "unit Garage light is offline; command not sent", "{error}");
    assert_eq!(error["topic"], "casambi/home/unit/garage-light/set", "{error}");
    let log = demo.stderr_until("command refused", Duration::from_secs(5));
    assert!(log.lines().any(|l| l.contains("command refused") && l.contains("is offline")), "{log}");

    let log = demo.stderr_until("bridging", Duration::from_secs(20));
    let entities: usize = log
        .split("entities=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no entities= in the start-up summary:\n{log}"));
    assert_eq!(entities, discovered_entities(port), "the summary counts what Home Assistant lists");
    assert!(!log.contains('\u{1b}'), "no colour codes in logs to a pipe:\n{log}");
    demo.stop();
}

/// With the default health address taken (here, or by another process), the demo serves health
/// on a free port and prints it with the healthcheck command that reaches it.
#[test]
fn demo_prints_a_free_health_address_when_the_default_is_taken() {
    let _held = std::net::TcpListener::bind("127.0.0.1:8099");
    let demo = Demo::start(&["--mqtt-port", "0"], &[]);
    let health = demo.line("health");
    assert!(!health.contains(":8099/"), "{health}");
    assert!(health.contains("(casambi2mqtt healthcheck --listen 127.0.0.1:"), "{health}");
    demo.printed_healthcheck_succeeds();
    demo.stop();
}

/// `--mqtt-listen 0.0.0.0` exposes the embedded broker (Home Assistant in a container reaches
/// it), with a warning and a banner that says so.
#[test]
fn demo_mqtt_listen_exposes_the_broker_with_a_warning() {
    // The health endpoint elsewhere than the default, which the test above may hold meanwhile.
    let demo = Demo::start(
        &["--mqtt-port", "0", "--mqtt-listen", "0.0.0.0"],
        &[("CASAMBI2MQTT_HEALTH__LISTEN", "127.0.0.1:0")],
    );
    assert!(demo.line("MQTT broker").starts_with("mqtt://0.0.0.0:"), "{:#?}", demo.banner);
    let home_assistant = demo.line("Home Assistant");
    assert!(home_assistant.contains("broker this machine's address, port"), "{home_assistant}");
    let log = demo.stderr_until("no authentication", Duration::from_secs(5));
    assert!(log.contains("WARN"), "{log}");
    assert_eq!(first_message(demo.mqtt_port(), "mqttv5", "casambi/bridge/state", 20), "online");
    demo.stop();
}

/// `--mqtt-port` or `--mqtt-listen` beside `--mqtt-url` would be ignored: refused instead.
#[test]
fn demo_refuses_a_port_beside_a_url() {
    for flag in [["--mqtt-port", "1884"], ["--mqtt-listen", "0.0.0.0"]] {
        let mut args = vec!["demo", "--mqtt-url", "mqtt://127.0.0.1:1883"];
        args.extend_from_slice(&flag);
        let out = spawn(&args).take().wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("cannot be used with") && text.contains(flag[0]), "{text}");
    }
}

/// Arguments past what they can mean (a rate of one change in 10²² years, a wait of 3·10¹¹
/// years) are usage errors naming the flag, not a panic once the value is used.
#[test]
fn out_of_range_arguments_are_usage_errors() {
    for args in [
        &["demo", "--activity", "1e-30"][..],
        &["sim", "--activity", "1e-9"],
        &["sim", "--lock-duration", "300000000000y"],
        &["check", "--timeout", "300000000000y"],
    ] {
        let out = spawn(args).take().wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(&format!("invalid value '{}' for '{}", args[2], args[1])), "{args:?}: {text}");
    }
}

/// A taken port is an error naming the address, not a silent wait.
#[test]
fn demo_on_a_taken_port_names_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut child = spawn(&["demo", "--mqtt-port", &port.to_string()]);
    let status = wait_exit(&mut child, Duration::from_secs(20)).expect("exits by itself");
    assert_eq!(status.code(), Some(1));
    let text = output_of(child);
    assert!(text.contains(&format!("cannot listen on 127.0.0.1:{port}")), "{text}");
}

/// A copy of config.example.yaml as shipped: its placeholder secrets are configuration errors
/// naming their keys (exit 2), before anything waits on the network.
#[test]
fn check_refuses_the_example_placeholders_naming_their_keys() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config.example.yaml");
    let copy = tempfile::NamedTempFile::new().unwrap();
    std::fs::copy(example, copy.path()).unwrap();
    let out = spawn(&["check", "-c", copy.path().to_str().unwrap()]).take().wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    for key in ["cloud.api_key", "networks[0].password"] {
        assert!(text.contains(&format!("{key}: is still the placeholder")), "{key}: {text}");
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains("configuration OK"));
}

/// A port nothing listens on (just released by this process).
fn closed_port() -> u16 {
    free_port()
}

/// A configuration whose cloud is `port` on loopback, where nothing listens.
fn unreachable_cloud(port: u16, mqtt_url: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        "cloud:\n  base_url: http://127.0.0.1:{port}\n  ws_url: ws://127.0.0.1:{port}/v1/bridge/\n  api_key: k\n\
         networks:\n  - email: a@example.com\n    password: p\nmqtt:\n  url: {mqtt_url}\n"
    )
    .unwrap();
    f
}

/// Runs `check -c config --timeout 6s`; returns its exit code, stdout and how long it took.
fn check_for_six_seconds(config: &tempfile::NamedTempFile) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let out = spawn(&["check", "-c", config.path().to_str().unwrap(), "--timeout", "6s"]).take().wait_with_output();
    let out = out.unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), start.elapsed())
}

/// An unreachable cloud: progress lines while waiting, a bounded wait, the cause on the last
/// line, exit 1 (not 2: the configuration may be right).
#[tokio::test(flavor = "multi_thread")]
async fn check_gives_up_on_an_unreachable_cloud_naming_the_cause() {
    let broker = Mosquitto::start();
    let port = closed_port();
    let f = unreachable_cloud(port, &broker.url());
    let (code, text, took) = tokio::task::spawn_blocking(move || check_for_six_seconds(&f)).await.unwrap();
    assert_eq!(code, Some(1), "{text}");
    assert!(took < Duration::from_secs(12), "{took:?}");
    assert!(text.lines().any(|l| l.starts_with("waiting (5 s of 6 s): ")), "a progress line: {text}");
    let last = text.lines().last().unwrap_or_default();
    assert!(last.starts_with("problem: gave up after 6 s: 1 credentials entry not logged in"), "{text}");
    assert!(last.contains(&format!("cloud http://127.0.0.1:{port}: Connection refused")), "{text}");
    assert!(!last.contains("broker"), "the broker answered: {text}");
}

/// An unreachable broker, the cloud fine: the broker's connect error on the last line, exit 1.
#[tokio::test(flavor = "multi_thread")]
async fn check_gives_up_on_an_unreachable_broker_naming_the_cause() {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let port = closed_port();
    let config = write_config(&sim, &format!("mqtt://127.0.0.1:{port}"), "demo");
    let (code, text, _) = tokio::task::spawn_blocking(move || check_for_six_seconds(&config)).await.unwrap();
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("network Home"), "the cloud part is still listed: {text}");
    let last = text.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "problem: gave up after 6 s: the broker not connected; cause: broker mqtt://127.0.0.1:{port}: Connection refused"
        ),
        "{text}"
    );
}

/// Runs `check` against an unreachable cloud for a second, under a terminal (`script`), with
/// `no_color` as NO_COLOR; returns what the terminal showed.
fn check_on_a_terminal(no_color: Option<&str>) -> String {
    let port = closed_port();
    let f = unreachable_cloud(port, &format!("mqtt://127.0.0.1:{port}"));
    let inner = format!("{BIN} check -c {} --timeout 1s", f.path().display());
    let mut command = Command::new("script");
    command.args(["-qec", &inner, "/dev/null"]).env_remove("RUST_LOG").env_remove("NO_COLOR");
    if let Some(v) = no_color {
        command.env("NO_COLOR", v);
    }
    let out = command.output().expect("script (util-linux) is needed by this test");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Log lines are coloured on a terminal, and not with NO_COLOR set (on a pipe: the demo test).
#[test]
fn logs_are_coloured_only_on_a_terminal_without_no_color() {
    let coloured = check_on_a_terminal(None);
    assert!(coloured.contains("WARN") && coloured.contains("\u{1b}["), "{coloured:?}");
    let plain = check_on_a_terminal(Some("1"));
    assert!(plain.contains("WARN") && !plain.contains("\u{1b}["), "{plain:?}");
}

/// The CPU time (user + system) a running process has used so far, from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let per_second = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    let per_second: u64 = String::from_utf8_lossy(&per_second.stdout).trim().parse().unwrap();
    Duration::from_millis(ticks * 1000 / per_second)
}

/// `check` waiting on an unreachable cloud and broker sleeps between its attempts: over four
/// seconds of waiting it uses a small part of one core, not all of it.
#[test]
fn check_waits_without_spinning() {
    let port = closed_port();
    let f = unreachable_cloud(port, &format!("mqtt://127.0.0.1:{port}"));
    let mut child = spawn(&["check", "-c", f.path().to_str().unwrap(), "--timeout", "8s"]);
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_time(child.child().id());
    std::thread::sleep(Duration::from_secs(4));
    let used = cpu_time(child.child().id()) - before;
    assert!(child.child().try_wait().unwrap().is_none(), "check ended before its timeout");
    assert!(used < Duration::from_millis(400), "check used {used:?} of CPU in 4 s of waiting");
}

/// `demo --mqtt-url` negotiates like `run` (`mqtt.protocol: auto`): against NATS's MQTT gateway,
/// which speaks 3.1.1 only, the bridge connects and publishes.
#[test]
fn demo_with_a_url_negotiates_the_protocol_like_run() {
    let nats = nats::Nats::start();
    let demo = Demo::start(&["--mqtt-url", &nats.url()], &[]);
    assert_eq!(first_message(nats.port(), "mqttv311", "casambi/bridge/state", 20), "online");
    assert!(!first_message(nats.port(), "mqttv311", "casambi/home/unit/kitchen-ceiling", 20).is_empty());
    demo.stop();
}
