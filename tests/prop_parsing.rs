//! Property tests of the cloud model: parsing never panics on any input, and generated valid
//! frames (with the real service's quirks: floats for ints, nested or flat controls, unknown and
//! `null` fields, any key order) parse to exactly what was generated.
//!
//! Case counts are set per block; `PROPTEST_CASES` (e.g. `PROPTEST_CASES=100000`) replaces them
//! for a longer run.

use casambi2mqtt::bridge::state::NetworkView;
use casambi2mqtt::cloud::model::{
    Cct, Color, ColorSource, Colorsource, Control, Fixture, Group, Lux, Network, NetworkSessions, NetworkState, Photo,
    Plain, Scene, ServerMessage, Slider, StatusControl, Unit, UnitState, UserSession, ValueControl, WireStatusKind,
    parse_frame,
};
use casambi2mqtt::mqtt::DiscoveryMode;
use casambi2mqtt::mqtt::caps::Caps;
use casambi2mqtt::mqtt::discovery::Discovery;
use casambi2mqtt::mqtt::render::{NetMirror, Renderer};
use casambi2mqtt::mqtt::topics::Layout;
use casambi2mqtt::mqtt::unit_json::UnitJson;
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// `n` cases, or `PROPTEST_CASES` when set (for a longer run).
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig::with_cases(std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(n))
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

/// Field names the parsers look at, so arbitrary objects reach the typed paths instead of being
/// ignored as unknown keys.
const KEYS: &[&str] = &[
    "method",
    "wire",
    "wireStatus",
    "ref",
    "response",
    "message",
    "id",
    "address",
    "mac",
    "name",
    "image",
    "position",
    "fixtureId",
    "firmwareVersion",
    "groupId",
    "type",
    "priority",
    "scene",
    "on",
    "online",
    "condition",
    "status",
    "activeSceneId",
    "controls",
    "dimLevel",
    "details",
    "units",
    "scenes",
    "groups",
    "revision",
    "activeScenes",
    "gateway",
    "photos",
    "grade",
    "timezone",
    "value",
    "min",
    "max",
    "level",
    "tw",
    "hue",
    "sat",
    "x",
    "y",
    "rgb",
    "source",
    "label",
    "sessionId",
    "sites",
    "networks",
    "role",
    "0",
    "hidden",
    "icon",
    "color",
    "vendor",
    "model",
    "readonly",
    "isLuminaire",
];

const METHODS: &[&str] = &["unitChanged", "peerChanged", "networkUpdated", "networkLog", "open", "ping", "mystery"];
const CONTROL_TYPES: &[&str] = &[
    "Dimmer",
    "OnOff",
    "CCT",
    "Color",
    "Colorsource",
    "Presence",
    "Lux",
    "Switch",
    "White",
    "Vertical",
    "Overheat",
    "Slider",
    "Mystery",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-zA-Z0-9_]{0,6}",
        1 => any::<String>(),
    ]
}

/// Any JSON number serde_json can represent, including huge, negative and fractional ones.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        (-3i64..300).prop_map(|n| json!(n as f64)),
        (0u32..2000).prop_map(|n| json!(f64::from(n) / 1000.0)),
        prop::sample::select(vec![json!(u32::MAX), json!(4294967296.0), json!(-1), json!(1e300), json!(-0.0)]),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        prop::sample::select(METHODS).prop_map(Value::from),
        prop::sample::select(CONTROL_TYPES).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ]
}

/// Arbitrary JSON, biased towards the keys and values the model knows.
fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A frame-shaped object: a known method (or none) plus arbitrary known fields.
fn frame_like() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop::sample::select(METHODS)),
        prop::collection::vec((prop::sample::select(KEYS), any_json()), 0..10),
    )
        .prop_map(|(method, fields)| {
            let mut m: Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            if let Some(method) = method {
                m.insert("method".into(), method.into());
            }
            Value::Object(m)
        })
}

/// A control-shaped object: a known type with arbitrary known fields.
fn control_like() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(CONTROL_TYPES),
        prop::collection::vec(
            (
                prop::sample::select(
                    &[
                        "value", "min", "max", "level", "tw", "hue", "sat", "x", "y", "rgb", "source", "status",
                        "label", "name",
                    ][..],
                ),
                leaf(),
            ),
            0..6,
        ),
    )
        .prop_map(|(t, fields)| {
            let mut m: Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            m.insert("type".into(), t.into());
            Value::Object(m)
        })
}

