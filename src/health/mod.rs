//! `/healthz` and `/metrics` on the HTTP listener (`http.listen`, beside the web page of
//! [`crate::web`]), for container health checks and Prometheus.
//!
//! Health is derived from what the bridge reports: the MQTT link (set by the publisher's client)
//! and every network's connection (observed from the update stream). `/healthz` answers 200 only
//! while MQTT is connected and every network is `live` or `polling`; otherwise 503, and the JSON
//! body always says why.

use crate::bridge::state::Connection;
use crate::bridge::update::Update;
use crate::cloud::rest::{Outcome, RequestStats};
use crate::metrics::{ConnectionLabels, RestLabels, metrics};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// How many recent problems `/healthz` shows.
const PROBLEMS_KEPT: usize = 20;

/// One network as `/healthz` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct NetworkHealth {
    /// Network name.
    pub name: String,
    /// `live`, `polling` or `down`.
    pub connection: Connection,
    /// Whether the gateway is online.
    pub gateway_online: bool,
}

/// What the health endpoints report; shared by the bridge's parts.
/// What the bridge expects, read at report time ([`Expectation`]).
pub type Expected = Box<dyn Fn() -> Expectation + Send + Sync>;

/// The bridge's side of a health report.
#[derive(Debug, Clone, Default)]
pub struct Expectation {
    /// The networks it supervises (id, name).
    pub networks: Vec<(String, String)>,
    /// How many credentials entries are still logging in.
    pub logging_in: usize,
    /// Why each credentials entry the service rejects is rejected (no secrets).
    pub rejected: Vec<String>,
    /// Why each entry still logging in failed last, when it has failed (no secrets).
    pub retrying: Vec<String>,
}

#[derive(Default)]
pub struct HealthState {
    /// Overrides the process-wide MQTT gauge when set (tests that run several bridges).
    mqtt_connected: AtomicBool,
    mqtt_override: AtomicBool,
    networks: Mutex<BTreeMap<String, NetworkHealth>>,
    problems: Mutex<Vec<String>>,
    rest: Mutex<Option<Arc<RequestStats>>>,
    expected: Mutex<Option<Expected>>,
}

impl std::fmt::Debug for HealthState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthState").field("networks", &*lock(&self.networks)).finish_non_exhaustive()
    }
}

