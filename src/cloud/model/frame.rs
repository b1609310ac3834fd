//! Server → client WebSocket messages and [`parse_frame`].
//!
//! Every server frame is one JSON object (sent as a binary or a text frame). Events carry a
//! `method` (`unitChanged`, `peerChanged`, `networkUpdated`, `networkLog`); the reply to `open`
//! carries `wireStatus` and no `method`; the reply to `ping` is `{"response":"pong"}`.
//!
//! Parsing is on the hot path (thousands of `unitChanged` per second on big sites). A frame is
//! read in one pass straight into a typed struct holding the routing fields (`method`, `wire`,
//! `wireStatus`, …) and the unit-state fields; no intermediate `serde_json::Value` of the frame is
//! built, and routing-field strings are borrowed from the frame.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use serde_json::Value;

use super::control::{self, Control};
use super::{OptF64, OptI32, OptInt, OptU32, UnitState, de, shared_text};

/// A message from the server on the WebSocket channel.
///
/// `UnitChanged`'s state is boxed although nearly every frame is one: a message is queued per
/// network on its way to the supervisor, and tokio's queues keep every block of 32 slots they
/// ever needed, so the size of a slot is kept for the bridge's life, per network, as often as a
/// start-up burst filled the queue. Boxed, a slot stays small (see the size test in
/// `model/tests.rs`); the box costs one allocation a frame.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerMessage {
    /// Reply to `open` (and error report for bad control messages); has no `method`.
    WireStatus {
        /// The status.
        status: WireStatusKind,
        /// The `ref` the client sent with `open`, echoed.
        ref_: Option<Box<str>>,
        /// The wire, when the server names it.
        wire: Option<u32>,
    },
    /// A unit's state changed (also sent for every unit right after `open`).
    UnitChanged {
        /// The wire (network) the event belongs to.
        wire: u32,
        /// The reported state; controls are flat here.
        unit: Box<UnitState>,
    },
    /// The network's gateway came or went; `online: false` = every unit unreachable.
    PeerChanged {
        /// The wire.
        wire: u32,
        /// Whether the gateway is online.
        online: bool,
    },
    /// The network configuration changed: refetch it over REST.
    NetworkUpdated {
        /// The wire.
        wire: u32,
    },
    /// A log line from the network; only logged.
    NetworkLog {
        /// The wire, if present.
        wire: Option<u32>,
        /// The message (non-string messages are kept as their JSON text).
        message: Option<Box<str>>,
    },
    /// Reply to an app-level ping (`{"response":"pong"}`).
    Pong,
    /// A `response` other than `pong`.
    Response {
        /// The response value.
        response: Box<str>,
        /// The wire, if present.
        wire: Option<u32>,
    },
    /// An event with a `method` this client does not know; callers log it at debug.
    Unknown {
        /// The method.
        method: Box<str>,
        /// The wire, if present.
        wire: Option<u32>,
    },
}

/// The `wireStatus` values the service documents, plus any other.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WireStatusKind {
    /// The wire is open.
    OpenWireSucceed,
    /// The API key is invalid.
    KeyAuthenticateFailed,
    /// The API key is not authorised (or WebSocket is not enabled for it).
    KeyAuthorizeFailed,
    /// The session is invalid, or has no access to the network: renew the session.
    InvalidSession,
    /// Too many wires on this socket.
    TooManyWires,
    /// A value of the wrong type in a message.
    InvalidValueType,
    /// Malformed data in a message.
    InvalidData,
    /// Any other status, kept as sent.
    Other(Box<str>),
}

impl WireStatusKind {
    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Self {
        match s {
            "openWireSucceed" => Self::OpenWireSucceed,
            "keyAuthenticateFailed" => Self::KeyAuthenticateFailed,
            "keyAuthorizeFailed" => Self::KeyAuthorizeFailed,
            "invalidSession" => Self::InvalidSession,
            "tooManyWires" => Self::TooManyWires,
            "invalidValueType" => Self::InvalidValueType,
            "invalidData" => Self::InvalidData,
            other => Self::Other(other.into()),
        }
    }

    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            Self::OpenWireSucceed => "openWireSucceed",
            Self::KeyAuthenticateFailed => "keyAuthenticateFailed",
            Self::KeyAuthorizeFailed => "keyAuthorizeFailed",
            Self::InvalidSession => "invalidSession",
            Self::TooManyWires => "tooManyWires",
            Self::InvalidValueType => "invalidValueType",
            Self::InvalidData => "invalidData",
            Self::Other(s) => s,
        }
    }

    /// True for `openWireSucceed`.
    pub fn is_success(&self) -> bool {
        matches!(self, Self::OpenWireSucceed)
    }
}

