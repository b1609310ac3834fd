use super::*;
use crate::bridge::state::NetworkView;
use crate::cloud::model::{Network, UnitState};
use crate::mqtt::discovery::Discovery;
use crate::mqtt::settings::DiscoveryMode;
use crate::mqtt::topics::Layout;
use crate::mqtt::unit_json::GroupJson;

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
        data_sensors: Default::default(),
    };
    published(renderer, view)
}

/// `view` as network "home", with everything `renderer` makes of it recorded as published.
fn published(renderer: Renderer, view: NetworkView) -> (Renderer, Store, NetMirror) {
    let mirror = NetMirror::new(view, "home".into());
    let mut store = Store::default();
    for op in network_ops(&renderer, &mut store, &mirror) {
        store.record(op.receipt());
    }
    (renderer, store, mirror)
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
        let (renderer, mut store, mut mirror) = setup(mode);
        let changed = LAMP.replace("0.5", "0.7").replace("\"on\":true", "\"on\":false");
        let mut text = StateText::default();
        let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut text, unit(&changed));
        assert!(topics(&ops).iter().all(|t| !t.starts_with("homeassistant/")), "{:?}", topics(&ops));
        assert!(topics(&ops).contains(&"casambi/home/unit/lamp"));
        assert_eq!(mirror.stale_groups, [1]);
        let ops = stale_group_ops(&renderer, &mut store, &mut mirror, &mut text);
        assert_eq!(topics(&ops), ["casambi/home/group/hall"]);
        assert!(mirror.stale_groups.is_empty());
        let owner = Owner::Unit("n1".into(), 1);
        assert!(store.wants_exactly(&owner, &renderer.unit(&mirror, 1)));
        assert!(store.wants_exactly(&Owner::Group("n1".into(), 1), &renderer.group(&mirror, 1)));
    }
}

#[test]
fn a_unit_s_datapoints_are_an_owner_of_their_own() {
    use crate::cloud::datapoints::{Datapoint, DatapointValue};
    let (renderer, mut store, mut mirror) = setup(DiscoveryMode::Device);
    let (unit_owner, data_owner) = (Owner::Unit("n1".into(), 1), Owner::Data("n1".into(), 1));
    let unit_topics = store.topics_of(&unit_owner);
    let time = chrono::DateTime::UNIX_EPOCH;
    let point = Datapoint { time, unit: Some(1), key: "energy".into(), value: DatapointValue::parse("1.5") };
    assert_eq!(mirror.data.take(&[point]).into_iter().collect::<Vec<_>>(), [1]);
    let ops = data_ops(&renderer, &mut store, &mirror, &[1]);
    assert_eq!(
        topics(&ops),
        [
            "homeassistant/device/casambi2mqtt_n1_a1/config",
            "casambi/home/unit/lamp/data",
            "casambi/home/unit/lamp/data/energy"
        ],
        "the device config gains the energy sensor"
    );
    assert_eq!(store.topics_of(&unit_owner), unit_topics, "the unit keeps its topics");
    assert_eq!(store.topics_of(&data_owner), ["casambi/home/unit/lamp/data", "casambi/home/unit/lamp/data/energy"]);
    assert!(mirror.owners().contains(&data_owner));
    for op in &ops {
        store.record(op.receipt());
    }
    // A unit that goes takes its datapoints' topics with it.
    mirror.view.units.remove(&1);
    mirror.reslug();
    mirror.recache_groups();
    let ops = network_ops(&renderer, &mut store, &mirror);
    let cleared: Vec<&str> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Clear { topic } => Some(topic.as_str()),
            Op::Publish { .. } => None,
        })
        .collect();
    assert!(cleared.contains(&"casambi/home/unit/lamp/data/energy"), "{cleared:?}");
    assert!(cleared.contains(&"casambi/home/unit/lamp/data"), "{cleared:?}");
    assert!(store.topics_of(&data_owner).is_empty());
}