// ---------------------------------------------------------------------------------------------
// Everything that parses cloud input
// ---------------------------------------------------------------------------------------------

/// Runs every parser of cloud input on `bytes`; whatever parses is also serialised back and
/// pushed through the bridge state and the topic renderer (the path real data takes).
fn parse_everything(bytes: &[u8]) {
    if let Ok(msg) = parse_frame(bytes) {
        let text = msg.to_json().expect("a parsed frame serialises");
        if let ServerMessage::UnitChanged { unit, .. } = &msg {
            let mut view = NetworkView::new("n");
            view.apply_unit((**unit).clone(), true);
            render_all(&view);
            direct_json_is_serdes(unit);
            // What was parsed parses again to the same thing (controls up to `3.0` → `3`).
            let again = parse_frame(text.as_bytes()).expect("re-serialised frame parses");
            if let ServerMessage::UnitChanged { unit: u2, .. } = again {
                assert_eq!(u2.id, unit.id);
            }
        }
    }
    if let Ok(state) = serde_json::from_slice::<NetworkState>(bytes) {
        let _ = serde_json::to_string(&state).expect("state serialises");
        let mut view = NetworkView::new("n");
        view.apply_snapshot(state);
        render_all(&view);
    }
    if let Ok(net) = serde_json::from_slice::<Network>(bytes) {
        let mut view = NetworkView::new("n");
        view.apply_config(&net);
        render_all(&view);
    }
    if let Ok(u) = serde_json::from_slice::<UnitState>(bytes) {
        let _ = serde_json::to_string(&u).expect("unit serialises");
    }
    let _ = serde_json::from_slice::<Fixture>(bytes);
    let _ = serde_json::from_slice::<NetworkSessions>(bytes);
    let _ = serde_json::from_slice::<UserSession>(bytes);
    let _ = serde_json::from_slice::<BTreeMap<String, Unit>>(bytes);
    let _ = serde_json::from_slice::<BTreeMap<String, Group>>(bytes);
    let _ = serde_json::from_slice::<BTreeMap<String, Scene>>(bytes);
    let _ = serde_json::from_slice::<Vec<Photo>>(bytes);
    if let Ok(controls) = serde_json::from_slice::<Vec<Control>>(bytes) {
        for c in &controls {
            let _ = (c.to_value(), c.type_name(), c.name());
            let mut direct = Vec::new();
            c.write_json(&mut direct);
            assert_eq!(String::from_utf8_lossy(&direct), serde_json::to_string(c).expect("a control serialises"));
        }
    }
}

/// The unit JSON and its controls written directly (the event path) are byte for byte what
/// serde_json writes for them.
fn direct_json_is_serdes(unit: &UnitState) {
    let json = UnitJson::of(unit, &Caps::of(unit, None));
    let mut direct = Vec::new();
    json.write_json(&mut direct);
    assert_eq!(String::from_utf8_lossy(&direct), serde_json::to_string(&json).expect("unit JSON serialises"));
}

