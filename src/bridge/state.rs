//! What the bridge knows of one network, and how snapshots and events change it.
//!
//! The state never does I/O. It merges REST snapshots and WebSocket events and answers with the
//! smallest typed change: an event that changes nothing produces nothing (and allocates nothing,
//! since incoming fields are compared before anything is moved), so replays and resync bursts are
//! free downstream.
//!
//! Units are kept as `Arc<UnitState>`: a change hands the MQTT side a cheap clone of the unit, and
//! `Arc::make_mut` copies a unit only while the MQTT side still holds the previous version.

use crate::cloud::model::{Control, Fixture, Network, NetworkState, OptU32, UnitState, shared_text};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// How the bridge currently reaches a network (published as `connection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Connection {
    /// The wire is open: events arrive live.
    Live,
    /// The wire is down; the state is polled over REST.
    Polling,
    /// Neither the wire nor REST works.
    Down,
}

impl Connection {
    /// The published spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Connection::Live => "live",
            Connection::Polling => "polling",
            Connection::Down => "down",
        }
    }
}

/// A scene as the bridge needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SceneInfo {
    /// Scene id.
    pub id: u32,
    /// Scene name.
    pub name: String,
    /// Member unit ids.
    pub units: Vec<u32>,
    /// Hidden in the app: Home Assistant gets its switch disabled until a user enables it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

/// A group as the bridge needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupInfo {
    /// Group id.
    pub id: u32,
    /// Group name.
    pub name: String,
    /// Member unit ids, in view order.
    pub units: Vec<u32>,
}

/// Network-level fields, published at `<base>/<net>`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkStatus {
    /// Network id.
    pub id: String,
    /// Network name.
    pub name: String,
    /// Configuration revision.
    pub revision: Option<u64>,
    /// Network dim level (0..1).
    pub dim_level: Option<f64>,
    /// Active scene ids.
    pub active_scenes: BTreeSet<u32>,
    /// Whether the gateway is online (`peerChanged`).
    pub gateway_online: bool,
    /// How the bridge reaches the network.
    pub connection: Connection,
}

impl NetworkStatus {
    /// Reachable = the cloud answers (wire or REST) and the gateway is online.
    pub fn available(&self) -> bool {
        self.gateway_online && self.connection != Connection::Down
    }
}

/// Added, removed and renamed things of one kind, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IdDiff {
    /// New ids.
    pub added: Vec<u32>,
    /// Ids gone.
    pub removed: Vec<u32>,
    /// Ids whose name changed.
    pub renamed: Vec<u32>,
}

impl IdDiff {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.renamed.is_empty()
    }

    fn of<'a, T: 'a>(old: &BTreeMap<u32, T>, new: &BTreeMap<u32, T>, name: impl Fn(&T) -> &str) -> IdDiff {
        IdDiff {
            added: new.keys().filter(|k| !old.contains_key(k)).copied().collect(),
            removed: old.keys().filter(|k| !new.contains_key(k)).copied().collect(),
            renamed: new
                .iter()
                .filter(|(k, v)| old.get(k).is_some_and(|o| name(o) != name(v)))
                .map(|(k, _)| *k)
                .collect(),
        }
    }
}

/// What a configuration change did (reported after `networkUpdated` or a revision change).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Topology {
    /// Units.
    pub units: IdDiff,
    /// Scenes.
    pub scenes: IdDiff,
    /// Groups.
    pub groups: IdDiff,
    /// Group memberships or scene memberships changed.
    pub membership_changed: bool,
}

impl Topology {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty() && self.scenes.is_empty() && self.groups.is_empty() && !self.membership_changed
    }
}

/// A non-retained happening of a unit (published on `…/event`).
#[derive(Debug, Clone, PartialEq)]
pub enum UnitEvent {
    /// A presence sensor's occupancy changed.
    Occupancy(bool),
    /// A switch reported (its controls as sent).
    Switch(Vec<Control>),
}

/// The effect of one unit update.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitDelta {
    /// The stored state changed.
    pub changed: bool,
    /// The unit's occupancy changed to this (docs/mqtt.md#events).
    pub occupancy: Option<bool>,
    /// A switch reported, live: its controls as sent. A sensor that is both a presence sensor and
    /// a switch reports both in one update.
    pub switch: Option<Vec<Control>>,
}

