//! Rejected credentials as an operator meets them (docs/cloud.md#logins-and-the-lockout-guard):
//! `run` does not exit; it stays up, unhealthy, and says why in its log, on
//! `<base>/bridge/error` and in `/healthz`, and it never trips the service's login lock (three
//! failed logins in a minute), not even when a process supervisor restarts it.

mod common;

use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::process::{Proc, output_of, sigterm, spawn, wait_exit, write_config_listening};
use common::{Mosquitto, Watcher, free_port};
use std::time::{Duration, Instant};

const WRONG: &str = "wrong-password-123";
/// The service's login lock: three failed logins within this window lock login.
const LOCK_WINDOW: Duration = Duration::from_secs(60);

/// The failed logins the simulator saw and whether any request met the lock (403).
fn failed_logins(sim: &Simulator) -> (Vec<Duration>, bool) {
    let log = sim.shared().log.requests();
    let failed = log.iter().filter(|r| r.is_login() && r.status != 200).map(|r| r.at).collect();
    (failed, log.iter().any(|r| r.status == 403))
}

/// The most failed logins within any window of [`LOCK_WINDOW`].
fn most_per_window(failed: &[Duration]) -> usize {
    (0..failed.len())
        .map(|i| failed[i..].iter().take_while(|t| **t - failed[i] < LOCK_WINDOW).count())
        .max()
        .unwrap_or(0)
}

/// `GET /healthz` of the bridge on `port`: status code and body.
async fn healthz(port: u16) -> (u16, String) {
    match reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(_) => (0, String::new()),
    }
}

/// Waits until `/healthz` names a rejected login; returns its body.
async fn wait_rejected_health(port: u16, child: &mut Proc) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, body) = healthz(port).await;
        if code == 503 && body.contains("login rejected") {
            return body;
        }
        assert!(child.child().try_wait().unwrap().is_none(), "the bridge exited");
        assert!(Instant::now() < deadline, "/healthz never named the rejected login: {code} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the bridge with `logins` (password [`WRONG`]): it stays up and unhealthy, names the
/// entry in `/healthz` and on `<base>/bridge/error`, logs in once, then stops cleanly on
/// SIGTERM; its output never shows the password. Returns the output.
async fn stays_up_rejected(logins: &str, named: &str) -> String {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let broker = Mosquitto::start();
    let mut errors = Watcher::start(broker.port(), "casambi/bridge/error").await;
    let http = free_port();
    let config = write_config_listening(&sim, &broker.url(), logins, &format!("127.0.0.1:{http}"));
    let mut child = spawn(&["run", "-c", config.path().to_str().unwrap()]);
    let body = wait_rejected_health(http, &mut child).await;
    assert!(body.contains(named) && body.contains("next login attempt in 1m 5s"), "{body}");
    let error = errors.wait_for(Duration::from_secs(10), |s| s.payload.contains(named)).await;
    assert!(error.payload.contains("user not found / wrong password"), "{}", error.payload);
    // Still up a while later, and one login only: the next waits out the lock window.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(child.child().try_wait().unwrap().is_none(), "the bridge exited over rejected credentials");
    let (failed, locked) = failed_logins(&sim);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(!locked);
    sigterm(&mut child);
    let status = wait_exit(&mut child, Duration::from_secs(5)).expect("exits within 5 s of SIGTERM");
    assert_eq!(status.code(), Some(0));
    let text = output_of(child);
    assert!(!text.contains(WRONG), "the password never appears: {text}");
    assert!(!body.contains(WRONG) && !error.payload.contains(WRONG));
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn rejected_credentials_keep_the_bridge_up_unhealthy_saying_why() {
    let logins = format!("networks:\n  - email: demo@example.com\n    password: {WRONG}\n");
    let text = stays_up_rejected(&logins, "credentials demo@example.com").await;
    assert!(text.contains("credentials rejected"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_site_login_alone_keeps_the_bridge_up_naming_it() {
    let logins = format!("sites:\n  - email: owner@example.com\n    password: {WRONG}\n");
    let text = stays_up_rejected(&logins, "site credentials owner@example.com").await;
    assert!(text.contains("site credentials owner@example.com: user not found / wrong password"), "{text}");
}

/// A process supervisor (`restart: unless-stopped`) starts the bridge again whenever it exits,
/// and the operator restarts it once by hand: failed logins stay within two per minute (the
/// service locks at three), and no request meets the lock.
#[tokio::test(flavor = "multi_thread")]
async fn restarts_never_lock_the_login() {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let broker = Mosquitto::start();
    let logins = format!("networks:\n  - email: demo@example.com\n    password: {WRONG}\n");
    let config = write_config_listening(&sim, &broker.url(), &logins, "");
    let args = ["run", "-c", config.path().to_str().unwrap()];
    let mut starts = 0;
    let mut supervise = |child: &mut Option<Proc>, until: Instant| {
        while Instant::now() < until {
            let running = child.as_mut().is_some_and(|c| c.child().try_wait().unwrap().is_none());
            if !running {
                *child = Some(spawn(&args));
                starts += 1;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let mut child = None;
    supervise(&mut child, Instant::now() + Duration::from_secs(6));
    // The operator restarts it.
    if let Some(mut running) = child.take() {
        sigterm(&mut running);
        assert_eq!(wait_exit(&mut running, Duration::from_secs(5)).and_then(|s| s.code()), Some(0));
    }
    supervise(&mut child, Instant::now() + Duration::from_secs(6));
    let (failed, locked) = failed_logins(&sim);
    let most = most_per_window(&failed);
    println!("process starts: {starts}; failed logins: {}; most in one minute: {most}", failed.len());
    assert_eq!(starts, 2, "the bridge exited by itself and was restarted");
    assert!(most <= 2, "{most} failed logins within a minute: {failed:?}");
    assert!(!locked, "a request met the login lock");
}
