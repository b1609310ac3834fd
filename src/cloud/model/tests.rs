//! Tests of the model against real-looking payloads under `tests/data/cloud/`.

use serde_json::{Value, json};

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cloud/", $name))
    };
}

fn controls_of(json: &str) -> Vec<Control> {
    #[derive(serde::Deserialize)]
    struct C {
        #[serde(default, deserialize_with = "control::controls_opt")]
        controls: Option<Vec<Control>>,
    }
    serde_json::from_str::<C>(json).unwrap().controls.unwrap_or_default()
}

#[test]
fn network_state_parses_with_all_quirks() {
    let state: NetworkState = serde_json::from_str(fixture!("network_state.json")).unwrap();
    assert_eq!(state.name, "Home");
    assert_eq!(state.revision, Some(212));
    assert_eq!(state.dim_level, Some(0.85));
    assert_eq!(state.active_scenes, vec![3, 4]);
    assert_eq!(state.gateway.as_ref().map(|g| g.name.as_str()), Some("Living room iPad"));
    assert_eq!(state.photos[0].image.as_deref(), Some("AhsyNdbn5JnMhFuQ"));

    // Nested controls become one flat list.
    let ceiling = &state.units["12"];
    let controls = ceiling.controls.as_ref().unwrap();
    assert_eq!(controls.len(), 5);
    assert!(matches!(&controls[0], Control::Dimmer(d) if d.value == 0.41 && d.name.as_deref() == Some("dimmer0")));
    match &controls[1] {
        Control::Cct(c) => {
            assert_eq!(
                (c.min, c.max, c.value, c.level.get(), c.tw.get()),
                (2200.0, 6500.0, 2850.0, Some(0.151), Some(0.0))
            );
        }
        other => panic!("expected CCT, got {other:?}"),
    }
    assert!(matches!(&controls[2], Control::Colorsource(c) if c.source == ColorSource::Tw));
    assert!(
        matches!(&controls[3], Control::Color(c) if c.rgb.as_deref() == Some("rgb(255, 170, 51)") && c.x == Some(0.4))
    );
    assert!(matches!(&controls[4], Control::Overheat(c) if &*c.status == "ok"));
    assert_eq!(ceiling.group_id.get(), Some(2));
    assert_eq!(ceiling.unit_type.as_deref(), Some("Luminaire"));

    // Sensors, and an unknown control type kept raw.
    let sensor = state.units["13"].controls.as_ref().unwrap();
    assert!(matches!(&sensor[0], Control::Presence(p) if &*p.status == "absent"));
    assert!(matches!(&sensor[1], Control::Lux(l) if l.value == Some(412.0) && l.level == Some(0.41)));
    assert_eq!(sensor[2], Control::Other(json!({"type":"Thermometer","value":21.5,"unit":"C","readonly":true})));
    assert_eq!(sensor[2].type_name(), Some("Thermometer"));

    // The offline unit lacks on, controls, dimLevel, status and priority.
    let garden = &state.units["14"];
    assert_eq!(garden.online, Some(false));
    assert_eq!(
        (garden.on, &garden.controls, garden.dim_level.get(), &garden.status, garden.priority.get()),
        (None, &None, None, &None, None)
    );
    assert_eq!(garden.condition.get(), Some(134));

    // Scene map key differs from the scene id.
    assert_eq!(state.scenes["4"].id, 2);
    assert_eq!(state.scenes["4"].unit_ids(), vec![12, 14]);
    assert_eq!(state.scenes["4"].units["12"].state.as_deref(), Some("fc03"));

    // Group members in the `{"0": id}` shape, one id written as a float.
    let members: Vec<(u32, Option<i32>)> = state.groups["2"].units.iter().map(|u| (u.id, u.position)).collect();
    assert_eq!(members, vec![(12, Some(0)), (15, Some(1))]);
}

#[test]
fn network_parses_floats_labels_and_ignores_unknown_fields() {
    let net: Network = serde_json::from_str(fixture!("network.json")).unwrap();
    assert_eq!(net.units.len(), 2);
    let sensor = &net.units["13"];
    assert_eq!((sensor.id, sensor.fixture_id, sensor.group_id), (13, Some(9902), Some(0)));
    assert_eq!(net.units["12"].labels, Some(json!({})));
    assert_eq!(net.units["12"].firmware_version.as_deref(), Some("32.10"));
    assert_eq!(net.groups["2"].units[0].id, 12);
}