/// Renders every topic of a view; every topic must be usable (no empty level, no wildcard).
fn render_all(view: &NetworkView) {
    let renderer = Renderer {
        layout: Layout::new("casambi"),
        discovery: Some(Discovery { prefix: "homeassistant".into(), mode: DiscoveryMode::Device, qos: 1 }),
        attribute_topics: true,
    };
    let mirror = NetMirror::new(view.clone(), "net".into());
    for owner in mirror.owners() {
        for (topic, _) in renderer.owner(&mirror, &owner) {
            assert!(
                topic.split('/').all(|l| !l.is_empty() && !l.contains(['+', '#', '\0'])),
                "unusable topic {topic:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(cases(2048))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        parse_everything(&bytes);
    }

}

proptest! {
    #![proptest_config(cases(1024))]

    #[test]
    fn arbitrary_json_never_panics(v in any_json()) {
        parse_everything(v.to_string().as_bytes());
        // The same value through serde_json's Value deserializer (a different code path).
        let _ = serde_json::from_value::<NetworkState>(v.clone());
        let _ = serde_json::from_value::<UnitState>(v.clone());
        let _ = serde_json::from_value::<Control>(v);
    }

}

proptest! {
    // Each case renders a whole network's topics, several times: fewer cases keep it quick.
    #![proptest_config(cases(512))]

    #[test]
    fn frame_shaped_json_never_panics(v in frame_like()) {
        let text = v.to_string();
        parse_everything(text.as_bytes());
        // Truncations and a flipped byte of a near-valid frame.
        let bytes = text.as_bytes();
        for cut in [bytes.len() / 3, bytes.len() / 2, bytes.len().saturating_sub(1)] {
            parse_everything(&bytes[..cut]);
        }
    }

    #[test]
    fn control_shaped_json_never_panics(
        controls in prop::collection::vec(control_like(), 0..5),
        nested in any::<bool>(),
    ) {
        let list = Value::Array(controls);
        let list = if nested { json!([list]) } else { list };
        let frame = json!({"method": "unitChanged", "wire": 1, "id": 3, "controls": list.clone()});
        parse_everything(frame.to_string().as_bytes());
        let state = json!({"id": "n", "units": {"3": {"id": 3, "controls": list}}});
        parse_everything(state.to_string().as_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Valid frames parse to what was generated
// ---------------------------------------------------------------------------------------------

/// A number that prints and parses exactly (a multiple of 1/1000 or an integer).
fn nice() -> impl Strategy<Value = f64> {
    prop_oneof![(0u32..=1000).prop_map(|n| f64::from(n) / 1000.0), (0u32..20000).prop_map(f64::from)]
}

/// An integer field written as a JSON integer or as an integral float (`3.0`).
fn int_json(v: i64, as_float: bool) -> Value {
    if as_float { json!(v as f64) } else { json!(v) }
}

/// A generated control: the JSON sent and the typed control expected.
fn control() -> impl Strategy<Value = (Value, Control)> {
    let name = prop::option::of("[a-z]{1,8}[0-9]?");
    prop_oneof![
        (prop::sample::select(&["Dimmer", "OnOff", "White", "Vertical"][..]), nice(), name.clone()).prop_map(
            |(t, v, name)| {
                let mut j = json!({"type": t, "value": v});
                if let Some(n) = &name {
                    j["name"] = json!(n);
                }
                let c = ValueControl { value: v, name: name.map(Into::into), extra: Default::default() };
                let c = match t {
                    "Dimmer" => Control::Dimmer(c),
                    "OnOff" => Control::OnOff(c),
                    "White" => Control::White(c),
                    _ => Control::Vertical(c),
                };
                (j, c)
            }
        ),
        (nice(), nice(), nice(), prop::option::of(nice()), prop::option::of(nice())).prop_map(
            |(min, max, value, level, tw)| {
                let mut j = json!({"type": "CCT", "min": min, "max": max, "value": value});
                if let Some(l) = level {
                    j["level"] = json!(l);
                }
                if let Some(t) = tw {
                    j["tw"] = json!(t);
                }
                (
                    j,
                    Control::Cct(Cct {
                        min,
                        max,
                        value,
                        level: level.into(),
                        tw: tw.into(),
                        name: None,
                        extra: Default::default(),
                    }),
                )
            }
        ),
        (
            prop::option::of(nice()),
            prop::option::of(nice()),
            prop::option::of(nice()),
            prop::option::of(nice()),
            prop::option::of("rgb\\([0-9]{1,3}, [0-9]{1,3}, [0-9]{1,3}\\)")
        )
            .prop_map(|(hue, sat, x, y, rgb)| {
                let mut j = json!({"type": "Color"});
                for (k, v) in [("hue", hue), ("sat", sat), ("x", x), ("y", y)] {
                    if let Some(v) = v {
                        j[k] = json!(v);
                    }
                }
                if let Some(r) = &rgb {
                    j["rgb"] = json!(r);
                }
                (
                    j,
                    Control::Color(Box::new(Color {
                        hue,
                        sat,
                        x,
                        y,
                        rgb: rgb.map(Into::into),
                        name: None,
                        extra: Default::default(),
                    })),
                )
            }),
        prop::sample::select(&["XY", "RGB", "TW", "HSV"][..]).prop_map(|s| {
            (
                json!({"type": "Colorsource", "source": s}),
                Control::Colorsource(Colorsource {
                    source: ColorSource::parse(s),
                    name: None,
                    extra: Default::default(),
                }),
            )
        }),
        (prop::sample::select(&["Presence", "Overheat"][..]), any::<String>()).prop_map(|(t, status)| {
            let c = StatusControl { status: status.clone().into(), name: None, extra: Default::default() };
            let c = if t == "Presence" { Control::Presence(c) } else { Control::Overheat(c) };
            (json!({"type": t, "status": status}), c)
        }),
        (prop::option::of(nice()), prop::option::of(nice())).prop_map(|(value, level)| {
            let mut j = json!({"type": "Lux"});
            if let Some(v) = value {
                j["value"] = json!(v);
            }
            if let Some(l) = level {
                j["level"] = json!(l);
            }
            (j, Control::Lux(Lux { value, level, name: None, extra: Default::default() }))
        }),
        Just((json!({"type": "Switch"}), Control::Switch(Plain::default()))),
        (prop::option::of(nice()), prop::option::of("[A-Za-z ]{0,10}")).prop_map(|(value, label)| {
            let mut j = json!({"type": "Slider"});
            if let Some(v) = value {
                j["value"] = json!(v);
            }
            if let Some(l) = &label {
                j["label"] = json!(l);
            }
            (j, Control::Slider(Slider { value: value.into(), label: label.map(Into::into), ..Slider::default() }))
        }),
        ("[A-Z][a-z]{2,10}X", prop::collection::btree_map("[a-z]{1,6}", leaf_nice(), 0..4)).prop_map(|(t, fields)| {
            let mut m: Map<String, Value> = fields.into_iter().collect();
            m.insert("type".into(), json!(t));
            let v = Value::Object(m);
            (v.clone(), Control::Other(v))
        }),
    ]
}

/// JSON scalars that survive a text round trip exactly.
fn leaf_nice() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        nice().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
    ]
}

/// How the controls list is laid out on the wire.
#[derive(Debug, Clone, Copy)]
enum Layout2 {
    /// `[c, c]` (events).
    Flat,
    /// `[[c, c]]` (REST).
    Nested,
    /// `[[c], [c]]`.
    EachNested,
    /// `[c, [c]]`.
    Mixed,
}

fn lay_out(controls: &[Value], how: Layout2) -> Value {
    match how {
        Layout2::Flat => Value::Array(controls.to_vec()),
        Layout2::Nested => json!([controls]),
        Layout2::EachNested => Value::Array(controls.iter().map(|c| json!([c])).collect()),
        Layout2::Mixed => Value::Array(
            controls.iter().enumerate().map(|(i, c)| if i % 2 == 1 { json!([c]) } else { c.clone() }).collect(),
        ),
    }
}

/// A generated `unitChanged`: the wire, the expected state, and the frame's fields in the order
/// they are sent.
#[derive(Debug, Clone)]
struct GenFrame {
    wire: u32,
    unit: UnitState,
    fields: Vec<(String, Value)>,
}

#[allow(clippy::type_complexity)]
fn unit_changed() -> impl Strategy<Value = GenFrame> {
    let opt_str = || prop::option::of(any::<String>());
    // Integers sent as floats stay below 10^15: the same generated units also go through
    // serde_json (REST shapes), whose default float parser is not correctly rounded beyond 15
    // significant digits (`-1858043434372081.0` reads as `…080.8`, rightly refused as
    // fractional). Frames, read by sonic-rs, have no such limit
    // (`frames_read_long_integral_floats_exactly`).
    let small_i64 = || prop::option::of(-999_999_999_999_999i64..=999_999_999_999_999);
    let strings = (opt_str(), opt_str(), opt_str(), opt_str(), opt_str(), opt_str());
    let ints = (
        prop::option::of(any::<i32>()),
        prop::option::of(any::<u32>()),
        prop::option::of(any::<u32>()),
        small_i64(),
        small_i64(),
        small_i64(),
        prop::option::of(any::<u32>()),
    );
    let rest = (
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(nice()),
        prop::option::of(prop::collection::btree_map("[a-zA-Z_]{1,8}", leaf_nice(), 0..4)),
        prop::option::of(prop::collection::vec(control(), 0..6)),
        prop::sample::select(vec![Layout2::Flat, Layout2::Nested, Layout2::EachNested, Layout2::Mixed]),
    );
    let quirks = (
        any::<u32>(),
        any::<u32>(),
        prop::collection::vec(any::<bool>(), 12),
        prop::collection::vec(any::<bool>(), 20),
        prop::collection::vec(("x[a-z]{1,6}", leaf_nice()), 0..3),
    );
    (strings, ints, rest, quirks)
        .prop_map(|(strings, ints, rest, quirks)| {
            let (address, name, image, firmware_version, unit_type, status) = strings;
            let (position, fixture_id, group_id, priority, scene, condition, active_scene_id) = ints;
            let (on, online, dim_level, details, controls, layout) = rest;
            let (id, wire, as_float, nulls, extras) = quirks;
            let details = details.map(|d| Value::Object(d.into_iter().collect()));
            let unit = UnitState {
                id,
                address: address.clone().map(Into::into),
                name: name.clone().map(Into::into),
                image: image.clone().map(Into::into),
                position,
                fixture_id,
                firmware_version: firmware_version.clone().map(Into::into),
                group_id,
                unit_type: unit_type.clone().map(Into::into),
                priority: priority.into(),
                scene: scene.into(),
                on,
                online,
                condition: condition.into(),
                status: status.clone().map(Into::into),
                active_scene_id,
                controls: controls.as_ref().map(|c| c.iter().map(|(_, t)| t.clone()).collect()),
                dim_level,
                details: details.clone().map(Box::new),
            };
            let mut fields: Vec<(String, Value)> = vec![
                ("method".into(), json!("unitChanged")),
                ("wire".into(), int_json(i64::from(wire), as_float[0])),
                ("id".into(), int_json(i64::from(id), as_float[1])),
            ];
            let ints: [(&str, Option<i64>); 7] = [
                ("position", position.map(i64::from)),
                ("fixtureId", fixture_id.map(i64::from)),
                ("groupId", group_id.map(i64::from)),
                ("priority", priority),
                ("scene", scene),
                ("condition", condition),
                ("activeSceneId", active_scene_id.map(i64::from)),
            ];
            let mut n = 0;
            let mut opt = |fields: &mut Vec<(String, Value)>, k: &str, v: Option<Value>| {
                n += 1;
                match v {
                    Some(v) => fields.push((k.into(), v)),
                    // A missing field and `null` both mean "not reported".
                    None if nulls[n % nulls.len()] => fields.push((k.into(), Value::Null)),
                    None => {}
                }
            };
            for (i, (k, v)) in ints.into_iter().enumerate() {
                opt(&mut fields, k, v.map(|v| int_json(v, as_float[2 + i])));
            }
            for (k, v) in [
                ("address", address),
                ("name", name),
                ("image", image),
                ("firmwareVersion", firmware_version),
                ("type", unit_type),
                ("status", status),
            ] {
                opt(&mut fields, k, v.map(Value::String));
            }
            opt(&mut fields, "on", on.map(Value::Bool));
            opt(&mut fields, "online", online.map(Value::Bool));
            opt(&mut fields, "dimLevel", dim_level.map(|d| json!(d)));
            opt(&mut fields, "details", details);
            let sent: Option<Vec<Value>> = controls.map(|c| c.into_iter().map(|(j, _)| j).collect());
            opt(&mut fields, "controls", sent.map(|c| lay_out(&c, layout)));
            // Unknown fields are ignored.
            fields.extend(extras);
            GenFrame { wire, unit, fields }
        })
        .prop_flat_map(|g| {
            let fields = g.fields.clone();
            (Just(g), Just(fields).prop_shuffle())
        })
        .prop_map(|(mut g, fields)| {
            g.fields = fields;
            g
        })
}

const WIRE_STATUSES: &[&str] = &[
    "openWireSucceed",
    "keyAuthenticateFailed",
    "keyAuthorizeFailed",
    "invalidSession",
    "tooManyWires",
    "invalidValueType",
    "invalidData",
    "somethingNew",
];

/// Parses a JSON value as a frame (it must parse).
fn frame_of(v: Value) -> ServerMessage {
    parse_frame(v.to_string().as_bytes()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// The JSON object text of `fields` in their order (a `Value` would sort the keys).
fn object_text(fields: &[(String, Value)]) -> String {
    let parts: Vec<String> =
        fields.iter().map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap_or_default(), v)).collect();
    format!("{{{}}}", parts.join(","))
}

proptest! {
    #![proptest_config(cases(1024))]

    #[test]
    fn valid_unit_changed_frames_parse_to_what_was_generated(g in unit_changed()) {
        let text = object_text(&g.fields);
        let parsed = parse_frame(text.as_bytes());
        prop_assert!(parsed.is_ok(), "{text}: {parsed:?}");
        prop_assert_eq!(parsed.unwrap(), ServerMessage::UnitChanged { wire: g.wire, unit: Box::new(g.unit.clone()) });
        // The REST path (unit state endpoint, units of the network state) reads the same object
        // to the same state.
        let rest: UnitState = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&rest, &g.unit);
        let state_text = format!(r#"{{"id":"n","units":{{"{}":{text}}}}}"#, g.unit.id);
        let state: NetworkState = serde_json::from_str(&state_text).unwrap();
        prop_assert_eq!(state.units.get(&g.unit.id.to_string()), Some(&g.unit));
        // And what the bridge would send on parses back to the same state.
        let again = ServerMessage::UnitChanged { wire: g.wire, unit: Box::new(g.unit.clone()) }.to_json().unwrap();
        let expected = ServerMessage::UnitChanged { wire: g.wire, unit: Box::new(g.unit) };
        prop_assert_eq!(parse_frame(again.as_bytes()).unwrap(), expected);
    }

    #[test]
    fn other_valid_frames_parse_to_what_was_generated(
        wire in any::<u32>(),
        wire_as_float in any::<bool>(),
        online in any::<bool>(),
        status in prop::sample::select(WIRE_STATUSES),
        reference in prop::option::of("[a-zA-Z0-9-]{0,12}"),
        method in "[a-z][a-zA-Z]{0,12}",
        message in any::<String>(),
    ) {
        let w = int_json(i64::from(wire), wire_as_float);
        let peer = frame_of(json!({"method": "peerChanged", "wire": w, "online": online}));
        prop_assert_eq!(peer, ServerMessage::PeerChanged { wire, online });
        let upd = frame_of(json!({"wire": w, "method": "networkUpdated", "extra": [1, 2]}));
        prop_assert_eq!(upd, ServerMessage::NetworkUpdated { wire });
        let mut ws = json!({"wireStatus": status, "wire": w});
        if let Some(r) = &reference {
            ws["ref"] = json!(r);
        }
        let ref_ = reference.map(Into::into);
        let expected = ServerMessage::WireStatus { status: WireStatusKind::parse(status), ref_, wire: Some(wire) };
        prop_assert_eq!(frame_of(ws), expected);
        let log = frame_of(json!({"method": "networkLog", "wire": w, "message": message}));
        prop_assert_eq!(log, ServerMessage::NetworkLog { wire: Some(wire), message: Some(message.into()) });
        prop_assert_eq!(parse_frame(br#"{"response":"pong"}"#).unwrap(), ServerMessage::Pong);
        let known = ["unitChanged", "peerChanged", "networkUpdated", "networkLog"];
        if !known.contains(&method.as_str()) {
            let unknown = frame_of(json!({"method": method, "wire": w}));
            prop_assert_eq!(unknown, ServerMessage::Unknown { method: method.into(), wire: Some(wire) });
        }
    }

    #[test]
    fn fractional_or_out_of_range_ids_are_errors_not_panics(id in prop_oneof![
        (0u32..1000).prop_map(|n| json!(f64::from(n) + 0.5)),
        Just(json!(u64::from(u32::MAX) + 1)),
        Just(json!(-1)),
        Just(json!(1e20)),
        Just(json!("12")),
    ]) {
        let frame = json!({"method": "unitChanged", "wire": 1, "id": id});
        prop_assert!(parse_frame(frame.to_string().as_bytes()).is_err());
    }
}
