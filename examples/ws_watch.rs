//! Opens the event channel of a lighting cloud service (real or `casambi2mqtt sim`) and prints
//! every frame: logs in with network credentials, opens one wire per network, sends an app ping
//! every 60 s. A minimal, readable client of the WebSocket protocol.
//!
//! ```text
//! cargo run --example ws_watch -- [BASE_URL] [API_KEY] [EMAIL] [PASSWORD]
//! ```
//! Defaults: `http://127.0.0.1:8765`, `demo-key`, `demo@example.com`, `demo` (the simulator's
//! demo site). The WebSocket URL is derived from the base URL (`ws://…/v1/bridge/`).

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest, http::HeaderValue};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let base = args.next().unwrap_or_else(|| "http://127.0.0.1:8765".into());
    let key = args.next().unwrap_or_else(|| "demo-key".into());
    let email = args.next().unwrap_or_else(|| "demo@example.com".into());
    let password = args.next().unwrap_or_else(|| "demo".into());

    // One network session per network the credentials open.
    let sessions: Value = reqwest::Client::new()
        .post(format!("{base}/v1/networks/session"))
        .header("X-Casambi-Key", &key)
        .json(&json!({"email": email, "password": password}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let networks = sessions.as_object().ok_or("session response is not an object")?;

    let ws_url = format!("{}/v1/bridge/", base.replacen("http", "ws", 1));
    let mut request = ws_url.as_str().into_client_request()?;
    // The API key travels as the WebSocket subprotocol.
    request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_str(&key)?);
    let (socket, _) = tokio_tungstenite::connect_async(request).await?;
    let (mut tx, mut rx) = socket.split();

    for (wire, (id, entry)) in (1..).zip(networks) {
        let open = json!({"method": "open", "id": id, "session": entry["sessionId"], "ref": format!("watch-{wire}"),
                          "wire": wire, "type": 1});
        tx.send(Message::text(open.to_string())).await?;
        println!("# wire {wire} = network {id} ({})", entry["name"]);
    }
    let wires = networks.len();
    let mut ping = tokio::time::interval(Duration::from_secs(60));
    ping.tick().await;
    loop {
        tokio::select! {
            frame = rx.next() => match frame {
                Some(Ok(Message::Binary(bytes))) => println!("{}", String::from_utf8_lossy(&bytes)),
                Some(Ok(Message::Text(text))) => println!("{text}"),
                Some(Ok(Message::Close(reason))) => { println!("# closed: {reason:?}"); break; }
                Some(Ok(_)) => {}
                Some(Err(e)) => { println!("# error: {e}"); break; }
                None => break,
            },
            _ = ping.tick() => {
                for wire in 1..=wires {
                    tx.send(Message::text(json!({"method": "ping", "wire": wire}).to_string())).await?;
                }
            }
        }
    }
    Ok(())
}
