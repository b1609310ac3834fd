//! The waiting part of `check`: the cloud (log in, read every network) and the broker (connect)
//! within one deadline, a progress line every few seconds meanwhile, and, when time runs out,
//! the cause (the last login failure, the broker's connect error) rather than a bare timeout.

use super::Report;
use crate::bridge::network::Timing;
use crate::bridge::update::Update;
use crate::bridge::{Bridge, CredentialState};
use crate::cloud::datapoints::Fetcher;
use crate::config::Config;
use crate::mqtt::broker_url;
use crate::mqtt::client::{Client, ClientEvent, QUIET_INFLIGHT};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Time between two progress lines.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// How long one TCP connection attempt to the broker may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between two failed TCP connection attempts.
const RETRY_CONNECT: Duration = Duration::from_secs(1);

/// `count` and the noun, singular or plural ("1 network", "2 networks").
pub fn counted(count: usize, singular: &str, plural: &str) -> String {
    format!("{count} {}", if count == 1 { singular } else { plural })
}

/// Where the broker check stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum BrokerState {
    /// Not answered yet; the last failure, if any.
    Waiting(Option<String>),
    /// The broker accepted the MQTT connection.
    Connected,
}

/// Logs in and reads every network, and connects to the broker, up to `wait`; `progress` gets a
/// line every [`PROGRESS_EVERY`] while either is still pending.
pub async fn run(
    config: &Config,
    wait: Duration,
    progress: &mut dyn FnMut(String),
) -> Result<Report, crate::bridge::runner::StartError> {
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let (tx, mut rx) = mpsc::channel(1024);
    let bridge = Bridge::start_with_sites(
        &config.cloud,
        &config.networks,
        &config.sites,
        tx,
        Timing::default(),
        shutdown.clone(),
    )?;
    let (broker_tx, mut broker) = watch::channel(BrokerState::Waiting(None));
    tokio::spawn(check_broker(config.mqtt.clone(), broker_tx, shutdown.clone()));
    // The login retries on its own; a TCP connection to the service says why it cannot get
    // through (a name not resolved, a connection refused) while it does.
    let (cloud_tx, mut cloud) = watch::channel(None);
    let base = &config.cloud.base_url;
    if let (Some(host), Some(port)) = (base.host_str(), base.port_or_known_default()) {
        let label = format!("cloud {}", crate::mqtt::broker_url::redact_url(base.as_str().trim_end_matches('/')));
        tokio::spawn(reach(label, host.to_string(), port, cloud_tx, shutdown.clone()));
    }
    progress(format!("connecting to the cloud and the broker (giving up after {} s)", wait.as_secs()));
    let mut report = Report::default();
    let start = Instant::now();
    let deadline = start + wait;
    let mut next_progress = start + PROGRESS_EVERY;
    // Each watch is marked seen as it is read, so the wait below wakes only on a new value; a
    // watch whose sender has gone is no longer waited on (its `changed` would be ready forever).
    let mut credentials = bridge.credential_watch();
    let (mut credentials_open, mut broker_open, mut cloud_open) = (true, true, true);
    loop {
        let states = credentials.borrow_and_update().clone();
        let cloud_done = states.iter().all(|s| !s.is_logging_in()) && report.networks.len() >= bridge.networks().len();
        let broker_state = broker.borrow_and_update().clone();
        let cloud_failure = cloud.borrow_and_update().clone();
        let failure = last_failure(&states, cloud_failure.as_deref(), &broker_state);
        if cloud_done && broker_state == BrokerState::Connected {
            break;
        }
        if states.iter().all(|s| matches!(s, CredentialState::Rejected(_))) {
            // Nothing will be read: the problems say why, the broker does not matter.
            report.all_rejected = true;
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            report.problems.push(gave_up(wait, &states, &report, &bridge, &broker_state, failure));
            report.timed_out = true;
            break;
        }
        if now >= next_progress {
            progress(status(now - start, wait, &states, &report, &broker_state, failure));
            next_progress += PROGRESS_EVERY;
        }
        let tick = next_progress.min(deadline);
        tokio::select! {
            update = rx.recv() => match update {
                None => break,
                Some(Update::Network { view, .. }) => {
                    report.networks.insert(view.status.id.clone(), view);
                }
                Some(Update::Problem { message, .. }) => report.problems.push(message),
                Some(_) => {}
            },
            changed = credentials.changed(), if credentials_open => credentials_open = changed.is_ok(),
            changed = broker.changed(), if broker_open => broker_open = changed.is_ok(),
            changed = cloud.changed(), if cloud_open => cloud_open = changed.is_ok(),
            _ = tokio::time::sleep_until(tick) => {}
        }
    }
    if !report.timed_out && !report.all_rejected && config.datapoints.enabled {
        report.datapoint_keys = datapoint_keys(config, &bridge, &report, deadline).await;
    }
    report.sites = bridge
        .sites()
        .into_iter()
        .map(|site| {
            let own = format!("site credentials {}", site.email);
            let networks = site
                .networks
                .into_iter()
                .map(|n| {
                    let via = bridge.network(&n.id).map(|h| h.via).filter(|via| *via != own);
                    super::SiteNetwork { id: n.id, name: n.name, via }
                })
                .collect();
            super::SiteReport { email: site.email, networks }
        })
        .collect();
    Ok(report)
}

