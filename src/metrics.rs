//! Process-wide counters, exported in the Prometheus text format on `/metrics`.
//!
//! One registry per process (like any Prometheus exporter): every layer counts into it without
//! being handed a handle, and `/metrics` reads it. Counters only ever grow, so tests that share a
//! process assert increases, not exact values.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;

/// Labels of a reconnect: which link (`mqtt`, `websocket`) and why in one word.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LinkLabels {
    /// `mqtt` or `websocket`.
    pub link: String,
}

/// Labels of a REST request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RestLabels {
    /// Endpoint name (`network_state`, `fixture`, …).
    pub endpoint: String,
    /// Outcome (`200`, `410`, `429`, `transport`, …).
    pub status: String,
}

/// Labels of a command.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CommandLabels {
    /// `sent` or `rejected`.
    pub result: String,
}

/// Labels of the networks-by-state gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConnectionLabels {
    /// `live`, `polling` or `down`.
    pub state: String,
}

/// Every metric of the bridge.
#[derive(Debug, Default)]
pub struct Metrics {
    /// WebSocket events received (every `unitChanged`, `peerChanged`, `networkUpdated`).
    pub events_received: Counter,
    /// MQTT messages published.
    pub messages_published: Counter,
    /// Reconnects by link.
    pub reconnects: Family<LinkLabels, Counter>,
    /// Commands by result.
    pub commands: Family<CommandLabels, Counter>,
    /// REST requests by endpoint and status (set from the REST client's counters at scrape time).
    pub rest_requests: Family<RestLabels, Gauge>,
    /// Networks by connection state (set at scrape time).
    pub networks: Family<ConnectionLabels, Gauge>,
    /// Unix time of the last completed REST state refresh (resync or poll).
    pub last_resync: Gauge<f64, AtomicU64>,
    /// 1 while the MQTT client is connected (the process has one MQTT connection).
    pub mqtt_connected: Gauge,
    /// The MQTT protocol version of the last connection: 4 (3.1.1) or 5; 0 before one.
    pub mqtt_protocol: Gauge,
}

impl Metrics {
    /// Counts a reconnect of a link.
    pub fn reconnect(&self, link: &str) {
        self.reconnects.get_or_create(&LinkLabels { link: link.to_string() }).inc();
    }

    /// Counts a command.
    pub fn command(&self, result: &str) {
        self.commands.get_or_create(&CommandLabels { result: result.to_string() }).inc();
    }

    /// Renders every metric in the Prometheus text format.
    pub fn encode(&'static self) -> String {
        let mut registry = Registry::with_prefix("casambi2mqtt");
        registry.register("events_received", "WebSocket events received", self.events_received.clone());
        registry.register("messages_published", "MQTT messages published", self.messages_published.clone());
        registry.register("reconnects", "Reconnects by link", self.reconnects.clone());
        registry.register("commands", "Commands by result", self.commands.clone());
        registry.register("rest_requests", "REST requests by endpoint and status", self.rest_requests.clone());
        registry.register("networks", "Networks by connection state", self.networks.clone());
        registry.register(
            "last_resync_timestamp_seconds",
            "Unix time of the last REST state refresh",
            self.last_resync.clone(),
        );
        registry.register("mqtt_connected", "1 while connected to the MQTT broker", self.mqtt_connected.clone());
        registry.register(
            "mqtt_protocol",
            "MQTT protocol level of the last connection (4 = 3.1.1, 5 = MQTT 5)",
            self.mqtt_protocol.clone(),
        );
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
            tracing::warn!(error = %e, "cannot encode metrics");
        }
        out
    }
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::default)
}
