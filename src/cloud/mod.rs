//! The cloud client layer: typed model, REST endpoints, sessions and the per-key request guard.
//!
//! Layers, bottom up:
//! - [`model`]: serde types of every REST resource and of the WebSocket messages (tolerant of the
//!   service's loose JSON), plus [`model::parse_frame`] for the event hot path.
//! - [`error`]: [`CloudError`], one variant per status of the spec.
//! - [`quota`]: the client-side guard per API key (requests per minute, concurrent requests) and
//!   the backoff policy for 429 / 5xx / transport errors.
//! - [`rest`]: [`RestClient`], one typed method per endpoint; every request passes the guard.
//! - [`session`]: [`SessionManager`], network sessions with lockout-safe logins and coalesced
//!   renewal after a 410 or an `invalidSession` wire status.
//! - [`channel`]: [`channel::EventChannel`], the one WebSocket per API key and its task, which
//!   carries a wire per network.
//!
//! Apart from the channel's task nothing here spawns tasks or keeps sockets open; the bridge's
//! supervisors drive it.

pub mod backoff;
pub mod channel;
pub mod datapoints;
pub mod error;
pub mod model;
pub mod quota;
pub mod rest;
pub mod session;

pub use error::CloudError;
pub use rest::{RestClient, RestConfig};
pub use session::{SessionManager, UserSessionManager};
