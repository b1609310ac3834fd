//! The simulator's truth: the live state of every network, unit, scene and group, the mutations
//! that control messages, activity and faults apply to it, and the events those mutations emit.
//!
//! Every mutation runs under one lock and emits its events while still holding it, so the order
//! in which wires see events is the order in which the truth changed, and a wire that subscribes
//! and renders its initial burst under the same lock misses nothing (see [`World::open_view`]).

use super::render;
use super::site::{self, Site};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::broadcast;

/// How many events a network buffers for slow wires before they lag, unless
/// [`super::SimConfig::event_buffer`] says otherwise. A lagging wire resends the whole network,
/// so its client ends up with the current truth, but the changes it skipped never reach it.
pub const EVENT_BUFFER: usize = 8192;

/// One event of a network, as the WebSocket wires need it.
#[derive(Debug, Clone)]
pub enum WorldEvent {
    /// A unit's state changed. `body` is the complete `unitChanged` JSON object without `wire`
    /// and `method`, rendered when the change happened.
    UnitChanged {
        /// Unit id.
        unit: i64,
        /// Rendered event body (a JSON object).
        body: Arc<str>,
    },
    /// The gateway went away (`false`) or came back (`true`).
    PeerChanged {
        /// Gateway presence.
        online: bool,
    },
    /// The persistent configuration changed (revision bumped).
    NetworkUpdated,
}

/// Why a control message was refused; the channel answers with the matching `wireStatus`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// A value has the wrong JSON type (e.g. a string where a number belongs).
    #[error("invalidValueType: {0}")]
    InvalidValueType(String),
    /// The message is shaped wrongly, names an unknown control or target, or a value is out of range.
    #[error("invalidData: {0}")]
    InvalidData(String),
}

/// The live state of one unit.
#[derive(Debug, Clone)]
pub struct UnitTruth {
    /// Static description plus the mutable `online`, `on` and `controls`.
    pub def: site::Unit,
    /// Scene that last set this unit (0 = none).
    pub active_scene_id: i64,
    /// Last non-zero Dimmer level, restored by `OnOff 1`.
    pub last_level: f64,
}

/// The live state of one network.
#[derive(Debug)]
pub struct NetworkTruth {
    /// Static description (units, scenes and groups below supersede its lists).
    pub def: site::Network,
    /// Units by id.
    pub units: BTreeMap<i64, UnitTruth>,
    /// Scenes, in site order.
    pub scenes: Vec<site::Scene>,
    /// Groups, in site order.
    pub groups: Vec<site::Group>,
    /// Network dim level (0..1).
    pub dim_level: f64,
    /// Active scene ids.
    pub active_scenes: BTreeSet<i64>,
    /// Whether the gateway is online.
    pub gateway_online: bool,
    /// Configuration revision.
    pub revision: i64,
    events: broadcast::Sender<WorldEvent>,
}

/// All networks and the fixture catalogue.
#[derive(Debug)]
pub struct World {
    /// Fixture catalogue by id.
    pub fixtures: BTreeMap<i64, site::Fixture>,
    /// Networks by id.
    pub networks: BTreeMap<String, NetworkTruth>,
}

impl World {
    /// Builds the truth from a site, each network buffering [`EVENT_BUFFER`] events.
    pub fn new(site: &Site) -> World {
        World::with_event_buffer(site, EVENT_BUFFER)
    }

    /// Builds the truth from a site, each network buffering `event_buffer` events (at least one)
    /// for wires that fall behind.
    pub fn with_event_buffer(site: &Site, event_buffer: usize) -> World {
        let fixtures = site.fixtures.iter().map(|f| (f.id, f.clone())).collect();
        let networks = site
            .networks
            .iter()
            .map(|n| {
                let units = n
                    .units
                    .iter()
                    .map(|u| {
                        let last_level =
                            control_value(&u.controls, "Dimmer", "value").filter(|v| *v > 0.0).unwrap_or(1.0);
                        (u.id, UnitTruth { def: u.clone(), active_scene_id: 0, last_level })
                    })
                    .collect();
                let active_scenes = n.scenes.iter().filter(|s| s.active).map(|s| s.id).collect();
                let (events, _) = broadcast::channel(event_buffer.max(1));
                let truth = NetworkTruth {
                    def: n.clone(),
                    units,
                    scenes: n.scenes.clone(),
                    groups: n.groups.clone(),
                    dim_level: n.dim_level,
                    active_scenes,
                    gateway_online: n.gateway_online,
                    revision: n.revision,
                    events,
                };
                (n.id.clone(), truth)
            })
            .collect();
        World { fixtures, networks }
    }

