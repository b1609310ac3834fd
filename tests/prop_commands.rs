//! Property tests of command intake: parsing never panics on any payload or topic, valid
//! commands parse to what was sent, and every command topic the bridge's own slugs produce
//! resolves back to the thing it names (and nothing else does).

use casambi2mqtt::bridge::state::NetworkView;
use casambi2mqtt::cloud::model::NetworkState;
use casambi2mqtt::commands::CommandError;
use casambi2mqtt::commands::Target as CommandTarget;
use casambi2mqtt::commands::parse::{
    ColorCommand, Command, LevelCommand, LightCommand, MAX_PAYLOAD, Switch, Target, parse,
};
use casambi2mqtt::mqtt::client::Message;
use casambi2mqtt::mqtt::command_intake::{classify, resolve};
use casambi2mqtt::mqtt::mirror::NetMirror;
use casambi2mqtt::mqtt::topics::{Layout, assign};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// `n` cases, or `PROPTEST_CASES` when set (for a longer run).
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig::with_cases(std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(n))
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        (
            any::<u32>(),
            prop::option::of(prop_oneof![
                prop::sample::select(vec!["state", "brightness", "color_temp", "color", "dim_level"])
                    .prop_map(str::to_string),
                any::<String>(),
            ])
        )
            .prop_map(|(id, attr)| Target::Unit { id, attr }),
        any::<u32>().prop_map(Target::Group),
        any::<u32>().prop_map(Target::Scene),
        Just(Target::Network),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        (-10i32..300).prop_map(Value::from),
        (0u32..=1000).prop_map(|n| json!(f64::from(n) / 1000.0)),
        prop::sample::select(vec!["ON", "off", "Toggle", "onn", ""]).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ]
}

const TOPIC_LEVELS: &[&str] = &["casambi", "home", "unit", "group", "scene", "set", "lamp", "", "+", "#", "brightness"];

const COMMAND_KEYS: &[&str] =
    &["state", "brightness", "color_temp", "color", "transition", "dim_level", "x", "y", "r", "g", "b"];

/// JSON shaped like commands (known keys, nested colour objects), any values.
fn command_json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![3 => prop::sample::select(COMMAND_KEYS).prop_map(str::to_string), 1 => any::<String>()],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

fn all_targets() -> Vec<Target> {
    vec![
        Target::Unit { id: 1, attr: None },
        Target::Unit { id: 1, attr: Some("state".into()) },
        Target::Unit { id: 1, attr: Some("brightness".into()) },
        Target::Unit { id: 1, attr: Some("color_temp".into()) },
        Target::Unit { id: 1, attr: Some("color".into()) },
        Target::Group(1),
        Target::Scene(1),
        Target::Network,
    ]
}

proptest! {
    #![proptest_config(cases(2048))]

    #[test]
    fn parsing_never_panics_on_bytes(t in target(), payload in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse(&t, &payload);
    }

    #[test]
    fn parsing_never_panics_on_json(v in command_json(), pad in prop::sample::select(vec!["", " ", "\n", "\t "])) {
        let text = format!("{pad}{v}{pad}");
        for t in all_targets() {
            if let Err(e) = parse(&t, text.as_bytes()) {
                // Every refusal has a message, and it stays short even for huge input.
                let msg = e.to_string();
                prop_assert!(!msg.is_empty());
            }
        }
    }

    #[test]
    fn plain_text_never_panics(text in any::<String>()) {
        for t in all_targets() {
            let _ = parse(&t, text.as_bytes());
        }
    }

    #[test]
    fn topics_never_panic(topic in prop_oneof![
        any::<String>(),
        prop::collection::vec(prop::sample::select(TOPIC_LEVELS), 0..8).prop_map(|l| l.join("/")),
    ], payload in prop::collection::vec(any::<u8>(), 0..32), retain in any::<bool>()) {
        let layout = Layout::new("casambi");
        let _ = layout.is_command(&topic);
        let _ = classify(&layout, &Message { topic: topic.clone(), payload, retain });
        let _ = resolve(&layout, &nets(), &topic);
    }
}

proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn oversized_payloads_are_refused_without_parsing(extra in 1usize..65536, t in target()) {
        let payload = vec![b'{'; MAX_PAYLOAD + extra];
        let r = parse(&t, &payload);
        prop_assert!(matches!(r, Err(CommandError::TooLarge { .. })), "{:?}", r);
    }
}

const SWITCH_WORDS: &[(&str, Switch)] =
    &[("ON", Switch::On), ("on", Switch::On), ("Off", Switch::Off), ("TOGGLE", Switch::Toggle)];

fn num(v: f64, as_int: bool) -> Value {
    if as_int && v.fract() == 0.0 { json!(v as i64) } else { json!(v) }
}

proptest! {
    #![proptest_config(cases(1024))]

    #[test]
    fn valid_commands_parse_to_what_was_sent(
        b in 0u8..=255,
        k in 1000u32..=20000,
        x in (0u32..=1000).prop_map(|n| f64::from(n) / 1000.0),
        y in (1u32..=1000).prop_map(|n| f64::from(n) / 1000.0),
        level in (0u32..=1000).prop_map(|n| f64::from(n) / 1000.0),
        word in prop::sample::select(SWITCH_WORDS),
        as_int in any::<bool>(),
        transition in prop::option::of(0u32..3600),
    ) {
        let unit = Target::Unit { id: 7, attr: None };
        let mut m = json!({"state": word.0, "brightness": num(f64::from(b), as_int)});
        if let Some(t) = transition {
            m["transition"] = json!(t);
        }
        let expected = LightCommand {
            state: Some(word.1),
            brightness: Some(b),
            transition: transition.map(f64::from),
            ..LightCommand::default()
        };
        prop_assert_eq!(parse(&unit, m.to_string().as_bytes()), Ok(Command::Unit(expected)));
        prop_assert_eq!(
            parse(&unit, json!({"color_temp": k}).to_string().as_bytes()),
            Ok(Command::Unit(LightCommand { color_temp: Some(k), ..LightCommand::default() }))
        );
        prop_assert_eq!(
            parse(&unit, json!({"color": {"x": x, "y": y}}).to_string().as_bytes()),
            Ok(Command::Unit(LightCommand { color: Some(ColorCommand::Xy { x, y }), ..LightCommand::default() }))
        );
        prop_assert_eq!(
            parse(&unit, word.0.as_bytes()),
            Ok(Command::Unit(LightCommand { state: Some(word.1), ..LightCommand::default() }))
        );
        let attr = |a: &str| Target::Unit { id: 7, attr: Some(a.to_string()) };
        prop_assert_eq!(
            parse(&attr("brightness"), b.to_string().as_bytes()),
            Ok(Command::Unit(LightCommand { brightness: Some(b), ..LightCommand::default() }))
        );
        prop_assert_eq!(
            parse(&Target::Group(2), json!({"brightness": b}).to_string().as_bytes()),
            Ok(Command::Group(LevelCommand { state: None, brightness: Some(b) }))
        );
        prop_assert_eq!(
            parse(&Target::Scene(3), word.0.as_bytes()),
            Ok(Command::Scene(LevelCommand { state: Some(word.1), brightness: None }))
        );
        let dim = json!({"dim_level": level}).to_string();
        prop_assert_eq!(parse(&Target::Network, dim.as_bytes()), Ok(Command::Network { level }));
        prop_assert_eq!(parse(&Target::Network, level.to_string().as_bytes()), Ok(Command::Network { level }));
    }

    #[test]
    fn out_of_range_values_are_refused(
        b in prop_oneof![-1000i64..0, 256i64..100000],
        k in prop_oneof![0u32..1000, 20001u32..1_000_000],
        level in prop_oneof![(-100i32..0).prop_map(f64::from), (1001u32..5000).prop_map(|n| f64::from(n) / 1000.0)],
    ) {
        let unit = Target::Unit { id: 7, attr: None };
        let refused = |t: &Target, v: Value| parse(t, v.to_string().as_bytes()).is_err();
        let (bv, kv, lv) = (json!({"brightness": b}), json!({"color_temp": k}), json!({"dim_level": level}));
        prop_assert!(refused(&unit, bv), "brightness {} accepted", b);
        prop_assert!(refused(&unit, kv), "color_temp {} accepted", k);
        prop_assert!(refused(&Target::Network, lv), "dim_level {} accepted", level);
    }
}

