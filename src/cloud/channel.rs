//! The WebSocket event channel: one socket per API key carrying one wire per network.
//!
//! Why one socket: the service limits sockets globally and answers "too many" with 429 on the
//! upgrade when a client opens one per network, so every network of a key shares one socket and
//! is told apart by its wire number.
//!
//! The channel is a task owning the socket (`channel/task.rs`). Networks register a wire with
//! [`EventChannel::open`] and receive [`WireEvent`]s on their own bounded queue (a slow consumer
//! slows the socket down instead of growing memory). After a socket loss the task reconnects with
//! exponential backoff and jitter and reopens every registered wire; the service then resends
//! every unit, which is the resync. It sends an app-level ping per wire at most every
//! `ping_interval` (the service closes idle wires after about 5 minutes) and a WebSocket ping
//! every `ws_ping_interval`; a socket that stays silent for two WebSocket ping intervals is
//! considered dead.
//!
//! Each wire's life is one `WireState` (`channel/wire.rs`: closed, opening, open, refused); why a
//! socket or a wire went down is a [`DownReason`].

mod error;
mod task;
mod wire;

pub use error::DownReason;

use super::model::{ClientMessage, Secret, ServerMessage, WireStatusKind};
use crate::wake_batch::WakeBatcher;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Largest frame the channel accepts; larger ones end the socket (and it reconnects).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// Settings of one event channel.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// WebSocket URL, e.g. `wss://door.casambi.com/v1/bridge/`.
    pub url: String,
    /// API key, sent as the WebSocket subprotocol.
    pub api_key: Secret,
    /// App-level ping per wire (the service wants one at least every ~5 minutes).
    pub ping_interval: Duration,
    /// WebSocket-level ping, also the liveness check of the socket.
    pub ws_ping_interval: Duration,
    /// Time allowed for connecting and the upgrade.
    pub connect_timeout: Duration,
    /// First reconnect delay.
    pub min_backoff: Duration,
    /// Longest reconnect delay.
    pub max_backoff: Duration,
}

impl ChannelConfig {
    /// Defaults for the real service.
    pub fn new(url: impl Into<String>, api_key: Secret) -> ChannelConfig {
        ChannelConfig {
            url: url.into(),
            api_key,
            ping_interval: Duration::from_secs(240),
            ws_ping_interval: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(20),
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
        }
    }
}

/// What a network hears from its wire.
///
/// `Message` is much larger than the other variants; it is also nearly every event, so boxing it
/// would add an allocation per event on the hot path for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum WireEvent {
    /// The wire is open (`openWireSucceed`); the unit burst follows.
    Opened,
    /// The wire is down: the socket was lost or the service closed it. The channel reopens it by
    /// itself after reconnecting.
    Down {
        /// Why, for the log; shared by every wire the same socket loss took down.
        reason: Arc<DownReason>,
    },
    /// The service refused to open the wire (`invalidSession`, `tooManyWires`, …). The channel
    /// does not retry: the network must get a new session and call [`EventChannel::open`] again.
    Refused(WireStatusKind),
    /// A message of the wire (`unitChanged`, `peerChanged`, `networkUpdated`, a control's
    /// `wireStatus` error, …).
    Message(ServerMessage),
}

/// Why a message could not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The network's wire is not open right now.
    #[error("the wire of network {0} is not open")]
    WireDown(String),
    /// The channel task has stopped.
    #[error("the event channel has stopped")]
    Stopped,
}

/// What a handle asks of the channel task.
enum Request {
    Open {
        network: String,
        session: Secret,
        events: mpsc::Sender<WireEvent>,
    },
    Close {
        network: String,
    },
    Send {
        network: String,
        build: Box<dyn FnOnce(u32) -> ClientMessage + Send>,
        done: tokio::sync::oneshot::Sender<Result<(), ChannelError>>,
    },
}

/// Handle to a running event channel; cheap to clone.
#[derive(Clone)]
pub struct EventChannel {
    requests: mpsc::UnboundedSender<Request>,
}

impl std::fmt::Debug for EventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventChannel")
    }
}

impl EventChannel {
    /// Starts the channel task; it runs until `shutdown` is cancelled, then closes every wire and
    /// the socket cleanly. Every frame read is noted in `wake` (the bridge's wake-up batching).
    pub fn spawn(config: ChannelConfig, wake: WakeBatcher, shutdown: CancellationToken) -> EventChannel {
        let (requests, rx) = mpsc::unbounded_channel();
        tokio::spawn(task::run(config, wake, rx, shutdown));
        EventChannel { requests }
    }

    /// Registers (or re-registers with a new session) the wire of a network. The wire is opened
    /// now if the socket is up, and after every reconnect.
    pub fn open(&self, network: &str, session: Secret, events: mpsc::Sender<WireEvent>) -> Result<(), ChannelError> {
        self.requests
            .send(Request::Open { network: network.to_string(), session, events })
            .map_err(|_| ChannelError::Stopped)
    }

    /// Closes and forgets the wire of a network.
    pub fn close(&self, network: &str) -> Result<(), ChannelError> {
        self.requests.send(Request::Close { network: network.to_string() }).map_err(|_| ChannelError::Stopped)
    }

    /// Sends a message on the network's wire; `build` receives the wire number. Fails when the
    /// wire is not open, so callers can wait or report instead of losing the message silently.
    pub async fn send(
        &self,
        network: &str,
        build: impl FnOnce(u32) -> ClientMessage + Send + 'static,
    ) -> Result<(), ChannelError> {
        let (done, result) = tokio::sync::oneshot::channel();
        self.requests
            .send(Request::Send { network: network.to_string(), build: Box::new(build), done })
            .map_err(|_| ChannelError::Stopped)?;
        result.await.map_err(|_| ChannelError::Stopped)?
    }
}
