//! The dispatcher against a fake supervisor: coalescing, order, wire-down retries, rejections.

use super::*;
use crate::bridge::state::NetworkView;
use crate::cloud::channel::ChannelError;
use crate::cloud::model::UnitState;
use serde_json::{Value, json};
use std::sync::atomic::AtomicUsize;

const NET: &str = "n1";
const TOPIC: &str = "casambi/home/unit/kitchen/set";

/// What the fake supervisor answers to the n-th message (0-based).
type Policy = Arc<dyn Fn(usize) -> Result<(), ChannelError> + Send + Sync>;

struct Fake {
    dispatcher: CommandDispatcher,
    rejections: mpsc::Receiver<Rejection>,
    /// Messages the fake supervisor sent, as JSON, in order (only answered `Ok` ones).
    sent: Arc<Mutex<Vec<Value>>>,
    attempts: Arc<AtomicUsize>,
}

fn config() -> DispatchConfig {
    DispatchConfig {
        coalesce_window: Duration::from_millis(50),
        wire_retry: Duration::from_millis(400),
        retry_interval: Duration::from_millis(40),
        ..DispatchConfig::default()
    }
}

fn view() -> Update {
    let mut view = NetworkView::new(NET);
    view.status.name = "Home".into();
    let unit: UnitState = serde_json::from_str(
        r#"{"id":1,"name":"Kitchen","type":"Luminaire","on":true,"controls":[{"type":"Dimmer","value":0.8}]}"#,
    )
    .unwrap();
    view.units.insert(1, Arc::new(unit));
    Update::Network { view: Arc::new(view), topology: Default::default() }
}

/// A dispatcher whose network's supervisor answers by `policy`.
fn fake(config: DispatchConfig, policy: Policy) -> Fake {
    let (tx, mut rx) = mpsc::channel::<Outgoing>(256);
    let wires: HashMap<String, mpsc::Sender<Outgoing>> = [(NET.to_string(), tx)].into();
    let (dispatcher, rejections) = CommandDispatcher::new(wires, config);
    dispatcher.observe(&view());
    let sent = Arc::new(Mutex::new(Vec::new()));
    let attempts = Arc::new(AtomicUsize::new(0));
    let (s, a) = (sent.clone(), attempts.clone());
    tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            let n = a.fetch_add(1, Ordering::SeqCst);
            let result = policy(n);
            if result.is_ok() {
                let msg = (out.build)(7);
                lock(&s).push(serde_json::from_str(&msg.to_json().unwrap()).unwrap());
            }
            let _ = out.done.send(result);
        }
    });
    Fake { dispatcher, rejections, sent, attempts }
}

fn wire_down() -> ChannelError {
    ChannelError::WireDown(NET.into())
}

fn always_ok() -> Policy {
    Arc::new(|_| Ok(()))
}

fn request(payload: &str) -> Request {
    Request {
        topic: TOPIC.into(),
        network: NET.into(),
        target: Target::Unit { id: 1, attr: None },
        payload: payload.as_bytes().to_vec(),
    }
}

