//! The page's own copy of what the bridge knows, kept from the update stream.
//!
//! [`Mirror::observe`] runs on the bridge's path (on the publisher's task, before it publishes),
//! so it only moves `Arc`s and notes what changed: no rendering, no allocation beyond the map
//! entries, no waiting on a page. The web thread copies what it needs out under the lock
//! ([`Mirror::snapshot`], [`Mirror::take_changes`]) and renders outside it.
//!
//! Unit states and network fields are kept beside the network's full view rather than inside
//! it: a change then touches one map entry, and the shared view (scenes, groups, fixtures) is
//! never copied.

use crate::bridge::state::{NetworkStatus, NetworkView};
use crate::bridge::update::Update;
use crate::cloud::model::UnitState;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How many recent problems are kept per network and for the bridge.
pub const PROBLEMS_KEPT: usize = 10;

/// A problem as the page lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProblemNote {
    /// When the bridge reported it.
    pub at: DateTime<Utc>,
    /// What is wrong (never a secret: it is what `<base>/bridge/error` carries).
    pub message: String,
}

/// One network as the page's mirror keeps it.
#[derive(Debug, Clone)]
pub struct PageNetwork {
    /// Network-level fields, newest.
    pub status: NetworkStatus,
    /// Unit states, newest.
    pub units: BTreeMap<u32, Arc<UnitState>>,
    /// The latest full view: scenes, groups and fixtures (its units and status may be older).
    pub view: Arc<NetworkView>,
    /// When the last unit change or unit event arrived.
    pub last_event: Option<DateTime<Utc>>,
    /// Recent problems of this network, oldest first.
    pub problems: VecDeque<ProblemNote>,
    /// The groups of each unit, from the view (a unit's change also changes their JSON).
    groups_of: HashMap<u32, Vec<u32>>,
}

/// Changed units of one network, with what their frame needs.
#[derive(Debug, Clone)]
pub struct UnitBatch {
    /// The network's latest full view (groups, fixtures).
    pub view: Arc<NetworkView>,
    /// The changed units and every member of their groups, as now.
    pub units: BTreeMap<u32, Arc<UnitState>>,
    /// The ids of the units that changed.
    pub changed: BTreeSet<u32>,
}

/// What changed since the web thread last asked.
#[derive(Debug, Default)]
pub struct Changes {
    /// Networks whose full view arrived (new, or configuration changed), as now.
    pub networks: Vec<PageNetwork>,
    /// Networks whose fields or problems changed (and whose full view did not arrive).
    pub statuses: Vec<PageNetwork>,
    /// Per network (not among `networks`): its changed units.
    pub units: Vec<UnitBatch>,
    /// The bridge-wide problems changed.
    pub bridge_problems: bool,
}

impl Changes {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.networks.is_empty() && self.statuses.is_empty() && self.units.is_empty() && !self.bridge_problems
    }
}

#[derive(Debug, Default)]
struct Dirty {
    networks: BTreeSet<String>,
    statuses: BTreeSet<String>,
    units: BTreeMap<String, BTreeSet<u32>>,
    bridge_problems: bool,
}