#[test]
fn a_group_is_rendered_once_for_its_member_changes_taken_in_together() {
    let (renderer, mut store, mut mirror) = setup(DiscoveryMode::Device);
    let mut text = StateText::default();
    for level in ["0.6", "0.7", "0.8"] {
        let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut text, unit(&LAMP.replace("0.5", level)));
        assert!(!topics(&ops).contains(&"casambi/home/group/hall"), "{:?}", topics(&ops));
    }
    assert_eq!(mirror.stale_groups, [1], "one entry per group, however many member changes");
    let ops = stale_group_ops(&renderer, &mut store, &mut mirror, &mut text);
    assert_eq!(topics(&ops), ["casambi/home/group/hall"]);
    let Op::Publish { payload, .. } = &ops[0] else { panic!("{:?}", topics(&ops)) };
    let json: serde_json::Value = serde_json::from_str(payload).unwrap();
    assert_eq!(json["brightness"], 204, "the group's JSON after the last change: {payload}");
    // Nothing stale: nothing to render; a change that leaves every reading as it is marks
    // no group.
    assert!(stale_group_ops(&renderer, &mut store, &mut mirror, &mut text).is_empty());
    unit_ops(&renderer, &mut store, &mut mirror, &mut text, unit(&LAMP.replace("0.5", "0.8")));
    assert!(mirror.stale_groups.is_empty());
}

#[test]
fn a_firmware_or_capability_change_renders_discovery_again() {
    let (renderer, mut store, mut mirror) = setup(DiscoveryMode::Device);
    let ops =
        unit_ops(&renderer, &mut store, &mut mirror, &mut StateText::default(), unit(&LAMP.replace("1.0", "2.0")));
    assert!(topics(&ops).iter().any(|t| t.starts_with("homeassistant/device/")), "{:?}", topics(&ops));
    let cct = LAMP.replace(r#"]}"#, r#",{"type":"CCT","value":3000,"min":2700,"max":6500}]}"#);
    let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut StateText::default(), unit(&cct));
    assert!(topics(&ops).iter().any(|t| t.starts_with("homeassistant/device/")), "{:?}", topics(&ops));
    assert!(store.wants_exactly(&Owner::Unit("n1".into(), 1), &renderer.unit(&mirror, 1)));
}

#[test]
fn an_attribute_that_becomes_unknown_loses_its_topic() {
    let (renderer, mut store, mut mirror) = setup(DiscoveryMode::Device);
    let dark = r#"{"id":2,"name":"Sensor","address":"a2","type":"Sensor","online":true,"controls":[{"type":"Lux"}]}"#;
    let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut StateText::default(), unit(dark));
    assert!(topics(&ops).iter().all(|t| !t.starts_with("homeassistant/")), "{:?}", topics(&ops));
    assert!(ops.contains(&Op::Clear { topic: "casambi/home/unit/sensor/illuminance".into() }), "{ops:?}");
    assert!(store.wants_exactly(&Owner::Unit("n1".into(), 2), &renderer.unit(&mirror, 2)));
}

#[test]
fn a_device_config_that_loses_a_component_carries_the_published_text() {
    let (renderer, mut store, mut mirror) = setup(DiscoveryMode::Device);
    let mut text = StateText::default();
    let with_presence = r#"{"id":2,"name":"Sensor","address":"a2","type":"Sensor","online":true,
        "controls":[{"type":"Lux","value":3},{"type":"Presence","status":"absent"}]}"#;
    let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut text, unit(with_presence));
    let config = |ops: &[Op]| {
        ops.iter()
            .find_map(|op| match op {
                Op::Publish { topic, payload, previous, .. } if topic.starts_with("homeassistant/device/") => {
                    Some((payload.clone(), previous.clone()))
                }
                _ => None,
            })
            .expect("the device config is published")
    };
    let (two, _) = config(&ops);
    for op in &ops {
        store.record(op.receipt());
    }
    let lux_only = r#"{"id":2,"name":"Sensor","address":"a2","type":"Sensor","online":true,
        "controls":[{"type":"Lux","value":3}]}"#;
    let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut text, unit(lux_only));
    let (one, previous) = config(&ops);
    assert_eq!(previous.as_deref(), Some(two.as_str()), "the published text with both components");
    assert!(crate::mqtt::discovery::removal_step(&two, &one).is_some());
    // That one was not sent (disconnected): back to both components, the broker already has
    // that config, so nothing is published for it.
    let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut text, unit(with_presence));
    assert!(ops.iter().all(|op| !matches!(op, Op::Publish { topic, .. } if topic.starts_with("homeassistant/"))));
}

