//! The simulator's WebSocket channel: open, burst, keepalive, idle close, control messages,
//! events and failure statuses, as the real service behaves.

#[path = "sim_ws_support/mod.rs"]
mod ws;

use casambi2mqtt::sim::site::{ApiKey, DEMO_API_KEY};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio_tungstenite::tungstenite::{self, Message};
use ws::*;

#[tokio::test]
async fn open_echoes_ref_and_wire_in_a_binary_frame_then_sends_every_unit() {
    let sim = start().await;
    let (mut ws, protocol) = try_connect(&sim.ws_url(), DEMO_API_KEY).await.unwrap();
    assert_eq!(protocol.as_deref(), Some(DEMO_API_KEY), "key echoed as subprotocol");
    let sid = session(&sim, HOME);
    let reply = open(&mut ws, HOME, &sid, 7).await;
    assert!(reply.binary, "frames are binary by default");
    assert_eq!(reply.json, json!({"wireStatus": "openWireSucceed", "ref": "ref-7", "wire": 7}));
    let peer = next(&mut ws).await;
    assert_eq!(peer.json, json!({"wire": 7, "method": "peerChanged", "online": true}));
    let mut ids = BTreeSet::new();
    for _ in 0..HOME_UNITS {
        let f = next(&mut ws).await;
        assert!(f.binary);
        assert!(f.text.starts_with("{\"wire\":7,\"method\":\"unitChanged\","), "{}", f.text);
        let id = f.json["id"].as_i64().unwrap();
        ids.insert(id);
        assert!(f.text.contains("\"fixtureId\":"), "{}", f.text);
        if id == 7 {
            // The offline unit has no state.
            assert_eq!(f.json["online"], false);
            assert!(f.json.get("on").is_none() && f.json.get("controls").is_none(), "{}", f.text);
        } else {
            assert!(f.text.contains("\"priority\":3.0"), "ints are sent as floats: {}", f.text);
            assert!(f.json["controls"].is_array(), "controls are flat: {}", f.text);
        }
    }
    assert_eq!(ids, (1..=8).collect());
    quiet(&mut ws).await;
    let records = serde_json::to_value(sim.shared().log.ws_records()).unwrap();
    assert_eq!(records[0]["kind"], "socket_opened");
    assert_eq!(records[1]["kind"], "open");
    assert_eq!(records[1]["status"], "openWireSucceed");
}

#[tokio::test]
async fn path_without_trailing_slash_and_text_frames_option() {
    let sim = start_with(|c| c.text_frames = true).await;
    let url = sim.ws_url();
    let (mut ws, _) = try_connect(url.trim_end_matches('/'), DEMO_API_KEY).await.unwrap();
    let burst = open_ok(&mut ws, &sim, OFFICE, 1).await;
    assert!(burst.iter().all(|f| !f.binary), "text frames when configured");
}

#[tokio::test]
async fn app_ping_and_websocket_ping_are_answered() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 3).await;
    send(&mut ws, json!({"method": "ping", "wire": 3})).await;
    let pong = next(&mut ws).await;
    assert_eq!(pong.json, json!({"response": "pong", "wire": 3}));
    ws.send(Message::Ping(b"hb".to_vec().into())).await.unwrap();
    let reply = tokio::time::timeout(WAIT, ws.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(reply, Message::Pong(b"hb".to_vec().into()));
}

#[tokio::test]
async fn idle_wire_is_closed_unless_pinged() {
    let sim = start_with(|c| c.idle_timeout = Duration::from_millis(400)).await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    // Pings keep the wire alive past the idle timeout.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        send(&mut ws, json!({"method": "ping", "wire": 1})).await;
        assert_eq!(next(&mut ws).await.json["response"], "pong");
    }
    // Then silence: the wire ends and, being the last, closes the socket with a close frame.
    let started = tokio::time::Instant::now();
    let end = tokio::time::timeout(WAIT, async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                other => panic!("socket ended without a close frame: {other:?}"),
            }
        }
    })
    .await
    .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(end.is_some());
}

