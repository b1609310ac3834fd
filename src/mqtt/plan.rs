//! What to publish for a change of the mirror, without I/O: the publisher's decisions as pure
//! functions (the publisher sends the returned operations; benchmarks and tests call them
//! directly).
//!
//! A changed unit re-renders its own topics, and marks its groups stale (a group's JSON summarises
//! its members): the caller renders stale groups with [`stale_group_ops`] once it has taken in the
//! changes waiting, so a scene that moves a group's ten members renders the group once, not ten
//! times, and publishes none of the values the group passes through on the way. Its network's
//! topics are re-rendered only when its capabilities changed (the network device lists dimmable
//! groups), and the whole network when its identity (name, address, fixture) changed, since slugs
//! and device ids may move. A change of state alone (the common case, thousands per second on big
//! sites) keeps the unit's discovery config as it is instead of rendering it again: the config
//! is rendered again only when what it reads of the unit ([`DiscoveryInputs`]) changed.

use super::mirror::NetMirror;
use super::render::{DiscoveryInputs, Renderer};
use super::state_text::StateText;
use super::store::Owner;
use super::store::{Op, Store};
use super::unit_json::member_reading;
use crate::bridge::caps::Caps;
use crate::cloud::model::UnitState;
use std::sync::Arc;

mod owed;
pub use owed::{attribute_ops, owner_ops_owing, publications_owing};

/// Records `unit` (a changed unit of `mirror`'s network) in the mirror and returns the broker
/// operations it calls for, except its groups': those it adds to `mirror.stale_groups`, for
/// [`stale_group_ops`]. `text` is a reused buffer for the state payloads.
pub fn unit_ops(
    renderer: &Renderer,
    store: &mut Store,
    mirror: &mut NetMirror,
    text: &mut StateText,
    unit: Arc<UnitState>,
) -> Vec<Op> {
    let id = unit.id;
    let old = mirror.view.units.get(&id).cloned();
    let old_inputs = old.as_deref().map(|o| DiscoveryInputs::of(mirror, o));
    let new_inputs = DiscoveryInputs::of(mirror, &unit);
    let old_caps = old_inputs.as_ref().map(DiscoveryInputs::caps);
    let new_caps = new_inputs.caps();
    let caps_changed = old_caps != Some(new_caps);
    // Whatever the unit's discovery config reads, compared as one value.
    let device_changed = old_inputs != Some(new_inputs);
    // What the rest of the network reads of the unit: its name (the slugs), its address (device
    // ids) and its fixture (the groups' capabilities). A change renders the whole network.
    let identity_changed = old
        .as_deref()
        .is_none_or(|o| o.name != unit.name || o.address != unit.address || o.fixture_id != unit.fixture_id);
    // A group's JSON depends on its members' readings alone: most changes (a colour, a sensor
    // value, a level below another member's) leave every group of the unit as it is.
    let reading = member_reading(&unit, new_caps.is_light());
    let reading_changed = old.as_deref().zip(old_caps).map(|(o, c)| member_reading(o, c.is_light())) != Some(reading);
    // The store keeps no payloads: the discovery config being replaced is rendered from the
    // mirror before it changes (HA needs it when a component goes away).
    let old_discovery = if device_changed { renderer.unit_discovery(mirror, id) } else { Vec::new() };
    mirror.view.units.insert(id, unit);
    if identity_changed {
        mirror.reslug();
        mirror.recache_groups();
        let mut ops = network_ops(renderer, store, mirror);
        attach_previous(store, &mut ops, &old_discovery);
        return ops;
    }
    let owner = Owner::Unit(mirror.key.clone(), id);
    let mut ops = if device_changed {
        let mut ops = store.set(owner, renderer.unit(mirror, id));
        attach_previous(store, &mut ops, &old_discovery);
        ops
    } else {
        unit_state_ops(renderer, store, mirror, owner, id, &new_caps, text)
    };
    if reading_changed || caps_changed {
        for g in mirror.view.groups.values().filter(|g| g.units.contains(&id)) {
            if reading_changed {
                mirror.group_cache.set_reading(g, id, reading);
            }
            if !mirror.stale_groups.contains(&g.id) {
                mirror.stale_groups.push(g.id);
            }
        }
    }
    if caps_changed {
        ops.extend(owner_ops(renderer, store, mirror, &[Owner::Network(mirror.key.clone())]));
    }
    ops
}

/// A unit's topics after a change of its state alone: the discovery topics it already wants, then
/// its state topics rendered anew.
fn unit_state_ops(
    renderer: &Renderer,
    store: &mut Store,
    mirror: &NetMirror,
    owner: Owner,
    id: u32,
    caps: &Caps,
    text: &mut StateText,
) -> Vec<Op> {
    let Some(slug) = renderer.unit_state_text(mirror, id, caps, text) else {
        return store.set(owner, renderer.unit(mirror, id));
    };
    let (layout, net) = (&renderer.layout, mirror.slug.as_str());
    if let Some(ops) = store.update_state(&owner, text, |t| layout.is_unit(t, net, slug)) {
        return ops;
    }
    // The set of state topics changed (an attribute became known or unknown): all again.
    store.set(owner, renderer.unit(mirror, id))
}