#[test]
fn a_status_change_renders_what_depends_on_the_status_and_agrees_with_a_full_render() {
    use crate::bridge::state::Connection;
    let (renderer, mut store, mut mirror) = setup(DiscoveryMode::Device);
    let mut text = StateText::default();
    let mut to = |mirror: &mut NetMirror, store: &mut Store, connection| {
        let before = mirror.view.status.available();
        mirror.view.status.connection = connection;
        let ops = status_ops(&renderer, store, mirror, &mut text, before != mirror.view.status.available());
        for op in &ops {
            store.record(op.receipt());
        }
        // What the store wants is what a full render wants: nothing left to publish.
        assert!(network_ops(&renderer, store, mirror).is_empty(), "{connection:?}");
        topics(&ops).into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    // Available: the network and every unit.
    let t = to(&mut mirror, &mut store, Connection::Polling);
    for topic in ["casambi/home", "casambi/home/availability", "casambi/home/unit/lamp/availability"] {
        assert!(t.iter().any(|x| x == topic), "{topic} in {t:?}");
    }
    assert!(t.iter().all(|t| !t.starts_with("homeassistant/")), "{t:?}");
    // Live: still available; only the network JSON changes.
    assert_eq!(to(&mut mirror, &mut store, Connection::Live), vec!["casambi/home"]);
    // Down: unavailable again.
    let t = to(&mut mirror, &mut store, Connection::Down);
    assert!(t.iter().any(|x| x == "casambi/home/unit/sensor/availability"), "{t:?}");
}

/// Four lamps in two overlapping groups (lamp 3 in both), everything published.
fn two_groups() -> (Renderer, Store, NetMirror) {
    let lamp = |id: u32| format!(r#""{id}":{{"id":{id},"name":"Lamp {id}","address":"a{id}"}}"#);
    let net: Network = serde_json::from_str(&format!(
        r#"{{"id":"n1","name":"Home","units":{{{}}},"groups":{{
        "1":{{"id":1,"name":"Hall","units":[{{"id":1}},{{"id":2}},{{"id":3}}]}},
        "2":{{"id":2,"name":"Stairs","units":[{{"id":3}},{{"id":4}}]}}}}}}"#,
        (1..=4).map(lamp).collect::<Vec<_>>().join(",")
    ))
    .unwrap();
    let mut view = NetworkView::new("n1");
    view.apply_config(&net);
    for id in 1..=4 {
        view.apply_unit(UnitState::clone(&lamp_at(id, 0.5, true)), false);
    }
    let renderer = Renderer {
        layout: Layout::new("casambi"),
        discovery: None,
        attribute_topics: false,
        data_sensors: Default::default(),
    };
    published(renderer, view)
}

fn lamp_at(id: u32, level: f64, on: bool) -> Arc<UnitState> {
    lamp_as(id, level, on, "Luminaire", &format!("Lamp {id}"))
}

/// Lamp `id` of [`two_groups`] as a `kind` unit named `name`.
fn lamp_as(id: u32, level: f64, on: bool, kind: &str, name: &str) -> Arc<UnitState> {
    unit(&format!(
        r#"{{"id":{id},"name":"{name}","address":"a{id}","type":"{kind}","online":true,"on":{on},
        "controls":[{{"type":"Dimmer","value":{level}}}]}}"#
    ))
}

