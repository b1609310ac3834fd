//! Why a command was refused: every reason a user can see on `<base>/bridge/error`.
//!
//! The messages are written for the person who sent the command (a Home Assistant user, a
//! Node-RED flow author): they name the field, the value and what would have been accepted, e.g.
//! `brightness 300 outside 0..255` or `unit Kitchen has no colour temperature control`.

use std::time::Duration;

/// A refused command.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandError {
    /// The payload is larger than [`super::parse::MAX_PAYLOAD`].
    #[error("payload of {size} bytes exceeds the {limit}-byte limit")]
    TooLarge {
        /// Payload size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The payload is empty (or only white space).
    #[error("empty payload")]
    Empty,
    /// The payload is not UTF-8 text.
    #[error("payload is not UTF-8 text")]
    NotUtf8,
    /// The payload looks like JSON but does not parse.
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    /// The JSON is valid but not of the expected shape.
    #[error("expected {expected}, got {got}")]
    Unexpected {
        /// What the topic takes.
        expected: &'static str,
        /// What arrived (shortened).
        got: String,
    },
    /// A JSON object has a key this kind of target does not take.
    #[error("unknown key \"{key}\" for a {target} command (accepted: {accepted})")]
    UnknownKey {
        /// The key (shortened).
        key: String,
        /// `unit`, `group`, `scene` or `network`.
        target: &'static str,
        /// The keys that are accepted.
        accepted: &'static str,
    },
    /// `…/unit/<unit>/set/<attr>` with an attribute that takes no commands.
    #[error("unknown attribute \"{0}\" (…/set/<attr> takes state, brightness, color_temp or color)")]
    UnknownAttribute(String),
    /// A field has the wrong JSON type.
    #[error("{field} must be {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// A number is outside its range.
    #[error("{field} {value} outside {range}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The value sent.
        value: f64,
        /// The accepted range, as text (`0..255`).
        range: &'static str,
    },
    /// `state` is not one of ON, OFF, TOGGLE.
    #[error("state must be ON, OFF or TOGGLE, got \"{0}\"")]
    BadState(String),
    /// `color` and `color_temp` in one command.
    #[error("color and color_temp cannot be set in one command")]
    ColorConflict,
    /// The command asks for nothing (e.g. `{}` or only `transition`).
    #[error("the command sets nothing (give state, brightness, color_temp or color)")]
    Nothing,
    /// The unit lacks the control the command needs.
    #[error("unit {unit} has no {control} control")]
    Unsupported {
        /// Unit name.
        unit: String,
        /// `colour`, `colour temperature`, `dimmer` (on/off only).
        control: &'static str,
    },
    /// The unit is not a light (a sensor or a switch).
    #[error("unit {0} is not a light")]
    NotALight(String),
    /// The unit is offline (its `online` is false): the cloud would accept the message and
    /// nothing would change, so it is not sent.
    #[error("unit {0} is offline; command not sent")]
    Offline(String),
    /// The network's gateway is offline: the cloud would accept the message and nothing would
    /// change, so it is not sent.
    #[error("the gateway of network {0} is offline; command not sent")]
    GatewayOffline(String),
    /// The target is not (or no longer) in the network.
    #[error("{kind} {id} is not known in network {network}")]
    UnknownTarget {
        /// `unit`, `group`, `scene`.
        kind: &'static str,
        /// Its id.
        id: u32,
        /// Network id or name.
        network: String,
    },
    /// The network is not known to the bridge (yet).
    #[error("network {0} is not known")]
    UnknownNetwork(String),
    /// The network's wire stayed down for the whole retry period.
    #[error("network {network} not reachable for {:.1} s; command dropped ({last})", waited.as_secs_f32())]
    WireDown {
        /// Network name.
        network: String,
        /// How long the dispatcher retried.
        waited: Duration,
        /// The last failure.
        last: String,
    },
    /// Too many commands are waiting for one target.
    #[error("too many commands queued for this target; command dropped")]
    QueueFull,
    /// A reload was asked for while every network still has one waiting.
    #[error("a reload is already waiting for every network; this one is not needed")]
    ReloadWaiting,
}

/// A payload or key shortened for a message (at most 40 characters, never splitting a char).
pub(crate) fn shorten(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        return text.to_string();
    }
    let mut out: String = text.chars().take(MAX).collect();
    out.push('…');
    out
}