impl UnitDelta {
    /// The non-retained events to publish, occupancy first.
    pub fn events(self) -> impl Iterator<Item = UnitEvent> {
        self.occupancy.map(UnitEvent::Occupancy).into_iter().chain(self.switch.map(UnitEvent::Switch))
    }
}

/// Everything the bridge knows of one network.
#[derive(Debug, Clone)]
pub struct NetworkView {
    /// Network-level fields.
    pub status: NetworkStatus,
    /// Unit states by id (merged from the configuration, snapshots and events).
    pub units: BTreeMap<u32, Arc<UnitState>>,
    /// Scenes by id.
    pub scenes: BTreeMap<u32, SceneInfo>,
    /// Groups by id.
    pub groups: BTreeMap<u32, GroupInfo>,
    /// Fixtures of the network's units, by fixture id.
    pub fixtures: BTreeMap<u32, Arc<Fixture>>,
}

impl NetworkView {
    /// An empty view of a network known only by id (before the first snapshot).
    pub fn new(id: &str) -> NetworkView {
        NetworkView {
            status: NetworkStatus {
                id: id.to_string(),
                name: id.to_string(),
                revision: None,
                dim_level: None,
                active_scenes: BTreeSet::new(),
                gateway_online: true,
                connection: Connection::Down,
            },
            units: BTreeMap::new(),
            scenes: BTreeMap::new(),
            groups: BTreeMap::new(),
            fixtures: BTreeMap::new(),
        }
    }

    /// Applies the network configuration (`GET /v1/networks/{id}`): names, scenes, groups and the
    /// unit list. Units that are gone are dropped; new ones are added with what the
    /// configuration says (their state follows from the next snapshot or event).
    pub fn apply_config(&mut self, config: &Network) -> Topology {
        let scenes: BTreeMap<u32, SceneInfo> = config
            .scenes
            .values()
            .map(|s| (s.id, SceneInfo { id: s.id, name: s.name.clone(), units: s.unit_ids(), hidden: s.hidden }))
            .collect();
        let groups: BTreeMap<u32, GroupInfo> = config
            .groups
            .values()
            .map(|g| {
                (g.id, GroupInfo { id: g.id, name: g.name.clone(), units: g.units.iter().map(|u| u.id).collect() })
            })
            .collect();
        let mut units: BTreeMap<u32, Arc<UnitState>> = BTreeMap::new();
        for u in config.units.values() {
            let mut state = self
                .units
                .get(&u.id)
                .map(|s| UnitState::clone(s))
                .unwrap_or_else(|| UnitState { id: u.id, ..UnitState::default() });
            state.name = Some(u.name.as_str().into());
            state.address = Some(u.address.as_str().into());
            state.fixture_id = u.fixture_id.and_then(OptU32::new).unwrap_or(state.fixture_id);
            state.firmware_version = u.firmware_version.as_deref().map(shared_text::share).or(state.firmware_version);
            state.group_id = u.group_id.and_then(OptU32::new).unwrap_or(state.group_id);
            state.unit_type = u.unit_type.as_deref().map(shared_text::share).or(state.unit_type);
            state.image = u.image.as_deref().map(|i| Box::new(i.into()));
            units.insert(u.id, Arc::new(state));
        }
        let topology = self.topology_against(&units, &scenes, &groups);
        self.units = units;
        self.scenes = scenes;
        self.groups = groups;
        self.status.name = config.name.clone();
        self.status.revision = config.revision.or(self.status.revision);
        topology
    }

    fn topology_against(
        &self,
        units: &BTreeMap<u32, Arc<UnitState>>,
        scenes: &BTreeMap<u32, SceneInfo>,
        groups: &BTreeMap<u32, GroupInfo>,
    ) -> Topology {
        let unit_name = |u: &Arc<UnitState>| -> String { u.name.as_deref().unwrap_or_default().to_string() };
        let old_names: BTreeMap<u32, String> = self.units.iter().map(|(k, v)| (*k, unit_name(v))).collect();
        let new_names: BTreeMap<u32, String> = units.iter().map(|(k, v)| (*k, unit_name(v))).collect();
        Topology {
            units: IdDiff::of(&old_names, &new_names, |s| s.as_str()),
            scenes: IdDiff::of(&self.scenes, scenes, |s| s.name.as_str()),
            groups: IdDiff::of(&self.groups, groups, |g| g.name.as_str()),
            membership_changed: self.scenes.iter().any(|(k, s)| scenes.get(k).is_some_and(|n| n.units != s.units))
                || self.groups.iter().any(|(k, g)| groups.get(k).is_some_and(|n| n.units != g.units)),
        }
    }

