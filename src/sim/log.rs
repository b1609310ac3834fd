//! What clients did to the simulator: every REST request (with its status) and every WebSocket
//! event (socket accepted or refused, wire opened, control message, ping, close). Tests assert
//! on it: start-up request counts, login attempts per minute, request rates, control messages.

use serde::Serialize;
use serde_json::Value;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One REST request.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    /// Time since the simulator started.
    pub at: Duration,
    /// HTTP method.
    pub method: String,
    /// Request path (without the query).
    pub path: String,
    /// Status answered.
    pub status: u16,
    /// Login e-mail, for session creation requests.
    pub login_email: Option<String>,
}

impl RequestRecord {
    /// Whether this was a session creation (login) request.
    pub fn is_login(&self) -> bool {
        self.method == "POST" && self.path.ends_with("/session")
    }
}

/// One WebSocket happening.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WsRecord {
    /// A socket was accepted.
    SocketOpened {
        /// Time since start.
        at: Duration,
    },
    /// A socket upgrade was refused with this HTTP status.
    SocketRefused {
        /// Time since start.
        at: Duration,
        /// Status.
        status: u16,
    },
    /// A socket ended.
    SocketClosed {
        /// Time since start.
        at: Duration,
    },
    /// An `open` message and the `wireStatus` answered.
    Open {
        /// Time since start.
        at: Duration,
        /// Network id asked for.
        network: String,
        /// Wire number.
        wire: i64,
        /// `wireStatus` answered.
        status: String,
    },
    /// Any other client message (control, ping, close) and the result (`ok` or a wireStatus).
    Message {
        /// Time since start.
        at: Duration,
        /// Network of the wire, when the wire is open.
        network: Option<String>,
        /// The message as received.
        message: Value,
        /// `ok` or the refusal.
        result: String,
    },
}

/// Both logs.
#[derive(Debug, Default)]
pub struct Log {
    requests: Mutex<Vec<RequestRecord>>,
    ws: Mutex<Vec<WsRecord>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Log {
    /// Appends a REST record.
    pub fn request(&self, record: RequestRecord) {
        lock(&self.requests).push(record);
    }

    /// Appends a WebSocket record.
    pub fn ws(&self, record: WsRecord) {
        lock(&self.ws).push(record);
    }

    /// A copy of the REST log.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.requests).clone()
    }

    /// A copy of the WebSocket log.
    pub fn ws_records(&self) -> Vec<WsRecord> {
        lock(&self.ws).clone()
    }

    /// Control messages received (method starting with `control`), in order.
    pub fn controls(&self) -> Vec<Value> {
        lock(&self.ws)
            .iter()
            .filter_map(|r| match r {
                WsRecord::Message { message, .. }
                    if message.get("method").and_then(Value::as_str).is_some_and(|m| m.starts_with("control")) =>
                {
                    Some(message.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// Forgets everything logged so far (tests measure a phase at a time).
    pub fn clear(&self) {
        lock(&self.requests).clear();
        lock(&self.ws).clear();
    }
}
