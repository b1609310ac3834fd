//! The simulator's fault injection (in-process and through the `/_sim/` admin routes) and its
//! background activity.

#[path = "sim_ws_support/mod.rs"]
mod ws;

use casambi2mqtt::sim::site::{DEMO_API_KEY, Site};
use casambi2mqtt::sim::world::WorldEvent;
use casambi2mqtt::sim::{SimConfig, Simulator};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_tungstenite::tungstenite::{self, Message};
use ws::*;

#[tokio::test]
async fn dropped_sockets_end_without_a_close_frame() {
    let sim = start().await;
    let mut a = connect(&sim).await;
    let mut b = connect(&sim).await;
    open_ok(&mut a, &sim, HOME, 1).await;
    assert_eq!(sim.drop_sockets(), 2);
    for ws in [&mut a, &mut b] {
        let end = tokio::time::timeout(WAIT, ws.next()).await.unwrap();
        match end {
            None | Some(Err(_)) => {}
            Some(Ok(Message::Close(_))) => panic!("a dropped socket must not send a close frame"),
            Some(Ok(other)) => panic!("unexpected {other:?}"),
        }
    }
    // The service still accepts new sockets.
    let mut c = connect(&sim).await;
    open_ok(&mut c, &sim, HOME, 1).await;
}

#[tokio::test]
async fn dropped_wire_goes_silent_while_others_continue() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    open_ok(&mut ws, &sim, OFFICE, 2).await;
    assert_eq!(sim.drop_wire(HOME), 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    sim.set_gateway(HOME, false).unwrap();
    sim.set_gateway(OFFICE, false).unwrap();
    let f = next(&mut ws).await;
    assert_eq!(f.json, json!({"wire": 2, "method": "peerChanged", "online": false}));
    quiet(&mut ws).await;
    send(&mut ws, json!({"method": "ping", "wire": 1})).await;
    assert_eq!(next(&mut ws).await.json["wireStatus"], "invalidData");
    send(&mut ws, json!({"method": "ping", "wire": 2})).await;
    assert_eq!(next(&mut ws).await.json["response"], "pong");
}

#[tokio::test]
async fn malformed_and_oversized_frames_reach_the_network_wires_only() {
    let sim = start().await;
    let mut home = connect(&sim).await;
    let mut office = connect(&sim).await;
    open_ok(&mut home, &sim, HOME, 4).await;
    open_ok(&mut office, &sim, OFFICE, 1).await;
    sim.send_malformed(HOME);
    let f = next(&mut home).await;
    assert!(f.binary);
    assert_eq!(f.text, "{\"wire\":4,\"method\":\"unitChanged\",\"id\":");
    assert!(serde_json::from_str::<Value>(&f.text).is_err());
    sim.send_oversized(HOME, 300_000);
    let f = next(&mut home).await;
    assert_eq!(f.text.len(), 300_000);
    assert_eq!(f.json["method"], "networkLog");
    quiet(&mut office).await;
    // The wire keeps working afterwards.
    send(&mut home, json!({"method": "ping", "wire": 4})).await;
    assert_eq!(next(&mut home).await.json["response"], "pong");
}

#[tokio::test]
async fn unit_state_fault_changes_the_truth() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    sim.set_unit_state(HOME, 4, &json!({"controls": [{"type": "Presence", "status": "present"}]})).unwrap();
    let u = unit_changed(&mut ws, 1, 4).await;
    assert_eq!(ws::control(&u, "Presence")["status"], "present");
    sim.set_unit_state(HOME, 1, &json!({"online": false})).unwrap();
    let u = unit_changed(&mut ws, 1, 1).await;
    assert_eq!(u["online"], false);
    assert!(u.get("controls").is_none());
    assert!(sim.set_unit_state(HOME, 1, &json!({"online": "no"})).is_err());
    assert!(sim.set_unit_state(HOME, 99, &json!({})).is_err());
}

#[tokio::test]
async fn quota_exhaustion_refuses_the_upgrade() {
    let sim = start().await;
    sim.exhaust_quota(DEMO_API_KEY, Duration::from_secs(30));
    match try_connect(&sim.ws_url(), DEMO_API_KEY).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 429),
        other => panic!("expected 429, got {:?}", other.map(|_| ())),
    }
    sim.exhaust_quota(DEMO_API_KEY, Duration::ZERO);
    connect(&sim).await;
}

