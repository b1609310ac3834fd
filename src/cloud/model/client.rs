//! Client → server WebSocket messages ([`ClientMessage`]) and the `targetControls` of control
//! messages ([`TargetControls`]).
//!
//! The REST interface is read-only; every command goes out as one of these messages on the wire
//! of its network. The serialised JSON is exactly what public clients send, e.g.
//! `{"method":"open","id":"<net>","session":"<sid>","ref":"<ref>","wire":1,"type":1}`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Secret, de};

/// The client type sent with `open`: 1 = "FRONTEND", the value every client sends.
const FRONTEND: u8 = 1;

fn frontend() -> u8 {
    FRONTEND
}

/// A message from the client on the WebSocket channel.
///
/// `Debug` never shows the session id (it is a [`Secret`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum ClientMessage {
    /// Opens wire `wire` for network `id` with a session id; answered by a `wireStatus`.
    Open {
        /// Network id.
        id: String,
        /// Network or user session id.
        session: Secret,
        /// Any client string; echoed in the `wireStatus` reply.
        #[serde(rename = "ref")]
        ref_: String,
        /// Client-chosen wire number naming the network on this socket.
        #[serde(deserialize_with = "de::lenient_int")]
        wire: u32,
        /// Client type; always 1 (use [`ClientMessage::open`]).
        #[serde(rename = "type", default = "frontend")]
        client_type: u8,
    },
    /// Closes a wire.
    Close {
        /// The wire.
        #[serde(deserialize_with = "de::lenient_int")]
        wire: u32,
    },
    /// App-level keepalive; answered by `{"response":"pong"}`.
    Ping {
        /// The wire.
        #[serde(deserialize_with = "de::lenient_int")]
        wire: u32,
    },
    /// Sets controls of one unit.
    ControlUnit {
        /// The wire.
        #[serde(deserialize_with = "de::lenient_int")]
        wire: u32,
        /// Unit id.
        #[serde(deserialize_with = "de::lenient_int")]
        id: u32,
        /// The controls to set.
        target_controls: TargetControls,
    },
    /// Sets controls of several units at once.
    ControlUnits {
        /// The wire.
        #[serde(deserialize_with = "de::lenient_int")]
        wire: u32,
        /// Unit ids.
        #[serde(deserialize_with = "de::lenient_int_vec")]
        ids: Vec<u32>,
        /// The controls to set.
        target_controls: TargetControls,
    },
    /// Sets a scene's level (0 = off, 1 = on, fractions dim it).
    ControlScene {
        /// The wire.
        #[serde(deserialize_with = "de::lenient_int")]
        wire: u32,
        /// Scene id.
        #[serde(deserialize_with = "de::lenient_int")]
        id: u32,
        /// Level 0..1.
        level: f64,
    },
    /// Sets a group's level.
    ControlGroup {
        /// The wire.
        #[serde(deserialize_with = "de::lenient_int")]
        wire: u32,
        /// Group id.
        #[serde(deserialize_with = "de::lenient_int")]
        id: u32,
        /// Level 0..1.
        level: f64,
    },
    /// Sets the network-wide dim level.
    ControlNetwork {
        /// The wire.
        #[serde(deserialize_with = "de::lenient_int")]
        wire: u32,
        /// Level 0..1.
        level: f64,
    },
}

impl ClientMessage {
    /// The `open` message for a network.
    pub fn open(network_id: impl Into<String>, session: Secret, ref_: impl Into<String>, wire: u32) -> Self {
        Self::Open { id: network_id.into(), session, ref_: ref_.into(), wire, client_type: FRONTEND }
    }

    /// The wire the message is for.
    pub fn wire(&self) -> u32 {
        match self {
            Self::Open { wire, .. }
            | Self::Close { wire }
            | Self::Ping { wire }
            | Self::ControlUnit { wire, .. }
            | Self::ControlUnits { wire, .. }
            | Self::ControlScene { wire, .. }
            | Self::ControlGroup { wire, .. }
            | Self::ControlNetwork { wire, .. } => *wire,
        }
    }

    /// The JSON text to send (as a text frame).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

/// The `targetControls` object of `controlUnit`/`controlUnits`: control name → new value.
///
/// The write names differ from the state names in places: colour temperature is written as
/// `ColorTemperature` (state reports `CCT`), hue/saturation as `RGB`. Keys this struct does not name
/// pass through `other` untouched.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetControls {
    /// `Dimmer: {value: 0..1}`; 0 is off.
    #[serde(rename = "Dimmer", default, skip_serializing_if = "Option::is_none")]
    pub dimmer: Option<ValueTarget>,
    /// `OnOff: {value: 1|0}` for on/off-only units.
    #[serde(rename = "OnOff", default, skip_serializing_if = "Option::is_none")]
    pub on_off: Option<ValueTarget>,
    /// `ColorTemperature: {value: K}`, sent with `Colorsource: {source: "TW"}`.
    #[serde(rename = "ColorTemperature", default, skip_serializing_if = "Option::is_none")]
    pub color_temperature: Option<ValueTarget>,
    /// `Colorsource: {source: "TW"|"RGB"|"XY"}`.
    #[serde(rename = "Colorsource", default, skip_serializing_if = "Option::is_none")]
    pub colorsource: Option<SourceTarget>,
    /// `RGB: {hue, sat}` (0..1) or `RGB: {rgb: "rgb(r, g, b)"}`, sent with `Colorsource: RGB`.
    #[serde(rename = "RGB", default, skip_serializing_if = "Option::is_none")]
    pub rgb: Option<RgbTarget>,
    /// `XY: {x, y}`, sent with `Colorsource: XY` (accepted by the simulator).
    #[serde(rename = "XY", default, skip_serializing_if = "Option::is_none")]
    pub xy: Option<XyTarget>,
    /// `White: {value: 0..1}` for RGBW.
    #[serde(rename = "White", default, skip_serializing_if = "Option::is_none")]
    pub white: Option<ValueTarget>,
    /// `Vertical: {value: 0..1}`.
    #[serde(rename = "Vertical", default, skip_serializing_if = "Option::is_none")]
    pub vertical: Option<ValueTarget>,
    /// Any other key, passed through.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl TargetControls {
    /// True when no control is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// `{value: …}`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueTarget {
    /// The value.
    pub value: f64,
}

/// `{source: …}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceTarget {
    /// `TW`, `RGB` or `XY`.
    pub source: String,
}

/// `{hue, sat}` or `{rgb}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RgbTarget {
    /// Hue, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hue: Option<f64>,
    /// Saturation, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sat: Option<f64>,
    /// `rgb(r, g, b)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rgb: Option<String>,
}

/// `{x, y}` (CIE 1931).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct XyTarget {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
}
