//! Commands end to end: a real mosquitto, the simulated cloud and the whole bridge started with
//! `app::run`. A test client publishes on the `…/set` topics (never retained, except where a
//! retained command is the point); the tests assert the exact control message the simulator
//! received, that the retained state topics follow once the cloud reports the change, and that
//! refused commands show on `casambi/bridge/error` and change nothing.

mod common;

use casambi2mqtt::app::{self, Running};
use casambi2mqtt::config;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::{Mosquitto, Watcher, retained, retained_until};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
const ERRORS: &str = "casambi/bridge/error";
const CEILING: &str = "casambi/home/unit/kitchen-ceiling";
const SPOTS: &str = "casambi/home/unit/kuche-spots";
const LAMP: &str = "casambi/home/unit/living-room-lamp";
const FLOOR: &str = "casambi/home/unit/living-room-floor";

/// The broker, the simulator and a running bridge, plus a client that publishes commands and
/// watches `casambi/bridge/error`.
struct Rig {
    sim: Simulator,
    broker: Mosquitto,
    client: Watcher,
    /// Everything under `casambi/#`, to follow the state live (confirmed on the broker's
    /// retained store by [`Rig::command`]).
    state: Watcher,
    topics: BTreeMap<String, String>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<app::Outcome, app::AppError>>,
}

/// Starts the broker, the simulator (demo site) and the bridge (MQTT 5, the default); `before`
/// are retained messages put on the broker before the bridge connects.
async fn rig_with(before: &[(&str, &str)]) -> Rig {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let broker = Mosquitto::start();
    let client = Watcher::start(broker.observer_port(), ERRORS).await;
    for (topic, payload) in before {
        client.publish(topic, payload, true).await;
    }
    if !before.is_empty() {
        retained_until(broker.port(), Duration::from_secs(5), |r| before.iter().all(|(t, _)| r.contains_key(*t))).await;
    }
    // Datapoints off: commands never touch them, and their first fetch falls at a random moment
    // of the first half minute, which would change the retained set under a test that compares it.
    let yaml = format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\nnetworks:\n  - email: demo@example.com\n    password: demo\n\
         mqtt:\n  url: {}\nhealth:\n  listen: 127.0.0.1:0\n\
         datapoints:\n  enabled: false\n",
        sim.base_url(),
        sim.ws_url(),
        broker.url()
    );
    let config = config::parse(&yaml, Vec::<(String, String)>::new()).unwrap();
    let shutdown = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel::<Running>();
    let mut task = tokio::spawn(app::run(config, shutdown.clone(), Some(tx)));
    if rx.await.is_err() {
        panic!("the bridge did not start: {:?}", (&mut task).await);
    }
    // Up: both networks published (the command topics are subscribed before anything is), and
    // Home's photo, which is fetched after its snapshot.
    retained_until(broker.port(), Duration::from_secs(15), |r| {
        r.get("casambi/bridge/state").is_some_and(|s| s == "online")
            && r.contains_key("casambi/home/photo/ground-floor")
            && r.get("casambi/home/availability").is_some_and(|s| s == "online")
            && r.get("casambi/office/availability").is_some_and(|s| s == "online")
            && r.contains_key(CEILING)
            && r.contains_key(FLOOR)
    })
    .await;
    let state = Watcher::start(broker.observer_port(), "casambi/#").await;
    let mut rig = Rig { sim, broker, client, state, topics: BTreeMap::new(), shutdown, task };
    rig.follow(Duration::from_secs(2), |r| r.contains_key(CEILING)).await;
    rig
}

async fn rig() -> Rig {
    rig_with(&[]).await
}

impl Rig {
    /// Publishes a command (QoS 1, not retained).
    async fn send(&self, topic: &str, payload: &str) {
        self.client.publish(topic, payload, false).await;
    }

    /// Control messages the simulator received, without their wire number.
    fn controls(&self) -> Vec<Value> {
        common::sim_controls(&self.sim)
    }