impl fmt::Display for WireStatusKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a frame could not be turned into a [`ServerMessage`]. The frame's content is never part
/// of the message (it may carry names the user considers private); callers log the error and drop
/// the frame.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Not JSON, not an object, or a field of the wrong type.
    #[error("malformed frame: {0}")]
    Json(JsonError),
    /// A binary frame whose bytes are not UTF-8 text.
    #[error("malformed frame: not UTF-8")]
    Utf8(#[from] simdutf8::basic::Utf8Error),
    /// A known message lacks a field it needs (e.g. a `unitChanged` without `id`, which older
    /// gateways send with a raw hex state; such frames carry nothing usable).
    #[error("`{method}` frame without `{field}`")]
    MissingField {
        /// The message kind.
        method: &'static str,
        /// The missing field.
        field: &'static str,
    },
    /// An object with none of `method`, `wireStatus` and `response`.
    #[error("frame has no `method`, `wireStatus` or `response`")]
    Unrecognized,
}

/// What the JSON reader said of a malformed frame (`… at line 1 column 5`), without the excerpt
/// of the frame that sonic-rs appends to its messages.
#[derive(Debug)]
pub struct JsonError(Box<str>);

impl From<sonic_rs::Error> for JsonError {
    fn from(e: sonic_rs::Error) -> Self {
        let text = e.to_string();
        // The excerpt follows a blank line; the first line is the reason and the position.
        Self(text.lines().next().unwrap_or_default().into())
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Every field any server frame carries: the routing fields plus the fields of [`UnitState`].
///
/// One pass over the frame fills it, whatever the message kind; `unitChanged` (the common case)
/// then moves the unit fields into a [`UnitState`] without reading the bytes again. The unit fields
/// mirror `UnitState` field for field (the test `unit_changed_carries_every_unit_state_field`
/// fails when they drift apart).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Frame<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "de::lenient_int_opt")]
    wire: Option<u32>,
    #[serde(borrow, default)]
    wire_status: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "ref")]
    ref_: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response: Option<Cow<'a, str>>,
    #[serde(default)]
    message: Option<Value>,
    // -- the fields of UnitState --
    #[serde(default, deserialize_with = "de::lenient_int_opt")]
    id: Option<u32>,
    #[serde(default)]
    address: Option<Box<str>>,
    #[serde(default)]
    name: Option<Box<str>>,
    #[serde(default)]
    image: Option<Box<Box<str>>>,
    #[serde(default)]
    position: OptI32,
    #[serde(default)]
    fixture_id: OptU32,
    #[serde(default, deserialize_with = "shared_text::opt")]
    firmware_version: Option<Arc<str>>,
    #[serde(default)]
    group_id: OptU32,
    #[serde(default, rename = "type", deserialize_with = "shared_text::opt")]
    unit_type: Option<Arc<str>>,
    #[serde(default)]
    priority: OptInt,
    #[serde(default)]
    scene: OptInt,
    #[serde(default)]
    on: Option<bool>,
    #[serde(default)]
    online: Option<bool>,
    #[serde(default)]
    condition: OptInt,
    #[serde(default, deserialize_with = "shared_text::opt")]
    status: Option<Arc<str>>,
    #[serde(default)]
    active_scene_id: OptU32,
    #[serde(default, deserialize_with = "control::controls_opt")]
    controls: Option<Vec<Control>>,
    #[serde(default)]
    dim_level: OptF64,
    #[serde(default)]
    details: Option<Box<Value>>,
}

impl Frame<'_> {
    /// Moves the unit fields into a [`UnitState`] with the given id.
    fn into_unit(self, id: u32) -> UnitState {
        UnitState {
            id,
            address: self.address,
            name: self.name,
            image: self.image,
            position: self.position,
            fixture_id: self.fixture_id,
            firmware_version: self.firmware_version,
            group_id: self.group_id,
            unit_type: self.unit_type,
            priority: self.priority,
            scene: self.scene,
            on: self.on,
            online: self.online,
            condition: self.condition,
            status: self.status,
            active_scene_id: self.active_scene_id,
            controls: self.controls,
            dim_level: self.dim_level,
            details: self.details,
        }
    }
}

