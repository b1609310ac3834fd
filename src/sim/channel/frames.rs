//! The JSON texts of the channel: frames the service sends (events, `wireStatus` replies, pongs,
//! injected faults) and the reading of client messages (wire numbers, ids, levels, controls).
//!
//! Event frames are built by splicing `"wire":N,"method":...` into the pre-rendered body, so an
//! event rendered once under the world lock costs each wire only a string copy, never a re-parse.

use crate::sim::world::{ControlError, World, WorldEvent};
use serde_json::{Map, Value, json};

/// `wireStatus` of a successful `open`.
pub const OPEN_SUCCEED: &str = "openWireSucceed";
/// `wireStatus`: the API key is unknown.
pub const KEY_AUTHENTICATE_FAILED: &str = "keyAuthenticateFailed";
/// `wireStatus`: the API key is known but not enabled.
pub const KEY_AUTHORIZE_FAILED: &str = "keyAuthorizeFailed";
/// `wireStatus`: the session is unknown, expired or not valid for the network.
pub const INVALID_SESSION: &str = "invalidSession";
/// `wireStatus`: the socket already carries its maximum number of wires.
pub const TOO_MANY_WIRES: &str = "tooManyWires";
/// `wireStatus`: a value has the wrong JSON type.
pub const INVALID_VALUE_TYPE: &str = "invalidValueType";
/// `wireStatus`: the message is shaped wrongly or names something unknown.
pub const INVALID_DATA: &str = "invalidData";

/// Splices `"wire":N,"method":"<method>"` in front of the fields of a rendered JSON object.
fn splice(wire: i64, method: &str, body: &str) -> String {
    let fields = body.trim().strip_prefix('{').unwrap_or("}");
    let mut out = String::with_capacity(body.len() + method.len() + 32);
    out.push_str("{\"wire\":");
    out.push_str(&wire.to_string());
    out.push_str(",\"method\":\"");
    out.push_str(method);
    out.push('"');
    if !fields.trim_start().starts_with('}') {
        out.push(',');
    }
    out.push_str(fields);
    out
}

/// A `unitChanged` frame from a rendered body.
pub fn unit_changed(wire: i64, body: &str) -> String {
    splice(wire, "unitChanged", body)
}

/// `peerChanged`: the gateway's presence.
pub fn peer_changed(wire: i64, online: bool) -> String {
    format!("{{\"wire\":{wire},\"method\":\"peerChanged\",\"online\":{online}}}")
}

/// The frame of a world event on a wire.
pub fn event(wire: i64, event: &WorldEvent) -> String {
    match event {
        WorldEvent::UnitChanged { body, .. } => unit_changed(wire, body),
        WorldEvent::PeerChanged { online } => peer_changed(wire, *online),
        WorldEvent::NetworkUpdated => format!("{{\"wire\":{wire},\"method\":\"networkUpdated\"}}"),
    }
}

/// A `wireStatus` reply (no `method` field), echoing the wire and the client's `ref` when known.
pub fn status(status: &str, wire: Option<i64>, reference: Option<&Value>) -> String {
    let mut m = Map::new();
    m.insert("wireStatus".into(), json!(status));
    if let Some(r) = reference {
        m.insert("ref".into(), r.clone());
    }
    if let Some(w) = wire {
        m.insert("wire".into(), json!(w));
    }
    Value::Object(m).to_string()
}

/// The answer to an application ping.
pub fn pong(wire: Option<i64>) -> String {
    match wire {
        Some(w) => format!("{{\"response\":\"pong\",\"wire\":{w}}}"),
        None => "{\"response\":\"pong\"}".to_string(),
    }
}

/// A truncated `unitChanged` frame: not valid JSON (fault injection).
pub fn malformed(wire: i64) -> String {
    format!("{{\"wire\":{wire},\"method\":\"unitChanged\",\"id\":")
}

/// A frame of exactly `bytes` bytes: a valid `networkLog` message padded with `x` when `bytes`
/// leaves room for it (so only a size limit can reject it), otherwise `bytes` times `x`.
pub fn oversized(wire: i64, bytes: usize) -> String {
    let head = format!("{{\"wire\":{wire},\"method\":\"networkLog\",\"message\":\"");
    let tail = "\"}";
    if bytes < head.len() + tail.len() {
        return "x".repeat(bytes);
    }
    let mut out = String::with_capacity(bytes);
    out.push_str(&head);
    out.extend(std::iter::repeat_n('x', bytes - head.len() - tail.len()));
    out.push_str(tail);
    out
}

/// Reads an integer the way real clients send them: an int or an integral float (`1.0`).
/// Strings and fractions are `invalidValueType`; a missing field is `invalidData`.
pub fn int(msg: &Map<String, Value>, field: &str) -> Result<i64, ControlError> {
    match msg.get(field) {
        None | Some(Value::Null) => Err(ControlError::InvalidData(format!("{field} missing"))),
        Some(v) => int_value(v, field),
    }
}

