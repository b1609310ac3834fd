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
