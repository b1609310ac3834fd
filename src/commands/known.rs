//! What the command layer knows of each network: unit states and capabilities, the last non-zero
//! level of each unit (what `ON` restores), group members, scenes and the active scenes.
//!
//! It is fed from the same [`Update`] stream the MQTT publisher mirrors (see
//! [`super::CommandDispatcher::observe`]); nothing here is published. Commands need it for
//! capability checks, `TOGGLE` and `ON` without a brightness.
//!
//! Besides what the cloud reported, it remembers for a short time what a sent command should have
//! done (`expected`), so two `TOGGLE`s in quick succession toggle twice instead of both reading
//! the state from before the first one's event came back. This is never published: the published
//! state always comes from the cloud.

use crate::bridge::caps::Caps;
use crate::bridge::state::{NetworkStatus, NetworkView};
use crate::bridge::update::Update;
use crate::cloud::model::{Control, Fixture, UnitState};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use tokio::time::Instant;

/// The level `ON` restores for a unit never seen at a non-zero level (what public clients send).
pub const DEFAULT_ON_LEVEL: f64 = 1.0;

/// Which thing of a network a command is for (an attribute topic shares its unit's key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A unit.
    Unit(u32),
    /// A group.
    Group(u32),
    /// A scene.
    Scene(u32),
    /// The network dim level.
    Network,
}

/// One unit as a command sees it, made when a command asks ([`NetworkInfo::unit`]).
#[derive(Debug, Clone)]
pub struct UnitInfo {
    /// The merged state last reported.
    pub state: Arc<UnitState>,
    /// Capabilities (controls merged with the fixture's).
    pub caps: Caps,
    /// The last Dimmer level above 0 seen.
    pub last_level: f64,
}

/// What is kept of one unit between commands: its state and the level `ON` restores. Its
/// capabilities are worked out from them when a command asks: kept, they would make every unit's
/// map slot 40 bytes instead of 16, on every unit of a big site, for the rare command.
#[derive(Debug, Clone)]
pub struct KnownUnit {
    state: Arc<UnitState>,
    last_level: f64,
}

impl KnownUnit {
    fn new(state: Arc<UnitState>, last_level: Option<f64>) -> KnownUnit {
        let last_level = dimmer(&state).filter(|v| *v > 0.0).or(last_level).unwrap_or(DEFAULT_ON_LEVEL);
        KnownUnit { state, last_level }
    }

    /// Whether the unit is on as reported: `on` and its Dimmer/OnOff (if any) above 0 (docs/mqtt.md).
    pub fn is_on(&self) -> bool {
        self.state.on == Some(true)
            && !self.state.controls.iter().flatten().any(|c| match c {
                Control::Dimmer(d) | Control::OnOff(d) => d.value <= 0.0,
                _ => false,
            })
    }
}

impl UnitInfo {
    /// The name for messages (the id when the name is unknown). Made when asked, from the state:
    /// a copy per unit would be kept for the rare refused command (25,000 of them on a big site).
    pub fn name(&self) -> String {
        self.state.name.as_deref().map_or_else(|| self.state.id.to_string(), str::to_string)
    }
}

/// The first Dimmer's value.
fn dimmer(unit: &UnitState) -> Option<f64> {
    unit.controls.iter().flatten().find_map(|c| match c {
        Control::Dimmer(d) => Some(d.value),
        _ => None,
    })
}

/// One network.
#[derive(Debug, Clone, Default)]
pub struct NetworkInfo {
    /// Network name for messages.
    pub name: String,
    /// Units by id.
    pub units: BTreeMap<u32, KnownUnit>,
    /// Group members by group id.
    pub groups: BTreeMap<u32, Vec<u32>>,
    /// Scene ids.
    pub scenes: BTreeSet<u32>,
    /// Active scene ids (from REST).
    pub active_scenes: BTreeSet<u32>,
    /// The network's gateway is reported offline: the cloud takes commands and nothing happens.
    pub gateway_offline: bool,
    fixtures: BTreeMap<u32, Arc<Fixture>>,
    /// On/off a sent command should have caused, and when it was sent.
    expected: HashMap<Key, (bool, Instant)>,
}

impl NetworkInfo {
    /// Unit `id` with its capabilities (its controls merged with its fixture's).
    pub fn unit(&self, id: u32) -> Option<UnitInfo> {
        let known = self.units.get(&id)?;
        let state = known.state.clone();
        let fixture = state.fixture_id.get().and_then(|f| self.fixtures.get(&f));
        Some(UnitInfo { caps: Caps::of(&state, fixture.map(|f| &**f)), state, last_level: known.last_level })
    }

