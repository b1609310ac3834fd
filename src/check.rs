//! `casambi2mqtt check`: validates the configuration, logs in, connects to the broker, and lists
//! what the bridge would export — networks, units with their detected capabilities, scenes,
//! groups, and the Home Assistant entities — without publishing anything. The waiting, with its
//! progress lines and the cause when time runs out, is in the `wait` module.

use crate::bridge::caps::Caps;
use crate::bridge::state::NetworkView;
use crate::mqtt::render::Renderer;
use crate::mqtt::unit_data;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

mod wait;

pub use wait::{counted, run};

/// What `check` found.
#[derive(Debug, Default)]
pub struct Report {
    /// Networks by id.
    pub networks: BTreeMap<String, Arc<NetworkView>>,
    /// Problems (rejected credentials, inaccessible networks, unreachable networks); when time
    /// ran out, the last one says what was pending and why.
    pub problems: Vec<String>,
    /// Every credentials entry was rejected for good (a configuration fault).
    pub all_rejected: bool,
    /// Time ran out before the cloud or the broker answered.
    pub timed_out: bool,
    /// Each `sites:` entry that logged in, with its networks.
    pub sites: Vec<SiteReport>,
    /// Per network id: each datapoint key logged within `datapoints.lookback`, with how many
    /// units logged it (empty when datapoints are off).
    pub datapoint_keys: BTreeMap<String, BTreeMap<String, usize>>,
}

/// A site login and the networks of its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteReport {
    /// Login e-mail of the site user.
    pub email: String,
    /// The networks its user session opens (filtered by the entry's `ids`).
    pub networks: Vec<SiteNetwork>,
}

/// One network of a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteNetwork {
    /// Network id.
    pub id: String,
    /// Network name.
    pub name: String,
    /// The other credentials entry that bridges it (a `networks:` entry wins), if any.
    pub via: Option<String>,
}

impl Report {
    /// `true` when every credentials entry worked and at least one network was read.
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && !self.networks.is_empty()
    }
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

/// The datapoint keys of a network: those with a sensor, those exported live, and those the
/// bridge publishes raw (docs/datapoints.md#home-assistant), which `datapoints.sensors` can turn
/// into sensors.
fn datapoint_lines(out: &mut String, keys: &BTreeMap<String, usize>, renderer: &Renderer) {
    let named = |k: &String, n: &usize| format!("{k} ({})", counted(*n, "unit", "units"));
    let unknown = unit_data::unknown_keys(keys.keys().map(String::as_str), &renderer.data_sensors);
    let (raw, known): (Vec<_>, Vec<_>) = keys.iter().partition(|(k, _)| unknown.contains(*k));
    let known: Vec<String> = known.into_iter().map(|(k, n)| named(k, n)).collect();
    let raw: Vec<String> = raw.into_iter().map(|(k, n)| named(k, n)).collect();
    if keys.is_empty() {
        let _ = writeln!(out, "  datapoints: none logged within datapoints.lookback");
    }
    if !known.is_empty() {
        let _ = writeln!(out, "  datapoints with a sensor or a live value: {}", known.join(", "));
    }
    if !raw.is_empty() {
        let _ =
            writeln!(out, "  datapoints published raw (give them a sensor in datapoints.sensors): {}", raw.join(", "));
    }
}

/// The datapoint sensors Home Assistant gets for a network's logged keys: one per unit that
/// logged a key with a sensor.
fn datapoint_sensor_count(keys: &BTreeMap<String, usize>, renderer: &Renderer) -> usize {
    keys.iter().filter(|(k, _)| unit_data::has_sensor(k, &renderer.data_sensors)).map(|(_, n)| n).sum()
}

/// Renders the report for people; `renderer` counts the Home Assistant entities as discovery
/// publishes them.
pub fn render(report: &Report, renderer: &Renderer) -> String {
    let mut out = String::new();
    for site in &report.sites {
        let _ = writeln!(out, "site {}: {}", site.email, counted(site.networks.len(), "network", "networks"));
        for n in &site.networks {
            let via = n.via.as_ref().map(|v| format!(", bridged with {v}")).unwrap_or_default();
            let _ = writeln!(out, "  network {} ({}){via}", n.name, n.id);
        }
    }
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
            "  HA: number (dim level), binary_sensor (cloud connectivity), {}, {}",
            counted(view.scenes.len(), "scene switch", "scene switches"),
            counted(view.groups.len(), "group light", "group lights")
        );
        for u in view.units.values() {
            let fixture = u.fixture_id.get().and_then(|f| view.fixtures.get(&f));
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
            let _ = writeln!(out, "  scene {:>3} {} ({})", sc.id, sc.name, counted(sc.units.len(), "unit", "units"));
        }
        for g in view.groups.values() {
            let _ = writeln!(out, "  group {:>3} {} (units {:?})", g.id, g.name, g.units);
        }
        if let Some(keys) = report.datapoint_keys.get(&s.id) {
            datapoint_lines(&mut out, keys, renderer);
        }
    }
    if !report.networks.is_empty() {
        let networks: usize = report.networks.values().map(|v| renderer.view_entity_count(v)).sum::<usize>()
            + report.datapoint_keys.values().map(|keys| datapoint_sensor_count(keys, renderer)).sum::<usize>();
        let bridge = renderer.bridge_entity_count();
        let _ = writeln!(
            out,
            "Home Assistant: {} ({} of the bridge itself), {}, {}",
            counted(bridge + networks, "entity", "entities"),
            bridge,
            counted(report.networks.len(), "network", "networks"),
            counted(report.networks.values().map(|v| v.units.len()).sum(), "unit", "units"),
        );
    }
    for p in &report.problems {
        let _ = writeln!(out, "problem: {p}");
    }
    out
}
