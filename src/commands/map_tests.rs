//! Mapping: the exact control message for each capability, clamping, toggles and refusals.

use super::*;
use crate::bridge::state::{GroupInfo, NetworkView, SceneInfo};
use crate::cloud::model::UnitState;
use crate::commands::known::Known;
use crate::commands::parse::{Target, parse};
use std::sync::Arc;

const MEMORY: Duration = Duration::from_secs(1);

fn network() -> NetworkInfo {
    let mut view = NetworkView::new("n1");
    view.status.name = "Home".into();
    let units = [
        r#"{"id":1,"name":"Kitchen","type":"Luminaire","on":true,"controls":[{"type":"Dimmer","value":0.8}]}"#,
        r#"{"id":2,"name":"Spots","type":"Luminaire","on":true,"controls":[{"type":"Dimmer","value":0.5},{"type":"CCT","value":3000,"min":2700,"max":6500}]}"#,
        r#"{"id":3,"name":"Lamp","type":"Luminaire","on":false,"controls":[{"type":"Dimmer","value":0},{"type":"Colorsource","source":"XY"},{"type":"Color","x":0.3,"y":0.3}]}"#,
        r#"{"id":4,"name":"Hallway presence","type":"Sensor","controls":[{"type":"Presence","status":"absent"}]}"#,
        r#"{"id":8,"name":"Plug","type":"Luminaire","on":true,"controls":[{"type":"OnOff","value":1}]}"#,
        r#"{"id":9,"name":"Garage","type":"Luminaire","online":false,"on":false,"controls":[{"type":"Dimmer","value":0}]}"#,
    ];
    for u in units {
        let state: UnitState = serde_json::from_str(u).unwrap();
        view.units.insert(state.id, Arc::new(state));
    }
    view.groups.insert(1, GroupInfo { id: 1, name: "Kitchen".into(), units: vec![1, 2] });
    view.groups.insert(2, GroupInfo { id: 2, name: "Living".into(), units: vec![3] });
    view.groups.insert(3, GroupInfo { id: 3, name: "Mixed".into(), units: vec![1, 8, 4, 2, 9, 77] });
    view.groups.insert(4, GroupInfo { id: 4, name: "Sensors".into(), units: vec![4] });
    view.scenes.insert(1, SceneInfo { id: 1, name: "Evening".into(), units: vec![1], hidden: false });
    view.scenes.insert(2, SceneInfo { id: 2, name: "Cooking".into(), units: vec![1], hidden: false });
    view.status.active_scenes.insert(2);
    let mut known = Known::default();
    known.observe_view(&view);
    known.network("n1").unwrap().clone()
}

fn target_of(key: Key) -> Target {
    match key {
        Key::Unit(id) => Target::Unit { id, attr: None },
        Key::Group(id) => Target::Group(id),
        Key::Scene(id) => Target::Scene(id),
        Key::Network => Target::Network,
    }
}

fn planned(net: &NetworkInfo, key: Key, payload: &str) -> Result<Plan, CommandError> {
    let command = parse(&target_of(key), payload.as_bytes())?;
    plan(&command, key, net, MEMORY)
}

/// The JSON sent on wire 3.
fn json(net: &NetworkInfo, key: Key, payload: &str) -> String {
    let p = planned(net, key, payload).unwrap_or_else(|e| panic!("{payload}: {e}"));
    with_wire(p.message, 3).to_json().unwrap()
}

fn reason(net: &NetworkInfo, key: Key, payload: &str) -> String {
    planned(net, key, payload).map(|p| format!("accepted: {p:?}")).unwrap_or_else(|e| e.to_string())
}