async fn post(client: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let response = client.post(url).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn admin_routes() {
    let sim = start().await;
    let base = sim.base_url();
    let client = reqwest::Client::new();
    let net = |path: &str| format!("{base}/_sim/networks/{HOME}{path}");
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;

    assert_eq!(post(&client, net("/gateway"), json!({"online": false})).await.0, 200);
    assert_eq!(next(&mut ws).await.json["online"], false);
    assert_eq!(post(&client, net("/gateway"), json!({"online": true})).await.0, 200);
    until(&mut ws, |v| v["method"] == "peerChanged" && v["online"] == true).await;
    for _ in 0..HOME_UNITS {
        next(&mut ws).await;
    }

    let unit = json!({"id": 30, "name": "Shed", "fixture": 1001, "controls": [{"type": "Dimmer", "value": 0.0}]});
    assert_eq!(post(&client, net("/units"), unit.clone()).await.0, 200);
    assert_eq!(next(&mut ws).await.json["method"], "networkUpdated");
    assert_eq!(unit_changed(&mut ws, 1, 30).await["name"], "Shed");
    assert_eq!(post(&client, net("/units"), unit).await.0, 400, "duplicate unit");

    let (status, _) = post(&client, net("/units/30/rename"), json!({"name": "Tool shed"})).await;
    assert_eq!(status, 200);
    assert_eq!(next(&mut ws).await.json["method"], "networkUpdated");
    assert_eq!(unit_changed(&mut ws, 1, 30).await["name"], "Tool shed");
    assert_eq!(post(&client, net("/groups/2/rename"), json!({"name": "Lounge"})).await.0, 200);
    assert_eq!(next(&mut ws).await.json["method"], "networkUpdated");
    assert_eq!(post(&client, net("/scenes/99/rename"), json!({"name": "x"})).await.0, 404);

    let response = client.delete(net("/units/30")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(next(&mut ws).await.json["method"], "networkUpdated");
    assert_eq!(client.delete(net("/units/30")).send().await.unwrap().status(), 404);

    let state = json!({"on": true, "controls": [{"type": "Dimmer", "value": 0.5}]});
    assert_eq!(post(&client, net("/units/3/state"), state).await.0, 200);
    let u = unit_changed(&mut ws, 1, 3).await;
    assert_eq!(ws::control(&u, "Dimmer")["value"], 0.5);
    assert_eq!(post(&client, net("/units/3/state"), json!({"on": 1})).await.0, 400);

    assert_eq!(post(&client, net("/malformed"), json!({})).await, (200, json!({"ok": true, "connections": 1})));
    assert!(next(&mut ws).await.json.is_null());
    assert_eq!(post(&client, net("/oversized"), json!({"bytes": 5000})).await.0, 200);
    assert_eq!(next(&mut ws).await.text.len(), 5000);

    let truth: Value = client.get(format!("{base}/_sim/truth/{HOME}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(truth["units"]["3"]["controls"][0][0]["value"], 0.5);
    assert_eq!(truth["groups"]["2"]["name"], "Lounge");
    assert_eq!(client.get(format!("{base}/_sim/truth/nope")).send().await.unwrap().status(), 404);
    assert_eq!(post(&client, format!("{base}/_sim/networks/nope/gateway"), json!({"online": true})).await.0, 404);
    assert_eq!(post(&client, net("/gateway"), json!({"online": "yes"})).await.0, 400);

    let log: Value = client.get(format!("{base}/_sim/log/ws")).send().await.unwrap().json().await.unwrap();
    assert!(log.as_array().unwrap().iter().any(|r| r["kind"] == "open" && r["status"] == "openWireSucceed"));
    let requests: Value = client.get(format!("{base}/_sim/log/requests")).send().await.unwrap().json().await.unwrap();
    assert!(requests.is_array());
    assert_eq!(post(&client, format!("{base}/_sim/log/clear"), json!({})).await.0, 200);
    assert!(sim.shared().log.ws_records().is_empty());

    assert_eq!(post(&client, format!("{base}/_sim/fail"), json!({"count": 2})).await.0, 200);
    assert_eq!(sim.shared().fail_next.load(std::sync::atomic::Ordering::SeqCst), 2);
    sim.fail_next_requests(0);

    let sid = session(&sim, OFFICE);
    assert_eq!(post(&client, format!("{base}/_sim/sessions/expire"), json!({})).await.0, 200);
    assert_eq!(open(&mut ws, OFFICE, &sid, 2).await.json["wireStatus"], "invalidSession");

    let exhaust = format!("{base}/_sim/keys/{DEMO_API_KEY}/exhaust");
    assert_eq!(post(&client, exhaust, json!({"seconds": 30})).await.0, 200);
    assert!(
        matches!(try_connect(&sim.ws_url(), DEMO_API_KEY).await, Err(tungstenite::Error::Http(r)) if r.status() == 429)
    );
    assert_eq!(post(&client, format!("{base}/_sim/keys/nokey/exhaust"), json!({"seconds": 1})).await.0, 404);

    assert_eq!(post(&client, net("/wire/drop"), json!({})).await.0, 200);
    assert_eq!(post(&client, format!("{base}/_sim/sockets/drop"), json!({})).await.0, 200);
    let end = tokio::time::timeout(WAIT, ws.next()).await.unwrap();
    assert!(matches!(end, None | Some(Err(_))), "{end:?}");
}

/// Collects the first `n` events of a network from the moment of the call.
async fn events(sim: &Simulator, network: &str, n: usize) -> Vec<String> {
    let (_, mut rx) = sim.shared().world().open_view(network).unwrap();
    let mut out = Vec::new();
    while out.len() < n {
        let event = tokio::time::timeout(WAIT, rx.recv()).await.unwrap().unwrap();
        out.push(match event {
            WorldEvent::UnitChanged { body, .. } => body.to_string(),
            other => format!("{other:?}"),
        });
    }
    out
}

#[tokio::test]
async fn activity_is_deterministic_per_seed() {
    let config = || {
        let mut c = SimConfig::new(Site::demo());
        c.seed = 11;
        c.activity_rate = 100.0;
        c
    };
    let a = Simulator::start_local(config()).await.unwrap();
    let b = Simulator::start_local(config()).await.unwrap();
    let (ea, eb) = tokio::join!(events(&a, HOME, 12), events(&b, HOME, 12));
    assert_eq!(ea, eb);
    // The activity touches sensors, not just lights.
    assert!(ea.iter().any(|e| e.contains("\"Presence\"") || e.contains("\"Lux\"")), "{ea:#?}");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn activity_stops_with_the_simulator() {
    let mut config = SimConfig::new(Site::demo());
    config.activity_rate = 200.0;
    let sim = Simulator::start_local(config).await.unwrap();
    let shared = sim.shared().clone();
    let (_, mut rx) = shared.world().open_view(OFFICE).unwrap();
    tokio::time::timeout(WAIT, rx.recv()).await.unwrap().unwrap();
    sim.stop().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    while rx.try_recv().is_ok() {}
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(rx.try_recv().is_err(), "no activity after stop");
}