/// Every datapoint key each network logged within `datapoints.lookback`, with how many units
/// logged it: one query per network (and its pages), with the bridge's own sessions, until
/// `deadline`. A network whose query fails or runs out of time is left out, with a warning.
async fn datapoint_keys(
    config: &Config,
    bridge: &Bridge,
    report: &Report,
    deadline: Instant,
) -> BTreeMap<String, BTreeMap<String, usize>> {
    let options = crate::bridge::datapoints::fetch_options(&config.datapoints);
    let to = chrono::Utc::now();
    let from = to - chrono::TimeDelta::from_std(config.datapoints.lookback).unwrap_or(chrono::TimeDelta::hours(1));
    let mut out = BTreeMap::new();
    for id in report.networks.keys() {
        let Some(handle) = bridge.network(id) else { continue };
        let fetcher = Fetcher::new(bridge.rest(), &handle.sessions, id, options.clone());
        let mut units: BTreeMap<String, std::collections::BTreeSet<Option<u32>>> = BTreeMap::new();
        let fetch = fetcher.fetch(from, to, |points| {
            for p in points {
                units.entry(p.key).or_default().insert(p.unit);
            }
            std::ops::ControlFlow::Continue(())
        });
        match tokio::time::timeout_at(deadline, fetch).await {
            Ok(Ok(_)) => {
                out.insert(id.clone(), units.into_iter().map(|(k, u)| (k, u.len())).collect());
            }
            Ok(Err(e)) => tracing::warn!(network = %id, error = %e, "could not read the network's datapoints"),
            Err(_) => tracing::warn!(network = %id, "no time left to read the network's datapoints"),
        }
    }
    out
}

/// One progress line: how long so far, what is still pending and its last failure.
fn status(
    elapsed: Duration,
    wait: Duration,
    states: &[CredentialState],
    report: &Report,
    broker: &BrokerState,
    failure: Option<String>,
) -> String {
    let logged_in = states.iter().filter(|s| matches!(s, CredentialState::Running)).count();
    let mut line = format!(
        "waiting ({} s of {} s): logged in with {} of {}, {} read, broker {}",
        elapsed.as_secs(),
        wait.as_secs(),
        logged_in,
        counted(states.len(), "credentials entry", "credentials entries"),
        counted(report.networks.len(), "network", "networks"),
        if *broker == BrokerState::Connected { "connected" } else { "not connected yet" },
    );
    if let Some(cause) = failure {
        line.push_str("; last failure: ");
        line.push_str(&cause);
    }
    line
}