/// The `/healthz` body.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    /// `ok` or `unhealthy`.
    pub status: &'static str,
    /// Why not healthy (empty when healthy).
    pub reasons: Vec<String>,
    /// MQTT connected.
    pub mqtt_connected: bool,
    /// Networks by id.
    pub networks: BTreeMap<String, NetworkHealth>,
    /// Recent problems (rejected credentials, refused commands, …).
    pub problems: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HealthState {
    /// A fresh state: MQTT not connected, no networks.
    pub fn new() -> Arc<HealthState> {
        Arc::new(HealthState::default())
    }

    /// Records whether MQTT is connected, instead of reading the MQTT client's gauge.
    pub fn set_mqtt_connected(&self, connected: bool) {
        self.mqtt_override.store(true, Ordering::Relaxed);
        self.mqtt_connected.store(connected, Ordering::Relaxed);
    }

    /// Whether MQTT is connected.
    pub fn mqtt_connected(&self) -> bool {
        if self.mqtt_override.load(Ordering::Relaxed) {
            self.mqtt_connected.load(Ordering::Relaxed)
        } else {
            metrics().mqtt_connected.get() > 0
        }
    }

    /// Tells the report which networks and logins to wait for (a network without its first
    /// snapshot yet, or a login still pending, is not healthy).
    pub fn set_expected(&self, expected: Expected) {
        *lock(&self.expected) = Some(expected);
    }

    /// Gives `/metrics` the REST client's counters.
    pub fn set_rest_stats(&self, stats: Arc<RequestStats>) {
        *lock(&self.rest) = Some(stats);
    }

    /// Takes note of an update on its way to the publisher.
    pub fn observe(&self, update: &Update) {
        match update {
            Update::Network { view, .. } => self.note_status(&view.status),
            Update::Status { status, .. } => self.note_status(status),
            Update::Problem { message, .. } => self.push_problem(message.clone()),
            Update::Rejected { topic, reason, .. } => {
                metrics().command("rejected");
                self.push_problem(format!("command on {topic} rejected: {reason}"));
            }
            Update::Unit { .. } | Update::Event { .. } | Update::Photos { .. } | Update::Datapoints { .. } => {}
        }
    }

    fn push_problem(&self, message: String) {
        let mut problems = lock(&self.problems);
        problems.push(message);
        let excess = problems.len().saturating_sub(PROBLEMS_KEPT);
        problems.drain(..excess);
    }

    fn note_status(&self, status: &crate::bridge::state::NetworkStatus) {
        lock(&self.networks).insert(
            status.id.clone(),
            NetworkHealth {
                name: status.name.clone(),
                connection: status.connection,
                gateway_online: status.gateway_online,
            },
        );
    }

    /// What the bridge still waits for: networks it expects without their first snapshot, and
    /// credentials entries still logging in.
    pub fn to_come(&self) -> (usize, usize) {
        let Some(expected) = lock(&self.expected).as_ref().map(|e| e()) else { return (0, 0) };
        let Expectation { networks: wanted, logging_in, .. } = expected;
        let networks = lock(&self.networks);
        (wanted.iter().filter(|(id, _)| !networks.contains_key(id)).count(), logging_in)
    }

    /// The MQTT protocol of the last connection (`5`, `3.1.1`); `None` before one.
    pub fn mqtt_protocol(&self) -> Option<&'static str> {
        match metrics().mqtt_protocol.get() {
            5 => Some("5"),
            4 => Some("3.1.1"),
            _ => None,
        }
    }

    /// The current report.
    pub fn report(&self) -> HealthReport {
        let mqtt_connected = self.mqtt_connected();
        let networks = lock(&self.networks).clone();
        let mut reasons = Vec::new();
        if !mqtt_connected {
            reasons.push("MQTT is not connected".to_string());
        }
        if let Some(expected) = lock(&self.expected).as_ref() {
            let Expectation { networks: wanted, logging_in, rejected, retrying } = expected();
            if logging_in > 0 {
                reasons.push(format!("{logging_in} credentials entries still logging in"));
            }
            reasons.extend(rejected.into_iter().map(|why| format!("login rejected: {why}")));
            reasons.extend(retrying.into_iter().map(|why| format!("login failed, trying again: {why}")));
            for (id, name) in wanted {
                if !networks.contains_key(&id) {
                    reasons.push(format!("network {name} ({id}) is starting: no snapshot yet"));
                }
            }
        }
        if networks.is_empty() {
            reasons.push("no network is bridged yet".to_string());
        }
        for (id, n) in &networks {
            if n.connection == Connection::Down {
                reasons.push(format!("network {} ({id}) is down: neither the wire nor REST works", n.name));
            }
        }
        HealthReport {
            status: if reasons.is_empty() { "ok" } else { "unhealthy" },
            reasons,
            mqtt_connected,
            networks,
            problems: lock(&self.problems).clone(),
        }
    }

    /// Brings the scrape-time metrics up to date and renders them.
    pub fn render_metrics(&self) -> String {
        let m = metrics();
        let mut counts = BTreeMap::new();
        for n in lock(&self.networks).values() {
            *counts.entry(n.connection.as_str()).or_insert(0i64) += 1;
        }
        for state in ["live", "polling", "down"] {
            m.networks
                .get_or_create(&ConnectionLabels { state: state.into() })
                .set(counts.get(state).copied().unwrap_or(0));
        }
        if let Some(stats) = lock(&self.rest).clone() {
            for c in stats.snapshot() {
                let status = match c.outcome {
                    Outcome::Status(code) => code.to_string(),
                    Outcome::Transport => "transport".to_string(),
                };
                let labels = RestLabels { endpoint: c.endpoint.as_str().into(), status };
                m.rest_requests.get_or_create(&labels).set(i64::try_from(c.count).unwrap_or(i64::MAX));
            }
        }
        m.encode()
    }
}

/// The routes `/healthz` and `/metrics` (served by [`crate::web::serve`]).
pub fn routes(state: Arc<HealthState>) -> Router {
    Router::new().route("/healthz", get(healthz)).route("/metrics", get(metrics_text)).with_state(state)
}

async fn healthz(State(state): State<Arc<HealthState>>) -> impl IntoResponse {
    let report = state.report();
    let code = if report.reasons.is_empty() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, axum::Json(report))
}

async fn metrics_text(State(state): State<Arc<HealthState>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.render_metrics())
}

/// The `healthcheck` command: asks a running bridge's `/healthz`; `Ok` when healthy.
pub async fn check(listen: SocketAddr) -> Result<(), String> {
    let url = format!("http://{listen}/healthz");
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let response = client.get(&url).send().await.map_err(|e| format!("{url}: {e}"))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if status.is_success() { Ok(()) } else { Err(format!("{url}: {status}: {body}")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_that_keeps_failing_to_log_in_is_named_with_why() {
        let health = HealthState::new();
        health.set_mqtt_connected(true);
        health.set_expected(Box::new(|| Expectation {
            networks: Vec::new(),
            logging_in: 1,
            rejected: vec!["credentials b@example.com: wrong password".into()],
            retrying: vec!["credentials a@example.com: API not enabled or login locked".into()],
        }));
        let report = health.report();
        assert_eq!(report.status, "unhealthy");
        assert_eq!(
            report.reasons,
            [
                "1 credentials entries still logging in",
                "login rejected: credentials b@example.com: wrong password",
                "login failed, trying again: credentials a@example.com: API not enabled or login locked",
                "no network is bridged yet",
            ]
        );
    }
}