#[test]
fn groups_endpoint_shape() {
    let groups: std::collections::BTreeMap<String, Group> = serde_json::from_str(fixture!("groups.json")).unwrap();
    assert_eq!(groups["2"].units.iter().map(|u| u.id).collect::<Vec<_>>(), vec![12, 15]);
    assert_eq!((groups["5"].id, groups["5"].position), (5, Some(3)));
    assert!(groups["5"].units.is_empty());
}

#[test]
fn unit_state_with_two_dimmers_and_details() {
    let unit: UnitState = serde_json::from_str(fixture!("unit_state.json")).unwrap();
    let names: Vec<_> = unit.controls.as_ref().unwrap().iter().map(|c| c.name().unwrap_or("")).collect();
    assert_eq!(names, ["dimmer0", "dimmer1"]);
    assert_eq!(unit.details.as_ref().and_then(|d| d.get("OEM")), Some(&json!("Casambi")));
}

#[test]
fn offline_unit_state() {
    let unit: UnitState = serde_json::from_str(fixture!("unit_state_offline.json")).unwrap();
    assert_eq!((unit.id, unit.online, unit.on, unit.condition.get()), (14, Some(false), None, Some(134)));
    assert!(unit.controls.is_none() && unit.dim_level.is_none() && unit.status.is_none() && unit.priority.is_none());
}

#[test]
fn fixture_with_lowercase_control_types() {
    let f: Fixture = serde_json::from_str(fixture!("fixture.json")).unwrap();
    let types: Vec<_> = f.controls.iter().map(|c| c.control_type.clone()).collect();
    assert_eq!(
        types,
        [
            FixtureControlType::Dimmer,
            FixtureControlType::Temperature,
            FixtureControlType::Button,
            FixtureControlType::Colorsource,
            FixtureControlType::Rgb,
            FixtureControlType::Slider,
            FixtureControlType::Other("fancyness".into()),
        ]
    );
    assert_eq!(f.controls[1].value_type.as_deref(), Some("FLOAT"));
    assert_eq!(f.controls[2].button_label.as_deref(), Some("Boost"));
    assert_eq!((f.vendor.as_deref(), f.is_luminaire), (Some("Casambi"), Some(true)));
    // Lowercase types serialise back as sent.
    assert_eq!(serde_json::to_value(&f.controls[6]).unwrap()["type"], "fancyness");
}

#[test]
fn datapoints_accept_string_and_number_values() {
    let r: DatapointResult = serde_json::from_str(fixture!("datapoints.json")).unwrap();
    assert_eq!((r.result_count, r.query_limit, r.has_more_results), (Some(3), Some(10000), false));
    assert_eq!(r.data_points[0].value, "412");
    assert_eq!(r.data_points[2].value, "0.41");
    assert!(r.data_points.iter().all(|d| d.parsed_time().is_some()));
}

#[test]
fn sessions_parse_and_never_show_ids_in_debug() {
    let s: NetworkSessions = serde_json::from_str(fixture!("network_session.json")).unwrap();
    assert_eq!(s.0.len(), 2);
    let home = &s.0["kbFhbE7rEMqpDf6KpUc9HrB6Ewc4t1Xr"];
    assert_eq!((home.name.as_str(), home.mac.as_deref()), ("Home", Some("f5b3a1d2c4e6")));
    assert!(home.session_id.expose().ends_with("__"));
    let debug = format!("{s:?}");
    assert!(!debug.contains("JhVZ3mK0") && !debug.contains("Zz9Yy8Xx"), "{debug}");

    // The session-set shape is not documented: a list of entries is accepted too.
    let list: NetworkSessions =
        serde_json::from_value(json!([{"id": "n1", "name": "A", "sessionId": "s1__"}])).unwrap();
    assert_eq!(list.0["n1"].session_id.expose(), "s1__");

    let u: UserSession = serde_json::from_str(fixture!("user_session.json")).unwrap();
    assert_eq!(u.sites["Xk3mPq"].networks.len(), 1);
    assert_eq!(u.networks["kbFhbE7rEMqpDf6KpUc9HrB6Ewc4t1Xr"].role, "ADMIN");
    assert!(!format!("{u:?}").contains("Us3rS3ss"));
}

