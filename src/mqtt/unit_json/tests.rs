//! The unit, group and network JSON against what serde writes and what the contract says.

use super::*;

fn unit(json: &str) -> UnitState {
    serde_json::from_str(json).unwrap()
}

fn render(json: &str) -> Map<String, Value> {
    let u = unit(json);
    unit_json(&u, &Caps::of(&u, None))
}

#[test]
fn every_key_is_always_present() {
    let fields = render(r#"{"id":7}"#);
    for k in UNIT_KEYS {
        assert!(fields.contains_key(k), "{k}");
    }
    assert_eq!(fields.len(), UNIT_KEYS.len());
    assert_eq!(fields["state"], Value::Null);
    assert_eq!(fields["controls"], Value::Null);
}

#[test]
fn dimmer_gives_state_and_brightness() {
    let fields = render(r#"{"id":1,"type":"Luminaire","on":true,"controls":[{"type":"Dimmer","value":0.5}]}"#);
    assert_eq!(fields["state"], "ON");
    assert_eq!(fields["brightness"], 128);
    assert_eq!(fields["color_mode"], "brightness");
    let fields = render(r#"{"id":1,"type":"Luminaire","on":true,"controls":[{"type":"Dimmer","value":0}]}"#);
    assert_eq!(fields["state"], "OFF");
}

#[test]
fn colour_follows_colorsource() {
    let fields = render(
        r#"{"id":3,"on":true,"controls":[{"type":"Dimmer","value":1},{"type":"Colorsource","source":"TW"},
        {"type":"CCT","value":3000.4,"min":2700,"max":6500},{"type":"Color","hue":0,"sat":1}]}"#,
    );
    assert_eq!(fields["color_mode"], "color_temp");
    assert_eq!(fields["color_temp"], 3000);
    assert_eq!(fields["color"]["y"], 0.33);
    assert_eq!((&fields["color"]["h"], &fields["color"]["s"]), (&json!(0.0), &json!(100.0)), "hs as the cloud says");
    let fields = render(
        r#"{"id":3,"on":true,"controls":[{"type":"Colorsource","source":"XY"},{"type":"Color","x":0.31234,"y":0.3}]}"#,
    );
    assert_eq!(fields["color_mode"], "hs");
    let (h, s) = crate::color::hue_sat_to_hs(
        crate::color::xy_to_hue_sat(0.3123, 0.3).0,
        crate::color::xy_to_hue_sat(0.3123, 0.3).1,
    );
    assert_eq!(fields["color"], json!({"h": h, "s": s, "x": 0.3123, "y": 0.3}), "hs converted from xy");
    let fields = render(r#"{"id":3,"on":true,"controls":[{"type":"Color","rgb":"rgb(0, 0, 255)"}]}"#);
    assert_eq!(fields["color"], json!({"h": 240.0, "s": 100.0, "x": 0.15, "y": 0.06}), "both from rgb");
}

#[test]
fn sensors_have_readings_and_no_state() {
    let fields = render(
        r#"{"id":4,"type":"Sensor","on":true,"controls":[{"type":"Presence","status":"present"},{"type":"Lux","value":412}]}"#,
    );
    assert_eq!(fields["state"], Value::Null);
    assert_eq!(fields["color_mode"], Value::Null);
    assert_eq!(fields["occupancy"], true);
    assert_eq!(fields["illuminance"], 412);
    assert_eq!(plain(&fields["illuminance"]).as_deref(), Some("412"));
    let fields = render(r#"{"id":4,"controls":[{"type":"Presence","status":"absent"}]}"#);
    assert_eq!(fields["occupancy"], false);
}

/// The direct writers (the event path) give exactly the bytes of the derived `Serialize`:
/// every control type, extra fields, strings that need escaping, nulls.
#[test]
fn direct_json_is_what_serde_writes() {
    let units = [
        r#"{"id":7}"#,
        r##"{"id":3,"name":"Desk \"left\"\n","type":"Luminaire","on":true,"online":true,"status":"ok","priority":3,
          "condition":0,"activeSceneId":2,"firmwareVersion":"1.2\\3","dimLevel":0.25,
          "controls":[{"type":"Dimmer","value":0.5,"name":"dimmer0","ramp":{"ms":20}},{"type":"OnOff","value":1},
          {"type":"CCT","min":2700,"max":6500,"value":3000.5,"level":0.1,"tw":2},{"type":"Color","hue":0.5,"sat":1,"x":0.3,"y":0.31,"rgb":"#ff0000"},
          {"type":"Colorsource","source":"XY"},{"type":"Slider","label":"L","min":0,"max":10,"value":2.5},
          {"type":"Switch","name":"s\"1"},{"type":"Overheat","status":"ok"},{"type":"White","value":0.1},
          {"type":"Vertical","value":0.9},{"type":"fancy","x":[1,{"a":null}]},{"noType":true}]}"##,
        r#"{"id":4,"type":"Sensor","online":false,"controls":[{"type":"Presence","status":"present","é":"ü"},{"type":"Lux","value":412,"level":0.5}]}"#,
    ];
    for text in units {
        let u = unit(text);
        let json = UnitJson::of(&u, &Caps::of(&u, None));
        let mut direct = Vec::new();
        json.write_json(&mut direct);
        assert_eq!(String::from_utf8(direct).unwrap(), serde_json::to_string(&json).unwrap(), "{text}");
    }
    let group = GroupInfo { id: 2, name: "Hall \"A\"\n".into(), units: vec![1, 2, 3] };
    let members = BTreeMap::from([(1, MemberReading { state: Some("ON"), brightness: Some(9) })]);
    let empty = GroupInfo { id: 5, name: String::new(), units: Vec::new() };
    for (group, members) in [(&group, members), (&empty, BTreeMap::new())] {
        let json = GroupJson::of(group, |id| members.get(&id).copied());
        let serde = serde_json::to_string(&json).unwrap();
        let mut direct = Vec::new();
        json.write_json(&mut direct);
        assert_eq!(String::from_utf8(direct).unwrap(), serde);
        // The group cache's way: the constant fields written once, then copied.
        let mut fixed = Vec::new();
        write_group_fixed(group, &mut fixed);
        let mut cached = Vec::new();
        json.write_with_fixed(std::str::from_utf8(&fixed).unwrap(), &mut cached);
        assert_eq!(String::from_utf8(cached).unwrap(), serde);
    }
}

/// Every attribute part is the plain text of its key in the unit JSON (numbers copied from
/// the JSON text, strings bare), and only the non-null scalar keys have one.
#[test]
fn attribute_parts_are_the_plain_values_of_the_json() {
    let units = [
        r#"{"id":7}"#,
        r##"{"id":3,"name":"Desk \"left\"","type":"Luminaire","on":true,"online":true,"status":"ok","priority":-3,
          "condition":134,"activeSceneId":2,"firmwareVersion":"1.2","dimLevel":0.1234567890123,
          "controls":[{"type":"Dimmer","value":0.5},{"type":"CCT","min":2700,"max":6500,"value":3000.4}]}"##,
        r#"{"id":4,"type":"Sensor","online":false,"dimLevel":1.0,"controls":[{"type":"Presence","status":"present"},{"type":"Lux","value":412.5}]}"#,
        r#"{"id":5,"type":"Sensor","controls":[{"type":"Lux","value":1e21}]}"#,
    ];
    for json in units {
        let u = unit(json);
        let caps = Caps::of(&u, None);
        let map = unit_json(&u, &caps);
        let mut text = StateText::default();
        UnitJson::of(&u, &caps).write_parts(&mut text, true);
        let mut parts = text.parts();
        let (leaf, state) = parts.next().unwrap();
        assert_eq!(leaf, Leaf::State);
        assert_eq!(serde_json::from_str::<Value>(state).unwrap(), Value::Object(map.clone()), "{json}");
        let mut keys = Vec::new();
        for (leaf, payload) in parts {
            let Leaf::Below(key) = leaf else { panic!("{leaf:?}") };
            assert_eq!(Some(payload.to_string()), plain(&map[key]), "{key} of {json}");
            keys.push(key);
        }
        let scalar_keys: Vec<&str> = UNIT_KEYS.into_iter().filter(|k| plain(&map[*k]).is_some()).collect();
        assert_eq!(keys, scalar_keys, "{json}");
        // Without attribute topics: the JSON alone.
        let mut text = StateText::default();
        UnitJson::of(&u, &caps).write_parts(&mut text, false);
        assert_eq!(text.len(), 1);
    }
}

#[test]
fn plain_values() {
    assert_eq!(plain(&json!("ON")).as_deref(), Some("ON"));
    assert_eq!(plain(&json!(128)).as_deref(), Some("128"));
    assert_eq!(plain(&json!(true)).as_deref(), Some("true"));
    assert_eq!(plain(&json!(0.5)).as_deref(), Some("0.5"));
    assert_eq!(plain(&Value::Null), None);
    assert_eq!(plain(&json!({"x": 1})), None);
}

#[test]
fn the_json_has_every_key_once_in_alphabetical_order() {
    let written: Vec<&str> = JSON_ORDER.iter().map(|i| UNIT_KEYS[*i]).collect();
    let mut sorted = UNIT_KEYS.to_vec();
    sorted.sort_unstable();
    assert_eq!(written, sorted);
    let text = serde_json::to_string(&UnitJson::of(&unit(r#"{"id":7}"#), &Caps::default())).unwrap();
    let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap();
    assert!(sorted.windows(2).all(|w| at(w[0]) < at(w[1])), "{text}");
}

/// A group's state and brightness say what its members do (docs/mqtt.md, "Groups and scenes"):
/// the brightest member that is on, a relay that is on counting as full.
#[test]
fn group_brightness_is_the_brightest_member_that_is_on() {
    let group = GroupInfo { id: 2, name: "Living room".into(), units: vec![3, 8] };
    let read = |members: [MemberReading; 2]| {
        let members = BTreeMap::from([(3, members[0]), (8, members[1])]);
        let v = group_json(&group, &members);
        (v["state"].clone(), v["brightness"].clone())
    };
    let relay = |on: bool| MemberReading { state: Some(if on { "ON" } else { "OFF" }), brightness: None };
    let lamp = |on: bool, b: u8| MemberReading { state: Some(if on { "ON" } else { "OFF" }), brightness: Some(b) };
    assert_eq!(read([relay(true), lamp(false, 0)]), (json!("ON"), json!(255)), "a relay on lights the room");
    assert_eq!(read([relay(false), lamp(true, 100)]), (json!("ON"), json!(100)));
    assert_eq!(read([lamp(true, 40), lamp(false, 200)]), (json!("ON"), json!(40)), "an off member does not count");
    assert_eq!(read([relay(false), lamp(false, 30)]), (json!("OFF"), json!(30)), "all off: the highest level");
    assert_eq!(read([relay(false), relay(false)]), (json!("OFF"), Value::Null));
}
