//! The embedded MQTT broker of `casambi2mqtt demo` (cargo feature `embedded-broker`, on by
//! default), so the demo needs nothing installed.
//!
//! It is rumqttd with its configuration built in code: one MQTT 3.1.1 listener on the given
//! address, retained messages and last wills supported. rumqttd runs on its own threads and has no
//! shutdown call, so the broker lives until the process ends — fine for a demo. Production setups
//! use a real broker (`mqtt.url`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Why the embedded broker did not come up.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The listen address is taken (another broker on 1883?).
    #[error("cannot listen on {0}: the address is in use (use --mqtt-port or --mqtt-url)")]
    InUse(SocketAddr),
    /// The broker stopped while starting.
    #[error("the embedded broker failed: {0}")]
    Failed(String),
}

/// Starts the broker on `listen` and waits until it accepts connections.
pub async fn start(listen: SocketAddr) -> Result<(), BrokerError> {
    // Refuse early with a clear message when the port is taken; rumqttd would only log it.
    match std::net::TcpListener::bind(listen) {
        Ok(probe) => drop(probe),
        Err(_) => return Err(BrokerError::InUse(listen)),
    }
    let connections = rumqttd::ConnectionSettings {
        connection_timeout_ms: 5000,
        max_payload_size: 256 * 1024,
        max_inflight_count: 500,
        auth: None,
        external_auth: None,
        dynamic_filters: true,
    };
    let server =
        rumqttd::ServerSettings { name: "demo".into(), listen, tls: None, next_connection_delay_ms: 1, connections };
    let config = rumqttd::Config {
        id: 0,
        router: rumqttd::RouterConfig {
            max_connections: 1000,
            max_outgoing_packet_count: 20_000,
            max_segment_size: 100 * 1024 * 1024,
            max_segment_count: 10,
            custom_segment: None,
            initialized_filters: None,
            shared_subscriptions_strategy: Default::default(),
        },
        v4: Some(HashMap::from([("demo".to_string(), server)])),
        ..Default::default()
    };
    let (failed_tx, mut failed_rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("embedded-broker".into())
        .spawn(move || {
            let mut broker = rumqttd::Broker::new(config);
            if let Err(e) = broker.start() {
                let _ = failed_tx.send(e.to_string());
            }
        })
        .map_err(|e| BrokerError::Failed(e.to_string()))?;
    // Wait until it accepts connections (or says why not).
    for _ in 0..100 {
        if let Ok(reason) = failed_rx.try_recv() {
            return Err(BrokerError::Failed(reason));
        }
        if tokio::net::TcpStream::connect(listen).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(BrokerError::Failed(format!("no connection accepted on {listen} after 5 s")))
}
