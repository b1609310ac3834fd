//! Why the channel's socket, or one wire of it, went down.

use super::super::model::WireStatusKind;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::http::StatusCode;

/// Why the socket could not be opened or ended, or why the service dropped one wire. Every wire
/// the socket carried hears it in [`super::WireEvent::Down`]; the channel then reconnects (or, for
/// a dropped wire, reopens it).
#[derive(Debug, thiserror::Error)]
pub enum DownReason {
    /// The configured WebSocket URL cannot make a request.
    #[error("bad WebSocket URL: {0}")]
    Url(#[source] tungstenite::Error),
    /// The API key cannot be sent as a header value.
    #[error("API key is not a valid header value")]
    ApiKeyHeader,
    /// Connecting and the upgrade took longer than `connect_timeout`.
    #[error("connect timed out")]
    ConnectTimeout,
    /// The service refused the upgrade (429: too many sockets).
    #[error("upgrade refused with HTTP {0}")]
    UpgradeRefused(StatusCode),
    /// The socket failed.
    #[error(transparent)]
    WebSocket(tungstenite::Error),
    /// A message could not be encoded.
    #[error("cannot encode a message: {0}")]
    Encode(#[source] serde_json::Error),
    /// The service sent a close frame; its reason, empty without one.
    #[error("closed by the service ({0})")]
    ClosedByService(String),
    /// The connection ended without a close frame.
    #[error("connection closed")]
    ConnectionClosed,
    /// The socket stayed silent for two WebSocket ping intervals.
    #[error("no answer to WebSocket pings")]
    NoPongs,
    /// Every handle of the channel is gone.
    #[error("channel handle dropped")]
    HandleDropped,
    /// The bridge is stopping.
    #[error("shutting down")]
    ShuttingDown,
    /// The service answered an app ping with an error: it no longer knows the wire (closed for
    /// idleness or dropped).
    #[error("the service closed the wire ({})", .0.as_str())]
    WireClosed(WireStatusKind),
}

impl From<tungstenite::Error> for DownReason {
    /// A refused upgrade keeps its HTTP status (429 = too many sockets); other errors are kept
    /// whole.
    fn from(e: tungstenite::Error) -> DownReason {
        match e {
            tungstenite::Error::Http(response) => DownReason::UpgradeRefused(response.status()),
            other => DownReason::WebSocket(other),
        }
    }
}
