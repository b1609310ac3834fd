//! The WebSocket event channel at `/v1/bridge/` (also without the trailing slash), as the real
//! service runs it.
//!
//! - The API key travels as the subprotocol and is echoed as the selected protocol. An unknown
//!   key still gets a socket, but every `open` is answered `keyAuthenticateFailed` (a disabled key:
//!   `keyAuthorizeFailed`). More sockets at once than the key's `max_sockets`, or a key over its
//!   request quota (the upgrade counts as one request), gets the upgrade refused with HTTP 429.
//! - A socket carries wires (`open` with network id, session, `ref` and wire number), each
//!   answered by a `wireStatus`; a wire then gets `peerChanged` with the gateway's presence, a
//!   `unitChanged` per unit, and every later event of its network. Control messages, app pings
//!   and `close` name their wire.
//! - Frames are binary UTF-8 JSON unless `text_frames` is set; client frames may be either.
//! - A wire without client messages for `idle_timeout` ends; a socket whose last wire ended that
//!   way is closed with a close frame.
//! - [`super::WireFault`]s from `shared.wire_faults` drop sockets and wires or inject bad frames.
//!
//! Layout: this file (route, upgrade, socket limit), `conn` (one socket's loop and its wires),
//! `frames` (JSON texts and the reading of client messages).

mod conn;
mod frames;

use super::Shared;
use super::auth::KeyError;
use super::log::WsRecord;
use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Routes of this interface: the channel with and without the trailing slash.
pub fn router() -> Router<Arc<Shared>> {
    let sockets = Arc::new(Sockets::default());
    Router::new().route("/v1/bridge/", get(upgrade)).route("/v1/bridge", get(upgrade)).layer(Extension(sockets))
}

/// How the socket's API key fared; decides the answer to every `open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyStatus {
    /// Known and enabled.
    Valid,
    /// Unknown (or none sent): `keyAuthenticateFailed`.
    Unknown,
    /// Known but not enabled: `keyAuthorizeFailed`.
    Disabled,
}

/// Open sockets per API key of one simulator (for the `max_sockets` limit).
#[derive(Debug, Default)]
struct Sockets {
    open: Mutex<HashMap<String, u32>>,
}

/// One socket counted against its key until dropped (when the connection ends or the upgrade
/// fails).
#[derive(Debug)]
struct SocketSlot {
    sockets: Arc<Sockets>,
    key: String,
}

impl Sockets {
    /// Counts one more socket of `key` unless it already has `limit` open.
    fn take(self: &Arc<Self>, key: &str, limit: u32) -> Option<SocketSlot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(key.to_string()).or_insert(0);
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(SocketSlot { sockets: self.clone(), key: key.to_string() })
    }
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        let mut open = self.sockets.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The first subprotocol the client offered (the API key).
fn offered_key(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::SEC_WEBSOCKET_PROTOCOL)?.to_str().ok()?;
    let first = value.split(',').next()?.trim();
    (!first.is_empty()).then(|| first.to_string())
}

async fn upgrade(
    State(shared): State<Arc<Shared>>,
    Extension(sockets): Extension<Arc<Sockets>>,
    headers: HeaderMap,
    mut ws: WebSocketUpgrade,
) -> Response {
    let key = offered_key(&headers);
    if let Some(value) = key.as_deref().and_then(|k| HeaderValue::from_str(k).ok()) {
        ws.set_selected_protocol(value);
    }
    let (status, slot) = {
        let mut auth = shared.auth();
        let status = match auth.check_key(key.as_deref()) {
            Ok(_) => KeyStatus::Valid,
            Err(KeyError::Rejected) => KeyStatus::Unknown,
            Err(KeyError::NotEnabled) => KeyStatus::Disabled,
        };
        // Only keys the service knows are limited; an unknown key is refused at `open`.
        let admitted = match (&key, status) {
            (Some(k), KeyStatus::Valid) => auth.admit(k, Instant::now()).is_some(),
            _ => true,
        };
        let slot = match (&key, status) {
            _ if !admitted => None,
            (Some(k), KeyStatus::Valid | KeyStatus::Disabled) => sockets.take(k, auth.max_sockets(k)).map(Some),
            _ => Some(None),
        };
        (status, slot)
    };
    let Some(slot) = slot else {
        tracing::info!("WebSocket upgrade refused: too many sockets or quota exhausted (429)");
        shared.log.ws(WsRecord::SocketRefused { at: shared.started.elapsed(), status: 429 });
        return (StatusCode::TOO_MANY_REQUESTS, "Too many active websocket connections").into_response();
    };
    ws.read_buffer_size(READ_BUFFER_BYTES).on_upgrade(move |socket| conn::run(socket, shared, status, slot))
}

/// How much one read from a socket may take. The WebSocket layer zero-fills this much of its
/// buffer before every read, also the reads that find nothing, and the socket task polls a read
/// each time it wakes to send an event: its 128 KiB default made that fill a quarter of the task's
/// CPU. Client messages are small; a larger one takes several reads.
const READ_BUFFER_BYTES: usize = 4 * 1024;
