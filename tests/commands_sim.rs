//! Commands end to end against the simulated cloud, below MQTT: requests go through the
//! dispatcher into a running bridge's network handles; the test asserts the exact control
//! messages the simulator received and that its truth (and the bridge's view) followed.
//! (End-to-end tests through MQTT come with the wiring of the MQTT intake.)

mod bridge_support;
mod common;

use bridge_support::{demo_credentials, fast_timing, settings};
use casambi2mqtt::bridge::Bridge;
use casambi2mqtt::bridge::state::NetworkStatus;
use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::cloud::model::{Control, UnitState};
use casambi2mqtt::commands::{CommandDispatcher, DispatchConfig, Rejection, Request, Target};
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";

/// What the test sees of the update stream (the dispatcher is fed the same stream).
#[derive(Default)]
struct Seen {
    status: BTreeMap<String, NetworkStatus>,
    units: BTreeMap<u32, Arc<UnitState>>,
}

struct Rig {
    sim: Simulator,
    dispatcher: CommandDispatcher,
    rejections: mpsc::Receiver<Rejection>,
    seen: Arc<Mutex<Seen>>,
    shutdown: CancellationToken,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn rig() -> Rig {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let shutdown = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(4096);
    let bridge =
        Bridge::start(&settings(&sim, 600), &demo_credentials("demo"), tx, fast_timing(), shutdown.clone()).unwrap();
    let (dispatcher, rejections) = CommandDispatcher::new(bridge, DispatchConfig::default());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (d, s) = (dispatcher.clone(), seen.clone());
    // As the binary does: every update to the dispatcher, then to the consumer.
    tokio::spawn(async move {
        while let Some(update) = rx.recv().await {
            d.observe(&update);
            let mut s = s.lock().unwrap();
            match update {
                Update::Network { view, .. } if view.status.id == HOME => {
                    s.status.insert(view.status.id.clone(), view.status.clone());
                    s.units = view.units.clone();
                }
                Update::Status { network, status } if &*network == HOME => {
                    s.status.insert(network.to_string(), *status);
                }
                Update::Unit { network, unit } if &*network == HOME => {
                    s.units.insert(unit.id, unit);
                }
                _ => {}
            }
        }
    });
    let rig = Rig { sim, dispatcher, rejections, seen, shutdown };
    rig.wait(20, "Home live", |s| s.status.get(HOME).is_some_and(|st| st.connection.as_str() == "live")).await;
    rig
}

impl Rig {
    async fn wait(&self, secs: u64, what: &str, pred: impl Fn(&Seen) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        while !pred(&self.seen.lock().unwrap()) {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn submit(&self, target: Target, payload: &str) {
        let topic = format!("casambi/home/{target:?}/set");
        let request = Request { topic, network: HOME.into(), target, payload: payload.as_bytes().to_vec() };
        self.dispatcher.submit(request).unwrap_or_else(|e| panic!("{payload}: {e}"));
    }

    /// Control messages the simulator received, without their wire number.
    fn controls(&self) -> Vec<Value> {
        common::sim_controls(&self.sim)
    }

    /// Waits until the simulator received `n` control messages in all; returns them.
    async fn wait_controls(&self, n: usize) -> Vec<Value> {
        common::wait_sim_controls(&self.sim, n, Duration::from_secs(10)).await
    }

    fn truth_unit(&self, id: u32) -> Value {
        self.sim.network_state(HOME).unwrap()["units"][id.to_string()].clone()
    }
}

fn unit(id: u32) -> Target {
    Target::Unit { id, attr: None }
}

/// A control of the truth's unit by type.
fn control(unit: &Value, kind: &str) -> Value {
    unit["controls"][0].as_array().unwrap().iter().find(|c| c["type"] == kind).cloned().unwrap_or(Value::Null)
}

fn dimmer_seen(s: &Seen, id: u32) -> Option<f64> {
    s.units.get(&id)?.controls.as_ref()?.iter().find_map(|c| match c {
        Control::Dimmer(d) => Some(d.value),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_command_becomes_its_control_message_and_the_truth_follows() {
    let rig = rig().await;
    rig.sim.shared().log.clear();
    let steps: Vec<(Target, &str, Value)> = vec![
        (
            unit(1),
            r#"{"state":"ON","brightness":128}"#,
            json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.502}}}),
        ),
        (
            unit(2),
            r#"{"state":"ON","color_temp":9000,"transition":1}"#,
            json!({"method":"controlUnit","id":2,"targetControls":{
                "Dimmer":{"value":0.5},"ColorTemperature":{"value":6500.0},"Colorsource":{"source":"TW"}}}),
        ),
        (
            unit(3),
            r#"{"state":"ON","color":{"x":0.64,"y":0.33}}"#,
            json!({"method":"controlUnit","id":3,"targetControls":{
                "Dimmer":{"value":1.0},"Colorsource":{"source":"RGB"},"RGB":{"hue":0.0,"sat":1.0}}}),
        ),
        (unit(8), "OFF", json!({"method":"controlUnit","id":8,"targetControls":{"OnOff":{"value":0.0}}})),
        (Target::Group(1), r#"{"state":"ON","brightness":51}"#, json!({"method":"controlGroup","id":1,"level":0.2})),
        (Target::Scene(2), "ON", json!({"method":"controlScene","id":2,"level":1.0})),
        (Target::Network, r#"{"dim_level": 0.42}"#, json!({"method":"controlNetwork","level":0.42})),
    ];
    let mut want = Vec::new();
    for (target, payload, message) in steps {
        rig.submit(target, payload);
        want.push(message);
        // One at a time, so the log order is the order of the steps.
        assert_eq!(rig.wait_controls(want.len()).await, want, "after {payload}");
    }
    // Wire numbers are the bridge's own; all on one wire.
    let wires: std::collections::BTreeSet<_> =
        rig.sim.shared().log.controls().iter().map(|m| m["wire"].as_i64()).collect();
    assert_eq!(wires.len(), 1, "{wires:?}");

    let truth = rig.sim.network_state(HOME).unwrap();
    assert_eq!(truth["dimLevel"], 0.42);
    assert_eq!(truth["activeScenes"], json!([2]));
    // Scene 2 (Cooking) set units 1 and 2 to 1.0 after the group set them to 0.2.
    assert_eq!(control(&truth["units"]["1"], "Dimmer")["value"], 1.0);
    assert_eq!(control(&truth["units"]["2"], "CCT")["value"], 6500.0);
    let lamp = &truth["units"]["3"];
    assert_eq!(lamp["on"], true);
    assert_eq!(control(lamp, "Colorsource")["source"], "RGB");
    assert_eq!(control(lamp, "Color")["rgb"], "rgb(255, 0, 0)");
    assert_eq!(truth["units"]["8"]["on"], false);
    // The state comes back from the cloud: the bridge's view follows, nothing is invented.
    rig.wait(5, "the bridge sees the scene", |s| {
        s.status.get(HOME).is_some_and(|st| st.active_scenes.contains(&2) && st.dim_level == Some(0.42))
    })
    .await;
    rig.wait(5, "the bridge sees unit 8 off", |s| s.units.get(&8).is_some_and(|u| u.on == Some(false))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slider_flood_is_coalesced_and_off_and_on_are_kept() {
    let rig = rig().await;
    rig.sim.shared().log.clear();
    let start = tokio::time::Instant::now();
    for b in 1..=100u32 {
        rig.submit(unit(1), &format!(r#"{{"brightness":{b}}}"#));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = start.elapsed();
    rig.submit(unit(1), "OFF");
    rig.wait(5, "unit 1 off", |s| dimmer_seen(s, 1) == Some(0.0)).await;
    let sent = rig.controls();
    let bound = (elapsed.as_millis() / 80) as usize + 3;
    assert!(sent.len() <= bound, "{} messages for 101 commands in {elapsed:?} (bound {bound})", sent.len());
    let values: Vec<f64> = sent.iter().map(|m| m["targetControls"]["Dimmer"]["value"].as_f64().unwrap()).collect();
    assert_eq!(values.last(), Some(&0.0), "OFF is last and not dropped: {values:?}");
    assert_eq!(values[values.len() - 2], 0.3922, "the last brightness (100) before OFF: {values:?}");
    assert!(values.windows(2).take(values.len() - 2).all(|w| w[0] < w[1]), "in order: {values:?}");
    assert_eq!(control(&rig.truth_unit(1), "Dimmer")["value"], 0.0);

    // ON restores the last level the cloud reported (100/255), tracked from the events.
    rig.sim.shared().log.clear();
    rig.submit(unit(1), "ON");
    assert_eq!(
        rig.wait_controls(1).await,
        vec![json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.3922}}})]
    );
    rig.wait(5, "unit 1 back on", |s| dimmer_seen(s, 1) == Some(0.3922)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_commands_are_refused_and_send_nothing() {
    let mut rig = rig().await;
    rig.sim.shared().log.clear();
    let bad = [
        (unit(8), r#"{"brightness":100}"#, "unit Living room floor has no dimmer control"),
        (unit(1), r#"{"color_temp":3000}"#, "unit Kitchen ceiling has no colour temperature control"),
        (unit(2), r#"{"color":{"x":0.3,"y":0.3}}"#, "unit Küche Spots has no colour control"),
        (unit(4), "ON", "unit Hallway presence is not a light"),
        (unit(1), r#"{"brightness":300}"#, "brightness 300 outside 0..255"),
        (Target::Group(9), "ON", "group 9 is not known in network Home"),
        (unit(99), "ON", "unit 99 is not known in network Home"),
        // The demo's garage light is offline: the cloud would take the message and do nothing.
        (unit(7), "ON", "unit Garage light is offline; command not sent"),
        (Target::Network, r#"{"dim_level":42}"#, "dim_level 42 outside 0..1"),
    ];
    for (target, payload, reason) in bad {
        let topic = format!("casambi/home/{target:?}/set");
        let request = Request { topic: topic.clone(), network: HOME.into(), target, payload: payload.into() };
        assert_eq!(rig.dispatcher.submit(request).unwrap_err().to_string(), reason);
        assert_eq!(
            rig.rejections.recv().await.unwrap(),
            Rejection { topic, network: Some(HOME.into()), reason: reason.into() }
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rig.controls().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_during_a_socket_drop_waits_for_the_wire() {
    let mut rig = rig().await;
    rig.sim.shared().log.clear();
    assert!(rig.sim.drop_sockets() > 0);
    // Once the bridge knows the wire is down (it polls over REST meanwhile), a command is retried
    // until the channel has reconnected and the wire is open again.
    rig.wait(5, "Home polling", |s| s.status.get(HOME).is_some_and(|st| st.connection.as_str() == "polling")).await;
    rig.submit(unit(1), r#"{"brightness":64}"#);
    rig.wait(10, "unit 1 at 64", |s| dimmer_seen(s, 1) == Some(0.251)).await;
    assert_eq!(control(&rig.truth_unit(1), "Dimmer")["value"], 0.251);
    let sent = rig.controls();
    assert_eq!(sent, vec![json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.251}}})]);
    assert!(rig.rejections.try_recv().is_err(), "no rejection");
}

/// While a network's gateway is offline the cloud takes commands and nothing happens: they are
/// refused visibly and not sent; once it is back, they go out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_while_the_gateway_is_offline_are_refused_and_not_sent() {
    let mut rig = rig().await;
    rig.sim.set_gateway(HOME, false).unwrap();
    rig.wait(10, "the gateway seen offline", |s| s.status.get(HOME).is_some_and(|st| !st.gateway_online)).await;
    rig.sim.shared().log.clear();
    let topic = "casambi/home/unit/kitchen-ceiling/set".to_string();
    let request = Request { topic: topic.clone(), network: HOME.into(), target: unit(1), payload: b"ON".to_vec() };
    let reason = "the gateway of network Home is offline; command not sent";
    assert_eq!(rig.dispatcher.submit(request).unwrap_err().to_string(), reason);
    assert_eq!(
        rig.rejections.recv().await.unwrap(),
        Rejection { topic, network: Some(HOME.into()), reason: reason.into() }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rig.controls().is_empty(), "{:?}", rig.controls());

    rig.sim.set_gateway(HOME, true).unwrap();
    rig.wait(10, "the gateway seen online", |s| s.status.get(HOME).is_some_and(|st| st.gateway_online)).await;
    rig.submit(unit(1), r#"{"brightness":64}"#);
    assert_eq!(
        rig.wait_controls(1).await,
        vec![json!({"method":"controlUnit","id":1,"targetControls":{"Dimmer":{"value":0.251}}})]
    );
}