proptest::proptest! {
    /// Whatever changes a member (its level, its being on, its type and so whether it is a
    /// light, its name and so the mirror's slugs), the cached group JSON is the one worked
    /// out from the units again.
    #[test]
    fn the_group_cache_follows_every_member_change(
        changes in proptest::collection::vec(
            (1u32..=4, 0u8..=4, proptest::bool::ANY, 0usize..3, proptest::bool::ANY),
            1..12,
        )
    ) {
        let (renderer, mut store, mut mirror) = two_groups();
        let mut text = StateText::default();
        for (id, level, on, kind, renamed) in changes {
            let kind = ["Luminaire", "Sensor", "Driver"][kind];
            let name = if renamed { format!("Lamp {id} renamed") } else { format!("Lamp {id}") };
            let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut text, lamp_as(id, f64::from(level) / 4.0, on, kind, &name));
            for op in &ops {
                store.record(op.receipt());
            }
            for op in stale_group_ops(&renderer, &mut store, &mut mirror, &mut text) {
                store.record(op.receipt());
            }
            for g in mirror.view.groups.values() {
                let fresh = GroupJson::of(g, |u| mirror.view.units.get(&u).map(|u| member_reading(u, mirror.caps(u).is_light())));
                let (mut want, mut cached) = (Vec::new(), Vec::new());
                fresh.write_json(&mut want);
                proptest::prop_assert!(mirror.group_cache.write_json(g, &mut cached), "group {} cached", g.id);
                proptest::prop_assert_eq!(String::from_utf8(cached).unwrap(), String::from_utf8(want).unwrap());
            }
        }
    }

    /// Whatever a unit's change touches (its level, its type and so its capabilities, its
    /// firmware), every unit wants what a full render of the mirror gives: no input of its
    /// discovery config goes unnoticed.
    #[test]
    fn every_change_leaves_the_full_render_wanted(
        changes in proptest::collection::vec((1u32..=4, 0u8..=4, 0usize..3, 0usize..3), 1..10)
    ) {
        let (mut renderer, mut store, mut mirror) = two_groups();
        renderer.discovery = Some(Discovery { prefix: "homeassistant".into(), mode: DiscoveryMode::Device, qos: 1 });
        renderer.attribute_topics = true;
        for op in network_ops(&renderer, &mut store, &mirror) {
            store.record(op.receipt());
        }
        let mut text = StateText::default();
        for (id, level, kind, firmware) in changes {
            let (kind, firmware, level) = (["Luminaire", "Sensor", "Driver"][kind], ["1.0", "1.1", "2.0"][firmware], f64::from(level) / 4.0);
            let changed = unit(&format!(
                r#"{{"id":{id},"name":"Lamp {id}","address":"a{id}","type":"{kind}","firmwareVersion":"{firmware}",
                "online":true,"on":true,"controls":[{{"type":"Dimmer","value":{level}}}]}}"#
            ));
            for op in unit_ops(&renderer, &mut store, &mut mirror, &mut text, changed) {
                store.record(op.receipt());
            }
            for op in stale_group_ops(&renderer, &mut store, &mut mirror, &mut text) {
                store.record(op.receipt());
            }
            for uid in mirror.view.units.keys() {
                let owner = Owner::Unit(mirror.key.clone(), *uid);
                proptest::prop_assert!(store.wants_exactly(&owner, &renderer.unit(&mirror, *uid)), "unit {}", uid);
            }
        }
    }

    /// However member changes fall into batches, each group's JSON is published once per
    /// batch at most, and after every batch the broker holds what a full render of the
    /// mirror gives: batching loses no group change.
    #[test]
    fn batched_groups_end_as_a_full_render(
        batches in proptest::collection::vec(
            proptest::collection::vec((1u32..=4, 0u8..=4, proptest::bool::ANY), 1..6),
            1..8,
        )
    ) {
        let (renderer, mut store, mut mirror) = two_groups();
        let mut text = StateText::default();
        for batch in batches {
            for (id, level, on) in batch {
                let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut text, lamp_at(id, f64::from(level) / 4.0, on));
                proptest::prop_assert!(!topics(&ops).iter().any(|t| t.contains("/group/")), "{:?}", topics(&ops));
                for op in &ops {
                    store.record(op.receipt());
                }
            }
            let ops = stale_group_ops(&renderer, &mut store, &mut mirror, &mut text);
            let mut seen = topics(&ops);
            seen.dedup();
            proptest::prop_assert_eq!(seen.len(), ops.len(), "a group twice in one batch");
            for op in &ops {
                store.record(op.receipt());
            }
            proptest::prop_assert!(mirror.stale_groups.is_empty());
            for g in [1, 2] {
                for (topic, payload) in renderer.group(&mirror, g) {
                    proptest::prop_assert!(store.has_published(&topic, &payload), "{topic} is not {payload}");
                }
            }
        }
    }
}