#[tokio::test]
async fn unit_controls_change_state_and_emit_unit_changed() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    let control =
        |id: Value, targets: Value| json!({"wire": 1, "method": "controlUnit", "id": id, "targetControls": targets});

    send(&mut ws, control(json!(1), json!({"Dimmer": {"value": 0.25}}))).await;
    let u = unit_changed(&mut ws, 1, 1).await;
    assert_eq!(ws::control(&u, "Dimmer")["value"], 0.25);

    // Ids may come as integral floats, and client frames may be binary.
    let msg = control(json!(8.0), json!({"OnOff": {"value": 0}}));
    ws.send(Message::binary(msg.to_string().into_bytes())).await.unwrap();
    let u = unit_changed(&mut ws, 1, 8).await;
    assert_eq!(u["on"], false);

    send(&mut ws, control(json!(2), json!({"ColorTemperature": {"value": 3000}, "Colorsource": {"source": "TW"}})))
        .await;
    let u = unit_changed(&mut ws, 1, 2).await;
    assert_eq!(ws::control(&u, "CCT")["value"], 3000.0);

    send(&mut ws, control(json!(3), json!({"RGB": {"hue": 0.0, "sat": 1.0}, "Colorsource": {"source": "RGB"}}))).await;
    let u = unit_changed(&mut ws, 1, 3).await;
    assert_eq!(ws::control(&u, "Color")["rgb"], "rgb(255, 0, 0)");
    assert_eq!(ws::control(&u, "Colorsource")["source"], "RGB");

    send(&mut ws, control(json!(3), json!({"RGB": {"rgb": "rgb(0, 0, 255)"}}))).await;
    let u = unit_changed(&mut ws, 1, 3).await;
    assert_eq!(ws::control(&u, "Color")["rgb"], "rgb(0, 0, 255)");
    assert_eq!(ws::control(&u, "Color")["hue"].as_f64().map(|h| (h * 1000.0).round()), Some(667.0));

    send(&mut ws, control(json!(3), json!({"XY": {"x": 0.64, "y": 0.33}, "Colorsource": {"source": "XY"}}))).await;
    let u = unit_changed(&mut ws, 1, 3).await;
    assert_eq!(ws::control(&u, "Color")["x"], 0.64);
    assert_eq!(ws::control(&u, "Colorsource")["source"], "XY");

    send(
        &mut ws,
        json!({"wire": 1, "method": "controlUnits", "ids": [1.0, 2], "targetControls": {"Dimmer": {"value": 0.6}}}),
    )
    .await;
    for id in [1, 2] {
        let u = unit_changed(&mut ws, 1, id).await;
        assert_eq!(ws::control(&u, "Dimmer")["value"], 0.6);
    }

    // The truth agrees, and the log has the exact control messages.
    let state = sim.network_state(HOME).unwrap();
    assert_eq!(state["units"]["1"]["controls"][0][0]["value"], 0.6);
    let controls = sim.shared().log.controls();
    assert_eq!(controls.len(), 7);
    assert_eq!(controls[0], control(json!(1), json!({"Dimmer": {"value": 0.25}})));
    assert_eq!(controls[1]["id"], 8.0);
}

#[tokio::test]
async fn scene_group_and_network_controls() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;

    send(&mut ws, json!({"wire": 1, "method": "controlScene", "id": 2, "level": 1.0})).await;
    let u = unit_changed(&mut ws, 1, 2).await;
    assert_eq!(ws::control(&u, "Dimmer")["value"], 1.0);
    assert_eq!(u["activeSceneId"], 2.0);
    assert_eq!(sim.network_state(HOME).unwrap()["activeScenes"], json!([2]));

    send(&mut ws, json!({"wire": 1, "method": "controlGroup", "id": 2, "level": 0.5})).await;
    let u = unit_changed(&mut ws, 1, 3).await;
    assert_eq!(ws::control(&u, "Dimmer")["value"], 0.5);
    assert_eq!(u["on"], true);

    send(&mut ws, json!({"wire": 1, "method": "controlNetwork", "level": 0.5})).await;
    let u = unit_changed(&mut ws, 1, 3).await;
    assert_eq!(u["dimLevel"], 0.25);
    assert_eq!(sim.network_state(HOME).unwrap()["dimLevel"], 0.5);

    send(&mut ws, json!({"wire": 1, "method": "controlScene", "id": 2, "level": 0})).await;
    let u = unit_changed(&mut ws, 1, 1).await;
    assert_eq!(u["on"], false);
}