    /// Applies a state snapshot (`GET /v1/networks/{id}/state`). Returns the topology change (the
    /// state also lists units, scenes and groups), whether network-level fields changed, and the
    /// units whose state changed.
    pub fn apply_snapshot(&mut self, snapshot: NetworkState) -> SnapshotDelta {
        let old_status = self.status.clone();
        let config = Network {
            id: snapshot.id.clone(),
            name: snapshot.name.clone(),
            revision: snapshot.revision,
            units: BTreeMap::new(),
            scenes: snapshot.scenes,
            groups: snapshot.groups,
            ..Network::default()
        };
        let units = one_entry_per_id(snapshot.units);
        // The configuration part: reuse apply_config with the unit list taken from the states.
        let mut unit_list = BTreeMap::new();
        for (key, u) in &units {
            unit_list.insert(
                key.clone(),
                crate::cloud::model::Unit {
                    id: u.id,
                    address: u.address.as_deref().unwrap_or_default().to_string(),
                    name: u.name.as_deref().unwrap_or_default().to_string(),
                    image: u.image.as_deref().map(|i| i.to_string()),
                    position: u.position.get(),
                    fixture_id: u.fixture_id.get(),
                    firmware_version: u.firmware_version.as_deref().map(str::to_string),
                    group_id: u.group_id.get(),
                    labels: None,
                    unit_type: u.unit_type.as_deref().map(str::to_string),
                },
            );
        }
        let before: BTreeMap<u32, Arc<UnitState>> = self.units.clone();
        let topology = self.apply_config(&Network { units: unit_list, ..config });
        let mut changed_units = Vec::new();
        let mut occupancy = Vec::new();
        for (_, state) in units {
            let id = state.id;
            let delta = self.apply_unit(state, false);
            let known = before.get(&id);
            let differs_from_before = match (known, self.units.get(&id)) {
                (Some(a), Some(b)) => a != b,
                _ => true,
            };
            if delta.changed || differs_from_before {
                changed_units.push(id);
            }
            // Only a flip of a presence known before: the first snapshot, or a unit that was
            // offline, tells where presence stands, not that it changed.
            let was_present = known.and_then(|u| presence(u));
            if let (Some(was), Some(now)) = (was_present, self.units.get(&id).and_then(|u| presence(u)))
                && was != now
            {
                occupancy.push((id, now));
            }
        }
        if let Some(level) = snapshot.dim_level {
            self.status.dim_level = Some(level);
        }
        self.status.active_scenes = snapshot.active_scenes.into_iter().collect();
        SnapshotDelta { topology, status_changed: self.status != old_status, changed_units, occupancy }
    }

    /// Merges one unit state (an event or a snapshot entry). Fields the update does not carry
    /// keep their last known value (offline units omit `on`/`controls`). `live` = a live event
    /// (switch reports become events; snapshot and resync entries do not).
    pub fn apply_unit(&mut self, update: UnitState, live: bool) -> UnitDelta {
        let Some(stored) = self.units.get_mut(&update.id) else {
            // A unit the configuration does not list yet (added before `networkUpdated`): keep it.
            let switch = (live && is_switch(&update)).then(|| update.controls.clone().unwrap_or_default());
            self.units.insert(update.id, Arc::new(update));
            return UnitDelta { changed: true, occupancy: None, switch };
        };
        let was_present = presence(stored);
        let changed = differs(stored, &update);
        let switch =
            (live && (is_switch(stored) || is_switch(&update))).then(|| update.controls.clone().unwrap_or_default());
        if changed {
            match Arc::get_mut(stored) {
                Some(only) => merge(only, update),
                // The MQTT side still holds the previous version: build the new one from the
                // update, copying only the fields it does not carry (not the whole unit).
                None => *stored = Arc::new(merged(stored, update)),
            }
        }
        let occupancy = presence(stored).filter(|now| changed && was_present != Some(*now));
        UnitDelta { changed, occupancy, switch }
    }

