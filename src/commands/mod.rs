//! Control from MQTT: commands on the `…/set` topics (docs/mqtt.md, docs/commands.md) become WebSocket control
//! messages on the network's wire.
//!
//! MQTT → [`parse`] (payload → typed [`Command`], type and range checks) → [`map`] (capability
//! checks, command + unit state → `controlUnit`/`controlGroup`/`controlScene`/`controlNetwork`) →
//! [`dispatch`] (per-target order, coalescing, retry while the wire is down) →
//! [`crate::bridge::network::Outgoing`] → the supervisor → the wire.
//!
//! Wiring (done by the binary): feed every bridge [`crate::bridge::update::Update`] to
//! [`CommandDispatcher::observe`] as well as to the MQTT publisher; resolve each forwarded
//! `(topic, payload)` to a network id and a [`Target`] and call [`CommandDispatcher::submit`]
//! (or send [`Request`]s to [`CommandDispatcher::run`]); publish each [`Rejection`] from the
//! stream [`CommandDispatcher::new`] returns on `<base>/bridge/error`. No state is published
//! here: the result comes back from the cloud as events.
//!
//! - [`parse`]: payload forms, limits, [`CommandError`] reasons.
//! - [`map`]: the mapping table; [`crate::color`]: xy → hue/sat and its measured precision.
//! - [`known`]: what the layer knows of each network (fed by `observe`).
//! - [`dispatch`]: queues, coalescing, retries, rejections.

pub mod dispatch;
pub mod error;
pub mod known;
pub mod map;
pub mod parse;

pub use dispatch::{CommandDispatcher, DispatchConfig, Rejection, Request, Wires};
pub use error::CommandError;
pub use parse::{Command, Target};
