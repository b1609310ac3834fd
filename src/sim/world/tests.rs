//! The world's mutations: control messages, scenes and groups, and the events they emit.

use super::*;
use serde_json::json;

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";

fn world() -> World {
    World::new(&Site::demo())
}

fn dimmer(w: &World, unit: i64) -> Option<f64> {
    control_value(&w.networks[HOME].units[&unit].def.controls, "Dimmer", "value")
}

#[test]
fn dimmer_control_changes_state_and_emits_one_event() {
    let mut w = world();
    let (_, mut rx) = w.open_view(HOME).unwrap();
    w.control_unit(HOME, 1, &json!({"Dimmer": {"value": 0.25}})).unwrap();
    assert_eq!(dimmer(&w, 1), Some(0.25));
    assert!(matches!(rx.try_recv(), Ok(WorldEvent::UnitChanged { unit: 1, .. })));
    // The same value again changes nothing and emits nothing.
    w.control_unit(HOME, 1, &json!({"Dimmer": {"value": 0.25}})).unwrap();
    assert!(rx.try_recv().is_err());
}

#[test]
fn invalid_controls_are_refused_and_change_nothing() {
    let mut w = world();
    let err = w.control_unit(HOME, 1, &json!({"Dimmer": {"value": "high"}})).unwrap_err();
    assert!(matches!(err, ControlError::InvalidValueType(_)));
    let err = w.control_unit(HOME, 1, &json!({"Dimmer": {"value": 1.5}})).unwrap_err();
    assert!(matches!(err, ControlError::InvalidData(_)));
    let err = w.control_unit(HOME, 1, &json!({"Sparkle": {"value": 1}})).unwrap_err();
    assert!(matches!(err, ControlError::InvalidData(_)));
    assert_eq!(dimmer(&w, 1), Some(0.8));
}

#[test]
fn temperature_is_clamped_to_the_cct_range() {
    let mut w = world();
    w.control_unit(HOME, 2, &json!({"ColorTemperature": {"value": 9000}, "Colorsource": {"source": "TW"}})).unwrap();
    let cct = control_value(&w.networks[HOME].units[&2].def.controls, "CCT", "value");
    assert_eq!(cct, Some(6500.0));
}

#[test]
fn scene_activation_sets_members_and_active_list() {
    let mut w = world();
    w.control_scene(HOME, 1, 1.0).unwrap();
    assert!(w.networks[HOME].active_scenes.contains(&1));
    assert_eq!(dimmer(&w, 1), Some(0.4));
    assert_eq!(w.networks[HOME].units[&1].active_scene_id, 1);
    // A direct command takes the unit out of the scene.
    w.control_unit(HOME, 1, &json!({"Dimmer": {"value": 0.9}})).unwrap();
    assert_eq!(w.networks[HOME].units[&1].active_scene_id, 0);
    w.control_scene(HOME, 1, 0.0).unwrap();
    assert!(!w.networks[HOME].active_scenes.contains(&1));
    assert_eq!(dimmer(&w, 2), Some(0.0));
}

#[test]
fn onoff_restores_last_level() {
    let mut w = world();
    w.control_unit(HOME, 1, &json!({"Dimmer": {"value": 0.0}})).unwrap();
    w.control_unit(HOME, 1, &json!({"OnOff": {"value": 1}})).unwrap();
    assert_eq!(dimmer(&w, 1), Some(0.8));
}

#[test]
fn offline_gateway_ignores_commands() {
    let mut w = world();
    let (_, mut rx) = w.open_view(HOME).unwrap();
    w.set_gateway(HOME, false).unwrap();
    assert!(matches!(rx.try_recv(), Ok(WorldEvent::PeerChanged { online: false })));
    w.control_unit(HOME, 1, &json!({"Dimmer": {"value": 0.1}})).unwrap();
    assert_eq!(dimmer(&w, 1), Some(0.8));
}

#[test]
fn config_changes_bump_revision() {
    let mut w = world();
    let rev = w.networks[HOME].revision;
    w.rename(HOME, "unit", 1, "Kitchen main").unwrap();
    w.remove_unit(HOME, 8).unwrap();
    assert_eq!(w.networks[HOME].revision, rev + 2);
    assert!(!w.networks[HOME].groups[1].units.contains(&8));
}

/// `set_unit_state` decides from what it changed, without rendering the body before the change;
/// it must emit exactly when the rendered body changed, with the body after it.
#[test]
fn set_unit_state_emits_exactly_when_the_rendered_body_changes() {
    type Case = (&'static str, Option<bool>, Option<bool>, Value);
    let cases: [Case; 12] = [
        ("the same Dimmer value", None, None, json!([{"type": "Dimmer", "value": 0.8}])),
        ("a new Dimmer value", None, None, json!([{"type": "Dimmer", "value": 0.3}])),
        ("a new field of a control", None, None, json!([{"type": "Dimmer", "note": "x"}])),
        ("a control of a new type", None, None, json!([{"type": "Lux", "value": 12}])),
        ("on, as it was", None, Some(true), json!([])),
        ("off", None, Some(false), json!([])),
        ("offline", Some(false), None, json!([])),
        ("offline again", Some(false), None, json!([])),
        ("a control while offline", None, None, json!([{"type": "Dimmer", "value": 0.6}])),
        ("on while offline", None, Some(true), json!([])),
        ("online", Some(true), None, json!([])),
        ("nothing", None, None, json!([])),
    ];
    let mut w = world();
    let (_, mut rx) = w.open_view(HOME).unwrap();
    let body = |w: &World| render::unit_event(&w.networks[HOME], &w.networks[HOME].units[&1]);
    for (what, online, on, controls) in cases {
        let before = body(&w);
        w.set_unit_state(HOME, 1, online, on, controls.as_array().unwrap()).unwrap();
        let after = body(&w);
        match rx.try_recv() {
            Ok(WorldEvent::UnitChanged { unit: 1, body }) => {
                assert_ne!(before, after, "{what}: an event for a body that did not change");
                assert_eq!(body, after, "{what}: the event's body");
            }
            Ok(other) => panic!("{what}: {other:?}"),
            Err(_) => assert_eq!(before, after, "{what}: no event for a changed body"),
        }
        assert!(rx.try_recv().is_err(), "{what}: one event at most");
    }
    // With the gateway away, nothing a unit's state does shows.
    w.set_gateway(HOME, false).unwrap();
    let _ = rx.try_recv();
    w.set_unit_state(HOME, 1, None, Some(false), json!([{"type": "Dimmer", "value": 0.1}]).as_array().unwrap())
        .unwrap();
    assert!(rx.try_recv().is_err(), "an event with the gateway away");
}