    /// Records gateway presence; `true` when it changed.
    pub fn set_gateway(&mut self, online: bool) -> bool {
        std::mem::replace(&mut self.status.gateway_online, online) != online
    }

    /// Records how the network is reached; `true` when it changed.
    pub fn set_connection(&mut self, connection: Connection) -> bool {
        std::mem::replace(&mut self.status.connection, connection) != connection
    }

    /// Records the fixtures of the network's units.
    pub fn set_fixtures(&mut self, fixtures: BTreeMap<u32, Arc<Fixture>>) {
        self.fixtures = fixtures;
    }

    /// Distinct fixture ids of the units.
    pub fn fixture_ids(&self) -> BTreeSet<u32> {
        self.units.values().filter_map(|u| u.fixture_id.get()).collect()
    }
}

/// The effect of a snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SnapshotDelta {
    /// Units, scenes, groups added, removed or renamed.
    pub topology: Topology,
    /// Network-level fields changed (dim level, active scenes, name, revision).
    pub status_changed: bool,
    /// Units whose state changed.
    pub changed_units: Vec<u32>,
    /// Units whose known occupancy flipped, and to what (polled: docs/mqtt.md#events).
    pub occupancy: Vec<(u32, bool)>,
}

/// `true` when the unit's type or controls say it is a switch.
pub fn is_switch(u: &UnitState) -> bool {
    u.unit_type.as_deref().is_some_and(is_switch_type)
        || u.controls.as_ref().is_some_and(|c| c.iter().any(|c| matches!(c, Control::Switch(_))))
}

/// Whether a unit or fixture type names a switch (`…Switch…` or `PushButton`).
///
/// Asked of every changed unit, whose type is nearly always a short word (`Luminaire`): a
/// window scan of its few bytes costs less than `str::contains`, which first builds a two-way
/// searcher for the needle.
pub fn is_switch_type(t: &str) -> bool {
    t == "PushButton" || t.as_bytes().windows(b"Switch".len()).any(|w| w == b"Switch")
}

/// The occupancy a unit reports: `false` for Presence status `absent`, `true` for any other.
pub fn presence(u: &UnitState) -> Option<bool> {
    u.controls.as_ref()?.iter().find_map(|c| match c {
        Control::Presence(p) => Some(&*p.status != "absent"),
        _ => None,
    })
}

/// Applies a macro to the list of every optional field of [`UnitState`] (one list, so the diff
/// and the merge can never disagree about which fields exist).
macro_rules! with_unit_fields {
    ($m:ident) => {
        $m!(
            address,
            name,
            image,
            position,
            fixture_id,
            firmware_version,
            group_id,
            unit_type,
            priority,
            scene,
            on,
            online,
            condition,
            status,
            active_scene_id,
            controls,
            dim_level,
            details
        )
    };
}

/// Whether merging `update` into `stored` would change it. Compares without allocating.
fn differs(stored: &UnitState, update: &UnitState) -> bool {
    macro_rules! field_differs {
        ($($f:ident),*) => { false $(|| update.$f.as_ref().is_some_and(|v| stored.$f.as_ref() != Some(v)))* };
    }
    with_unit_fields!(field_differs)
}

/// Moves every field `update` carries into `stored`.
fn merge(stored: &mut UnitState, update: UnitState) {
    macro_rules! take {
        ($($f:ident),*) => { $(if update.$f.is_some() { stored.$f = update.$f; })* };
    }
    with_unit_fields!(take);
}

/// `stored` with every field `update` carries replaced, as a new value: the fields of `update`
/// are moved, only the others are cloned from `stored`.
fn merged(stored: &UnitState, update: UnitState) -> UnitState {
    macro_rules! build {
        ($($f:ident),*) => { UnitState { id: update.id, $($f: update.$f.or_else(|| stored.$f.clone()),)* } };
    }
    with_unit_fields!(build)
}

