//! Property tests of the cloud model: parsing never panics on any input, and generated valid
//! frames (with the real service's quirks: floats for ints, nested or flat controls, unknown and
//! `null` fields, any key order) parse to exactly what was generated.
//!
//! Case counts are set per block; `PROPTEST_CASES` (e.g. `PROPTEST_CASES=100000`) replaces them
//! for a longer run.

#[path = "prop_parsing/valid.rs"]
mod valid;

use casambi2mqtt::bridge::caps::Caps;
use casambi2mqtt::bridge::state::NetworkView;
use casambi2mqtt::cloud::model::{
    Cct, Color, ColorSource, Colorsource, Control, Fixture, Group, Lux, Network, NetworkSessions, NetworkState, Photo,
    Plain, Scene, ServerMessage, Slider, StatusControl, Unit, UnitState, UserSession, ValueControl, WireStatusKind,
    parse_frame,
};
use casambi2mqtt::mqtt::DiscoveryMode;
use casambi2mqtt::mqtt::discovery::Discovery;
use casambi2mqtt::mqtt::mirror::NetMirror;
use casambi2mqtt::mqtt::render::Renderer;
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
        data_sensors: Default::default(),
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