// ---------------------------------------------------------------------------------------------
// Topic resolution
// ---------------------------------------------------------------------------------------------

/// A network with the given unit, group and scene names, as the publisher mirrors it.
fn mirror(
    id: &str,
    name: &str,
    units: &BTreeMap<u32, String>,
    groups: &BTreeMap<u32, String>,
    scenes: &BTreeMap<u32, String>,
) -> NetMirror {
    let by_id = |m: &BTreeMap<u32, String>| -> Map<String, Value> {
        m.iter().map(|(k, n)| (k.to_string(), json!({"id": k, "name": n}))).collect()
    };
    let state =
        json!({"id": id, "name": name, "units": by_id(units), "groups": by_id(groups), "scenes": by_id(scenes)});
    let state: NetworkState = serde_json::from_value(state).unwrap_or_default();
    let mut view = NetworkView::new(id);
    view.apply_snapshot(state);
    let slug = assign([(id.to_string(), name.to_string())], &["bridge"]).remove(id).unwrap_or_default();
    NetMirror::new(view, slug)
}

fn nets() -> BTreeMap<String, NetMirror> {
    let names: BTreeMap<u32, String> =
        [(1, "Lamp"), (2, "lamp"), (3, "a/b"), (4, "+"), (5, "Küche")].map(|(k, v)| (k, v.to_string())).into();
    let mut m = BTreeMap::new();
    m.insert("n1".to_string(), mirror("n1", "Home", &names, &names, &names));
    m
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[aAbB /+#\\-]{0,5}", "[A-Z][a-z]{0,6}"]
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn every_command_topic_resolves_to_what_it_names(
        units in prop::collection::btree_map(0u32..40, name(), 0..10),
        groups in prop::collection::btree_map(0u32..10, name(), 0..4),
        scenes in prop::collection::btree_map(0u32..10, name(), 0..4),
        net_name in name(),
    ) {
        let layout = Layout::new("casambi");
        let m = mirror("abc123", &net_name, &units, &groups, &scenes);
        let net = m.slug.clone();
        let mut nets = BTreeMap::new();
        nets.insert("abc123".to_string(), m.clone());
        let resolved = |topic: String| resolve(&layout, &nets, &topic);
        let to = |target: CommandTarget| Some(("abc123".to_string(), target));
        prop_assert_eq!(resolved(layout.network_set(&net)), to(CommandTarget::Network));
        for (id, s) in m.unit_slugs.iter() {
            let plain = CommandTarget::Unit { id, attr: None };
            prop_assert_eq!(resolved(layout.unit_leaf(&net, s, "set")), to(plain));
            let t = format!("{}/brightness", layout.unit_leaf(&net, s, "set"));
            prop_assert_eq!(resolved(t), to(CommandTarget::Unit { id, attr: Some("brightness".into()) }));
        }
        for (id, s) in m.group_slugs.iter() {
            prop_assert_eq!(resolved(format!("{}/set", layout.group(&net, s))), to(CommandTarget::Group(id)));
        }
        for (id, s) in m.scene_slugs.iter() {
            prop_assert_eq!(resolved(format!("{}/set", layout.scene(&net, s))), to(CommandTarget::Scene(id)));
        }
    }
}