#[tokio::test]
async fn invalid_messages_are_refused_with_wire_status() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    let cases = [
        (
            json!({"wire": 1, "method": "controlUnit", "id": "1", "targetControls": {"Dimmer": {"value": 0.5}}}),
            "invalidValueType",
        ),
        (
            json!({"wire": 1, "method": "controlUnit", "id": 1.5, "targetControls": {"Dimmer": {"value": 0.5}}}),
            "invalidValueType",
        ),
        (
            json!({"wire": 1, "method": "controlUnit", "id": 1, "targetControls": {"Dimmer": {"value": "high"}}}),
            "invalidValueType",
        ),
        (
            json!({"wire": 1, "method": "controlUnit", "id": 1, "targetControls": {"Dimmer": {"value": 1.5}}}),
            "invalidData",
        ),
        (
            json!({"wire": 1, "method": "controlUnit", "id": 99, "targetControls": {"Dimmer": {"value": 0.5}}}),
            "invalidData",
        ),
        (json!({"wire": 1, "method": "controlUnit", "id": 1}), "invalidData"),
        (json!({"wire": 1, "method": "controlScene", "id": 77, "level": 1}), "invalidData"),
        (json!({"wire": 1, "method": "controlGroup", "id": 1, "level": "full"}), "invalidValueType"),
        (json!({"wire": 1, "method": "controlNetwork", "level": 2}), "invalidData"),
        (json!({"wire": 1, "method": "dance"}), "invalidData"),
        (json!({"wire": 9, "method": "controlNetwork", "level": 0.5}), "invalidData"),
    ];
    for (msg, status) in cases {
        send(&mut ws, msg.clone()).await;
        let reply = next(&mut ws).await;
        assert_eq!(reply.json["wireStatus"], status, "{msg}");
        assert!(reply.json.get("method").is_none());
        assert_eq!(reply.json["wire"], msg["wire"]);
    }
    ws.send(Message::text("{not json")).await.unwrap();
    assert_eq!(next(&mut ws).await.json["wireStatus"], "invalidData");
    // Nothing changed.
    quiet(&mut ws).await;
    assert_eq!(sim.network_state(HOME).unwrap()["units"]["1"]["controls"][0][0]["value"], 0.8);
}

#[tokio::test]
async fn gateway_loss_and_return_send_peer_changed() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    sim.set_gateway(HOME, false).unwrap();
    assert_eq!(next(&mut ws).await.json, json!({"wire": 1, "method": "peerChanged", "online": false}));
    // Commands are ignored while the gateway is away.
    send(&mut ws, json!({"wire": 1, "method": "controlUnit", "id": 1, "targetControls": {"Dimmer": {"value": 0.1}}}))
        .await;
    quiet(&mut ws).await;
    sim.set_gateway(HOME, true).unwrap();
    assert_eq!(next(&mut ws).await.json, json!({"wire": 1, "method": "peerChanged", "online": true}));
    for _ in 0..HOME_UNITS {
        assert_eq!(next(&mut ws).await.json["method"], "unitChanged");
    }
    // A wire opened while the gateway is away learns it at once.
    sim.set_gateway(OFFICE, false).unwrap();
    let mut other = connect(&sim).await;
    let sid = session(&sim, OFFICE);
    assert_eq!(open(&mut other, OFFICE, &sid, 2).await.json["wireStatus"], "openWireSucceed");
    assert_eq!(next(&mut other).await.json["online"], false);
    let unit = next(&mut other).await;
    assert_eq!(unit.json["online"], false, "{}", unit.text);
}

#[tokio::test]
async fn configuration_changes_send_network_updated() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    let updated = json!({"wire": 1, "method": "networkUpdated"});
    let unit = serde_json::from_value(json!({"id": 20, "name": "Porch", "fixture": 1001, "on": true,
        "controls": [{"type": "Dimmer", "value": 0.3}]}))
    .unwrap();
    sim.add_unit(HOME, unit).unwrap();
    assert_eq!(next(&mut ws).await.json, updated);
    let added = next(&mut ws).await.json;
    assert_eq!((added["method"].as_str(), added["id"].as_f64()), (Some("unitChanged"), Some(20.0)));
    sim.remove_unit(HOME, 20).unwrap();
    assert_eq!(next(&mut ws).await.json, updated);
    sim.rename(HOME, "scene", 1, "Late evening").unwrap();
    assert_eq!(next(&mut ws).await.json, updated);
    sim.rename(HOME, "units", 1, "Kitchen main").unwrap();
    assert_eq!(next(&mut ws).await.json, updated);
    assert_eq!(unit_changed(&mut ws, 1, 1).await["name"], "Kitchen main");
}

#[tokio::test]
async fn key_failures() {
    let sim = start_with(|c| {
        let off = ApiKey { key: "off-key".into(), enabled: false, ..c.site.api_keys[0].clone() };
        c.site.api_keys.push(off);
    })
    .await;
    let sid = session(&sim, HOME);
    for (key, status) in [("no-such-key", "keyAuthenticateFailed"), ("off-key", "keyAuthorizeFailed")] {
        let (mut ws, protocol) = try_connect(&sim.ws_url(), key).await.unwrap();
        assert_eq!(protocol.as_deref(), Some(key), "accepted and echoed");
        let reply = open(&mut ws, HOME, &sid, 1).await;
        assert_eq!(reply.json, json!({"wireStatus": status, "ref": "ref-1", "wire": 1}));
        send(&mut ws, json!({"wire": 1, "method": "controlNetwork", "level": 0.5})).await;
        assert_eq!(next(&mut ws).await.json["wireStatus"], "invalidData", "no wire was opened");
    }
}