fn unit_msg(id: u32, controls: &str) -> String {
    format!(r#"{{"method":"controlUnit","wire":3,"id":{id},"targetControls":{controls}}}"#)
}

#[test]
fn dimmable_units() {
    let net = network();
    let k = Key::Unit(1);
    assert_eq!(json(&net, k, r#"{"state":"ON","brightness":128}"#), unit_msg(1, r#"{"Dimmer":{"value":0.502}}"#));
    assert_eq!(json(&net, k, r#"{"brightness":255}"#), unit_msg(1, r#"{"Dimmer":{"value":1.0}}"#));
    assert_eq!(json(&net, k, "OFF"), unit_msg(1, r#"{"Dimmer":{"value":0.0}}"#));
    assert_eq!(json(&net, k, r#"{"brightness":0}"#), unit_msg(1, r#"{"Dimmer":{"value":0.0}}"#));
    // ON restores the last level seen (0.8), not 1.
    assert_eq!(json(&net, k, "ON"), unit_msg(1, r#"{"Dimmer":{"value":0.8}}"#));
    // TOGGLE of a unit that is on turns it off; of one that is off restores its level.
    assert_eq!(json(&net, k, "TOGGLE"), unit_msg(1, r#"{"Dimmer":{"value":0.0}}"#));
    assert_eq!(json(&net, Key::Unit(3), "TOGGLE"), unit_msg(3, r#"{"Dimmer":{"value":1.0}}"#));
    // OFF wins over anything else in the command.
    assert_eq!(json(&net, k, r#"{"state":"OFF","brightness":100}"#), unit_msg(1, r#"{"Dimmer":{"value":0.0}}"#));
}

#[test]
fn brightness_round_trips_through_the_level() {
    let net = network();
    for b in 0..=255u8 {
        let p = planned(&net, Key::Unit(1), &format!(r#"{{"brightness":{b}}}"#)).unwrap();
        let ClientMessage::ControlUnit { target_controls, .. } = p.message else { panic!() };
        let v = target_controls.dimmer.unwrap().value;
        assert_eq!((v * 255.0).round() as u8, b);
    }
}

#[test]
fn on_off_only_units() {
    let net = network();
    let k = Key::Unit(8);
    assert_eq!(json(&net, k, "ON"), unit_msg(8, r#"{"OnOff":{"value":1.0}}"#));
    assert_eq!(json(&net, k, r#"{"state":"OFF"}"#), unit_msg(8, r#"{"OnOff":{"value":0.0}}"#));
    assert_eq!(json(&net, k, "TOGGLE"), unit_msg(8, r#"{"OnOff":{"value":0.0}}"#));
    assert_eq!(reason(&net, k, r#"{"brightness":100}"#), "unit Plug has no dimmer control");
}

#[test]
fn colour_temperature_is_clamped_to_the_unit() {
    let net = network();
    let k = Key::Unit(2);
    assert_eq!(
        json(&net, k, r#"{"color_temp":4000}"#),
        unit_msg(2, r#"{"ColorTemperature":{"value":4000.0},"Colorsource":{"source":"TW"}}"#)
    );
    assert_eq!(
        json(&net, k, r#"{"state":"ON","color_temp":9000}"#),
        unit_msg(2, r#"{"Dimmer":{"value":0.5},"ColorTemperature":{"value":6500.0},"Colorsource":{"source":"TW"}}"#)
    );
    assert_eq!(
        json(&net, k, r#"{"color_temp":2000}"#),
        unit_msg(2, r#"{"ColorTemperature":{"value":2700.0},"Colorsource":{"source":"TW"}}"#)
    );
    assert_eq!(reason(&net, Key::Unit(1), r#"{"color_temp":3000}"#), "unit Kitchen has no colour temperature control");
}

#[test]
fn colour_becomes_hue_and_saturation() {
    let net = network();
    let k = Key::Unit(3);
    assert_eq!(
        json(&net, k, r#"{"color":{"x":0.64,"y":0.33}}"#),
        unit_msg(3, r#"{"Colorsource":{"source":"RGB"},"RGB":{"hue":0.0,"sat":1.0}}"#)
    );
    assert_eq!(
        json(&net, k, r#"{"state":"ON","brightness":51,"color":{"r":0,"g":0,"b":255}}"#),
        unit_msg(3, r#"{"Dimmer":{"value":0.2},"Colorsource":{"source":"RGB"},"RGB":{"hue":0.6667,"sat":1.0}}"#)
    );
    // A warm orange (x 0.5, y 0.4): hue 25°, sat 0.74 (checked against Python colorsys).
    assert_eq!(
        json(&net, k, r#"{"color":{"x":0.5,"y":0.4}}"#),
        unit_msg(3, r#"{"Colorsource":{"source":"RGB"},"RGB":{"hue":0.0696,"sat":0.7415}}"#)
    );
    assert_eq!(reason(&net, Key::Unit(2), r#"{"color":{"x":0.3,"y":0.3}}"#), "unit Spots has no colour control");
    // Home Assistant's hs mode: only scaled, whatever the colour space.
    assert_eq!(
        json(&net, k, r#"{"state":"ON","color":{"h":240,"s":100}}"#),
        unit_msg(3, r#"{"Dimmer":{"value":1.0},"Colorsource":{"source":"RGB"},"RGB":{"hue":0.666667,"sat":1.0}}"#)
    );
    assert_eq!(
        json(&net, k, r#"{"color":{"h":30.5,"s":42}}"#),
        unit_msg(3, r#"{"Colorsource":{"source":"RGB"},"RGB":{"hue":0.084722,"sat":0.42}}"#)
    );
    assert_eq!(reason(&net, Key::Unit(2), r#"{"color":{"h":0,"s":100}}"#), "unit Spots has no colour control");
}

#[test]
fn non_lights_and_unknown_targets_are_refused() {
    let net = network();
    assert_eq!(reason(&net, Key::Unit(4), "ON"), "unit Hallway presence is not a light");
    assert_eq!(reason(&net, Key::Unit(99), "ON"), "unit 99 is not known in network Home");
    assert_eq!(reason(&net, Key::Group(9), "ON"), "group 9 is not known in network Home");
    assert_eq!(reason(&net, Key::Scene(9), "ON"), "scene 9 is not known in network Home");
}

#[test]
fn groups_scenes_and_network_levels() {
    let net = network();
    let group = |payload| json(&net, Key::Group(1), payload);
    assert_eq!(group(r#"{"state":"ON","brightness":51}"#), r#"{"method":"controlGroup","wire":3,"id":1,"level":0.2}"#);
    assert_eq!(group("OFF"), r#"{"method":"controlGroup","wire":3,"id":1,"level":0.0}"#);
    // A member is on, so the group is on: TOGGLE turns it off. Group 2's only member is off.
    assert_eq!(group("TOGGLE"), r#"{"method":"controlGroup","wire":3,"id":1,"level":0.0}"#);
    assert_eq!(group("TOGGLE"), r#"{"method":"controlGroup","wire":3,"id":1,"level":0.0}"#);

    let p = planned(&net, Key::Scene(1), "ON").unwrap();
    assert!(p.refresh_after, "scene commands refresh activeScenes");
    assert_eq!(with_wire(p.message, 3).to_json().unwrap(), r#"{"method":"controlScene","wire":3,"id":1,"level":1.0}"#);
    assert_eq!(
        json(&net, Key::Scene(1), r#"{"brightness":128}"#),
        r#"{"method":"controlScene","wire":3,"id":1,"level":0.502}"#
    );
    // Scene 2 is active: TOGGLE deactivates it.
    assert_eq!(json(&net, Key::Scene(2), "TOGGLE"), r#"{"method":"controlScene","wire":3,"id":2,"level":0.0}"#);

    let p = planned(&net, Key::Network, r#"{"dim_level":0.42}"#).unwrap();
    assert!(p.refresh_after);
    assert_eq!(with_wire(p.message, 3).to_json().unwrap(), r#"{"method":"controlNetwork","wire":3,"level":0.42}"#);
}

#[test]
fn a_sent_toggle_is_remembered_for_the_next_one() {
    let mut net = network();
    let first = planned(&net, Key::Unit(1), "TOGGLE").unwrap();
    assert_eq!(first.expect_on, Some(false));
    net.expect(Key::Unit(1), false);
    assert_eq!(json(&net, Key::Unit(1), "TOGGLE"), unit_msg(1, r#"{"Dimmer":{"value":0.8}}"#));
}

/// The cloud takes a command to an offline unit and nothing happens: it is refused instead, with
/// the unit's name, whatever it asks.
#[test]
fn commands_to_an_offline_unit_are_refused() {
    let net = network();
    for payload in ["ON", "OFF", "TOGGLE", r#"{"brightness":10}"#] {
        assert_eq!(reason(&net, Key::Unit(9), payload), "unit Garage is offline; command not sent", "{payload}");
    }
    assert!(planned(&net, Key::Unit(1), "ON").is_ok(), "an online unit takes it");
}

/// With the network's gateway offline, no command of any kind is sent.
#[test]
fn commands_to_a_network_whose_gateway_is_offline_are_refused() {
    let mut net = network();
    net.gateway_offline = true;
    let refused = "the gateway of network Home is offline; command not sent";
    for (key, payload) in [(Key::Unit(1), "ON"), (Key::Group(1), "ON"), (Key::Scene(1), "ON"), (Key::Network, "0.5")] {
        assert_eq!(reason(&net, key, payload), refused, "{key:?}");
    }
}

/// Every message of a plan as sent on wire 3.
fn all_json(net: &NetworkInfo, key: Key, payload: &str) -> Vec<String> {
    let p = planned(net, key, payload).unwrap_or_else(|e| panic!("{payload}: {e}"));
    std::iter::once(p.message).chain(p.then).map(|m| with_wire(m, 3).to_json().unwrap()).collect()
}

/// A group switched on without a brightness returns each member light to its own last level, as
/// `ON` does for a unit (docs/commands.md): a `controlUnits` per level, `OnOff` for on/off-only
/// members; sensors and units the network does not know are left out.
#[test]
fn a_group_on_without_brightness_returns_its_members_to_their_levels() {
    let net = network();
    assert_eq!(
        all_json(&net, Key::Group(1), "ON"),
        [
            r#"{"method":"controlUnits","wire":3,"ids":[2],"targetControls":{"Dimmer":{"value":0.5}}}"#,
            r#"{"method":"controlUnits","wire":3,"ids":[1],"targetControls":{"Dimmer":{"value":0.8}}}"#,
        ]
    );
    // The Garage (offline, never seen on) returns to full, as a unit would.
    assert_eq!(
        all_json(&net, Key::Group(3), r#"{"state":"ON"}"#),
        [
            r#"{"method":"controlUnits","wire":3,"ids":[2],"targetControls":{"Dimmer":{"value":0.5}}}"#,
            r#"{"method":"controlUnits","wire":3,"ids":[1],"targetControls":{"Dimmer":{"value":0.8}}}"#,
            r#"{"method":"controlUnits","wire":3,"ids":[9],"targetControls":{"Dimmer":{"value":1.0}}}"#,
            r#"{"method":"controlUnits","wire":3,"ids":[8],"targetControls":{"OnOff":{"value":1.0}}}"#,
        ]
    );
    // TOGGLE of a group that is off turns it on the same way.
    assert_eq!(
        all_json(&net, Key::Group(2), "TOGGLE"),
        [r#"{"method":"controlUnits","wire":3,"ids":[3],"targetControls":{"Dimmer":{"value":1.0}}}"#]
    );
    let p = planned(&net, Key::Group(1), "ON").unwrap();
    assert_eq!(p.expect_on, Some(true));
    // With a brightness, or without a member light, the group's level does it.
    assert_eq!(
        all_json(&net, Key::Group(1), r#"{"state":"ON","brightness":51}"#),
        [r#"{"method":"controlGroup","wire":3,"id":1,"level":0.2}"#]
    );
    assert_eq!(all_json(&net, Key::Group(4), "ON"), [r#"{"method":"controlGroup","wire":3,"id":4,"level":1.0}"#]);
}
