//! Parsing: every accepted form and every refusal with its exact reason.

use super::*;
use proptest::prelude::*;

fn unit() -> Target {
    Target::Unit { id: 1, attr: None }
}

fn attr(a: &str) -> Target {
    Target::Unit { id: 1, attr: Some(a.into()) }
}

fn ok(target: &Target, payload: &str) -> Command {
    parse(target, payload.as_bytes()).unwrap_or_else(|e| panic!("{payload:?} refused: {e}"))
}

fn reason(target: &Target, payload: &str) -> String {
    match parse(target, payload.as_bytes()) {
        Ok(c) => panic!("{payload:?} accepted as {c:?}"),
        Err(e) => e.to_string(),
    }
}

fn light(c: LightCommand) -> Command {
    Command::Unit(c)
}

#[test]
fn plain_unit_words() {
    for (p, s) in [("ON", Switch::On), ("off", Switch::Off), (" Toggle\n", Switch::Toggle), ("\"ON\"", Switch::On)] {
        assert_eq!(ok(&unit(), p), light(LightCommand { state: Some(s), ..Default::default() }), "{p:?}");
    }
}

#[test]
fn ha_json_light_commands() {
    let c = ok(&unit(), r#"{"state":"ON","brightness":128,"transition":2}"#);
    assert_eq!(
        c,
        light(LightCommand {
            state: Some(Switch::On),
            brightness: Some(128),
            transition: Some(2.0),
            ..Default::default()
        })
    );
    let c = ok(&unit(), r#"{"state":"ON","color_temp":3000}"#);
    assert_eq!(c, light(LightCommand { state: Some(Switch::On), color_temp: Some(3000), ..Default::default() }));
    let c = ok(&unit(), r#"{"state":"ON","color":{"x":0.2,"y":0.3}}"#);
    assert_eq!(
        c,
        light(LightCommand {
            state: Some(Switch::On),
            color: Some(ColorCommand::Xy { x: 0.2, y: 0.3 }),
            ..Default::default()
        })
    );
    let c = ok(&unit(), r#"{"color":{"h":240.5,"s":100}}"#);
    assert_eq!(c, light(LightCommand { color: Some(ColorCommand::Hs { h: 240.5, s: 100.0 }), ..Default::default() }));
    let c = ok(&attr("color"), r#"{"s":5,"h":0}"#);
    assert_eq!(c, light(LightCommand { color: Some(ColorCommand::Hs { h: 0.0, s: 5.0 }), ..Default::default() }));
    for bad in [r#"{"color":{"h":361,"s":1}}"#, r#"{"color":{"h":1,"s":101}}"#, r#"{"color":{"h":"1","s":1}}"#] {
        assert!(parse(&unit(), bad.as_bytes()).is_err(), "{bad}");
    }
    let c = ok(&unit(), r#"{"color":{"r":255,"g":0,"b":10}}"#);
    assert_eq!(c, light(LightCommand { color: Some(ColorCommand::Rgb { r: 255, g: 0, b: 10 }), ..Default::default() }));
    let c = ok(&unit(), r#"{"state":"TOGGLE"}"#);
    assert_eq!(c, light(LightCommand { state: Some(Switch::Toggle), ..Default::default() }));
    // Fractions are rounded.
    let c = ok(&unit(), r#"{"brightness":127.6,"color_temp":2999.7}"#);
    assert_eq!(c, light(LightCommand { brightness: Some(128), color_temp: Some(3000), ..Default::default() }));
}

#[test]
fn attribute_topics() {
    assert_eq!(ok(&attr("state"), "OFF"), light(LightCommand { state: Some(Switch::Off), ..Default::default() }));
    assert_eq!(ok(&attr("brightness"), "42"), light(LightCommand { brightness: Some(42), ..Default::default() }));
    assert_eq!(ok(&attr("color_temp"), "4000"), light(LightCommand { color_temp: Some(4000), ..Default::default() }));
    assert_eq!(
        ok(&attr("color"), r#"{"x":0.5,"y":0.4}"#),
        light(LightCommand { color: Some(ColorCommand::Xy { x: 0.5, y: 0.4 }), ..Default::default() })
    );
}

#[test]
fn groups_scenes_and_the_network() {
    let on = LevelCommand { state: Some(Switch::On), brightness: None };
    assert_eq!(ok(&Target::Group(1), "ON"), Command::Group(on));
    assert_eq!(ok(&Target::Scene(1), "ON"), Command::Scene(on));
    assert_eq!(
        ok(&Target::Group(1), r#"{"state":"ON","brightness":51,"transition":1}"#),
        Command::Group(LevelCommand { state: Some(Switch::On), brightness: Some(51) })
    );
    assert_eq!(
        ok(&Target::Scene(1), r#"{"brightness":0}"#),
        Command::Scene(LevelCommand { state: None, brightness: Some(0) })
    );
    // What HA's "Dim level" number sends (its command_template divides by 100).
    assert_eq!(ok(&Target::Network, r#"{"dim_level": 0.42}"#), Command::Network { level: 0.42 });
    assert_eq!(ok(&Target::Network, "0.5"), Command::Network { level: 0.5 });
    assert_eq!(ok(&Target::Network, "1"), Command::Network { level: 1.0 });
}

#[test]
fn refusals_name_the_problem() {
    let big = "x".repeat(MAX_PAYLOAD + 1);
    let cases: Vec<(Target, &str, &str)> = vec![
        (unit(), r#"{"brightness":300}"#, "brightness 300 outside 0..255"),
        (unit(), r#"{"brightness":-1}"#, "brightness -1 outside 0..255"),
        (unit(), r#"{"brightness":"high"}"#, "brightness must be a number"),
        (unit(), r#"{"state":"DIM"}"#, "state must be ON, OFF or TOGGLE, got \"DIM\""),
        (unit(), r#"{"state":1}"#, "state must be a string (ON, OFF or TOGGLE)"),
        (unit(), r#"{"color_temp":250}"#, "color_temp 250 outside 1000..20000 K"),
        (unit(), r#"{"color":{"x":0.2}}"#, "color must be an object {h, s}, {x, y} or {r, g, b}"),
        (unit(), r#"{"color":{"x":1.2,"y":0.3}}"#, "color.x 1.2 outside 0..1"),
        (unit(), r#"{"color":{"x":0.2,"y":0}}"#, "color.y 0 outside 0 (exclusive)..1"),
        (unit(), r#"{"color":{"r":256,"g":0,"b":0}}"#, "color.r 256 outside 0..255"),
        (
            unit(),
            r#"{"color":{"x":0.3,"y":0.3},"color_temp":3000}"#,
            "color and color_temp cannot be set in one command",
        ),
        (unit(), r#"{"transition":2}"#, "the command sets nothing (give state, brightness, color_temp or color)"),
        (unit(), r#"{"transition":-2,"state":"ON"}"#, "transition -2 outside 0..3600 s"),
        (
            unit(),
            r#"{"brigthness":100}"#,
            "unknown key \"brigthness\" for a unit command (accepted: state, brightness, color_temp, color, transition)",
        ),
        (unit(), r#"{"state":"ON""#, "invalid JSON: EOF while parsing an object at line 1 column 13"),
        (unit(), "DIM", "expected ON, OFF, TOGGLE or a JSON light command, got DIM"),
        (unit(), "[1]", "expected ON, OFF, TOGGLE or a JSON light command, got [1]"),
        (unit(), "  ", "empty payload"),
        (unit(), &big, "payload of 16385 bytes exceeds the 16384-byte limit"),
        (attr("brightness"), "abc", "brightness must be a number"),
        (attr("brightness"), "NaN", "brightness must be a number"),
        (attr("brightness"), "256", "brightness 256 outside 0..255"),
        (attr("color_temp"), "153", "color_temp 153 outside 1000..20000 K"),
        (attr("state"), "128", "expected ON, OFF or TOGGLE, got 128"),
        (
            attr("dim_level"),
            "0.5",
            "unknown attribute \"dim_level\" (…/set/<attr> takes state, brightness, color_temp or color)",
        ),
        (
            Target::Group(1),
            r#"{"color_temp":3000}"#,
            "unknown key \"color_temp\" for a group command (accepted: state, brightness, transition)",
        ),
        (Target::Scene(1), r#"{"brightness":1000}"#, "brightness 1000 outside 0..255"),
        (Target::Scene(1), "START", "expected ON, OFF, TOGGLE or a JSON object {state, brightness}, got START"),
        (Target::Network, r#"{"dim_level":42}"#, "dim_level 42 outside 0..1"),
        (Target::Network, "42", "dim_level 42 outside 0..1"),
        (Target::Network, r#"{"level":0.4}"#, "unknown key \"level\" for a network command (accepted: dim_level)"),
        (Target::Network, "ON", "expected {\"dim_level\": 0..1} or a number 0..1, got ON"),
        (Target::Network, r#"{"dim_level":"half"}"#, "dim_level must be a number"),
        (Target::Network, "[0.5]", "expected {\"dim_level\": 0..1} or a number 0..1, got [0.5]"),
    ];
    for (target, payload, want) in cases {
        assert_eq!(reason(&target, payload), want, "{target:?} {payload:?}");
    }
    assert_eq!(parse(&unit(), &[0xff, 0xfe]).unwrap_err().to_string(), "payload is not UTF-8 text");
}

#[test]
fn long_garbage_is_shortened_in_the_reason() {
    let r = reason(&unit(), &"A".repeat(100));
    assert!(r.ends_with(&format!("{}…", "A".repeat(40))), "{r}");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("{{\"color\":{}{}}}", "[".repeat(5000), "]".repeat(5000));
    assert!(reason(&unit(), &deep).starts_with("invalid JSON"));
}

proptest! {
    #[test]
    fn never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512), kind in 0u8..6) {
        let target = match kind {
            0 => unit(),
            1 => attr("brightness"),
            2 => attr("color"),
            3 => Target::Group(1),
            4 => Target::Scene(1),
            _ => Target::Network,
        };
        let _ = parse(&target, &bytes);
    }

    #[test]
    fn never_panics_on_json_like_text(
        text in r#"\{("(state|brightness|color_temp|color|transition|dim_level|x|y|r|g|b)":(-?[0-9.e]{0,8}|"[A-Za-z]{0,6}"|\{[^}]{0,30}\}|null|true),?){0,6}\}"#,
        kind in 0u8..4,
    ) {
        let target = match kind { 0 => unit(), 1 => Target::Group(2), 2 => Target::Scene(3), _ => Target::Network };
        if let Ok(Command::Unit(c)) = parse(&target, text.as_bytes()) {
            prop_assert!(c.color.is_none() || c.color_temp.is_none());
        }
    }
}