    /// Waits until the simulator received `n` control messages; returns them.
    async fn wait_controls(&self, n: usize) -> Vec<Value> {
        common::wait_sim_controls(&self.sim, n, Duration::from_secs(5)).await
    }

    /// Follows the topics under `casambi/#` until `f` holds for the latest payloads (panics after
    /// `max` with them).
    async fn follow(&mut self, max: Duration, f: impl Fn(&BTreeMap<String, String>) -> bool) {
        let deadline = tokio::time::Instant::now() + max;
        loop {
            for seen in self.state.settle(Duration::from_millis(30), Duration::from_millis(200)).await {
                if seen.payload.is_empty() {
                    self.topics.remove(&seen.topic);
                } else if seen.topic != ERRORS {
                    self.topics.insert(seen.topic, seen.payload);
                }
            }
            if f(&self.topics) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the state never matched; last:\n{}",
                common::render_golden(&self.topics)
            );
        }
    }

    /// Publishes `payload` on `topic`, asserts the one control message it becomes, then waits
    /// until the state satisfies `state` and checks the broker's retained store does too (and
    /// that nothing else was sent meanwhile).
    async fn command(
        &mut self,
        topic: &str,
        payload: &str,
        want: Value,
        state: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> BTreeMap<String, String> {
        self.sim.shared().log.clear();
        self.send(topic, payload).await;
        assert_eq!(self.wait_controls(1).await, vec![want.clone()], "{topic} {payload}");
        self.follow(Duration::from_secs(8), &state).await;
        let r = retained(self.broker.port()).await;
        assert!(state(&r), "{topic} {payload}: the retained store differs:\n{}", common::render_golden(&r));
        assert_eq!(self.controls(), vec![want], "{topic} {payload}: one message only");
        r
    }

    /// Waits for the next message on `casambi/bridge/error` and checks it.
    async fn expect_error(&mut self, topic: &str, network: Option<&str>, reason: &str) {
        let seen = self.client.wait_for(Duration::from_secs(5), |s| s.topic == ERRORS).await;
        assert!(!seen.retain, "errors are not retained");
        let v: Value = serde_json::from_str(&seen.payload).unwrap();
        assert_eq!(v["topic"], topic, "{v}");
        assert_eq!(v["reason"], reason, "{v}");
        assert_eq!(v["network"].as_str(), network, "{v}");
        assert!(v["time"].as_str().is_some_and(|t| t.ends_with('Z')), "every refusal has its time: {v}");
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let outcome = tokio::time::timeout(Duration::from_secs(6), self.task).await.unwrap().unwrap().unwrap();
        assert_eq!(outcome, app::Outcome::Stopped);
    }
}

/// The unit (or group, network) JSON on its retained topic.
fn json_at(r: &BTreeMap<String, String>, topic: &str) -> Value {
    r.get(topic).and_then(|p| serde_json::from_str(p).ok()).unwrap_or(Value::Null)
}

