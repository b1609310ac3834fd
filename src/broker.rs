//! The embedded MQTT broker of `casambi2mqtt demo` (cargo feature `embedded-broker`, on by
//! default), so the demo needs nothing installed.
//!
//! It is rumqttd with its configuration built in code, retained messages and last wills
//! supported. rumqttd serves MQTT 3.1.1 and MQTT 5 on separate listeners, while the demo prints
//! one address for every client (mosquitto_sub, Home Assistant, a Node-RED flow set to MQTT 5).
//! So rumqttd listens on two loopback ports of its own, and the printed address is a small front
//! listener ([`front`]) that reads the protocol level of each connection's CONNECT packet and
//! relays the connection to the listener of that version. rumqttd runs on its own threads and has
//! no shutdown call, so the broker lives until the process ends — fine for a demo. Production
//! setups use a real broker (`mqtt.url`).

mod front;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Why the embedded broker did not come up.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The listen address is taken (another broker on 1883?).
    #[error("cannot listen on {0}: {1} (use --mqtt-port or --mqtt-url)")]
    Listen(SocketAddr, String),
    /// The broker stopped while starting.
    #[error("the embedded broker failed: {0}")]
    Failed(String),
}

/// The largest MQTT packet a client may send, counted as the packet's remaining length (what
/// follows its fixed header): a QoS 1 PUBLISH carries up to this minus 4 bytes minus its topic's
/// length of payload. A bigger packet closes the client's connection (docs/brokers.md).
pub const MAX_PACKET_SIZE: usize = 256 * 1024;

/// How long the broker may take to accept connections before it counts as failed.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts the broker, answering MQTT 3.1.1 and MQTT 5 clients on `listen`, and waits until it
/// accepts connections; returns the bound address (`listen` with port 0 gets a free port).
pub async fn start(listen: SocketAddr) -> Result<SocketAddr, BrokerError> {
    // The printed address first: a taken port is refused with a clear message.
    let front = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| BrokerError::Listen(listen, crate::config::io_reason(&e)))?;
    let bound = front.local_addr().map_err(|e| BrokerError::Failed(e.to_string()))?;
    let v4 = free_loopback_port()?;
    let v5 = free_loopback_port()?;
    let server = |name: &str, listen: SocketAddr| rumqttd::ServerSettings {
        name: name.into(),
        listen,
        tls: None,
        next_connection_delay_ms: 1,
        connections: rumqttd::ConnectionSettings {
            connection_timeout_ms: 5000,
            max_payload_size: MAX_PACKET_SIZE,
            max_inflight_count: 500,
            auth: None,
            external_auth: None,
            dynamic_filters: true,
        },
    };
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
        v4: Some(HashMap::from([("demo-v4".to_string(), server("demo-v4", v4))])),
        v5: Some(HashMap::from([("demo-v5".to_string(), server("demo-v5", v5))])),
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
    // Wait until both of rumqttd's listeners accept connections (or it says why not).
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    for backend in [v4, v5] {
        loop {
            if let Ok(reason) = failed_rx.try_recv() {
                return Err(BrokerError::Failed(reason));
            }
            if tokio::net::TcpStream::connect(backend).await.is_ok() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(BrokerError::Failed(format!(
                    "no connection accepted on {backend} after {} s",
                    START_TIMEOUT.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tokio::spawn(front::serve(front, front::Backends { v4, v5 }));
    Ok(bound)
}

/// A loopback address with a port free now, for one of rumqttd's listeners (rumqttd binds the
/// address itself; should another process take the port meanwhile, the start fails visibly).
fn free_loopback_port() -> Result<SocketAddr, BrokerError> {
    std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|probe| probe.local_addr())
        .map_err(|e| BrokerError::Failed(format!("no free loopback port for the broker: {e}")))
}