/// The problem recorded when time ran out: what was still pending, and why.
fn gave_up(
    wait: Duration,
    states: &[CredentialState],
    report: &Report,
    bridge: &Bridge,
    broker: &BrokerState,
    failure: Option<String>,
) -> String {
    let mut pending = Vec::new();
    let logging_in = states.iter().filter(|s| s.is_logging_in()).count();
    if logging_in > 0 {
        pending.push(format!("{} not logged in", counted(logging_in, "credentials entry", "credentials entries")));
    }
    let unread = bridge.networks().len().saturating_sub(report.networks.len());
    if unread > 0 {
        pending.push(format!("{} not read", counted(unread, "network", "networks")));
    }
    if matches!(broker, BrokerState::Waiting(_)) {
        pending.push("the broker not connected".into());
    }
    let mut line = format!("gave up after {} s: {}", wait.as_secs(), pending.join(", "));
    if let Some(cause) = failure {
        line.push_str("; cause: ");
        line.push_str(&cause);
    }
    line
}

/// The last failures known: the logins', the cloud's connection's and the broker's.
fn last_failure(states: &[CredentialState], cloud: Option<&str>, broker: &BrokerState) -> Option<String> {
    let mut causes: Vec<String> = states
        .iter()
        .filter_map(|s| match s {
            CredentialState::Retrying(why) => Some(why.clone()),
            _ => None,
        })
        .collect();
    causes.extend(cloud.map(str::to_string));
    if let BrokerState::Waiting(Some(why)) = broker {
        causes.push(why.clone());
    }
    (!causes.is_empty()).then(|| causes.join("; "))
}

/// Tries a TCP connection to `host:port` until one opens (then `failure` is `None`) or
/// `shutdown`; `failure` holds the last attempt's reason, prefixed with `label`.
async fn reach(
    label: String,
    host: String,
    port: u16,
    failure: watch::Sender<Option<String>>,
    shutdown: CancellationToken,
) {
    loop {
        let attempt = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect((host.as_str(), port)));
        let result = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = attempt => r,
        };
        let why = match result {
            Ok(Ok(_)) => {
                failure.send_replace(None);
                return;
            }
            Ok(Err(e)) => crate::config::io_reason(&e),
            Err(_) => format!("no answer to a TCP connection to {host}:{port} within {} s", CONNECT_TIMEOUT.as_secs()),
        };
        failure.send_replace(Some(format!("{label}: {why}")));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(RETRY_CONNECT) => {}
        }
    }
}

/// Connects to the broker like the bridge does (without a last will, with a client id of its
/// own so a running bridge keeps its session), until it is accepted or `shutdown`. A failing TCP
/// connection (name not resolved, refused, unreachable) is reported with the system's reason.
async fn check_broker(
    settings: crate::mqtt::MqttSettings,
    state: watch::Sender<BrokerState>,
    shutdown: CancellationToken,
) {
    let shown = broker_url::redact_url(&settings.url);
    let Some((host, port, _)) = broker_url::broker_address(&settings.url) else {
        state.send_replace(BrokerState::Waiting(Some(format!("broker {shown}: not an mqtt:// or mqtts:// URL"))));
        return;
    };
    let fail = |why: String| BrokerState::Waiting(Some(format!("broker {shown}: {why}")));
    let (tcp_tx, mut tcp) = watch::channel(None);
    tokio::spawn(reach(format!("broker {shown}"), host, port, tcp_tx, shutdown.clone()));
    // The TCP connection first: its error says what is wrong (DNS, refused, unreachable).
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = tcp.changed() => if changed.is_err() { break },
        }
        state.send_replace(BrokerState::Waiting(tcp.borrow().clone()));
    }
    let client_id = format!("{}-check", settings.client_id);
    let (client, mut events, _task) = match Client::start(&settings, &client_id, None, QUIET_INFLIGHT) {
        Ok(started) => started,
        Err(e) => {
            state.send_replace(fail(e.to_string()));
            return;
        }
    };
    state.send_replace(fail(
        "the TCP connection is open, but the broker has not accepted the MQTT connection (see the warnings above)"
            .into(),
    ));
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => None,
            e = events.recv() => e,
        };
        match event {
            Some(ClientEvent::Connected) => {
                state.send_replace(BrokerState::Connected);
                let _ = client.disconnect().await;
                return;
            }
            Some(_) => {}
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn counts_take_the_singular_for_one_only() {
        assert_eq!(counted(1, "network", "networks"), "1 network");
        assert_eq!(counted(2, "network", "networks"), "2 networks");
        assert_eq!(counted(0, "credentials entry", "credentials entries"), "0 credentials entries");
    }
}
