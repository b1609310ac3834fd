//! What to publish for a change of the mirror, without I/O: the publisher's decisions as pure
//! functions (the publisher sends the returned operations; benchmarks and tests call them
//! directly).
//!
//! A changed unit re-renders its own topics and its groups' (a group's JSON summarises its
//! members); its network's topics only when its capabilities changed (the network device lists
//! dimmable groups), and the whole network when its identity (name, address, fixture) changed,
//! since slugs and device ids may move. A change of state alone (the common case, thousands per
//! second on big sites) keeps the unit's discovery config as it is instead of rendering it again:
//! it depends only on the identity, the firmware and the capabilities.

use super::render::{NetMirror, Owner, Renderer, Topics};
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
    let caps_changed = old_caps != Some(new_caps);
    let identity_changed = old
        .as_deref()
        .is_none_or(|o| o.name != unit.name || o.address != unit.address || o.fixture_id != unit.fixture_id);
    let device_changed =
        identity_changed || caps_changed || old.as_deref().is_some_and(|o| o.firmware_version != unit.firmware_version);
    m.view.units.insert(id, unit);
    if identity_changed {
        m.reslug();
        return network_ops(renderer, store, m);
    }
    let network = &m.view.status.id;
    let owner = Owner::Unit(network.clone(), id);
    let mut ops = if device_changed {
        store.set(owner, renderer.unit(m, id))
    } else {
        unit_state_ops(renderer, store, m, owner, id)
    };
    let groups: Vec<Owner> =
        m.view.groups.values().filter(|g| g.units.contains(&id)).map(|g| Owner::Group(network.clone(), g.id)).collect();
    ops.extend(owner_ops(renderer, store, m, &groups));
    if caps_changed {
        ops.extend(owner_ops(renderer, store, m, &[Owner::Network(network.clone())]));
    }
    ops
}

/// A unit's topics after a change of its state alone: the discovery topics it already wants, then
/// its state topics rendered anew.
fn unit_state_ops(renderer: &Renderer, store: &mut Store, m: &NetMirror, owner: Owner, id: u32) -> Vec<Op> {
    let state = renderer.unit_state_topics(m, id);
    if state.is_empty() {
        return store.set(owner, renderer.unit(m, id));
    }
    let state = match store.update_tail(&owner, state) {
        Ok(ops) => return ops,
        // The set of state topics changed (an attribute became known or unknown).
        Err(state) => state,
    };
    let state_topic = &state[0].0;
    let below =
        |t: &str| t.strip_prefix(state_topic.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    let mut topics: Topics = store.desired_of(&owner).iter().filter(|(t, _)| !below(t)).cloned().collect();
    topics.extend(state);
    store.set(owner, topics)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::state::NetworkView;
    use crate::cloud::model::{Network, UnitState};
    use crate::mqtt::discovery::Discovery;
    use crate::mqtt::settings::DiscoveryMode;
    use crate::mqtt::topics::Layout;

    fn unit(json: &str) -> Arc<UnitState> {
        Arc::new(serde_json::from_str(json).unwrap())
    }

    const LAMP: &str = r#"{"id":1,"name":"Lamp","address":"a1","type":"Luminaire","firmwareVersion":"1.0",
        "online":true,"on":true,"controls":[{"type":"Dimmer","value":0.5}]}"#;

    /// A network with a dimmable lamp and a sensor in one group, everything published.
    fn setup(mode: DiscoveryMode) -> (Renderer, Store, NetMirror) {
        let net: Network = serde_json::from_str(
            r#"{"id":"n1","name":"Home","units":{"1":{"id":1,"name":"Lamp","address":"a1","groupId":1},
            "2":{"id":2,"name":"Sensor","address":"a2","groupId":1}},
            "groups":{"1":{"id":1,"name":"Hall","units":[{"id":1},{"id":2}]}}}"#,
        )
        .unwrap();
        let mut view = NetworkView::new("n1");
        view.apply_config(&net);
        view.apply_unit(UnitState::clone(&unit(LAMP)), false);
        view.apply_unit(
            serde_json::from_str(r#"{"id":2,"type":"Sensor","online":true,"controls":[{"type":"Lux","value":3}]}"#)
                .unwrap(),
            false,
        );
        let renderer = Renderer {
            layout: Layout::new("casambi"),
            discovery: Some(Discovery { prefix: "homeassistant".into(), mode, qos: 1 }),
            attribute_topics: true,
        };
        let m = NetMirror::new(view, "home".into());
        let mut store = Store::default();
        for op in network_ops(&renderer, &mut store, &m) {
            store.sent(&op);
        }
        (renderer, store, m)
    }

    fn topics(ops: &[Op]) -> Vec<&str> {
        ops.iter()
            .map(|op| match op {
                Op::Publish { topic, .. } | Op::Clear { topic } => topic.as_str(),
            })
            .collect()
    }

    #[test]
    fn a_state_change_keeps_discovery_and_wants_what_a_full_render_wants() {
        for mode in [DiscoveryMode::Device, DiscoveryMode::Component] {
            let (renderer, mut store, mut m) = setup(mode);
            let changed = LAMP.replace("0.5", "0.7").replace("\"on\":true", "\"on\":false");
            let ops = unit_ops(&renderer, &mut store, &mut m, unit(&changed));
            assert!(topics(&ops).iter().all(|t| !t.starts_with("homeassistant/")), "{:?}", topics(&ops));
            assert!(topics(&ops).contains(&"casambi/home/unit/lamp"));
            assert!(topics(&ops).contains(&"casambi/home/group/hall"));
            let owner = Owner::Unit("n1".into(), 1);
            assert_eq!(store.desired_of(&owner), renderer.unit(&m, 1).as_slice());
        }
    }

    #[test]
    fn a_firmware_or_capability_change_renders_discovery_again() {
        let (renderer, mut store, mut m) = setup(DiscoveryMode::Device);
        let ops = unit_ops(&renderer, &mut store, &mut m, unit(&LAMP.replace("1.0", "2.0")));
        assert!(topics(&ops).iter().any(|t| t.starts_with("homeassistant/device/")), "{:?}", topics(&ops));
        let cct = LAMP.replace(r#"]}"#, r#",{"type":"CCT","value":3000,"min":2700,"max":6500}]}"#);
        let ops = unit_ops(&renderer, &mut store, &mut m, unit(&cct));
        assert!(topics(&ops).iter().any(|t| t.starts_with("homeassistant/device/")), "{:?}", topics(&ops));
        assert_eq!(store.desired_of(&Owner::Unit("n1".into(), 1)), renderer.unit(&m, 1).as_slice());
    }

    #[test]
    fn an_attribute_that_becomes_unknown_loses_its_topic() {
        let (renderer, mut store, mut m) = setup(DiscoveryMode::Device);
        let dark =
            r#"{"id":2,"name":"Sensor","address":"a2","type":"Sensor","online":true,"controls":[{"type":"Lux"}]}"#;
        let ops = unit_ops(&renderer, &mut store, &mut m, unit(dark));
        assert!(topics(&ops).iter().all(|t| !t.starts_with("homeassistant/")), "{:?}", topics(&ops));
        assert!(ops.contains(&Op::Clear { topic: "casambi/home/unit/sensor/illuminance".into() }), "{ops:?}");
        assert_eq!(store.desired_of(&Owner::Unit("n1".into(), 2)), renderer.unit(&m, 2).as_slice());
    }
}
