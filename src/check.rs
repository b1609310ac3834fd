//! `casambi2mqtt check`: validates the configuration, logs in, and lists what the bridge would
//! export — networks, units with their detected capabilities, scenes, groups, and the Home
//! Assistant entities — without publishing anything.

use crate::bridge::network::Timing;
use crate::bridge::state::NetworkView;
use crate::bridge::update::Update;
use crate::bridge::{Bridge, CredentialState};
use crate::config::Config;
use crate::mqtt::caps::Caps;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What `check` found.
#[derive(Debug, Default)]
pub struct Report {
    /// Networks by id.
    pub networks: BTreeMap<String, Arc<NetworkView>>,
    /// Problems (rejected credentials, inaccessible networks, unreachable networks).
    pub problems: Vec<String>,
}

impl Report {
    /// `true` when every credentials entry worked and at least one network was read.
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && !self.networks.is_empty()
    }
}

/// Logs in and reads every network (up to `wait`).
pub async fn run(config: &Config, wait: Duration) -> Result<Report, crate::bridge::runner::StartError> {
    let shutdown = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(1024);
    let bridge = Bridge::start(&config.cloud, &config.networks, tx, Timing::default(), shutdown.clone())?;
    let mut report = Report::default();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let states = bridge.credential_states();
        let settled = states.iter().all(|s| !matches!(s, CredentialState::Starting));
        let expected = bridge.networks().len();
        if settled && report.networks.len() >= expected {
            break;
        }
        let next = tokio::time::timeout_at(deadline, rx.recv()).await;
        match next {
            Err(_) => {
                report.problems.push(format!("gave up waiting after {} s", wait.as_secs()));
                break;
            }
            Ok(None) => break,
            Ok(Some(Update::Network { view, .. })) => {
                report.networks.insert(view.status.id.clone(), view);
            }
            Ok(Some(Update::Problem { message, .. })) => report.problems.push(message),
            Ok(Some(_)) => {}
        }
    }
    shutdown.cancel();
    Ok(report)
}

/// How many Home Assistant entities a network gets: the unit entities, plus the network's dim
/// level and connectivity, a switch per scene and a light per group.
pub fn entity_count(view: &NetworkView) -> usize {
    let units: usize = view
        .units
        .values()
        .map(|u| unit_entities(&Caps::of(u, u.fixture_id.and_then(|f| view.fixtures.get(&f)).map(|f| &**f))).len())
        .sum();
    units + 2 + view.scenes.len() + view.groups.len()
}

/// The HA entities a unit gets, in words.
fn unit_entities(caps: &Caps) -> Vec<String> {
    let mut out = Vec::new();
    if caps.is_light() {
        out.push(format!("light ({})", caps.color_modes().join(", ")));
    }
    if caps.presence {
        out.push("binary_sensor (occupancy)".into());
    }
    if caps.lux {
        out.push("sensor (illuminance, lx)".into());
    }
    if caps.switch {
        out.push("event (switch)".into());
    }
    out
}

fn capabilities(caps: &Caps) -> String {
    let mut words = Vec::new();
    for (on, word) in [
        (caps.dimmer, "dimmer"),
        (caps.onoff, "on/off"),
        (caps.cct, "tunable white"),
        (caps.color, "colour"),
        (caps.presence, "presence"),
        (caps.lux, "lux"),
        (caps.switch, "switch"),
    ] {
        if on {
            words.push(word.to_string());
        }
    }
    if let Some((min, max)) = caps.kelvin {
        words.push(format!("{min}-{max} K"));
    }
    if words.is_empty() { "none".into() } else { words.join(", ") }
}

/// Renders the report for people.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for view in report.networks.values() {
        let s = &view.status;
        let _ = writeln!(
            out,
            "network {} ({}), revision {:?}, gateway {}",
            s.name,
            s.id,
            s.revision.unwrap_or(0),
            if s.gateway_online { "online" } else { "offline" }
        );
        let _ = writeln!(
            out,
            "  HA: number (dim level), binary_sensor (cloud connectivity), {} scene switch(es), {} group light(s)",
            view.scenes.len(),
            view.groups.len()
        );
        for u in view.units.values() {
            let fixture = u.fixture_id.and_then(|f| view.fixtures.get(&f));
            let caps = Caps::of(u, fixture.map(|f| &**f));
            let model = fixture
                .map(|f| format!("{} {}", f.vendor.as_deref().unwrap_or("?"), f.model.as_deref().unwrap_or("?")))
                .unwrap_or_else(|| "unknown fixture".into());
            let _ = writeln!(
                out,
                "  unit {:>4} {:<28} {:<14} {:<24} {:<7} [{}] -> {}",
                u.id,
                u.name.as_deref().unwrap_or("?"),
                u.unit_type.as_deref().unwrap_or("?"),
                model,
                if u.online == Some(false) { "offline" } else { "online" },
                capabilities(&caps),
                {
                    let e = unit_entities(&caps);
                    if e.is_empty() { "no entity".to_string() } else { e.join(" + ") }
                }
            );
        }
        for sc in view.scenes.values() {
            let _ = writeln!(out, "  scene {:>3} {} ({} units)", sc.id, sc.name, sc.units.len());
        }
        for g in view.groups.values() {
            let _ = writeln!(out, "  group {:>3} {} (units {:?})", g.id, g.name, g.units);
        }
    }
    for p in &report.problems {
        let _ = writeln!(out, "problem: {p}");
    }
    out
}
