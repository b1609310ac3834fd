//! A whole render in two passes (docs/mqtt.md#publishing-order): first every owner's topics but
//! the plain attribute topics of its units, which Home Assistant does not read; then those, from
//! the mirror's current state. The store counts the withheld publications as handed over, so a
//! live change in between publishes only what changed.

use crate::mqtt::mirror::NetMirror;
use crate::mqtt::render::Renderer;
use crate::mqtt::state_text::{AVAILABILITY, Leaf, StateText};
use crate::mqtt::store::{Op, Owner, Store};

/// [`owner_ops`](crate::mqtt::plan::owner_ops) without the publications of unit attribute
/// topics; the units that had some are added to `owed`.
pub fn owner_ops_owing(
    renderer: &Renderer,
    store: &mut Store,
    mirror: &NetMirror,
    owners: &[Owner],
    owed: &mut Vec<u32>,
) -> Vec<Op> {
    let mut ops = Vec::new();
    for owner in owners {
        let mut own = store.set(owner.clone(), renderer.owner(mirror, owner));
        withhold(renderer, mirror, owner, &mut own, owed);
        ops.extend(own);
    }
    ops
}

/// Publications of every topic of `owners`, without unit attribute topics; the units that had
/// some are added to `owed`.
pub fn publications_owing(renderer: &Renderer, mirror: &NetMirror, owners: &[Owner], owed: &mut Vec<u32>) -> Vec<Op> {
    let mut ops = Vec::new();
    for owner in owners {
        let mut own: Vec<Op> = renderer
            .owner(mirror, owner)
            .into_iter()
            .map(|(topic, payload)| Op::publish(topic, payload, None))
            .collect();
        withhold(renderer, mirror, owner, &mut own, owed);
        ops.extend(own);
    }
    ops
}

/// The publications of the attribute topics of `units` of `mirror`, with their current values
/// (units the mirror no longer has are skipped).
pub fn attribute_ops(renderer: &Renderer, mirror: &NetMirror, units: &[u32], text: &mut StateText) -> Vec<Op> {
    let mut ops = Vec::new();
    for &id in units {
        let Some(unit) = mirror.view.units.get(&id) else { continue };
        let caps = mirror.caps(unit);
        let Some(slug) = renderer.unit_state_text(mirror, id, &caps, text) else { continue };
        let state = renderer.layout.unit(&mirror.slug, slug);
        for (leaf, payload) in text.parts() {
            if let Leaf::Below(key) = leaf
                && key != AVAILABILITY
            {
                ops.push(Op::publish([state.as_str(), key].join("/"), payload.to_string(), None));
            }
        }
    }
    ops
}

/// Takes the publications of a unit's attribute topics out of `ops` (all of `owner`'s) and owes
/// the unit when there were some.
fn withhold(renderer: &Renderer, mirror: &NetMirror, owner: &Owner, ops: &mut Vec<Op>, owed: &mut Vec<u32>) {
    let Owner::Unit(_, id) = owner else { return };
    let Some(slug) = mirror.unit_slugs.get(id).filter(|_| renderer.attribute_topics) else { return };
    let state = renderer.layout.unit(&mirror.slug, slug);
    let before = ops.len();
    ops.retain(|op| !matches!(op, Op::Publish { topic, .. } if is_attribute_of(topic, &state)));
    if ops.len() != before {
        owed.push(*id);
    }
}

/// Whether `topic` is an attribute topic of the unit whose state topic is `state`: one level
/// below it, not its availability.
fn is_attribute_of(topic: &str, state: &str) -> bool {
    topic
        .strip_prefix(state)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|leaf| leaf != AVAILABILITY && !leaf.contains('/'))
}
