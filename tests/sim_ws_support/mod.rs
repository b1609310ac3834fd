//! WebSocket client helpers for the simulator's channel tests.
#![allow(dead_code)]

use casambi2mqtt::sim::site::{DEMO_API_KEY, DEMO_NETWORK_EMAIL, DEMO_PASSWORD, Site};
use casambi2mqtt::sim::{SimConfig, Simulator};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
pub const OFFICE: &str = "c0ffee00aa11bb22cc33dd44ee55ff66";
pub const HOME_UNITS: usize = 8;
pub const OFFICE_UNITS: usize = 5;
/// Longest wait for a frame that should come.
pub const WAIT: Duration = Duration::from_secs(3);
/// How long to listen for a frame that should not come.
pub const QUIET: Duration = Duration::from_millis(250);

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A server frame: whether it was binary, its text, and its JSON when it parses.
#[derive(Debug, Clone)]
pub struct Frame {
    pub binary: bool,
    pub text: String,
    pub json: Value,
}

pub async fn start_with(change: impl FnOnce(&mut SimConfig)) -> Simulator {
    let mut config = SimConfig::new(Site::demo());
    change(&mut config);
    Simulator::start_local(config).await.unwrap()
}

pub async fn start() -> Simulator {
    start_with(|_| {}).await
}

/// A network session obtained in-process.
pub fn session(sim: &Simulator, network: &str) -> String {
    let wanted = [network.to_string()];
    let sessions =
        sim.shared().auth().login_networks(DEMO_NETWORK_EMAIL, DEMO_PASSWORD, Some(&wanted), Instant::now()).unwrap();
    sessions[0].1.clone()
}

/// Connects with a key as subprotocol; returns the socket and the selected protocol.
pub async fn try_connect(url: &str, key: &str) -> Result<(Ws, Option<String>), tungstenite::Error> {
    let mut request = url.into_client_request()?;
    request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_str(key).unwrap());
    let (ws, response) = tokio_tungstenite::connect_async(request).await?;
    let protocol = response.headers().get("Sec-WebSocket-Protocol").map(|v| v.to_str().unwrap().to_string());
    Ok((ws, protocol))
}

pub async fn connect(sim: &Simulator) -> Ws {
    try_connect(&sim.ws_url(), DEMO_API_KEY).await.unwrap().0
}

pub async fn send(ws: &mut Ws, msg: Value) {
    ws.send(Message::text(msg.to_string())).await.unwrap();
}

/// The next data frame within `wait`; `None` on timeout, close or end.
pub async fn next_within(ws: &mut Ws, wait: Duration) -> Option<Frame> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let msg = tokio::time::timeout_at(deadline, ws.next()).await.ok()??.ok()?;
        let (binary, text) = match msg {
            Message::Binary(b) => (true, String::from_utf8(b.to_vec()).unwrap()),
            Message::Text(t) => (false, t.as_str().to_string()),
            Message::Close(_) => return None,
            _ => continue,
        };
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        return Some(Frame { binary, text, json });
    }
}

/// The next data frame; panics when none comes.
pub async fn next(ws: &mut Ws) -> Frame {
    next_within(ws, WAIT).await.expect("a frame")
}

/// Reads frames until one matches; panics when none does in time.
pub async fn until(ws: &mut Ws, what: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let frame = next_within(ws, left).await.expect("a matching frame");
        if what(&frame.json) {
            return frame.json;
        }
    }
}

/// The next `unitChanged` of a unit on a wire.
pub async fn unit_changed(ws: &mut Ws, wire: i64, unit: i64) -> Value {
    until(ws, |v| v["method"] == "unitChanged" && v["wire"] == wire && v["id"].as_f64() == Some(unit as f64)).await
}

pub fn open_msg(network: &str, session: &str, wire: i64) -> Value {
    json!({"method": "open", "id": network, "session": session, "ref": format!("ref-{wire}"), "wire": wire, "type": 1})
}

/// Sends `open` and returns the reply.
pub async fn open(ws: &mut Ws, network: &str, session: &str, wire: i64) -> Frame {
    send(ws, open_msg(network, session, wire)).await;
    next(ws).await
}

/// Opens a wire successfully and reads its first frames (peerChanged and one unitChanged per
/// unit); returns the unitChanged frames.
pub async fn open_ok(ws: &mut Ws, sim: &Simulator, network: &str, wire: i64) -> Vec<Frame> {
    let sid = session(sim, network);
    let reply = open(ws, network, &sid, wire).await;
    assert_eq!(reply.json["wireStatus"], "openWireSucceed", "{}", reply.text);
    let peer = next(ws).await;
    assert_eq!(peer.json["method"], "peerChanged", "{}", peer.text);
    let units = if network == HOME { HOME_UNITS } else { OFFICE_UNITS };
    let mut burst = Vec::new();
    for _ in 0..units {
        let f = next(ws).await;
        assert_eq!(f.json["method"], "unitChanged", "{}", f.text);
        burst.push(f);
    }
    burst
}

/// Asserts that no data frame arrives for a while.
pub async fn quiet(ws: &mut Ws) {
    if let Some(f) = next_within(ws, QUIET).await {
        panic!("unexpected frame {}", f.text);
    }
}

/// The control value of a unitChanged frame.
pub fn control<'a>(unit: &'a Value, kind: &str) -> &'a Value {
    unit["controls"].as_array().and_then(|c| c.iter().find(|c| c["type"] == kind)).unwrap_or(&Value::Null)
}