/// Parses one WebSocket frame (binary or text payload) into a [`ServerMessage`].
///
/// Never panics; anything unusable is a [`FrameError`]. Unknown methods are not errors
/// ([`ServerMessage::Unknown`]).
pub fn parse_frame(bytes: &[u8]) -> Result<ServerMessage, FrameError> {
    // One vectorised UTF-8 check of the whole frame instead of one per string: `from_str` then
    // reads strings without validating them again.
    let text = simdutf8::basic::from_utf8(bytes)?;
    // sonic-rs rather than serde_json: it scans strings and skips unknown values with vector
    // instructions, which is most of the work of parsing a frame.
    let mut frame: Frame<'_> = sonic_rs::from_str(text).map_err(|e| FrameError::Json(e.into()))?;
    let wire = frame.wire;
    let need_wire = |method: &'static str| wire.ok_or(FrameError::MissingField { method, field: "wire" });
    if let Some(method) = frame.method.take() {
        return Ok(match &*method {
            "unitChanged" => {
                let wire = need_wire("unitChanged")?;
                let id = frame.id.ok_or(FrameError::MissingField { method: "unitChanged", field: "id" })?;
                ServerMessage::UnitChanged { wire, unit: Box::new(frame.into_unit(id)) }
            }
            "peerChanged" => {
                let wire = need_wire("peerChanged")?;
                let online = frame.online.ok_or(FrameError::MissingField { method: "peerChanged", field: "online" })?;
                ServerMessage::PeerChanged { wire, online }
            }
            "networkUpdated" => ServerMessage::NetworkUpdated { wire: need_wire("networkUpdated")? },
            "networkLog" => ServerMessage::NetworkLog {
                wire,
                message: frame.message.map(|m| match m {
                    Value::String(s) => s.into_boxed_str(),
                    other => other.to_string().into_boxed_str(),
                }),
            },
            other => ServerMessage::Unknown { method: other.into(), wire },
        });
    }
    if let Some(status) = frame.wire_status.as_deref() {
        return Ok(ServerMessage::WireStatus {
            status: WireStatusKind::parse(status),
            ref_: frame.ref_.map(|r| r.into()),
            wire,
        });
    }
    match frame.response.as_deref() {
        Some("pong") => Ok(ServerMessage::Pong),
        Some(other) => Ok(ServerMessage::Response { response: other.into(), wire }),
        None => Err(FrameError::Unrecognized),
    }
}

impl ServerMessage {
    /// The frame's JSON text, as the service sends it (used by the simulator and by tests).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

impl Serialize for ServerMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// `unitChanged` = the unit state's fields plus `method` and `wire` at the same level.
        #[derive(Serialize)]
        struct UnitChanged<'a> {
            method: &'static str,
            wire: u32,
            #[serde(flatten)]
            unit: &'a UnitState,
        }
        match self {
            Self::UnitChanged { wire, unit } => UnitChanged { method: "unitChanged", wire: *wire, unit }.serialize(s),
            Self::WireStatus { status, ref_, wire } => {
                let mut m = s.serialize_map(None)?;
                m.serialize_entry("wireStatus", status.as_str())?;
                if let Some(r) = ref_ {
                    m.serialize_entry("ref", r)?;
                }
                if let Some(w) = wire {
                    m.serialize_entry("wire", w)?;
                }
                m.end()
            }
            Self::PeerChanged { wire, online } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("wire", wire)?;
                m.serialize_entry("method", "peerChanged")?;
                m.serialize_entry("online", online)?;
                m.end()
            }
            Self::NetworkUpdated { wire } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("wire", wire)?;
                m.serialize_entry("method", "networkUpdated")?;
                m.end()
            }
            Self::NetworkLog { wire, message } => {
                let mut m = s.serialize_map(None)?;
                if let Some(w) = wire {
                    m.serialize_entry("wire", w)?;
                }
                m.serialize_entry("method", "networkLog")?;
                if let Some(msg) = message {
                    m.serialize_entry("message", msg)?;
                }
                m.end()
            }
            Self::Pong => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("response", "pong")?;
                m.end()
            }
            Self::Response { response, wire } => {
                let mut m = s.serialize_map(None)?;
                if let Some(w) = wire {
                    m.serialize_entry("wire", w)?;
                }
                m.serialize_entry("response", response)?;
                m.end()
            }
            Self::Unknown { method, wire } => {
                let mut m = s.serialize_map(None)?;
                if let Some(w) = wire {
                    m.serialize_entry("wire", w)?;
                }
                m.serialize_entry("method", method)?;
                m.end()
            }
        }
    }
}
