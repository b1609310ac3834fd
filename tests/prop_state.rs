//! Property tests of the bridge state's diff (`NetworkView::apply_unit` / `apply_snapshot`): an
//! event applied twice changes nothing the second time, a replay of what is known (resync burst,
//! the same snapshot again) changes nothing, `changed` is reported exactly when the stored state
//! changed, and occupancy events follow the presence status.

use casambi2mqtt::bridge::state::{NetworkView, UnitDelta, is_switch, presence};
use casambi2mqtt::cloud::model::{
    Control, Group, GroupUnit, NetworkState, Plain, Scene, SceneUnit, StatusControl, UnitState, ValueControl,
};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use std::collections::BTreeMap;

/// `n` cases, or `PROPTEST_CASES` when set (for a longer run).
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig::with_cases(std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(n))
}

/// Few distinct values per field, so that events often repeat what is stored.
fn control() -> impl Strategy<Value = Control> {
    prop_oneof![
        (0u8..4).prop_map(|v| Control::Dimmer(ValueControl {
            value: f64::from(v) / 4.0,
            name: None,
            extra: Default::default()
        })),
        prop::sample::select(vec!["absent", "present", "presence"]).prop_map(|s| Control::Presence(StatusControl {
            status: s.into(),
            name: None,
            extra: Default::default()
        })),
        (0u8..2).prop_map(|v| Control::OnOff(ValueControl {
            value: f64::from(v),
            name: None,
            extra: Default::default()
        })),
        Just(Control::Switch(Plain::default())),
        Just(Control::Other(serde_json::json!({"type": "Mystery", "v": 1}))),
    ]
}

/// A unit state as an event or a snapshot carries it: any subset of the fields.
fn unit_state(ids: std::ops::Range<u32>) -> impl Strategy<Value = UnitState> {
    (
        ids,
        prop::option::of(prop::sample::select(vec!["Lamp", "Spot", "Küche"])),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(prop::collection::vec(control(), 0..3)),
        prop::option::of((0u8..3).prop_map(|d| f64::from(d) / 2.0)),
        prop::option::of(0u32..3),
        prop::option::of(prop::sample::select(vec!["Luminaire", "Sensor", "BatterySwitch"])),
        prop::option::of(0i64..2),
    )
        .prop_map(|(id, name, on, online, controls, dim_level, active_scene_id, unit_type, condition)| UnitState {
            id,
            name: name.map(Into::into),
            on,
            online,
            controls,
            dim_level: dim_level.into(),
            active_scene_id: active_scene_id.into(),
            unit_type: unit_type.map(Into::into),
            condition: condition.into(),
            ..UnitState::default()
        })
}

fn events() -> impl Strategy<Value = Vec<(UnitState, bool)>> {
    prop::collection::vec((unit_state(0..6), any::<bool>()), 0..24)
}

fn view_after(events: &[(UnitState, bool)]) -> NetworkView {
    let mut view = NetworkView::new("n1");
    for (e, live) in events {
        view.apply_unit(e.clone(), *live);
    }
    view
}

fn units(view: &NetworkView) -> BTreeMap<u32, UnitState> {
    view.units.iter().map(|(k, v)| (*k, UnitState::clone(v))).collect()
}

/// A state snapshot with the given units, scenes and groups.
fn snapshot() -> impl Strategy<Value = NetworkState> {
    (
        prop::collection::btree_map(0u32..8, unit_state(0..1), 0..8),
        prop::collection::btree_map(1u32..4, ("[A-Z][a-z]{0,5}", prop::collection::vec(0u32..8, 0..3)), 0..3),
        prop::collection::btree_map(1u32..4, ("[A-Z][a-z]{0,5}", prop::collection::vec(0u32..8, 0..3)), 0..3),
        prop::option::of((0u8..5).prop_map(|d| f64::from(d) / 4.0)),
        prop::collection::vec(1u32..4, 0..3),
        prop::option::of(1u64..5),
    )
        .prop_map(|(units, scenes, groups, dim_level, active_scenes, revision)| NetworkState {
            id: "n1".into(),
            name: "Home".into(),
            revision,
            dim_level,
            active_scenes,
            units: units
                .into_iter()
                .map(|(id, mut u)| {
                    u.id = id;
                    (id.to_string(), u)
                })
                .collect(),
            scenes: scenes
                .into_iter()
                .map(|(id, (name, members))| {
                    let units =
                        members.into_iter().map(|m| (m.to_string(), SceneUnit { id: Some(m), state: None })).collect();
                    (id.to_string(), Scene { id, name, units, ..Scene::default() })
                })
                .collect(),
            groups: groups
                .into_iter()
                .map(|(id, (name, members))| {
                    let units = members.into_iter().map(|m| GroupUnit { id: m, position: None }).collect();
                    (id.to_string(), Group { id, name, units, position: None })
                })
                .collect(),
            ..NetworkState::default()
        })
}