/// The JSON at `topic` has `key` = `value`, and (for scalars of units) the attribute topic too.
fn shows(r: &BTreeMap<String, String>, topic: &str, key: &str, value: Value) -> bool {
    if json_at(r, topic)[key] != value {
        return false;
    }
    let plain = match &value {
        Value::String(s) => s.clone(),
        Value::Null => return !r.contains_key(&format!("{topic}/{key}")),
        other => other.to_string(),
    };
    !topic.contains("/unit/") || r.get(&format!("{topic}/{key}")) == Some(&plain)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unit_commands_become_control_messages_and_the_retained_state_follows() {
    let mut rig = rig().await;
    let r = retained(rig.broker.port()).await;
    assert!(shows(&r, CEILING, "brightness", json!(204)) && shows(&r, CEILING, "state", json!("ON")));

    // Dimmable unit: HA's JSON command.
    rig.command(
        &format!("{CEILING}/set"),
        r#"{"state":"ON","brightness":128}"#,
        json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.502}}}),
        |r| shows(r, CEILING, "brightness", json!(128)) && shows(r, CEILING, "state", json!("ON")),
    )
    .await;
    // Plain OFF and ON (ON restores the last level the cloud reported).
    rig.command(
        &format!("{CEILING}/set"),
        "OFF",
        json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.0}}}),
        |r| shows(r, CEILING, "state", json!("OFF")) && shows(r, CEILING, "brightness", json!(0)),
    )
    .await;
    rig.command(
        &format!("{CEILING}/set"),
        "ON",
        json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.502}}}),
        |r| shows(r, CEILING, "state", json!("ON")) && shows(r, CEILING, "brightness", json!(128)),
    )
    .await;
    // A plain value on an attribute topic.
    rig.command(
        &format!("{CEILING}/set/brightness"),
        "64",
        json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.251}}}),
        |r| shows(r, CEILING, "brightness", json!(64)),
    )
    .await;
    // TOGGLE follows the current state, both ways.
    rig.command(
        &format!("{CEILING}/set"),
        "TOGGLE",
        json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.0}}}),
        |r| shows(r, CEILING, "state", json!("OFF")),
    )
    .await;
    rig.command(
        &format!("{CEILING}/set"),
        "toggle",
        json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.251}}}),
        |r| shows(r, CEILING, "state", json!("ON")) && shows(r, CEILING, "brightness", json!(64)),
    )
    .await;

    // Tunable white: kelvin, and a value above the unit's maximum is clamped to it.
    rig.command(
        &format!("{SPOTS}/set"),
        r#"{"state":"ON","color_temp":3000}"#,
        json!({"method":"controlUnit","id":2,"targetControls":{
            "Dimmer":{"value":0.5},"ColorTemperature":{"value":3000.0},"Colorsource":{"source":"TW"}}}),
        |r| shows(r, SPOTS, "color_temp", json!(3000)) && shows(r, SPOTS, "color_mode", json!("color_temp")),
    )
    .await;
    rig.command(
        &format!("{SPOTS}/set/color_temp"),
        "9000",
        json!({"method":"controlUnit","id":2,"targetControls":{
            "ColorTemperature":{"value":6500.0},"Colorsource":{"source":"TW"}}}),
        |r| shows(r, SPOTS, "color_temp", json!(6500)) && shows(r, SPOTS, "brightness", json!(128)),
    )
    .await;

    // Colour: xy becomes hue/sat with Colorsource RGB; the reported xy is back within 0.001.
    let r = rig
        .command(
            &format!("{LAMP}/set"),
            r#"{"state":"ON","color":{"x":0.64,"y":0.33}}"#,
            json!({"method":"controlUnit","id":3,"targetControls":{
                "Dimmer":{"value":1.0},"Colorsource":{"source":"RGB"},"RGB":{"hue":0.0,"sat":1.0}}}),
            |r| {
                let lamp = json_at(r, LAMP);
                shows(r, LAMP, "state", json!("ON"))
                    && shows(r, LAMP, "brightness", json!(255))
                    && shows(r, LAMP, "color_mode", json!("hs"))
                    && lamp["color"]["x"].as_f64().is_some_and(|x| (x - 0.64).abs() <= 0.001)
            },
        )
        .await;
    let color = &json_at(&r, LAMP)["color"];
    assert!((color["y"].as_f64().unwrap() - 0.33).abs() <= 0.001, "{color}");

    // Colour as Home Assistant's hs mode sends it: hue/sat only scaled, and the same hs back
    // within 1° and 1 % (in xy mode a blue picked at [240, 100] read back as [241.2, 79.2]).
    for (h, s, hue, sat) in [(240.0, 100.0, 0.666667, 1.0), (0.0, 100.0, 0.0, 1.0), (30.0, 60.0, 0.083333, 0.6)] {
        let sent = json!({"color": {"h": h, "s": s}}).to_string();
        let want = json!({"method":"controlUnit","id":3,"targetControls":{
            "Colorsource":{"source":"RGB"},"RGB":{"hue":hue,"sat":sat}}});
        let near = |v: &Value, target: f64| v.as_f64().is_some_and(|v| (v - target).abs() <= 1.0);
        rig.command(&format!("{LAMP}/set"), &sent, want, |r| {
            let color = &json_at(r, LAMP)["color"];
            near(&color["h"], h) && near(&color["s"], s)
        })
        .await;
    }

    // On/off-only unit: OnOff, both ways.
    rig.command(
        &format!("{FLOOR}/set"),
        "OFF",
        json!({"method":"controlUnit","id":8,"targetControls":{"OnOff":{"value":0.0}}}),
        |r| shows(r, FLOOR, "state", json!("OFF")),
    )
    .await;
    rig.command(
        &format!("{FLOOR}/set"),
        r#"{"state":"ON"}"#,
        json!({"method":"controlUnit","id":8,"targetControls":{"OnOff":{"value":1.0}}}),
        |r| shows(r, FLOOR, "state", json!("ON")),
    )
    .await;

    // The simulator's truth agrees with what the bridge published.
    let truth = rig.sim.network_state(HOME).unwrap();
    assert_eq!(truth["units"]["8"]["on"], true);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scene_group_and_network_commands_become_control_messages_and_the_state_follows() {
    let mut rig = rig().await;
    let evening = "casambi/home/scene/evening";
    let kitchen = "casambi/home/group/kitchen";
    let r = retained(rig.broker.port()).await;
    assert_eq!(r.get(evening).map(String::as_str), Some("OFF"));

    // Scene on: controlScene level 1; the scene topic goes ON after the debounced /state refresh,
    // and the scene's levels show on its units.
    rig.command(&format!("{evening}/set"), "ON", json!({"method":"controlScene","id":1,"level":1.0}), |r| {
        r.get(evening).is_some_and(|s| s == "ON")
            && shows(r, CEILING, "brightness", json!(102))
            && json_at(r, "casambi/home")["active_scenes"] == json!([{"id":1,"name":"Evening"}])
    })
    .await;
    rig.command(&format!("{evening}/set"), "OFF", json!({"method":"controlScene","id":1,"level":0.0}), |r| {
        r.get(evening).is_some_and(|s| s == "OFF") && json_at(r, "casambi/home")["active_scenes"] == json!([])
    })
    .await;

    // Group: controlGroup with level b/255; both members and the group JSON follow.
    rig.command(
        &format!("{kitchen}/set"),
        r#"{"state":"ON","brightness":51}"#,
        json!({"method":"controlGroup","id":1,"level":0.2}),
        |r| {
            let g = json_at(r, kitchen);
            g["brightness"] == 51
                && g["state"] == "ON"
                && shows(r, CEILING, "brightness", json!(51))
                && shows(r, SPOTS, "brightness", json!(51))
        },
    )
    .await;
    rig.command(&format!("{kitchen}/set"), "OFF", json!({"method":"controlGroup","id":1,"level":0.0}), |r| {
        json_at(r, kitchen)["state"] == "OFF" && shows(r, CEILING, "state", json!("OFF"))
    })
    .await;
    // ON without a brightness: the members return to their last levels (both were at 51), not
    // to full.
    rig.command(
        &format!("{kitchen}/set"),
        "ON",
        json!({"method":"controlUnits","ids":[1,2],"targetControls":{"Dimmer":{"value":0.2}}}),
        |r| {
            json_at(r, kitchen)["state"] == "ON"
                && shows(r, CEILING, "brightness", json!(51))
                && shows(r, SPOTS, "brightness", json!(51))
        },
    )
    .await;

    // Network dim level.
    rig.command("casambi/home/set", r#"{"dim_level":0.5}"#, json!({"method":"controlNetwork","level":0.5}), |r| {
        json_at(r, "casambi/home")["dim_level"] == 0.5
    })
    .await;
    assert_eq!(rig.sim.network_state(HOME).unwrap()["dimLevel"], 0.5);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retained_commands_are_ignored_and_cleared() {
    // Stray retained commands on the broker from before the bridge started: replayed to the
    // bridge when it subscribes, never acted on, and cleared.
    let stale = [(format!("{CEILING}/set"), "OFF"), ("casambi/home/set".to_string(), r#"{"dim_level":0.1}"#)];
    let before: Vec<(&str, &str)> = stale.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    let mut rig = rig_with(&before).await;
    let truth = rig.sim.network_state(HOME).unwrap();
    retained_until(rig.broker.port(), Duration::from_secs(5), |r| before.iter().all(|(t, _)| !r.contains_key(*t)))
        .await;

    // One published with the retain flag while the bridge runs: ignored and cleared too (the
    // bridge subscribes to commands with MQTT 5's retain-as-published to see the flag).
    let floor_set = format!("{FLOOR}/set");
    rig.client.publish(&floor_set, "OFF", true).await;
    retained_until(rig.broker.port(), Duration::from_secs(5), |r| !r.contains_key(&floor_set)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rig.controls(), Vec::<Value>::new(), "no control message for a retained command");
    assert_eq!(rig.sim.network_state(HOME).unwrap(), truth, "the truth is unchanged");
    let r = retained(rig.broker.port()).await;
    assert!(shows(&r, CEILING, "state", json!("ON")) && shows(&r, FLOOR, "state", json!("ON")));
    assert_eq!(json_at(&r, "casambi/home")["dim_level"], 1);

    // The same command without the flag is carried out.
    rig.command(
        &floor_set,
        "OFF",
        json!({"method":"controlUnit","id":8,"targetControls":{"OnOff":{"value":0.0}}}),
        |r| shows(r, FLOOR, "state", json!("OFF")),
    )
    .await;
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_commands_are_reported_on_bridge_error_and_change_nothing() {
    let mut rig = rig().await;
    rig.sim.shared().log.clear();
    let truth = rig.sim.network_state(HOME).unwrap();
    let before = retained(rig.broker.port()).await;
    let ceiling = format!("{CEILING}/set");
    let bad: Vec<(String, &str, Option<&str>, &str)> = vec![
        (
            ceiling.clone(),
            r#"{"state":"ON""#,
            Some(HOME),
            "invalid JSON: EOF while parsing an object at line 1 column 13",
        ),
        (ceiling.clone(), r#"{"brightness":300}"#, Some(HOME), "brightness 300 outside 0..255"),
        (format!("{CEILING}/set/brightness"), "-1", Some(HOME), "brightness -1 outside 0..255"),
        (ceiling.clone(), r#"{"state":"DIM"}"#, Some(HOME), "state must be ON, OFF or TOGGLE, got \"DIM\""),
        (
            ceiling.clone(),
            r#"{"brigthness":100}"#,
            Some(HOME),
            "unknown key \"brigthness\" for a unit command (accepted: state, brightness, color_temp, color, transition)",
        ),
        (ceiling.clone(), r#"{"color":{"x":0.3,"y":0.3}}"#, Some(HOME), "unit Kitchen ceiling has no colour control"),
        (
            ceiling.clone(),
            r#"{"color_temp":3000}"#,
            Some(HOME),
            "unit Kitchen ceiling has no colour temperature control",
        ),
        (format!("{SPOTS}/set/color_temp"), "153", Some(HOME), "color_temp 153 outside 1000..20000 K"),
        (
            format!("{SPOTS}/set"),
            r#"{"color":{"x":0.3,"y":0.3}}"#,
            Some(HOME),
            "unit Küche Spots has no colour control",
        ),
        (format!("{FLOOR}/set"), r#"{"brightness":100}"#, Some(HOME), "unit Living room floor has no dimmer control"),
        ("casambi/home/unit/hallway-presence/set".into(), "ON", Some(HOME), "unit Hallway presence is not a light"),
        (
            "casambi/home/unit/garage-light/set".into(),
            "ON",
            Some(HOME),
            "unit Garage light is offline; command not sent",
        ),
        ("casambi/home/set".into(), r#"{"dim_level":42}"#, Some(HOME), "dim_level 42 outside 0..1"),
        (
            "casambi/home/unit/no-such-lamp/set".into(),
            "ON",
            None,
            "no network, unit, group or scene has this command topic",
        ),
    ];
    for (topic, payload, network, reason) in &bad {
        rig.send(topic, payload).await;
        rig.expect_error(topic, *network, reason).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rig.controls(), Vec::<Value>::new(), "nothing reached the cloud");
    assert_eq!(rig.sim.network_state(HOME).unwrap(), truth, "the truth is unchanged");
    let after = retained(rig.broker.port()).await;
    let state = |r: &BTreeMap<String, String>| {
        r.iter()
            .filter(|(t, _)| !t.starts_with("homeassistant/") && *t != "casambi/bridge/info")
            .map(|(t, p)| (t.clone(), p.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(state(&after), state(&before), "the retained state is unchanged");
    assert!(!after.contains_key(ERRORS), "errors are not retained");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_brightness_commands_is_coalesced_and_the_last_value_wins() {
    let rig = rig().await;
    rig.sim.shared().log.clear();
    let topic = format!("{CEILING}/set");
    let start = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(9));
    for b in 1..=100u32 {
        tick.tick().await;
        rig.send(&topic, &format!(r#"{{"brightness":{b}}}"#)).await;
    }
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_millis(1100), "100 commands took {elapsed:?}");
    let r = retained_until(rig.broker.port(), Duration::from_secs(8), |r| shows(r, CEILING, "brightness", json!(100)))
        .await;
    assert!(shows(&r, CEILING, "state", json!("ON")));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = rig.controls();
    // The first at once, then at most one per 80 ms window; a few more for scheduling slack.
    let bound = (elapsed.max(Duration::from_secs(1)).as_millis() / 80) as usize + 4;
    assert!(sent.len() <= bound, "{} control messages for 100 commands in {elapsed:?} (bound {bound})", sent.len());
    assert!(sent.len() >= 2, "{sent:?}");
    let values: Vec<f64> = sent.iter().map(|m| m["targetControls"]["Dimmer"]["value"].as_f64().unwrap()).collect();
    assert!(sent.iter().all(|m| m["method"] == "controlUnit" && m["id"] == 1), "{sent:?}");
    assert_eq!(values.first(), Some(&0.0039), "the first goes out at once: {values:?}");
    assert_eq!(values.last(), Some(&0.3922), "the last sent (100) wins: {values:?}");
    assert!(values.windows(2).all(|w| w[0] < w[1]), "in order: {values:?}");
    rig.stop().await;
}

/// The bridge's Reload button: `PRESS` on `casambi/bridge/request/reload` fetches every network's
/// configuration and state again (through the quota guard, as REST requests the simulator logs)
/// and publishes discovery and state again; no control message reaches any wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_fetches_every_network_again_and_publishes_everything_again() {
    let mut rig = rig().await;
    rig.sim.shared().log.clear();
    let mut seen = Watcher::start(rig.broker.observer_port(), "homeassistant/#").await;
    seen.settle(Duration::from_millis(300), Duration::from_secs(5)).await;
    rig.send("casambi/bridge/request/reload", "PRESS").await;
    let bridge_config = "homeassistant/device/casambi2mqtt_bridge_casambi/config";
    seen.wait_for(Duration::from_secs(10), |s| s.topic == bridge_config).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for net in [HOME, "c0ffee00aa11bb22cc33dd44ee55ff66"] {
        let wanted = [format!("/v1/networks/{net}"), format!("/v1/networks/{net}/state")];
        loop {
            let paths: Vec<String> = rig.sim.shared().log.requests().into_iter().map(|r| r.path).collect();
            if wanted.iter().all(|w| paths.contains(w)) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{net} was not fetched again: {paths:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(rig.controls().is_empty(), "a reload sends nothing to a wire: {:?}", rig.controls());
    rig.follow(Duration::from_secs(2), |r| r.contains_key(CEILING)).await;
    rig.stop().await;
}