/// The units of a state snapshot with at most one entry per unit id. Two entries of one id (a
/// corrupt or mid-migration payload) would otherwise both be applied, the second overwriting the
/// first, and every snapshot would look like a change. The entry whose map key is its id wins,
/// otherwise the last one in key order.
fn one_entry_per_id(units: BTreeMap<String, UnitState>) -> BTreeMap<String, UnitState> {
    use std::collections::btree_map::Entry;
    let mut by_id: BTreeMap<u32, (String, UnitState)> = BTreeMap::new();
    for (key, unit) in units {
        match by_id.entry(unit.id) {
            Entry::Vacant(slot) => {
                slot.insert((key, unit));
            }
            Entry::Occupied(mut slot) => {
                tracing::warn!(unit = unit.id, key = %key, "snapshot lists a unit twice; keeping one entry");
                if slot.get().0 != unit.id.to_string() {
                    slot.insert((key, unit));
                }
            }
        }
    }
    by_id.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(json: &str) -> UnitState {
        serde_json::from_str(json).unwrap()
    }

    fn view_with_unit() -> NetworkView {
        let mut view = NetworkView::new("n1");
        view.apply_unit(
            event(r#"{"id":1,"name":"Lamp","online":true,"on":true,"controls":[{"type":"Dimmer","value":0.5}]}"#),
            false,
        );
        view
    }

    #[test]
    fn identical_event_changes_nothing() {
        let mut view = view_with_unit();
        let again = view
            .apply_unit(event(r#"{"id":1,"online":true,"on":true,"controls":[{"type":"Dimmer","value":0.5}]}"#), true);
        assert_eq!(again, UnitDelta::default());
    }

    #[test]
    fn changed_dimmer_is_a_change_and_offline_keeps_last_controls() {
        let mut view = view_with_unit();
        let d = view.apply_unit(event(r#"{"id":1,"controls":[{"type":"Dimmer","value":0.7}]}"#), true);
        assert!(d.changed);
        let d = view.apply_unit(event(r#"{"id":1,"online":false}"#), true);
        assert!(d.changed);
        let u = &view.units[&1];
        assert_eq!(u.online, Some(false));
        assert!(u.controls.is_some(), "offline event keeps the last known controls");
    }

    #[test]
    fn presence_changes_become_occupancy_events() {
        let mut view = NetworkView::new("n1");
        view.apply_unit(event(r#"{"id":4,"controls":[{"type":"Presence","status":"absent"}]}"#), false);
        let d = view.apply_unit(event(r#"{"id":4,"controls":[{"type":"Presence","status":"present"}]}"#), true);
        assert_eq!(d.occupancy, Some(true));
        assert_eq!(d.events().collect::<Vec<_>>(), [UnitEvent::Occupancy(true)]);
        let d = view.apply_unit(event(r#"{"id":4,"controls":[{"type":"Presence","status":"present"}]}"#), true);
        assert_eq!(d, UnitDelta::default());
    }

    #[test]
    fn switch_reports_are_events_only_when_live() {
        let mut view = NetworkView::new("n1");
        let sw = r#"{"id":6,"type":"BatterySwitch","controls":[{"type":"Switch"}]}"#;
        assert_eq!(view.apply_unit(event(sw), false).switch, None);
        assert_eq!(view.apply_unit(event(sw), true).switch, Some(vec![Control::Switch(Default::default())]));
    }

    #[test]
    fn a_combined_sensor_reports_its_occupancy_and_the_switch() {
        let mut view = NetworkView::new("n1");
        let report = |status: &str| {
            event(&format!(
                r#"{{"id":7,"type":"SwitchInput","controls":[{{"type":"Switch"}},{{"type":"Presence","status":"{status}"}}]}}"#
            ))
        };
        view.apply_unit(report("absent"), false);
        let events: Vec<UnitEvent> = view.apply_unit(report("present"), true).events().collect();
        assert!(
            matches!(events.as_slice(), [UnitEvent::Occupancy(true), UnitEvent::Switch(c)] if c.len() == 2),
            "{events:?}"
        );
        // The same report again is a press, not an occupancy change.
        let events: Vec<UnitEvent> = view.apply_unit(report("present"), true).events().collect();
        assert!(matches!(events.as_slice(), [UnitEvent::Switch(_)]), "{events:?}");
    }

    #[test]
    fn a_snapshot_reports_occupancy_flips_of_known_presence_only() {
        let snapshot = |status: Option<&str>| -> NetworkState {
            let controls =
                status.map_or(String::new(), |s| format!(r#","controls":[{{"type":"Presence","status":"{s}"}}]"#));
            serde_json::from_str(&format!(
                r#"{{"id":"n1","name":"N","units":{{"4":{{"id":4,"name":"Hall","online":true{controls}}}}}}}"#
            ))
            .unwrap()
        };
        let mut view = NetworkView::new("n1");
        assert_eq!(view.apply_snapshot(snapshot(Some("present"))).occupancy, [], "the first snapshot only tells");
        assert_eq!(view.apply_snapshot(snapshot(Some("present"))).occupancy, []);
        assert_eq!(view.apply_snapshot(snapshot(Some("absent"))).occupancy, [(4, false)]);
        // A unit that reports no controls keeps its last presence: nothing flips.
        assert_eq!(view.apply_snapshot(snapshot(None)).occupancy, []);
        assert_eq!(view.apply_snapshot(snapshot(Some("present"))).occupancy, [(4, true)]);
    }

    #[test]
    fn switch_types_are_any_type_naming_a_switch_and_push_buttons() {
        for t in ["Switch", "BatterySwitch", "SwitchInput", "WallSwitch2", "PushButton"] {
            assert!(is_switch_type(t), "{t}");
        }
        for t in ["", "Luminaire", "Driver", "Switc", "switch", "PushButtons", "Sensor"] {
            assert!(!is_switch_type(t), "{t}");
        }
    }

    #[test]
    fn a_snapshot_listing_a_unit_twice_is_still_idempotent() {
        // Found by the `rest_payload` fuzz target: two map entries with one unit id.
        let state: NetworkState = serde_json::from_str(
            r#"{"id":"n1","name":"N","units":{
                "13":{"id":13,"name":"Garden","online":false},
                "26":{"id":13,"name":"Hall sensor","online":true,"controls":[{"type":"Lux","value":4}]}}}"#,
        )
        .unwrap();
        let mut view = NetworkView::new("n1");
        view.apply_snapshot(state.clone());
        assert_eq!(view.units[&13].name.as_deref(), Some("Garden"), "the entry under its own id wins");
        let again = view.apply_snapshot(state);
        assert!(again.changed_units.is_empty() && again.topology.is_empty(), "{again:?}");
    }

    #[test]
    fn config_reports_topology() {
        let mut view = NetworkView::new("n1");
        let net = |units: &str| -> Network {
            serde_json::from_str(&format!(r#"{{"id":"n1","name":"N","units":{units}}}"#)).unwrap()
        };
        view.apply_config(&net(r#"{"1":{"id":1,"name":"A"},"2":{"id":2,"name":"B"}}"#));
        let t = view.apply_config(&net(r#"{"1":{"id":1,"name":"A2"},"3":{"id":3,"name":"C"}}"#));
        assert_eq!(t.units, IdDiff { added: vec![3], removed: vec![2], renamed: vec![1] });
    }

    #[test]
    fn units_from_the_network_config_share_their_type_and_firmware() {
        let config: Network = serde_json::from_value(serde_json::json!({
            "id": "n1",
            "units": {
                "1": {"id": 1, "address": "a1", "name": "One", "type": "Luminaire", "firmwareVersion": "32.10"},
                "2": {"id": 2, "address": "a2", "name": "Two", "type": "Luminaire", "firmwareVersion": "32.10"}
            }
        }))
        .unwrap();
        let mut view = NetworkView::new("n1");
        view.apply_config(&config);
        let (one, two) = (&view.units[&1], &view.units[&2]);
        let shared =
            |a: &Option<Arc<str>>, b: &Option<Arc<str>>| matches!((a, b), (Some(a), Some(b)) if Arc::ptr_eq(a, b));
        assert!(shared(&one.unit_type, &two.unit_type));
        assert!(shared(&one.firmware_version, &two.firmware_version));
        assert_eq!(one.unit_type.as_deref(), Some("Luminaire"));
    }
}