#[test]
fn controls_nested_flat_and_mixed_are_the_same() {
    let flat = controls_of(r#"{"controls":[{"type":"Dimmer","value":0.5},{"type":"Switch"}]}"#);
    let nested = controls_of(r#"{"controls":[[{"type":"Dimmer","value":0.5},{"type":"Switch"}]]}"#);
    let mixed = controls_of(r#"{"controls":[[{"type":"Dimmer","value":0.5}],{"type":"Switch"}]}"#);
    assert_eq!(flat.len(), 2);
    assert_eq!(flat, nested);
    assert_eq!(flat, mixed);
    assert!(controls_of(r#"{"controls":null}"#).is_empty());
    assert!(controls_of(r#"{"controls":{}}"#).is_empty());
    assert!(controls_of(r#"{"controls":[[]]}"#).is_empty());
}

#[test]
fn unknown_control_round_trips_identically() {
    let raw = json!({"type":"Thermostat","setpoint":21.5,"mode":"auto","limits":{"lo":5,"hi":30.0},"id":3.0});
    let c: Control = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(c, Control::Other(raw.clone()));
    assert_eq!(serde_json::to_value(&c).unwrap(), raw);
    // Also byte for byte (keys come out sorted, as serde_json sorts them).
    assert_eq!(serde_json::to_string(&c).unwrap(), raw.to_string());
}

#[test]
fn known_controls_round_trip_with_extra_fields() {
    for raw in [
        json!({"type":"Dimmer","value":0.41,"name":"dimmer0"}),
        json!({"type":"Dimmer","value":0.5,"readonly":true,"id":4}),
        json!({"type":"OnOff","value":1}),
        json!({"type":"CCT","min":2200,"max":6500,"value":2850,"level":0.151,"tw":0.5,"name":"temperature"}),
        json!({"type":"Color","hue":0.1,"sat":0.9,"rgb":"rgb(1, 2, 3)","name":"rgb"}),
        json!({"type":"Colorsource","source":"XY"}),
        json!({"type":"Colorsource","source":"HSV"}),
        json!({"type":"Presence","status":"present"}),
        json!({"type":"Lux","level":0.2,"value":120}),
        json!({"type":"Switch","button":1}),
        json!({"type":"White","value":0.3,"name":"white"}),
        json!({"type":"Vertical","value":0.87,"name":"vertical"}),
        json!({"type":"Overheat","status":"ok"}),
        json!({"type":"Slider","min":0,"max":100,"value":42,"name":"White Dimmer","label":"White"}),
    ] {
        let c: Control = serde_json::from_value(raw.clone()).unwrap();
        assert!(!matches!(c, Control::Other(_)), "{raw} should be typed");
        assert_eq!(c.to_value(), raw, "round trip of {raw}");
    }
    // Integral floats come back as integers (3.0 -> 3); JSON readers see the same number.
    let c: Control = serde_json::from_value(json!({"type":"CCT","min":2700.0,"max":4000,"value":2850.0})).unwrap();
    assert_eq!(c.to_value(), json!({"type":"CCT","min":2700,"max":4000,"value":2850}));
}

/// Strings in a frame are read borrowed when they have no escapes and copied when they do; both
/// give the same controls.
#[test]
fn control_strings_with_escapes_parse_like_plain_ones() {
    let plain = controls_of(
        r#"{"controls":[{"type":"Dimmer","value":0.5,"name":"dimmer\"0"},{"type":"Presence","status":"absent"}]}"#,
    );
    let escaped = controls_of(
        r#"{"controls":[{"type":"Dim\u006der","value":0.5,"name":"dimmer\u00220"},{"type":"Presence","status":"abs\u0065nt"}]}"#,
    );
    assert_eq!(plain, escaped);
    assert_eq!(plain[0].name(), Some("dimmer\"0"));
    assert!(matches!(&plain[1], Control::Presence(p) if &*p.status == "absent"));
    let frame =
        br#"{"wire":1,"method":"unitChanged","id":3,"controls":[{"type":"Dim\u006der","value":1,"extra":"\u00e9"}]}"#;
    let Ok(ServerMessage::UnitChanged { unit, .. }) = parse_frame(frame) else { panic!("unitChanged expected") };
    assert_eq!(unit.controls.unwrap()[0].to_value(), json!({"type":"Dimmer","value":1,"extra":"\u{e9}"}));
}

#[test]
fn known_type_with_missing_or_wrong_fields_is_kept_raw() {
    for raw in [
        json!({"type":"Dimmer"}),
        json!({"type":"Dimmer","value":"high"}),
        json!({"type":"CCT","min":2200,"value":3000}),
        json!({"type":"Presence"}),
        json!({"value":0.5}),
        json!({"type":7,"value":0.5}),
    ] {
        let c: Control = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(c, Control::Other(raw.clone()));
        assert_eq!(c.to_value(), raw);
    }
    // A field of an unexpected type on an otherwise fine control lands in `extra`.
    let c: Control = serde_json::from_value(json!({"type":"Dimmer","value":0.2,"name":5})).unwrap();
    assert!(matches!(&c, Control::Dimmer(d) if d.name.is_none() && d.extra.get().is_some()));
    assert_eq!(c.to_value(), json!({"type":"Dimmer","value":0.2,"name":5}));
}

fn frame(bytes: &str) -> ServerMessage {
    parse_frame(bytes.trim().as_bytes()).unwrap()
}

#[test]
fn unit_changed_frame() {
    let ServerMessage::UnitChanged { wire, unit } = frame(fixture!("frames/unit_changed.json")) else {
        panic!("not unitChanged")
    };
    assert_eq!(
        (wire, unit.id, unit.priority.get(), unit.condition.get(), unit.fixture_id.get()),
        (1, 12, Some(3), Some(0), Some(859))
    );
    assert_eq!((unit.on, unit.online, unit.status.as_deref()), (Some(true), Some(true), Some("ok")));
    let controls = unit.controls.unwrap();
    assert_eq!(controls.len(), 3);
    assert!(matches!(&controls[1], Control::Vertical(v) if v.value == 0.87));
    assert!(matches!(&controls[2], Control::Cct(c) if c.value == 2850.0 && c.min == 2700.0));
}

#[test]
fn offline_and_old_style_unit_changed_frames() {
    let ServerMessage::UnitChanged { wire, unit } = frame(fixture!("frames/unit_changed_offline.json")) else {
        panic!("not unitChanged")
    };
    assert_eq!((wire, unit.id, unit.online, unit.on, unit.controls), (2, 14, Some(false), None, None));

    let ServerMessage::UnitChanged { unit, .. } = frame(fixture!("frames/unit_changed_details.json")) else {
        panic!("not unitChanged")
    };
    assert_eq!(unit.details.as_ref().and_then(|d| d.get("fixture_model")), Some(&json!("CBU-ASD")));
    assert_eq!(unit.controls.map(|c| c.len()), Some(2));
}

#[test]
fn unit_changed_without_id_is_an_error() {
    let err = parse_frame(fixture!("frames/unit_changed_no_id.json").as_bytes()).unwrap_err();
    assert!(matches!(err, FrameError::MissingField { method: "unitChanged", field: "id" }), "{err}");
}

#[test]
fn other_server_frames() {
    assert_eq!(
        frame(fixture!("frames/wire_status_ok.json")),
        ServerMessage::WireStatus {
            status: WireStatusKind::OpenWireSucceed,
            ref_: Some("5c0fe3d2-8a49-11ee-b9d1-0242ac120002".into()),
            wire: Some(1)
        }
    );
    assert_eq!(
        frame(fixture!("frames/wire_status_invalid_session.json")),
        ServerMessage::WireStatus {
            status: WireStatusKind::InvalidSession,
            ref_: Some("REFERENCE-ID".into()),
            wire: None
        }
    );
    assert_eq!(frame(fixture!("frames/pong.json")), ServerMessage::Pong);
    assert_eq!(frame(fixture!("frames/peer_changed.json")), ServerMessage::PeerChanged { wire: 1, online: false });
    assert_eq!(frame(fixture!("frames/network_updated.json")), ServerMessage::NetworkUpdated { wire: 3 });
    assert_eq!(
        frame(fixture!("frames/network_log.json")),
        ServerMessage::NetworkLog { wire: Some(1), message: Some("Gateway switched to Living room iPad".into()) }
    );
    assert_eq!(
        frame(fixture!("frames/unknown_method.json")),
        ServerMessage::Unknown { method: "eventUpdated".into(), wire: Some(1) }
    );
    for (text, kind) in [
        ("keyAuthenticateFailed", WireStatusKind::KeyAuthenticateFailed),
        ("keyAuthorizeFailed", WireStatusKind::KeyAuthorizeFailed),
        ("tooManyWires", WireStatusKind::TooManyWires),
        ("invalidValueType", WireStatusKind::InvalidValueType),
        ("invalidData", WireStatusKind::InvalidData),
        ("somethingNew", WireStatusKind::Other("somethingNew".into())),
    ] {
        let msg = frame(&format!(r#"{{"wireStatus":"{text}","wire":2.0}}"#));
        assert_eq!(msg, ServerMessage::WireStatus { status: kind.clone(), ref_: None, wire: Some(2) });
        assert_eq!(kind.as_str(), text);
    }
    assert_eq!(
        frame(r#"{"response":"ok","wire":1}"#),
        ServerMessage::Response { response: "ok".into(), wire: Some(1) }
    );
}

#[test]
fn malformed_frames_are_errors_not_panics() {
    for bad in [
        &b""[..],
        b"{",
        b"[]",
        b"null",
        b"42",
        b"\"unitChanged\"",
        b"{}",
        b"{\"method\":12}",
        b"{\"method\":\"unitChanged\",\"id\":1}",
        b"{\"method\":\"unitChanged\",\"wire\":1,\"id\":\"x\"}",
        b"{\"method\":\"unitChanged\",\"wire\":1,\"id\":1.5}",
        b"{\"method\":\"unitChanged\",\"wire\":1,\"id\":1,\"online\":\"yes\"}",
        b"{\"method\":\"peerChanged\",\"wire\":1}",
        b"{\"method\":\"networkUpdated\"}",
        b"{\"wire\":-1,\"method\":\"networkUpdated\"}",
        b"\xff\xfe{\"method\":\"ping\"}",
        b"{\"method\":\"unitChanged\",\"wire\":1,\"id\":1} trailing",
    ] {
        assert!(parse_frame(bad).is_err(), "{:?} should be rejected", String::from_utf8_lossy(bad));
    }
    // Bytes that are not UTF-8 anywhere in the frame (here inside a string, where the JSON
    // reader no longer checks) are named as such, without the frame's content.
    let err = parse_frame(b"{\"wire\":1,\"method\":\"unitChanged\",\"id\":1,\"name\":\"L\xe4mp\"}").unwrap_err();
    assert!(matches!(err, FrameError::Utf8(_)), "{err}");
    assert_eq!(err.to_string(), "malformed frame: not UTF-8");
    // A syntax error names the reason and the position, never the bytes around it (the JSON
    // reader quotes them; a frame may carry names the user considers private).
    let err = parse_frame(b"{\"wire\":1,\"method\":\"unitChanged\",\"id\":1,\"name\":\"Anna bedroom\" x}").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, FrameError::Json(_)), "{text}");
    assert!(text.starts_with("malformed frame: ") && text.contains("column"), "{text}");
    assert!(!text.contains("bedroom") && !text.contains('\n'), "{text}");
}

#[test]
fn server_messages_round_trip_through_json() {
    let unit = match frame(fixture!("frames/unit_changed.json")) {
        ServerMessage::UnitChanged { unit, .. } => unit,
        _ => unreachable!(),
    };
    for msg in [
        ServerMessage::UnitChanged { wire: 4, unit },
        ServerMessage::WireStatus { status: WireStatusKind::TooManyWires, ref_: Some("r".into()), wire: Some(9) },
        ServerMessage::PeerChanged { wire: 1, online: true },
        ServerMessage::NetworkUpdated { wire: 2 },
        ServerMessage::NetworkLog { wire: Some(1), message: Some("hi".into()) },
        ServerMessage::Pong,
        ServerMessage::Response { response: "busy".into(), wire: None },
        ServerMessage::Unknown { method: "eventUpdated".into(), wire: Some(1) },
    ] {
        let text = msg.to_json().unwrap();
        assert_eq!(parse_frame(text.as_bytes()).unwrap(), msg, "{text}");
    }
    assert_eq!(ServerMessage::Pong.to_json().unwrap(), r#"{"response":"pong"}"#);
}

#[test]
fn unit_changed_carries_every_unit_state_field() {
    // Every field set (no `..Default::default()`: a new UnitState field must be added here, and
    // then to the frame parser, or this fails to compile / to compare).
    let unit = UnitState {
        id: 9,
        address: Some("aabbccddeeff".into()),
        name: Some("Desk".into()),
        image: Some(Box::new("img".into())),
        position: Some(3).into(),
        fixture_id: Some(1001).into(),
        firmware_version: Some("32.10".into()),
        group_id: Some(2).into(),
        unit_type: Some("Luminaire".into()),
        priority: Some(3).into(),
        scene: Some(1).into(),
        on: Some(true),
        online: Some(true),
        condition: Some(128).into(),
        status: Some("ok".into()),
        active_scene_id: Some(5).into(),
        controls: Some(vec![Control::Other(json!({"type":"Mystery","v":1}))]),
        dim_level: Some(0.25).into(),
        details: Some(Box::new(json!({"OEM":"Casambi"}))),
    };
    let text = ServerMessage::UnitChanged { wire: 1, unit: Box::new(unit.clone()) }.to_json().unwrap();
    assert_eq!(
        parse_frame(text.as_bytes()).unwrap(),
        ServerMessage::UnitChanged { wire: 1, unit: Box::new(unit.clone()) }
    );
    // The REST path parses the same object to the same value.
    assert_eq!(serde_json::from_str::<UnitState>(&text).unwrap(), unit);
}

#[test]
fn client_messages_serialise_exactly() {
    let open = ClientMessage::open("net1", Secret::new("s3cr3t__"), "ref-1", 1);
    assert_eq!(
        open.to_json().unwrap(),
        r#"{"method":"open","id":"net1","session":"s3cr3t__","ref":"ref-1","wire":1,"type":1}"#
    );
    assert!(!format!("{open:?}").contains("s3cr3t"));
    assert_eq!(ClientMessage::Ping { wire: 2 }.to_json().unwrap(), r#"{"method":"ping","wire":2}"#);
    assert_eq!(ClientMessage::Close { wire: 2 }.to_json().unwrap(), r#"{"method":"close","wire":2}"#);

    let tc = TargetControls {
        color_temperature: Some(ValueTarget { value: 3000.0 }),
        colorsource: Some(SourceTarget { source: "TW".into() }),
        ..TargetControls::default()
    };
    let cu = ClientMessage::ControlUnit { wire: 1, id: 12, target_controls: tc.clone() };
    assert_eq!(
        serde_json::to_value(&cu).unwrap(),
        json!({"method":"controlUnit","wire":1,"id":12,"targetControls":{"ColorTemperature":{"value":3000.0},"Colorsource":{"source":"TW"}}})
    );
    let many = ClientMessage::ControlUnits {
        wire: 1,
        ids: vec![1, 2],
        target_controls: TargetControls { dimmer: Some(ValueTarget { value: 0.5 }), ..TargetControls::default() },
    };
    assert_eq!(
        many.to_json().unwrap(),
        r#"{"method":"controlUnits","wire":1,"ids":[1,2],"targetControls":{"Dimmer":{"value":0.5}}}"#
    );
    assert_eq!(
        ClientMessage::ControlScene { wire: 1, id: 3, level: 1.0 }.to_json().unwrap(),
        r#"{"method":"controlScene","wire":1,"id":3,"level":1.0}"#
    );
    assert_eq!(
        ClientMessage::ControlGroup { wire: 1, id: 2, level: 0.5 }.to_json().unwrap(),
        r#"{"method":"controlGroup","wire":1,"id":2,"level":0.5}"#
    );
    assert_eq!(
        ClientMessage::ControlNetwork { wire: 1, level: 0.25 }.to_json().unwrap(),
        r#"{"method":"controlNetwork","wire":1,"level":0.25}"#
    );

    // The simulator reads them back, tolerant of float ids and unknown target controls.
    let back: ClientMessage = serde_json::from_str(
        r#"{"wire":1.0,"method":"controlUnit","id":12.0,"targetControls":{"RGB":{"hue":0.5,"sat":1},"Mystery":{"v":1}}}"#,
    )
    .unwrap();
    let ClientMessage::ControlUnit { id: 12, target_controls, .. } = back else { panic!("{back:?}") };
    assert_eq!(target_controls.rgb, Some(RgbTarget { hue: Some(0.5), sat: Some(1.0), rgb: None }));
    assert_eq!(target_controls.other.get("Mystery"), Some(&json!({"v":1})));
    let reopened: ClientMessage = serde_json::from_str(&open.to_json().unwrap()).unwrap();
    assert_eq!(reopened, open);
}

proptest::proptest! {
    #[test]
    fn parse_frame_never_panics_on_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
        let _ = parse_frame(&bytes);
    }

    #[test]
    fn parse_frame_never_panics_on_mangled_frames(cut in 0usize..418, byte in proptest::num::u8::ANY) {
        let mut bytes = fixture!("frames/unit_changed.json").trim().as_bytes().to_vec();
        let i = cut.min(bytes.len() - 1);
        bytes[i] = byte;
        let _ = parse_frame(&bytes);
        let _ = parse_frame(&bytes[..i]);
    }
}

/// Throughput of the hot path; run with
/// `cargo test --release --lib cloud::model::tests::frame_throughput -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark; run in release mode"]
fn frame_throughput() {
    let bytes = fixture!("frames/unit_changed.json").trim().as_bytes();
    let n = 1_000_000;
    let start = std::time::Instant::now();
    let mut ok = 0usize;
    for _ in 0..n {
        if let Ok(ServerMessage::UnitChanged { unit, .. }) = parse_frame(std::hint::black_box(bytes)) {
            ok += unit.controls.map_or(0, |c| c.len());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(ok, 3 * n);
    println!("parse_frame(unitChanged, {} bytes): {:.0} frames/s", bytes.len(), n as f64 / secs);

    // Reference: the same frame parsed into an untyped `Value` (what the typed parser avoids).
    let start = std::time::Instant::now();
    for _ in 0..n {
        let _ = serde_json::from_slice::<Value>(std::hint::black_box(bytes));
    }
    println!("  as Value (reference): {:.0} frames/s", n as f64 / start.elapsed().as_secs_f64());
}

#[test]
fn value_helpers() {
    let v: Value = Control::Other(json!({"type":"X","name":"n"})).to_value();
    assert_eq!(v["name"], "n");
}

#[test]
fn frames_read_long_integral_floats_exactly() {
    // sonic-rs rounds floats correctly: an integer sent as a float with 16 digits stays integral
    // (serde_json's default parser, used for REST bodies, reads `…081.0` as `…080.8`).
    let msg =
        parse_frame(b"{\"wire\":1,\"method\":\"unitChanged\",\"id\":1,\"condition\":-1858043434372081.0}").unwrap();
    let ServerMessage::UnitChanged { unit, .. } = msg else { panic!("{msg:?}") };
    assert_eq!(unit.condition.get(), Some(-1_858_043_434_372_081));
}

#[test]
fn a_frames_optional_integers_read_null_floats_and_absence() {
    // The frame reader (sonic-rs) reads these through one visitor that takes `null` as well.
    let msg = parse_frame(
        b"{\"wire\":2.0,\"method\":\"unitChanged\",\"id\":7,\"fixtureId\":null,\"groupId\":3.0,\"activeSceneId\":0}",
    )
    .unwrap();
    let ServerMessage::UnitChanged { wire, unit } = msg else { panic!("{msg:?}") };
    assert_eq!(
        (wire, unit.id, unit.fixture_id.get(), unit.group_id.get(), unit.active_scene_id.get(), unit.position.get()),
        (2, 7, None, Some(3), Some(0), None)
    );
    // `null` where a required integer belongs is a missing field; a fraction, a string or a
    // negative id is a malformed frame.
    assert!(matches!(
        parse_frame(b"{\"wire\":1,\"method\":\"unitChanged\",\"id\":null}"),
        Err(FrameError::MissingField { field: "id", .. })
    ));
    for bad in ["1.5", "\"7\"", "-7", "true"] {
        let text = format!("{{\"wire\":1,\"method\":\"unitChanged\",\"id\":{bad}}}");
        assert!(matches!(parse_frame(text.as_bytes()), Err(FrameError::Json(_))), "{bad}");
    }
}

#[test]
fn a_queued_wire_event_stays_small() {
    // Up to `WIRE_QUEUE` of them wait per network, and tokio keeps every queue block it needed.
    let size = std::mem::size_of::<crate::cloud::channel::WireEvent>();
    assert!(size <= 48, "WireEvent is {size} bytes");
}

#[test]
fn a_stored_unit_state_stays_in_its_size_class() {
    // The core keeps each unit as an `Arc<UnitState>` (two counters + the state); past 192
    // bytes the allocator rounds it up to 224, 32 bytes more for each of a big site's units.
    let size = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<UnitState>();
    assert!(size <= 192, "Arc<UnitState> takes {size} bytes");
    // A luminaire's one, two or three controls fit an 80-, 160- or 224-byte block (with 88
    // bytes a control, 96, 192 and 320).
    let control = std::mem::size_of::<Control>();
    assert!(control <= 72, "Control is {control} bytes");
}