    /// Whether `key` is on now: what a command sent within `memory` should have done, else what
    /// the cloud reported. A group is on when any member is; a scene when it is active.
    pub fn is_on(&self, key: Key, memory: std::time::Duration) -> bool {
        if let Some((on, at)) = self.expected.get(&key)
            && at.elapsed() < memory
        {
            return *on;
        }
        match key {
            Key::Unit(id) => self.units.get(&id).is_some_and(KnownUnit::is_on),
            Key::Group(id) => {
                self.groups.get(&id).is_some_and(|members| members.iter().any(|m| self.is_on(Key::Unit(*m), memory)))
            }
            Key::Scene(id) => self.active_scenes.contains(&id),
            Key::Network => true,
        }
    }

    /// Records what a sent command should do (for `TOGGLE` until the cloud's answer is in).
    pub fn expect(&mut self, key: Key, on: bool) {
        self.expected.insert(key, (on, Instant::now()));
    }
}

/// Every network's knowledge.
#[derive(Debug, Default)]
pub struct Known {
    networks: HashMap<String, NetworkInfo>,
}

impl Known {
    /// The knowledge of one network.
    pub fn network(&self, id: &str) -> Option<&NetworkInfo> {
        self.networks.get(id)
    }

    /// Mutable knowledge of one network.
    pub fn network_mut(&mut self, id: &str) -> Option<&mut NetworkInfo> {
        self.networks.get_mut(id)
    }

    /// Takes in one update of the bridge core.
    pub fn observe(&mut self, update: &Update) {
        match update {
            Update::Network { view, .. } => self.observe_view(view),
            Update::Status { status, .. } => self.observe_status(status),
            Update::Unit { network, unit } => self.observe_unit(network, unit.clone()),
            Update::Event { .. }
            | Update::Photos { .. }
            | Update::Datapoints { .. }
            | Update::Problem { .. }
            | Update::Rejected { .. } => {}
        }
    }

    /// Replaces a network's knowledge with a full view, keeping the last levels of its units.
    pub fn observe_view(&mut self, view: &NetworkView) {
        let id = view.status.id.clone();
        let old = self.networks.remove(&id).unwrap_or_default();
        let units = view
            .units
            .iter()
            .map(|(uid, state)| {
                let last = old.units.get(uid).map(|u| u.last_level);
                (*uid, KnownUnit::new(state.clone(), last))
            })
            .collect();
        let info = NetworkInfo {
            name: view.status.name.clone(),
            units,
            groups: view.groups.iter().map(|(g, info)| (*g, info.units.clone())).collect(),
            scenes: view.scenes.keys().copied().collect(),
            active_scenes: view.status.active_scenes.clone(),
            gateway_offline: !view.status.gateway_online,
            fixtures: view.fixtures.clone(),
            expected: old.expected,
        };
        self.networks.insert(id, info);
    }

    /// Takes in network-level fields (name, active scenes).
    pub fn observe_status(&mut self, status: &NetworkStatus) {
        let net = self.networks.entry(status.id.clone()).or_default();
        net.name = status.name.clone();
        net.active_scenes = status.active_scenes.clone();
        net.gateway_offline = !status.gateway_online;
    }

    /// Takes in one unit's merged state; tracks its last non-zero level.
    pub fn observe_unit(&mut self, network: &str, unit: Arc<UnitState>) {
        // A unit's change names a network already known but for the first: no key to make.
        let net = match self.networks.get_mut(network) {
            Some(net) => net,
            None => self.networks.entry(network.to_string()).or_default(),
        };
        let last = net.units.get(&unit.id).map(|u| u.last_level);
        net.units.insert(unit.id, KnownUnit::new(unit, last));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(json: &str) -> Arc<UnitState> {
        Arc::new(serde_json::from_str(json).unwrap())
    }

    #[test]
    fn last_level_survives_off_and_defaults_to_full() {
        let mut k = Known::default();
        k.observe_unit("n", unit(r#"{"id":1,"on":true,"controls":[{"type":"Dimmer","value":0.3}]}"#));
        k.observe_unit("n", unit(r#"{"id":1,"on":false,"controls":[{"type":"Dimmer","value":0}]}"#));
        let u = &k.network("n").unwrap().units[&1];
        assert_eq!(u.last_level, 0.3);
        assert!(!u.is_on());
        k.observe_unit("n", unit(r#"{"id":2,"on":false,"controls":[{"type":"Dimmer","value":0}]}"#));
        assert_eq!(k.network("n").unwrap().units[&2].last_level, DEFAULT_ON_LEVEL);
    }

    #[test]
    fn expectations_win_for_a_while() {
        let mut k = Known::default();
        k.observe_unit("n", unit(r#"{"id":1,"on":true,"controls":[{"type":"Dimmer","value":0.3}]}"#));
        let net = k.network_mut("n").unwrap();
        let memory = std::time::Duration::from_secs(1);
        assert!(net.is_on(Key::Unit(1), memory));
        net.expect(Key::Unit(1), false);
        assert!(!net.is_on(Key::Unit(1), memory));
        assert!(net.is_on(Key::Unit(1), std::time::Duration::ZERO));
    }
}