proptest! {
    #![proptest_config(cases(1024))]

    #[test]
    fn the_same_event_twice_changes_nothing_the_second_time(
        history in events(),
        event in unit_state(0..6),
        live in any::<bool>(),
    ) {
        let mut view = view_after(&history);
        view.apply_unit(event.clone(), live);
        let before = units(&view);
        let second = view.apply_unit(event.clone(), live);
        prop_assert!(!second.changed, "second application changed the state: {event:?}");
        prop_assert_eq!(units(&view), before);
        // The only thing a repeat may report is a switch press (each press is an event).
        let stored_is_switch = is_switch(&view.units[&event.id]);
        prop_assert_eq!(second.occupancy, None, "a repeated event reported occupancy");
        if second.switch.is_some() {
            prop_assert!(live && (stored_is_switch || is_switch(&event)));
        }
        if !live {
            prop_assert_eq!(second, UnitDelta::default());
        }
    }

    #[test]
    fn replaying_what_is_known_changes_nothing(history in events(), live in any::<bool>()) {
        let mut view = view_after(&history);
        let before = units(&view);
        // The resync burst after a reopened wire: every unit as the bridge knows it.
        for unit in before.values() {
            let d = view.apply_unit(unit.clone(), live);
            prop_assert!(!d.changed, "replay of unit {} changed it", unit.id);
            prop_assert_eq!(d.occupancy, None, "replay reported occupancy");
        }
        prop_assert_eq!(units(&view), before);
    }

    #[test]
    fn replaying_a_whole_burst_ends_in_the_same_state(history in events()) {
        let once = units(&view_after(&history));
        let twice: Vec<(UnitState, bool)> = history.iter().chain(history.iter()).cloned().collect();
        prop_assert_eq!(units(&view_after(&twice)), once);
    }

    #[test]
    fn changed_is_reported_exactly_when_the_state_changed(
        history in events(),
        event in unit_state(0..6),
        live in any::<bool>(),
    ) {
        let mut view = view_after(&history);
        let before = view.units.get(&event.id).map(|u| UnitState::clone(u));
        let presence_before = before.as_ref().and_then(presence);
        let d = view.apply_unit(event.clone(), live);
        let after = UnitState::clone(&view.units[&event.id]);
        prop_assert_eq!(d.changed, before.as_ref() != Some(&after));
        // Occupancy is reported when a known unit's presence flips, switch or not; a switch's
        // report is a press when live.
        if before.is_some() {
            let expected = presence(&after).filter(|now| presence_before != Some(*now));
            prop_assert_eq!(d.occupancy, expected);
        }
        let switch = live && (before.as_ref().is_some_and(is_switch) || is_switch(&event));
        prop_assert_eq!(d.switch.is_some(), switch);
    }

    #[test]
    fn the_same_snapshot_twice_changes_nothing(snap in snapshot(), history in events()) {
        let mut view = view_after(&history);
        view.apply_snapshot(snap.clone());
        let before = units(&view);
        let status = view.status.clone();
        let again = view.apply_snapshot(snap);
        prop_assert!(again.topology.is_empty(), "{:?}", again.topology);
        prop_assert!(!again.status_changed);
        prop_assert!(again.changed_units.is_empty(), "{:?}", again.changed_units);
        prop_assert_eq!(units(&view), before);
        prop_assert_eq!(view.status, status);
    }
}