/// The operations of `mirror`'s stale groups ([`NetMirror::stale_groups`]), which it empties: each
/// group's JSON rendered once, after all the member changes taken in since the last call.
pub fn stale_group_ops(
    renderer: &Renderer,
    store: &mut Store,
    mirror: &mut NetMirror,
    text: &mut StateText,
) -> Vec<Op> {
    let mut stale = std::mem::take(&mut mirror.stale_groups);
    let mut ops = Vec::new();
    for id in stale.drain(..) {
        let group = group_ops(renderer, store, mirror, id, text);
        // One group (a change taken in alone) keeps its own list: no second allocation.
        if ops.is_empty() {
            ops = group;
        } else {
            ops.extend(group);
        }
    }
    mirror.stale_groups = stale;
    ops
}

/// A group's topic after a change of one of its members.
fn group_ops(renderer: &Renderer, store: &mut Store, mirror: &NetMirror, id: u32, text: &mut StateText) -> Vec<Op> {
    let owner = Owner::Group(mirror.key.clone(), id);
    let Some(slug) = renderer.group_text(mirror, id, text) else {
        return store.set(owner, Vec::new());
    };
    let (layout, net) = (&renderer.layout, mirror.slug.as_str());
    if let Some(ops) = store.update_state(&owner, text, |t| layout.is_group(t, net, slug)) {
        return ops;
    }
    store.set(owner, text.topics(&layout.group(net, slug)))
}

/// The operations after a change of `mirror`'s network status that kept its name (its connection,
/// gateway, dim level, active scenes): the network's own topics and its scenes'; the units' state
/// topics only when the network's availability flipped (their `availability` follows it). Units'
/// discovery and groups do not depend on the status, so a network going live after start-up does
/// not render its 250 device configs again.
pub fn status_ops(
    renderer: &Renderer,
    store: &mut Store,
    mirror: &NetMirror,
    text: &mut StateText,
    availability_changed: bool,
) -> Vec<Op> {
    let mut owners = vec![Owner::Network(mirror.key.clone())];
    owners.extend(mirror.view.scenes.keys().map(|id| Owner::Scene(mirror.key.clone(), *id)));
    let mut ops = owner_ops(renderer, store, mirror, &owners);
    if availability_changed {
        for (id, unit) in &mirror.view.units {
            let caps = mirror.caps(unit);
            ops.extend(unit_state_ops(renderer, store, mirror, Owner::Unit(mirror.key.clone(), *id), *id, &caps, text));
        }
    }
    ops
}

/// Gives each publication in `ops` of a topic of `old` the text it replaces, when that text is
/// what was published there (so the publisher can tell HA about removed components).
pub fn attach_previous(store: &Store, ops: &mut [Op], old: &[(String, String)]) {
    if old.is_empty() {
        return;
    }
    let old: foldhash::HashMap<&str, &str> = old.iter().map(|(t, p)| (t.as_str(), p.as_str())).collect();
    for op in ops {
        if let Op::Publish { topic, previous: previous @ None, .. } = op
            && let Some(text) = old.get(topic.as_str())
            && store.has_published(topic, text)
        {
            *previous = Some(text.to_string());
        }
    }
}

/// Renders every owner of `mirror`'s network; owners that no longer exist lose their topics.
pub fn network_ops(renderer: &Renderer, store: &mut Store, mirror: &NetMirror) -> Vec<Op> {
    let owners = mirror.owners();
    let mut ops = owner_ops(renderer, store, mirror, &owners);
    ops.extend(removed_ops(store, &mirror.view.status.id, &owners));
    ops
}

/// Clears the topics of `network`'s owners that are not among `owners` any more.
pub fn removed_ops(store: &mut Store, network: &str, owners: &[Owner]) -> Vec<Op> {
    let mut ops = Vec::new();
    for old in store.owners_of(network) {
        if !owners.contains(&old) {
            ops.extend(store.remove(&old));
        }
    }
    ops
}

/// Renders units of `mirror` whose datapoints changed: each unit (its device config lists a
/// sensor for each key that has one), then its datapoints ([`Owner::Data`]). A unit removed
/// meanwhile has nothing left to publish.
pub fn data_ops(renderer: &Renderer, store: &mut Store, mirror: &NetMirror, units: &[u32]) -> Vec<Op> {
    let owners: Vec<Owner> = units
        .iter()
        .filter(|id| mirror.view.units.contains_key(id))
        .flat_map(|id| [Owner::Unit(mirror.key.clone(), *id), Owner::Data(mirror.key.clone(), *id)])
        .collect();
    owner_ops(renderer, store, mirror, &owners)
}

/// Renders the given owners of `mirror`.
pub fn owner_ops(renderer: &Renderer, store: &mut Store, mirror: &NetMirror, owners: &[Owner]) -> Vec<Op> {
    let mut ops = Vec::new();
    for o in owners {
        ops.extend(store.set(o.clone(), renderer.owner(mirror, o)));
    }
    ops
}

#[cfg(test)]
mod tests;
