//! `/healthz` and `/metrics` of a running bridge (in-process, against the simulator and a real
//! mosquitto): healthy while MQTT is up and every network live, 503 with the reason when MQTT goes
//! away, and the Prometheus text with the documented metrics.

mod common;

use casambi2mqtt::app::{self, Running};
use casambi2mqtt::config;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::Mosquitto;
use serde_json::Value;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn get(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn wait_status(url: &str, want: u16, secs: u64) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let (status, body) = get(url).await;
        if status == want {
            return body;
        }
        assert!(tokio::time::Instant::now() < deadline, "{url} stayed {status}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn healthz_follows_mqtt_and_networks_and_metrics_are_exported() {
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let mut broker = Mosquitto::start();
    let yaml = format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\n  event_batch_window: 3ms\nnetworks:\n  - email: demo@example.com\n    \
         password: demo\nmqtt:\n  url: {}\nhealth:\n  listen: 127.0.0.1:0\n",
        sim.base_url(),
        sim.ws_url(),
        broker.url()
    );
    let config = config::parse(&yaml, Vec::<(String, String)>::new()).unwrap();
    let shutdown = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel::<Running>();
    let task = tokio::spawn(app::run(config, shutdown.clone(), Some(tx)));
    let running = rx.await.unwrap();
    assert_eq!(running.bridge.event_batch_window(), Duration::from_millis(3), "the run took the configured window");
    let addr = running.health_addr.unwrap();
    let healthz = format!("http://{addr}/healthz");

    let body = wait_status(&healthz, 200, 20).await;
    let report: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(report["status"], "ok");
    assert_eq!(report["mqtt_connected"], true);
    assert_eq!(report["networks"]["7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b"]["connection"], "live");

    let (status, metrics) = get(&format!("http://{addr}/metrics")).await;
    assert_eq!(status, 200);
    for needle in [
        "casambi2mqtt_events_received_total",
        "casambi2mqtt_messages_published_total",
        "casambi2mqtt_networks{state=\"live\"} 2",
        "casambi2mqtt_rest_requests{endpoint=\"network_state\",status=\"200\"}",
        "casambi2mqtt_last_resync_timestamp_seconds",
        "casambi2mqtt_mqtt_connected 1",
        // The default protocol setting, auto, settles on MQTT 5 with mosquitto.
        "casambi2mqtt_mqtt_protocol 5",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in:\n{metrics}");
    }

    // MQTT gone: unhealthy, and the body says why.
    broker.stop();
    let body = wait_status(&healthz, 503, 20).await;
    assert!(body.contains("MQTT is not connected"), "{body}");
    broker.restart();
    wait_status(&healthz, 200, 30).await;

    shutdown.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap().unwrap();
    assert_eq!(outcome, app::Outcome::Stopped);
}