#[tokio::test]
async fn session_failures_and_malformed_open() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    assert_eq!(open(&mut ws, HOME, "bogus__", 1).await.json["wireStatus"], "invalidSession");
    let office = session(&sim, OFFICE);
    assert_eq!(open(&mut ws, HOME, &office, 1).await.json["wireStatus"], "invalidSession");
    assert_eq!(open(&mut ws, "nonexistent", &office, 1).await.json["wireStatus"], "invalidSession");
    send(&mut ws, json!({"method": "open", "id": HOME, "ref": "x", "wire": 1})).await;
    assert_eq!(next(&mut ws).await.json, json!({"wireStatus": "invalidData", "ref": "x", "wire": 1}));
    send(&mut ws, json!({"method": "open", "id": HOME, "session": office, "wire": "one"})).await;
    assert_eq!(next(&mut ws).await.json, json!({"wireStatus": "invalidData"}));
    let home = session(&sim, HOME);
    sim.expire_sessions();
    assert_eq!(open(&mut ws, HOME, &home, 1).await.json["wireStatus"], "invalidSession");
}

#[tokio::test]
async fn wires_per_socket_are_limited_and_multiplexed() {
    let sim = start_with(|c| c.max_wires_per_socket = 2).await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    open_ok(&mut ws, &sim, HOME, 2).await;
    let office = session(&sim, OFFICE);
    let reply = open(&mut ws, OFFICE, &office, 3).await;
    assert_eq!(reply.json, json!({"wireStatus": "tooManyWires", "ref": "ref-3", "wire": 3}));
    // The same network twice: both wires get its events.
    sim.shared().world().control_unit(HOME, 1, &json!({"Dimmer": {"value": 0.2}})).unwrap();
    unit_changed(&mut ws, 1, 1).await;
    unit_changed(&mut ws, 2, 1).await;
    // Closing a wire frees its place; nothing more is sent on it.
    send(&mut ws, json!({"method": "close", "wire": 1})).await;
    open_ok(&mut ws, &sim, OFFICE, 3).await;
    sim.shared().world().control_unit(HOME, 1, &json!({"Dimmer": {"value": 0.3}})).unwrap();
    let f = next(&mut ws).await;
    assert_eq!((f.json["wire"].as_i64(), f.json["id"].as_f64()), (Some(2), Some(1.0)));
    quiet(&mut ws).await;
    send(&mut ws, json!({"method": "ping", "wire": 1})).await;
    assert_eq!(next(&mut ws).await.json, json!({"wireStatus": "invalidData", "wire": 1}));
    // Re-opening an open wire number replaces it (no extra place needed).
    open_ok(&mut ws, &sim, OFFICE, 3).await;
}

#[tokio::test]
async fn too_many_sockets_are_refused_with_429() {
    let sim = start_with(|c| c.site.api_keys[0].max_sockets = 2).await;
    let mut first = connect(&sim).await;
    let _second = connect(&sim).await;
    match try_connect(&sim.ws_url(), DEMO_API_KEY).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 429),
        other => panic!("expected 429, got {:?}", other.map(|_| ())),
    }
    // Unknown keys are not counted against the demo key.
    let _unknown = try_connect(&sim.ws_url(), "no-such-key").await.unwrap();
    first.close(None).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match try_connect(&sim.ws_url(), DEMO_API_KEY).await {
            Ok(_) => break,
            Err(_) if tokio::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("slot not released: {e}"),
        }
    }
    let refused = sim.shared().log.ws_records();
    let refused = serde_json::to_value(refused).unwrap();
    assert!(refused.as_array().unwrap().iter().any(|r| r["kind"] == "socket_refused" && r["status"] == 429));
}

#[tokio::test]
async fn shutdown_closes_sockets() {
    let sim = start().await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, OFFICE, 1).await;
    sim.stop().await;
    let end = tokio::time::timeout(WAIT, ws.next()).await.unwrap();
    assert!(matches!(end, Some(Ok(Message::Close(Some(_))))), "{end:?}");
}

