//! What to publish for a change of the mirror, without I/O: the publisher's decisions as pure
//! functions (the publisher sends the returned operations; benchmarks and tests call them
//! directly).
//!
//! A changed unit re-renders its own topics and its groups' (a group's JSON summarises its
//! members); its network's topics only when its capabilities changed (the network device lists
//! dimmable groups), and the whole network when its identity (name, address, fixture) changed,
//! since slugs and device ids may move.

use super::render::{NetMirror, Owner, Renderer};
use super::store::{Op, Store};
use crate::cloud::model::UnitState;
use std::sync::Arc;

/// Records `unit` (a changed unit of `m`'s network) in the mirror and returns the broker
/// operations it calls for.
pub fn unit_ops(renderer: &Renderer, store: &mut Store, m: &mut NetMirror, unit: Arc<UnitState>) -> Vec<Op> {
    let id = unit.id;
    let old = m.view.units.get(&id).cloned();
    let old_caps = old.as_deref().map(|u| m.caps(u));
    let new_caps = m.caps(&unit);
    let identity_changed = old
        .as_deref()
        .is_none_or(|o| o.name != unit.name || o.address != unit.address || o.fixture_id != unit.fixture_id);
    m.view.units.insert(id, unit);
    if identity_changed {
        m.reslug();
        return network_ops(renderer, store, m);
    }
    let network = &m.view.status.id;
    let mut owners = vec![Owner::Unit(network.clone(), id)];
    owners
        .extend(m.view.groups.values().filter(|g| g.units.contains(&id)).map(|g| Owner::Group(network.clone(), g.id)));
    if old_caps != Some(new_caps) {
        owners.push(Owner::Network(network.clone()));
    }
    owner_ops(renderer, store, m, &owners)
}

/// Renders every owner of `m`'s network; owners that no longer exist lose their topics.
pub fn network_ops(renderer: &Renderer, store: &mut Store, m: &NetMirror) -> Vec<Op> {
    let owners = m.owners();
    let mut ops = owner_ops(renderer, store, m, &owners);
    for old in store.owners_of(&m.view.status.id) {
        if !owners.contains(&old) {
            ops.extend(store.remove(&old));
        }
    }
    ops
}

/// Renders the given owners of `m`.
pub fn owner_ops(renderer: &Renderer, store: &mut Store, m: &NetMirror, owners: &[Owner]) -> Vec<Op> {
    let mut ops = Vec::new();
    for o in owners {
        ops.extend(store.set(o.clone(), renderer.owner(m, o)));
    }
    ops
}
