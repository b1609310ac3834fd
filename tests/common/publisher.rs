//! The bridge's MQTT side alone, fed updates by the test.

use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::mqtt::{self, Config, DiscoveryMode, Protocol, ResolvedCommand, Tuning};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A running MQTT publisher fed by the test.
pub struct Bridge {
    pub updates: mpsc::Sender<Update>,
    pub commands: mpsc::Receiver<ResolvedCommand>,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), mqtt::MqttError>>,
}

/// The configuration used by the tests.
pub fn config(url: &str, mode: DiscoveryMode, protocol: Protocol) -> Config {
    let mut c = Config::default();
    c.mqtt.url = url.to_string();
    c.mqtt.protocol = protocol;
    c.mqtt.client_id = format!("casambi2mqtt-test-{}", std::process::id());
    c.homeassistant.discovery = mode;
    c
}

/// Short timings for tests.
pub fn tuning() -> Tuning {
    Tuning {
        scan_delay: Duration::from_millis(500),
        scan: Duration::from_millis(500),
        birth_delay_min: Duration::from_millis(100),
        birth_delay_max: Duration::from_millis(300),
        shutdown_grace: Duration::from_secs(2),
    }
}

/// Starts the publisher.
pub fn start_bridge(config: Config) -> Bridge {
    let (utx, urx) = mpsc::channel(64);
    let (ctx, crx) = mpsc::channel(64);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(mqtt::run_with(config, tuning(), urx, ctx, shutdown.clone()));
    Bridge { updates: utx, commands: crx, shutdown, task }
}

impl Bridge {
    /// Stops cleanly and waits.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let r = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        r.expect("bridge stops in time").expect("task ok").expect("run ok");
    }
}
