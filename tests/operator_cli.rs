//! The binary as an operator meets it: `run` with a config against the simulator and a real
//! mosquitto (SIGTERM publishes `offline` and exits 0 within 5 s), exit code 2 for a bad config and
//! for rejected credentials, `check`, and the zero-setup `demo` with its embedded broker.

mod common;

use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::{Mosquitto, retained_until};
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_casambi2mqtt");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn write_config(sim: &Simulator, mqtt_url: &str, password: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\nnetworks:\n  - email: demo@example.com\n    password: {password}\n\
         mqtt:\n  url: {mqtt_url}\nhealth:\n  listen: \"\"\n",
        sim.base_url(),
        sim.ws_url()
    )
    .unwrap();
    f
}

/// A child process that is killed if the test fails before it ends.
struct Proc(Option<Child>);

impl Proc {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }
    fn take(mut self) -> Child {
        self.0.take().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(args: &[&str]) -> Proc {
    spawn_env(args, &[])
}

/// [`spawn`] with environment variables set for the child.
fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Proc {
    let mut command = Command::new(BIN);
    command.args(args).env_remove("RUST_LOG").envs(env.iter().copied());
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    Proc(Some(child.unwrap()))
}

fn sigterm(child: &mut Proc) {
    let child = child.child();
    let status = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
}

/// Waits for the child to exit, at most `limit`.
fn wait_exit(child: &mut Proc, limit: Duration) -> Option<std::process::ExitStatus> {
    let child = child.child();
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

fn output_of(child: Proc) -> String {
    let out = child.take().wait_with_output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_publishes_offline_and_exits_zero_within_five_seconds() {
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
    sigterm(&mut child);
    let status = wait_exit(&mut child, Duration::from_secs(5)).expect("exited within 5 s");
    let took = sent.elapsed();
    assert!(status.success(), "exit code {status:?}");
    let r = retained_until(port, Duration::from_secs(2), |r| r.contains_key("casambi/bridge/state")).await;
    assert_eq!(r["casambi/bridge/state"], "offline");
    println!("SIGTERM to exit: {took:?}");
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

#[tokio::test(flavor = "multi_thread")]
async fn rejected_credentials_exit_two_with_a_clear_error() {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let broker = Mosquitto::start();
    let config = write_config(&sim, &broker.url(), "wrong-password-123");
    let mut child = spawn(&["run", "-c", config.path().to_str().unwrap()]);
    let status = wait_exit(&mut child, Duration::from_secs(20)).expect("exits by itself");
    assert_eq!(status.code(), Some(2));
    let text = output_of(child);
    assert!(text.contains("demo@example.com"), "{text}");
    assert!(!text.contains("wrong-password-123"), "the password never appears: {text}");
    let failed = sim.shared().log.requests().iter().filter(|r| r.is_login() && r.status != 200).count();
    assert!(failed <= 2, "{failed} failed logins");
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