fn dimmer_values(sent: &[Value]) -> Vec<f64> {
    sent.iter().map(|m| m["targetControls"]["Dimmer"]["value"].as_f64().unwrap()).collect()
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_flood_of_brightness_is_coalesced_and_the_last_value_wins() {
    let f = fake(config(), always_ok());
    for b in 1..=100 {
        f.dispatcher.submit(request(&format!(r#"{{"brightness":{b}}}"#))).unwrap();
    }
    settle().await;
    let sent = lock(&f.sent).clone();
    assert!(sent.len() <= 3, "{} messages: {sent:?}", sent.len());
    assert_eq!(dimmer_values(&sent).last(), Some(&0.3922), "brightness 100 wins");
    assert!(sent.iter().all(|m| m["method"] == "controlUnit" && m["wire"] == 7 && m["id"] == 1));
}

#[tokio::test]
async fn a_slow_flood_is_bounded_by_the_window() {
    let f = fake(config(), always_ok());
    let start = Instant::now();
    for b in 1..=100u32 {
        f.dispatcher.submit(request(&format!(r#"{{"brightness":{b}}}"#))).unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = start.elapsed();
    settle().await;
    let sent = lock(&f.sent).clone();
    let bound = (elapsed.as_millis() / 50) as usize + 2;
    assert!(sent.len() <= bound, "{} messages in {elapsed:?} (bound {bound})", sent.len());
    assert!(sent.len() >= 3, "a slow flood still moves the light: {}", sent.len());
    assert_eq!(dimmer_values(&sent).last(), Some(&0.3922));
}

#[tokio::test]
async fn off_in_a_flood_is_never_dropped_and_order_is_kept() {
    let f = fake(config(), always_ok());
    for p in [r#"{"brightness":10}"#, r#"{"brightness":20}"#, "OFF", r#"{"brightness":30}"#, r#"{"brightness":40}"#] {
        f.dispatcher.submit(request(p)).unwrap();
    }
    settle().await;
    let values = dimmer_values(&lock(&f.sent));
    // All five arrive before the first is sent: 20 replaces 10, OFF does not merge with 20,
    // 30 does not merge with OFF, 40 replaces 30.
    assert_eq!(values, vec![0.0784, 0.0, 0.1569]);
}

#[tokio::test]
async fn toggles_are_never_merged_and_each_reads_the_previous() {
    let f = fake(config(), always_ok());
    for _ in 0..3 {
        f.dispatcher.submit(request("TOGGLE")).unwrap();
    }
    settle().await;
    // On (0.8) → off → on again (restoring 0.8) → off, without waiting for the cloud's events.
    assert_eq!(dimmer_values(&lock(&f.sent)), vec![0.0, 0.8, 0.0]);
}

#[tokio::test]
async fn invalid_commands_are_refused_at_once_with_their_topic() {
    let mut f = fake(config(), always_ok());
    let err = f.dispatcher.submit(request(r#"{"brightness":300}"#)).unwrap_err();
    assert_eq!(err.to_string(), "brightness 300 outside 0..255");
    let r = f.rejections.try_recv().unwrap();
    let want =
        Rejection { topic: TOPIC.into(), network: Some(NET.into()), reason: "brightness 300 outside 0..255".into() };
    assert_eq!(r, want);
    assert_eq!(
        r.to_json(),
        r#"{"topic":"casambi/home/unit/kitchen/set","network":"n1","reason":"brightness 300 outside 0..255"}"#
    );
    f.dispatcher.reject("casambi/nowhere/set", None, "no such network");
    assert_eq!(
        f.rejections.try_recv().unwrap().to_json(),
        r#"{"topic":"casambi/nowhere/set","reason":"no such network"}"#
    );
    let err = f.dispatcher.submit(request(r#"{"color_temp":3000}"#)).unwrap_err();
    assert_eq!(err.to_string(), "unit Kitchen has no colour temperature control");
    let err = f.dispatcher.submit(Request { network: "nope".into(), ..request("ON") }).unwrap_err();
    assert_eq!(err.to_string(), "network nope is not known");
    settle().await;
    assert!(lock(&f.sent).is_empty());
}

#[tokio::test]
async fn a_short_wire_outage_is_ridden_out() {
    // The first three attempts find the wire down.
    let mut f = fake(config(), Arc::new(|n| if n < 3 { Err(wire_down()) } else { Ok(()) }));
    f.dispatcher.submit(request(r#"{"brightness":51}"#)).unwrap();
    settle().await;
    assert_eq!(dimmer_values(&lock(&f.sent)), vec![0.2]);
    assert_eq!(f.attempts.load(Ordering::SeqCst), 4);
    assert!(f.rejections.try_recv().is_err());
}

#[tokio::test]
async fn a_newer_value_replaces_one_waiting_for_the_wire() {
    let f = fake(config(), Arc::new(|n| if n < 2 { Err(wire_down()) } else { Ok(()) }));
    f.dispatcher.submit(request(r#"{"brightness":51}"#)).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    f.dispatcher.submit(request(r#"{"brightness":102}"#)).unwrap();
    settle().await;
    assert_eq!(dimmer_values(&lock(&f.sent)), vec![0.4]);
}

#[tokio::test]
async fn a_long_outage_is_refused_visibly() {
    let mut f = fake(config(), Arc::new(|_| Err(wire_down())));
    f.dispatcher.submit(request("OFF")).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(2), f.rejections.recv()).await.unwrap().unwrap();
    assert_eq!(r.topic, TOPIC);
    assert!(r.reason.starts_with("network Home not reachable for 0."), "{}", r.reason);
    assert!(r.reason.ends_with(" s; command dropped (the wire of network n1 is not open)"), "{}", r.reason);
    assert!(lock(&f.sent).is_empty());
    assert!(f.attempts.load(Ordering::SeqCst) >= 5, "retried: {}", f.attempts.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_network_without_supervisor_is_retried_then_refused() {
    let wires: HashMap<String, mpsc::Sender<Outgoing>> = HashMap::new();
    let (dispatcher, mut rejections) = CommandDispatcher::new(wires, config());
    dispatcher.observe(&view());
    dispatcher.submit(request("ON")).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(2), rejections.recv()).await.unwrap().unwrap();
    assert!(r.reason.ends_with("(the network is not connected yet)"), "{}", r.reason);
}

#[tokio::test]
async fn a_silent_supervisor_gets_a_ping_instead_of_a_stale_command() {
    let (tx, mut rx) = mpsc::channel::<Outgoing>(8);
    let wires: HashMap<String, mpsc::Sender<Outgoing>> = [(NET.to_string(), tx)].into();
    let (dispatcher, mut rejections) = CommandDispatcher::new(wires, config());
    dispatcher.observe(&view());
    dispatcher.submit(request("OFF")).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(2), rejections.recv()).await.unwrap().unwrap();
    assert!(r.reason.ends_with("(no answer from the network (still starting?))"), "{}", r.reason);
    // The supervisor wakes up late: what it builds is harmless.
    let out = rx.recv().await.unwrap();
    assert_eq!((out.build)(4), ClientMessage::Ping { wire: 4 });
}

#[tokio::test]
async fn scene_and_network_commands_ask_for_a_refresh() {
    let (tx, mut rx) = mpsc::channel::<Outgoing>(8);
    let wires: HashMap<String, mpsc::Sender<Outgoing>> = [(NET.to_string(), tx)].into();
    let (dispatcher, _rejections) = CommandDispatcher::new(wires, config());
    dispatcher.observe(&view());
    let req = Request {
        topic: "casambi/home/set".into(),
        network: NET.into(),
        target: Target::Network,
        payload: b"0.5".to_vec(),
    };
    dispatcher.submit(req).unwrap();
    let out = rx.recv().await.unwrap();
    assert!(out.refresh_after);
    assert_eq!((out.build)(2), ClientMessage::ControlNetwork { wire: 2, level: 0.5 });
    let _ = out.done.send(Ok(()));
}

/// Wires whose reload answers `waiting` once asked (every network had a reload waiting).
struct Reloads {
    asked: Arc<AtomicUsize>,
}

impl Wires for Reloads {
    fn outgoing(&self, _network: &str) -> Option<mpsc::Sender<Outgoing>> {
        None
    }

    fn reload(&self) -> bool {
        self.asked.fetch_add(1, Ordering::SeqCst) == 0
    }
}

#[tokio::test]
async fn a_reload_asks_the_networks_and_a_second_one_waiting_is_refused() {
    let asked = Arc::new(AtomicUsize::new(0));
    let (dispatcher, mut rejections) = CommandDispatcher::new(Reloads { asked: asked.clone() }, config());
    let req = || Request {
        topic: "casambi/bridge/request/reload".into(),
        network: String::new(),
        target: Target::Reload,
        payload: b"PRESS".to_vec(),
    };
    dispatcher.submit(req()).unwrap();
    assert_eq!(dispatcher.submit(req()), Err(CommandError::ReloadWaiting));
    assert_eq!(asked.load(Ordering::SeqCst), 2, "no network list needed, no queue");
    let r = rejections.recv().await.unwrap();
    assert_eq!(r.reason, "a reload is already waiting for every network; this one is not needed");
    assert_eq!(r.network, None, "a reload names no network");
}

/// A group switched on without a brightness: each of its messages goes out, in order, the second
/// after the first was sent.
#[tokio::test]
async fn every_message_of_a_group_on_goes_out_in_order() {
    let f = fake(config(), always_ok());
    let mut view = NetworkView::new(NET);
    view.status.name = "Home".into();
    for u in [
        r#"{"id":1,"name":"Kitchen","type":"Luminaire","on":true,"controls":[{"type":"Dimmer","value":0.8}]}"#,
        r#"{"id":2,"name":"Plug","type":"Luminaire","on":false,"controls":[{"type":"OnOff","value":0}]}"#,
    ] {
        let unit: UnitState = serde_json::from_str(u).unwrap();
        view.units.insert(unit.id, Arc::new(unit));
    }
    let group = crate::bridge::state::GroupInfo { id: 5, name: "Room".into(), units: vec![1, 2] };
    view.groups.insert(5, group);
    f.dispatcher.observe(&Update::Network { view: Arc::new(view), topology: Default::default() });
    let req = Request { topic: "casambi/home/group/room/set".into(), target: Target::Group(5), ..request("ON") };
    f.dispatcher.submit(req).unwrap();
    settle().await;
    let sent = lock(&f.sent).clone();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!((&sent[0]["ids"], &sent[0]["targetControls"]["Dimmer"]["value"]), (&json!([1]), &json!(0.8)));
    assert_eq!((&sent[1]["ids"], &sent[1]["targetControls"]["OnOff"]["value"]), (&json!([2]), &json!(1.0)));
}

#[tokio::test]
async fn at_shutdown_queued_commands_and_one_waiting_for_its_wire_are_refused() {
    let long =
        DispatchConfig { wire_retry: Duration::from_secs(30), retry_interval: Duration::from_secs(10), ..config() };
    let mut f = fake(long, Arc::new(|_| Err(wire_down())));
    f.dispatcher.submit(request("OFF")).unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    f.dispatcher.submit(request("ON")).unwrap();
    assert_eq!(f.dispatcher.abandon_pending(), 1, "ON was queued behind OFF");
    for _ in 0..2 {
        let r = tokio::time::timeout(Duration::from_millis(500), f.rejections.recv()).await.unwrap().unwrap();
        assert_eq!((r.topic.as_str(), r.reason.as_str()), (TOPIC, SHUTTING_DOWN));
    }
    assert!(lock(&f.sent).is_empty());
}