    /// Subscribes to a network's events and renders its initial `unitChanged` burst, atomically:
    /// every change after the burst arrives on the receiver, none before it does.
    pub fn open_view(&self, network: &str) -> Option<(Vec<Arc<str>>, broadcast::Receiver<WorldEvent>)> {
        let net = self.networks.get(network)?;
        let rx = net.events.subscribe();
        let burst = net.units.values().map(|u| render::unit_event(net, u)).collect();
        Some((burst, rx))
    }

    /// Looks a network up mutably, or says which id is unknown.
    fn network_mut(&mut self, network: &str) -> Result<&mut NetworkTruth, ControlError> {
        self.networks.get_mut(network).ok_or_else(|| ControlError::InvalidData(format!("unknown network {network}")))
    }

    /// Applies `targetControls` to one unit (`controlUnit`).
    pub fn control_unit(&mut self, network: &str, unit: i64, targets: &Value) -> Result<(), ControlError> {
        self.control_units(network, &[unit], targets)
    }

    /// Applies `targetControls` to several units (`controlUnits`). Every unit id and every target
    /// is checked before anything changes, so a refused message changes nothing.
    pub fn control_units(&mut self, network: &str, units: &[i64], targets: &Value) -> Result<(), ControlError> {
        let targets =
            targets.as_object().ok_or_else(|| ControlError::InvalidData("targetControls must be an object".into()))?;
        let net = self.network_mut(network)?;
        for id in units {
            if !net.units.contains_key(id) {
                return Err(ControlError::InvalidData(format!("unknown unit {id}")));
            }
        }
        let parsed = parse_targets(targets)?;
        for id in units {
            net.apply_targets(*id, &parsed, SceneEffect::Leave);
        }
        Ok(())
    }

    /// Activates (`level` > 0, scaling each unit's scene level) or deactivates a scene.
    pub fn control_scene(&mut self, network: &str, scene: i64, level: f64) -> Result<(), ControlError> {
        check_level(level)?;
        let net = self.network_mut(network)?;
        let def = net
            .scenes
            .iter()
            .find(|s| s.id == scene)
            .cloned()
            .ok_or_else(|| ControlError::InvalidData(format!("unknown scene {scene}")))?;
        if !net.gateway_online {
            return Ok(());
        }
        if level > 0.0 {
            net.active_scenes.insert(scene);
            for member in &def.units {
                // One event per unit: its level and its scene change together.
                let targets = [Target::Dimmer(member.level * level)];
                net.apply_targets(member.id, &targets, SceneEffect::Join(scene));
            }
        } else {
            net.active_scenes.remove(&scene);
            let members: Vec<i64> = def.units.iter().map(|m| m.id).collect();
            for id in members {
                if net.units.get(&id).is_some_and(|u| u.active_scene_id == scene) {
                    net.apply_targets(id, &[Target::Dimmer(0.0)], SceneEffect::Join(0));
                    // An unreachable unit is not switched but still leaves the scene.
                    if let Some(u) = net.units.get_mut(&id).filter(|u| u.active_scene_id == scene) {
                        u.active_scene_id = 0;
                        net.emit_unit(id);
                    }
                }
            }
        }
        Ok(())
    }

    /// Sets every member of a group to `level` (`controlGroup`).
    pub fn control_group(&mut self, network: &str, group: i64, level: f64) -> Result<(), ControlError> {
        check_level(level)?;
        let net = self.network_mut(network)?;
        let members = net
            .groups
            .iter()
            .find(|g| g.id == group)
            .map(|g| g.units.clone())
            .ok_or_else(|| ControlError::InvalidData(format!("unknown group {group}")))?;
        for id in members {
            net.apply_targets(id, &[Target::Dimmer(level)], SceneEffect::Leave);
        }
        Ok(())
    }