/// The publications among `ops`, as (topic, payload).
fn published_pairs(ops: &[Op]) -> Vec<(String, String)> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Publish { topic, payload, .. } => Some((topic.clone(), payload.clone())),
            Op::Clear { .. } => None,
        })
        .collect()
}

/// Whether `topic` is a unit's plain attribute topic.
fn is_attribute(topic: &str) -> bool {
    matches!(topic.split('/').collect::<Vec<_>>().as_slice(), ["casambi", "home", "unit", _, leaf] if *leaf != "availability")
}

#[test]
fn a_whole_render_owes_the_attribute_topics_and_a_change_in_between_publishes_its_own() {
    let (renderer, _, mut mirror) = setup(DiscoveryMode::Device);
    let owners = mirror.owners();
    let full: Vec<(String, String)> = owners.iter().flat_map(|o| renderer.owner(&mirror, o)).collect();
    let mut store = Store::default();
    let mut owed = Vec::new();
    let ops = owner_ops_owing(&renderer, &mut store, &mirror, &owners, &mut owed);
    assert_eq!(owed, [1, 2]);
    let first = published_pairs(&ops);
    let rest: Vec<(String, String)> = full.iter().filter(|(t, _)| !is_attribute(t)).cloned().collect();
    assert_eq!(first, rest, "everything but the attribute topics, in order");
    for op in &ops {
        store.record(op.receipt());
    }

    // A change before the second pass publishes what it changed, attribute topics included.
    let changed = LAMP.replace("0.5", "0.7");
    let mut text = StateText::default();
    let ops = unit_ops(&renderer, &mut store, &mut mirror, &mut text, unit(&changed));
    let changes = topics(&ops);
    assert!(changes.contains(&"casambi/home/unit/lamp") && changes.contains(&"casambi/home/unit/lamp/brightness"));
    assert!(changes.iter().all(|t| t.starts_with("casambi/home/unit/lamp")), "{changes:?}");
    for op in ops.iter().chain(&stale_group_ops(&renderer, &mut store, &mut mirror, &mut text)) {
        store.record(op.receipt());
    }

    // The second pass: every attribute topic, with the values a full render has now.
    let now: Vec<(String, String)> =
        mirror.owners().iter().flat_map(|o| renderer.owner(&mirror, o)).filter(|(t, _)| is_attribute(t)).collect();
    assert!(now.len() >= 10, "{now:?}");
    assert_eq!(published_pairs(&attribute_ops(&renderer, &mirror, &owed, &mut text)), now);
    // Counted as handed over: the store wants nothing more.
    let again = owner_ops(&renderer, &mut store, &mirror, &mirror.owners());
    assert!(published_pairs(&again).is_empty(), "{:?}", topics(&again));
}