fn int_value(v: &Value, field: &str) -> Result<i64, ControlError> {
    let wrong = || ControlError::InvalidValueType(format!("{field} must be an integer"));
    let n = v.as_number().ok_or_else(wrong)?;
    if let Some(i) = n.as_i64() {
        return Ok(i);
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(f as i64),
        _ => Err(wrong()),
    }
}

/// Reads a level (a number; the world checks its range).
fn level(msg: &Map<String, Value>) -> Result<f64, ControlError> {
    match msg.get("level") {
        Some(Value::Number(n)) => {
            n.as_f64().ok_or_else(|| ControlError::InvalidValueType("level must be a number".into()))
        }
        Some(Value::Null) | None => match msg.get("targetControls") {
            // Some clients switch scenes and groups with `targetControls` (`OnOff` or `Dimmer`)
            // instead of `level`.
            Some(Value::Object(t)) => {
                let (name, value) = t
                    .iter()
                    .find(|(k, _)| matches!(k.as_str(), "OnOff" | "Dimmer"))
                    .ok_or_else(|| ControlError::InvalidData("level missing".into()))?;
                let v = value
                    .get("value")
                    .ok_or_else(|| ControlError::InvalidData(format!("{name}.value missing")))?
                    .as_f64()
                    .ok_or_else(|| ControlError::InvalidValueType(format!("{name}.value must be a number")))?;
                Ok(if name == "OnOff" { if v > 0.5 { 1.0 } else { 0.0 } } else { v })
            }
            _ => Err(ControlError::InvalidData("level missing".into())),
        },
        Some(_) => Err(ControlError::InvalidValueType("level must be a number".into())),
    }
}

fn targets(msg: &Map<String, Value>) -> Result<&Value, ControlError> {
    msg.get("targetControls").ok_or_else(|| ControlError::InvalidData("targetControls missing".into()))
}

/// Whether a method is one of the control messages.
pub fn is_control(method: &str) -> bool {
    matches!(method, "controlUnit" | "controlUnits" | "controlScene" | "controlGroup" | "controlNetwork")
}

/// Applies a control message to a network of the world. Nothing changes when it is refused.
pub fn apply_control(
    world: &mut World,
    network: &str,
    method: &str,
    msg: &Map<String, Value>,
) -> Result<(), ControlError> {
    match method {
        "controlUnit" => {
            let id = int(msg, "id")?;
            world.control_unit(network, id, targets(msg)?)
        }
        "controlUnits" => {
            let ids = match msg.get("ids") {
                Some(Value::Array(ids)) => ids.iter().map(|v| int_value(v, "ids")).collect::<Result<Vec<i64>, _>>()?,
                Some(_) => return Err(ControlError::InvalidData("ids must be a list".into())),
                None => return Err(ControlError::InvalidData("ids missing".into())),
            };
            world.control_units(network, &ids, targets(msg)?)
        }
        "controlScene" => {
            let id = int(msg, "id")?;
            world.control_scene(network, id, level(msg)?)
        }
        "controlGroup" => {
            let id = int(msg, "id")?;
            world.control_group(network, id, level(msg)?)
        }
        "controlNetwork" => world.control_network(network, level(msg)?),
        other => Err(ControlError::InvalidData(format!("unknown method {other}"))),
    }
}

/// The `wireStatus` of a refused control.
pub fn refusal(err: &ControlError) -> &'static str {
    match err {
        ControlError::InvalidValueType(_) => INVALID_VALUE_TYPE,
        ControlError::InvalidData(_) => INVALID_DATA,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splicing_keeps_the_body() {
        assert_eq!(unit_changed(3, "{\"id\":1.0}"), "{\"wire\":3,\"method\":\"unitChanged\",\"id\":1.0}");
        assert_eq!(unit_changed(1, "{}"), "{\"wire\":1,\"method\":\"unitChanged\"}");
        let v: Value = serde_json::from_str(&event(2, &WorldEvent::NetworkUpdated)).unwrap();
        assert_eq!(v, json!({"wire": 2, "method": "networkUpdated"}));
    }

    #[test]
    fn ints_accept_integral_floats_only() {
        let m = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(int(&m(json!({"id": 4})), "id"), Ok(4));
        assert_eq!(int(&m(json!({"id": 4.0})), "id"), Ok(4));
        assert!(matches!(int(&m(json!({"id": 4.5})), "id"), Err(ControlError::InvalidValueType(_))));
        assert!(matches!(int(&m(json!({"id": "4"})), "id"), Err(ControlError::InvalidValueType(_))));
        assert!(matches!(int(&m(json!({})), "id"), Err(ControlError::InvalidData(_))));
    }

    #[test]
    fn fault_frames() {
        assert!(serde_json::from_str::<Value>(&malformed(1)).is_err());
        for n in [0, 5, 60, 1000] {
            assert_eq!(oversized(1, n).len(), n);
        }
        assert!(serde_json::from_str::<Value>(&oversized(1, 1000)).is_ok());
    }
}