    /// Sets the network dim level (`controlNetwork`); every unit's `dimLevel` follows.
    pub fn control_network(&mut self, network: &str, level: f64) -> Result<(), ControlError> {
        check_level(level)?;
        let net = self.network_mut(network)?;
        if !net.gateway_online || (net.dim_level - level).abs() < f64::EPSILON {
            return Ok(());
        }
        net.dim_level = level;
        let ids: Vec<i64> = net.units.iter().filter(|(_, u)| u.def.online && u.def.on).map(|(id, _)| *id).collect();
        for id in ids {
            net.emit_unit(id);
        }
        Ok(())
    }

    /// Takes the gateway away or brings it back. Coming back resends every unit, as the real
    /// service does after a gateway reconnects.
    pub fn set_gateway(&mut self, network: &str, online: bool) -> Result<(), ControlError> {
        let net = self.network_mut(network)?;
        if net.gateway_online == online {
            return Ok(());
        }
        net.gateway_online = online;
        net.send(WorldEvent::PeerChanged { online });
        if online {
            let ids: Vec<i64> = net.units.keys().copied().collect();
            for id in ids {
                net.emit_unit(id);
            }
        }
        Ok(())
    }

    /// Overwrites parts of a unit's state (fault injection and activity): `online`, `on`, and
    /// controls merged by type (`{"type":"Lux","value":12}` updates the Lux control's fields).
    pub fn set_unit_state(
        &mut self,
        network: &str,
        unit: i64,
        online: Option<bool>,
        on: Option<bool>,
        controls: &[Value],
    ) -> Result<(), ControlError> {
        let net = self.network_mut(network)?;
        let u = net.units.get_mut(&unit).ok_or_else(|| ControlError::InvalidData(format!("unknown unit {unit}")))?;
        // The body is rendered once, after the change, and only when the change shows in it: a
        // second rendering before it (to compare the texts) was ~8 % of the end-to-end
        // benchmark's own CPU per event, taken from the machine the bridge is measured on.
        // `on` and the controls show only while the unit is reachable; nothing else this call
        // sets is in the body.
        let reachable_before = u.def.online && net.gateway_online;
        let mut shown_changed = false;
        if let Some(online) = online {
            u.def.online = online;
        }
        if let Some(on) = on {
            shown_changed |= u.def.on != on;
            u.def.on = on;
        }
        for patch in controls {
            let Some(kind) = patch.get("type").and_then(Value::as_str) else {
                return Err(ControlError::InvalidData("control without type".into()));
            };
            match u.def.controls.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(kind)) {
                Some(existing) => {
                    if let (Some(dst), Some(src)) = (existing.as_object_mut(), patch.as_object()) {
                        for (k, v) in src {
                            shown_changed |= dst.insert(k.clone(), v.clone()).as_ref() != Some(v);
                        }
                    }
                }
                None => {
                    u.def.controls.push(patch.clone());
                    shown_changed = true;
                }
            }
        }
        if let Some(level) = control_value(&u.def.controls, "Dimmer", "value").filter(|v| *v > 0.0) {
            u.last_level = level;
        }
        let reachable_after = u.def.online && net.gateway_online;
        if reachable_before != reachable_after || (reachable_after && shown_changed) {
            let body = render::unit_event(net_view(&net.def, net.dim_level, net.gateway_online), u);
            net.send(WorldEvent::UnitChanged { unit, body });
        }
        Ok(())
    }

    /// Adds a unit (configuration change: revision bump and `networkUpdated`).
    pub fn add_unit(&mut self, network: &str, unit: site::Unit) -> Result<(), ControlError> {
        if !self.fixtures.contains_key(&unit.fixture) {
            return Err(ControlError::InvalidData(format!("unknown fixture {}", unit.fixture)));
        }
        let net = self.network_mut(network)?;
        if net.units.contains_key(&unit.id) {
            return Err(ControlError::InvalidData(format!("unit {} exists", unit.id)));
        }
        let id = unit.id;
        net.units.insert(id, UnitTruth { def: unit, active_scene_id: 0, last_level: 1.0 });
        net.config_changed();
        net.emit_unit(id);
        Ok(())
    }

    /// Removes a unit and its scene and group memberships (revision bump and `networkUpdated`).
    pub fn remove_unit(&mut self, network: &str, unit: i64) -> Result<(), ControlError> {
        let net = self.network_mut(network)?;
        if net.units.remove(&unit).is_none() {
            return Err(ControlError::InvalidData(format!("unknown unit {unit}")));
        }
        for scene in &mut net.scenes {
            scene.units.retain(|m| m.id != unit);
        }
        for group in &mut net.groups {
            group.units.retain(|m| *m != unit);
        }
        net.config_changed();
        Ok(())
    }

    /// Replaces a network's gallery (configuration change: revision bump and `networkUpdated`).
    pub fn set_photos(&mut self, network: &str, photos: Vec<site::Photo>) -> Result<(), ControlError> {
        let net = self.network_mut(network)?;
        net.def.photos = photos;
        net.config_changed();
        Ok(())
    }

    /// Renames a unit, scene or group (`kind` = `unit` | `scene` | `group`), bumping the revision.
    pub fn rename(&mut self, network: &str, kind: &str, id: i64, name: &str) -> Result<(), ControlError> {
        let net = self.network_mut(network)?;
        let slot = match kind {
            "unit" => net.units.get_mut(&id).map(|u| &mut u.def.name),
            "scene" => net.scenes.iter_mut().find(|s| s.id == id).map(|s| &mut s.name),
            "group" => net.groups.iter_mut().find(|g| g.id == id).map(|g| &mut g.name),
            other => return Err(ControlError::InvalidData(format!("cannot rename a {other}"))),
        };
        let slot = slot.ok_or_else(|| ControlError::InvalidData(format!("unknown {kind} {id}")))?;
        *slot = name.to_string();
        net.config_changed();
        if kind == "unit" {
            net.emit_unit(id);
        }
        Ok(())
    }
}