/// `changes` Lux values of one unit sent at once on a wire of `sim`, which reads none of them
/// before the last (the test runtime has one thread and the loop does not yield); the wire
/// catches up with the final one. Returns the frames it took to get there.
async fn lag_a_wire(sim: &casambi2mqtt::sim::Simulator, changes: usize) -> usize {
    let mut ws = connect(sim).await;
    open_ok(&mut ws, sim, HOME, 1).await;
    for i in 1..=changes {
        let lux = json!([{"type": "Lux", "value": i as f64}]);
        sim.shared().world().set_unit_state(HOME, 5, None, None, lux.as_array().unwrap()).unwrap();
    }
    let mut frames = 0;
    loop {
        let f = next(&mut ws).await;
        frames += 1;
        if f.json["id"] == 5.0 && ws::control(&f.json, "Lux")["value"] == changes as f64 {
            return frames;
        }
    }
}

#[tokio::test]
async fn a_lagging_wire_gets_the_whole_network_again() {
    let sim = start().await;
    // More changes than the event buffer holds before the wire's forwarder runs again.
    const CHANGES: usize = 10_000;
    let frames = lag_a_wire(&sim, CHANGES).await;
    // The stale events were skipped: the final state came within one fresh burst.
    assert!(frames <= HOME_UNITS, "{frames}");
    // Every change was dropped, and counted: those past the buffer were overwritten, and the
    // burst superseded those still in it.
    assert_eq!(sim.shared().events_dropped(), CHANGES as u64);
    assert_eq!(sim.shared().wire_lags(), 1);
    // The forwarder fell behind on its own: its last frame had not waited for room in the queue
    // to the socket.
    assert_eq!(sim.shared().wire_lags_client_behind(), 0);
}

#[tokio::test]
async fn the_event_buffer_is_a_setting_and_a_wire_within_it_drops_nothing() {
    let sim = start_with(|c| c.event_buffer = 64).await;
    assert!(lag_a_wire(&sim, 150).await <= HOME_UNITS);
    assert_eq!((sim.shared().events_dropped(), sim.shared().wire_lags()), (150, 1));
    // Within the buffer the wire gets every change, one frame each, and nothing is dropped.
    let sim = start_with(|c| c.event_buffer = 256).await;
    assert!(lag_a_wire(&sim, 150).await >= 150);
    assert_eq!((sim.shared().events_dropped(), sim.shared().wire_lags()), (0, 0));
}

#[tokio::test]
async fn a_wire_whose_client_does_not_read_lags_with_the_client_behind() {
    let sim = start_with(|c| c.event_buffer = 64).await;
    let mut ws = connect(&sim).await;
    open_ok(&mut ws, &sim, HOME, 1).await;
    // Changes in batches the forwarder takes in between, while nothing reads the socket: its
    // buffers fill, then the queue to it, and the forwarder waits to queue a frame while its
    // events are overwritten. It sees that once the client reads again.
    const BATCH: u64 = 32;
    const CHANGES: u64 = 4_700 * BATCH;
    for batch in 0..CHANGES / BATCH {
        for i in 1..=BATCH {
            let lux = json!([{"type": "Lux", "value": (batch * BATCH + i) as f64}]);
            sim.shared().world().set_unit_state(HOME, 5, None, None, lux.as_array().unwrap()).unwrap();
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(sim.shared().wire_lags(), 0, "the forwarder is waiting, it has not seen its lag yet");
    // Frame by frame, each within 5 s: the socket's buffers hold tens of thousands of frames,
    // more than `until` reads within its one deadline on a loaded machine.
    for n in 0.. {
        let Some(f) = next_within(&mut ws, Duration::from_secs(5)).await else {
            panic!("after {n} frames, lags {}", sim.shared().wire_lags())
        };
        if f.json["id"] == 5.0 && ws::control(&f.json, "Lux")["value"] == CHANGES as f64 {
            break;
        }
    }
    assert!(sim.shared().wire_lags_client_behind() >= 1, "lags: {}", sim.shared().wire_lags());
    assert!(sim.shared().events_dropped() > 0);
}

#[tokio::test]
async fn a_session_from_rest_opens_a_wire() {
    let sim = start().await;
    let response = reqwest::Client::new()
        .post(format!("{}/v1/networks/session", sim.base_url()))
        .header("X-Casambi-Key", DEMO_API_KEY)
        .json(&json!({"email": "demo@example.com", "password": "demo"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let sessions: Value = response.json().await.unwrap();
    let sid = sessions[HOME]["sessionId"].as_str().unwrap().to_string();
    let mut ws = connect(&sim).await;
    assert_eq!(open(&mut ws, HOME, &sid, 1).await.json["wireStatus"], "openWireSucceed");
}