impl Dirty {
    fn note_unit(&mut self, network: &str, unit: u32) {
        match self.units.get_mut(network) {
            Some(ids) => {
                ids.insert(unit);
            }
            None => {
                self.units.insert(network.to_string(), BTreeSet::from([unit]));
            }
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    nets: BTreeMap<String, PageNetwork>,
    bridge_problems: VecDeque<ProblemNote>,
    dirty: Dirty,
}

/// The page's copy of the bridge's networks. Shared between the bridge's path and the web thread.
#[derive(Debug, Default)]
pub struct Mirror {
    inner: Mutex<Inner>,
    /// Whether a page is open: unit changes are noted for the live stream only then.
    watching: AtomicBool,
}

fn push_problem(list: &mut VecDeque<ProblemNote>, message: String) {
    list.push_back(ProblemNote { at: Utc::now(), message });
    while list.len() > PROBLEMS_KEPT {
        list.pop_front();
    }
}

impl Mirror {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says whether pages are open (set by the live stream's hub).
    pub fn set_watching(&self, watching: bool) {
        self.watching.store(watching, Ordering::Relaxed);
    }

    /// Takes in one update of the bridge core. Cheap: see the module documentation.
    pub fn observe(&self, update: &Update) {
        let watching = self.watching.load(Ordering::Relaxed);
        let mut guard = self.lock();
        let inner = &mut *guard;
        match update {
            Update::Network { view, .. } => {
                let id = view.status.id.clone();
                let old = inner.nets.remove(&id);
                let (last_event, problems) = old.map(|o| (o.last_event, o.problems)).unwrap_or_default();
                let mut groups_of: HashMap<u32, Vec<u32>> = HashMap::new();
                for g in view.groups.values() {
                    for u in &g.units {
                        groups_of.entry(*u).or_default().push(g.id);
                    }
                }
                let net = PageNetwork {
                    status: view.status.clone(),
                    units: view.units.clone(),
                    view: view.clone(),
                    last_event,
                    problems,
                    groups_of,
                };
                inner.nets.insert(id.clone(), net);
                inner.dirty.units.remove(&id);
                inner.dirty.networks.insert(id);
            }
            Update::Status { network, status } => {
                if let Some(net) = inner.nets.get_mut(&**network) {
                    net.status = NetworkStatus::clone(status);
                    inner.dirty.statuses.insert(network.to_string());
                }
            }
            Update::Unit { network, unit } => {
                if let Some(net) = inner.nets.get_mut(&**network) {
                    net.units.insert(unit.id, unit.clone());
                    net.last_event = Some(Utc::now());
                    if watching {
                        inner.dirty.note_unit(network, unit.id);
                    }
                }
            }
            Update::Event { network, at, .. } => {
                if let Some(net) = inner.nets.get_mut(&**network) {
                    net.last_event = Some(*at);
                }
            }
            // The page's battery and energy come from the web state's own copy, which sends the
            // units again ([`super::WebState::note_datapoints`]).
            Update::Datapoints { .. } | Update::Photos { .. } => {}
            Update::Problem { network, message } => inner.note_problem(network.as_deref(), message.clone()),
            Update::Rejected { network, topic, reason } => {
                inner.note_problem(network.as_deref(), format!("command on {topic} refused: {reason}"));
            }
        }
    }

    /// Sends `unit` of `network` to open pages again at the next tick (what the page shows of it
    /// changed outside the update stream: its datapoints).
    pub fn touch(&self, network: &str, unit: u32) {
        if self.watching.load(Ordering::Relaxed) {
            self.lock().dirty.note_unit(network, unit);
        }
    }

    /// Every network, as now (for a whole page).
    pub fn snapshot(&self) -> (Vec<PageNetwork>, Vec<ProblemNote>) {
        let inner = self.lock();
        (inner.nets.values().cloned().collect(), inner.bridge_problems.iter().cloned().collect())
    }

    /// One network, as now.
    pub fn network(&self, id: &str) -> Option<PageNetwork> {
        self.lock().nets.get(id).cloned()
    }

    /// How many units every network has together.
    pub fn unit_total(&self) -> usize {
        self.lock().nets.values().map(|n| n.units.len()).sum()
    }

    /// The bridge-wide problems, as now.
    pub fn bridge_problems(&self) -> Vec<ProblemNote> {
        self.lock().bridge_problems.iter().cloned().collect()
    }

    /// Whether a network has a unit of fixture `fixture` (only those icons are fetched).
    pub fn knows_fixture(&self, fixture: u32) -> bool {
        self.lock().nets.values().any(|n| n.units.values().any(|u| u.fixture_id.get() == Some(fixture)))
    }

    /// Where a unit's icon comes from: whether it has an image of its own, and its fixture;
    /// `None` for a unit no network has.
    pub fn icon_source(&self, network: &str, unit: u32) -> Option<(bool, Option<u32>)> {
        let inner = self.lock();
        let unit = inner.nets.get(network)?.units.get(&unit)?;
        Some((unit.image.is_some(), unit.fixture_id.get()))
    }

    /// What changed since the last call, as now; forgets it. Copies only what the frames need
    /// (the bridge's path waits on this lock): whole networks only for the rare full views.
    pub fn take_changes(&self) -> Changes {
        let mut inner = self.lock();
        let dirty = std::mem::take(&mut inner.dirty);
        let mut changes = Changes { bridge_problems: dirty.bridge_problems, ..Changes::default() };
        for id in &dirty.networks {
            if let Some(net) = inner.nets.get(id) {
                changes.networks.push(net.clone());
            }
        }
        for id in dirty.statuses.difference(&dirty.networks) {
            if let Some(net) = inner.nets.get(id) {
                changes.statuses.push(net.clone());
            }
        }
        for (id, ids) in dirty.units {
            let Some(net) = inner.nets.get(&id) else { continue };
            let mut units = BTreeMap::new();
            for u in &ids {
                let groups = net.groups_of.get(u).into_iter().flatten();
                let members = groups.filter_map(|g| net.view.groups.get(g)).flat_map(|g| g.units.iter());
                for m in std::iter::once(u).chain(members) {
                    if let Some(state) = net.units.get(m) {
                        units.entry(*m).or_insert_with(|| state.clone());
                    }
                }
            }
            let changed: BTreeSet<u32> = ids.into_iter().filter(|u| net.units.contains_key(u)).collect();
            if !changed.is_empty() {
                changes.units.push(UnitBatch { view: net.view.clone(), units, changed });
            }
        }
        changes
    }
}

impl Inner {
    fn note_problem(&mut self, network: Option<&str>, message: String) {
        match network.and_then(|id| self.nets.get_mut(id).map(|n| (id, n))) {
            Some((id, net)) => {
                push_problem(&mut net.problems, message);
                self.dirty.statuses.insert(id.to_string());
            }
            None => {
                push_problem(&mut self.bridge_problems, message);
                self.dirty.bridge_problems = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::state::Topology;

    fn view() -> Arc<NetworkView> {
        let mut view = NetworkView::new("n1");
        let unit: UnitState = serde_json::from_str(r#"{"id":1,"name":"Lamp","on":true}"#).unwrap();
        view.apply_unit(unit, false);
        Arc::new(view)
    }

    #[test]
    fn unit_changes_are_noted_only_while_a_page_watches() {
        let mirror = Mirror::default();
        mirror.observe(&Update::Network { view: view(), topology: Box::new(Topology::default()) });
        assert_eq!(mirror.take_changes().networks.len(), 1);
        let unit: Arc<UnitState> = Arc::new(serde_json::from_str(r#"{"id":1,"name":"Lamp","on":false}"#).unwrap());
        mirror.observe(&Update::Unit { network: "n1".into(), unit: unit.clone() });
        assert!(mirror.take_changes().is_empty(), "no page: nothing to send");
        let (nets, _) = mirror.snapshot();
        assert_eq!(nets[0].units[&1].on, Some(false), "the copy is current all the same");
        assert!(nets[0].last_event.is_some());
        mirror.set_watching(true);
        mirror.observe(&Update::Unit { network: "n1".into(), unit });
        let changes = mirror.take_changes();
        assert_eq!(changes.units.len(), 1);
        assert_eq!(changes.units[0].changed, BTreeSet::from([1]));
        assert!(mirror.take_changes().is_empty(), "taken once");
    }

    #[test]
    fn problems_are_kept_per_network_and_bounded() {
        let mirror = Mirror::default();
        mirror.observe(&Update::Network { view: view(), topology: Box::new(Topology::default()) });
        for i in 0..15 {
            mirror.observe(&Update::Problem { network: Some("n1".into()), message: format!("p{i}") });
        }
        mirror.observe(&Update::Rejected { network: None, topic: "t".into(), reason: "bad".into() });
        let (nets, bridge) = mirror.snapshot();
        assert_eq!(nets[0].problems.len(), PROBLEMS_KEPT);
        assert_eq!(nets[0].problems.back().map(|p| p.message.as_str()), Some("p14"));
        assert_eq!(bridge.len(), 1);
        assert_eq!(bridge[0].message, "command on t refused: bad");
    }
}