/// The network fields a rendered unit depends on, borrowed apart from the units map so a unit can
/// be rendered while it is mutably borrowed.
pub struct NetView<'a> {
    /// Borrow marker: a view never outlives the network it was taken from.
    _net: std::marker::PhantomData<&'a NetworkTruth>,
    /// Network dim level.
    pub dim_level: f64,
    /// Gateway presence.
    pub gateway_online: bool,
}

fn net_view<'a>(_def: &'a site::Network, dim_level: f64, gateway_online: bool) -> NetView<'a> {
    NetView { _net: std::marker::PhantomData, dim_level, gateway_online }
}

impl<'a> From<&'a NetworkTruth> for NetView<'a> {
    fn from(net: &'a NetworkTruth) -> Self {
        net_view(&net.def, net.dim_level, net.gateway_online)
    }
}

impl NetworkTruth {
    fn send(&self, event: WorldEvent) {
        // No receiver (no wire open) is normal: the event only matters to open wires.
        let _ = self.events.send(event);
    }

    /// Renders and emits a unit's current state.
    fn emit_unit(&self, id: i64) {
        if let Some(u) = self.units.get(&id) {
            self.send(WorldEvent::UnitChanged { unit: id, body: render::unit_event(self, u) });
        }
    }

    fn config_changed(&mut self) {
        self.revision += 1;
        self.send(WorldEvent::NetworkUpdated);
    }

    /// Applies parsed targets to one unit and emits one `unitChanged` when its state changed.
    /// `scene` says what happens to the unit's active scene.
    fn apply_targets(&mut self, id: i64, targets: &[Target], scene: SceneEffect) {
        if !self.gateway_online {
            return;
        }
        let view = net_view(&self.def, self.dim_level, self.gateway_online);
        let Some(u) = self.units.get_mut(&id) else { return };
        if !u.def.online {
            return;
        }
        let before = render::unit_event(view, u);
        for target in targets {
            target.apply(u);
        }
        let mut left_scene = None;
        match scene {
            SceneEffect::Leave if u.active_scene_id != 0 => {
                left_scene = Some(u.active_scene_id);
                u.active_scene_id = 0;
            }
            SceneEffect::Leave => {}
            SceneEffect::Join(s) => u.active_scene_id = s,
        }
        let after = render::unit_event(net_view(&self.def, self.dim_level, self.gateway_online), u);
        if let Some(scene) = left_scene
            && !self.units.values().any(|o| o.active_scene_id == scene)
        {
            self.active_scenes.remove(&scene);
        }
        if before != after {
            self.send(WorldEvent::UnitChanged { unit: id, body: after });
        }
    }
}

/// What a change does to a unit's active scene.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SceneEffect {
    /// A unit or group command: the unit leaves its scene.
    Leave,
    /// A scene command: the unit's active scene becomes this one (0 = none).
    Join(i64),
}

mod targets;
use targets::{Target, check_level, parse_targets};
pub(crate) use targets::{control_value, round6};

#[cfg(test)]
mod tests;
