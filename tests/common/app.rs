//! The whole bridge (`app::run`) started against the simulator, and what the simulator heard.

use casambi2mqtt::sim::Simulator;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Starts the whole bridge (`app::run`) against `sim` with the demo's network credentials and
/// the broker at `broker_url`; `extra` is YAML appended (sections such as `http:`). Returns its
/// handles, the token that stops it and its task.
pub async fn start_app(
    sim: &Simulator,
    broker_url: &str,
    extra: &str,
) -> (
    casambi2mqtt::app::Running,
    CancellationToken,
    tokio::task::JoinHandle<Result<casambi2mqtt::app::Outcome, casambi2mqtt::app::AppError>>,
) {
    let yaml = format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\nnetworks:\n  - email: demo@example.com\n    \
         password: demo\nmqtt:\n  url: {broker_url}\n{extra}",
        sim.base_url(),
        sim.ws_url(),
    );
    let config = casambi2mqtt::config::parse(&yaml, Vec::<(String, String)>::new()).expect("a valid configuration");
    let shutdown = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut task = tokio::spawn(casambi2mqtt::app::run(config, shutdown.clone(), Some(tx)));
    match rx.await {
        Ok(running) => (running, shutdown, task),
        Err(_) => panic!("the bridge did not start: {:?}", (&mut task).await),
    }
}

/// Control messages the simulator received, without their wire number.
pub fn sim_controls(sim: &Simulator) -> Vec<serde_json::Value> {
    let mut all = sim.shared().log.controls();
    for m in &mut all {
        if let Some(m) = m.as_object_mut() {
            m.remove("wire");
        }
    }
    all
}

/// Waits up to `max` until the simulator received `n` control messages in all; returns them.
pub async fn wait_sim_controls(sim: &Simulator, n: usize, max: Duration) -> Vec<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let got = sim_controls(sim);
        if got.len() >= n {
            return got;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} control messages, wanted {n}: {got:#?}", got.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
