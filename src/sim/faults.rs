//! Fault injection: the failures of the real service on demand, in-process through methods on
//! [`Simulator`] and from outside through admin routes under `/_sim/` (no API key needed; bodies
//! are JSON; answers are `{"ok":true,...}`, or `{"error":...}` with 404 for an unknown network,
//! unit or key and 400 for a refused change).
//!
//! | Fault | In-process | Admin route | Effect |
//! |---|---|---|---|
//! | Drop every socket | [`Simulator::drop_sockets`] | `POST /_sim/sockets/drop` | Every WebSocket connection is cut without a close frame. |
//! | Drop a network's wires | [`Simulator::drop_wire`] | `POST /_sim/networks/{id}/wire/drop` | The network's wires end silently: no more events, and messages on them get `invalidData`. |
//! | Expire sessions | [`Simulator::expire_sessions`] | `POST /_sim/sessions/expire` | Every session becomes invalid: REST answers 410, `open` answers `invalidSession` (open wires keep working). |
//! | Exhaust a key's quota | [`Simulator::exhaust_quota`] | `POST /_sim/keys/{key}/exhaust` `{"seconds":30}` | Every request of the key, and every WebSocket upgrade, is answered 429 for that long. |
//! | Gateway offline/online | [`Simulator::set_gateway`] | `POST /_sim/networks/{id}/gateway` `{"online":false}` | `peerChanged`; units report offline; commands are ignored. Coming back resends every unit. |
//! | Add a unit | [`Simulator::add_unit`] | `POST /_sim/networks/{id}/units` (a unit as in the site file) | Revision bump, `networkUpdated`, `unitChanged` of the new unit. |
//! | Remove a unit | [`Simulator::remove_unit`] | `DELETE /_sim/networks/{id}/units/{unit}` | Revision bump, `networkUpdated`; the unit leaves its scenes and groups. |
//! | Rename | [`Simulator::rename`] | `POST /_sim/networks/{id}/{kind}/{item}/rename` `{"name":"..."}` (`kind`: `units`, `scenes`, `groups`) | Revision bump, `networkUpdated` (and `unitChanged` for a unit). |
//! | Malformed frame | [`Simulator::send_malformed`] | `POST /_sim/networks/{id}/malformed` | Each wire of the network gets `{"wire":N,"method":"unitChanged","id":` (truncated JSON). |
//! | Oversized frame | [`Simulator::send_oversized`] | `POST /_sim/networks/{id}/oversized` `{"bytes":N}` | Each wire of the network gets one valid `networkLog` frame of exactly N bytes. |
//! | Unit state | [`Simulator::set_unit_state`] | `POST /_sim/networks/{id}/units/{unit}/state` `{"online":..,"on":..,"controls":[..]}` | Overwrites the unit's state (controls merged by `type`); `unitChanged` when it changed. |
//! | Failing requests | [`Simulator::fail_next_requests`] | `POST /_sim/fail` `{"count":N}` | The next N REST requests are answered 500. |
//! | Request log | [`Log::requests`](super::log::Log::requests) | `GET /_sim/log/requests` | Every REST request with its status. |
//! | WebSocket log | [`Log::ws_records`](super::log::Log::ws_records) | `GET /_sim/log/ws` | Sockets, opens, client messages and their results. |
//! | Clear the logs | [`Log::clear`](super::log::Log::clear) | `POST /_sim/log/clear` | Forgets both logs. |
//! | Truth | [`Simulator::network_state`] | `GET /_sim/truth/{network}` | The network's current state in the shape of `GET /v1/networks/{id}/state`. |

use super::site::Unit;
use super::world::ControlError;
use super::{Shared, Simulator, WireFault, render};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Simulator {
    /// Cuts every WebSocket connection without a close frame. Returns the connections reached.
    pub fn drop_sockets(&self) -> usize {
        fault(&self.shared, WireFault::DropSockets)
    }

    /// Ends the wires of a network silently. Returns the connections reached.
    pub fn drop_wire(&self, network: &str) -> usize {
        fault(&self.shared, WireFault::DropWire { network: network.to_string() })
    }

    /// Makes every session invalid (REST 410, `open` → `invalidSession`).
    pub fn expire_sessions(&self) {
        self.shared.auth().expire_sessions();
    }

    /// Answers every request and WebSocket upgrade of `key` with 429 for `duration`.
    pub fn exhaust_quota(&self, key: &str, duration: Duration) {
        self.shared.auth().exhaust_quota(key, Instant::now() + duration);
    }

    /// Takes a network's gateway offline or brings it back (`peerChanged`).
    pub fn set_gateway(&self, network: &str, online: bool) -> Result<(), ControlError> {
        self.shared.world().set_gateway(network, online)
    }

    /// Adds a unit to a network (`networkUpdated`).
    pub fn add_unit(&self, network: &str, unit: Unit) -> Result<(), ControlError> {
        self.shared.world().add_unit(network, unit)
    }

    /// Removes a unit from a network (`networkUpdated`).
    pub fn remove_unit(&self, network: &str, unit: i64) -> Result<(), ControlError> {
        self.shared.world().remove_unit(network, unit)
    }

    /// Replaces a network's gallery (`networkUpdated`).
    pub fn set_photos(&self, network: &str, photos: Vec<crate::sim::site::Photo>) -> Result<(), ControlError> {
        self.shared.world().set_photos(network, photos)
    }

    /// Renames a unit, scene or group (`kind`: `unit`, `scene` or `group`; plurals accepted).
    pub fn rename(&self, network: &str, kind: &str, id: i64, name: &str) -> Result<(), ControlError> {
        self.shared.world().rename(network, singular(kind), id, name)
    }

    /// Sends a truncated, unparseable frame on every wire of a network. Returns the connections
    /// reached.
    pub fn send_malformed(&self, network: &str) -> usize {
        fault(&self.shared, WireFault::Malformed { network: network.to_string() })
    }

    /// Sends a frame of exactly `bytes` bytes on every wire of a network. Returns the connections
    /// reached.
    pub fn send_oversized(&self, network: &str, bytes: usize) -> usize {
        fault(&self.shared, WireFault::Oversized { network: network.to_string(), bytes })
    }

    /// Overwrites a unit's state from `{"online":bool,"on":bool,"controls":[...]}` (every field
    /// optional; controls are merged by `type`).
    pub fn set_unit_state(&self, network: &str, unit: i64, state: &Value) -> Result<(), ControlError> {
        apply_unit_state(&self.shared, network, unit, state)
    }

    /// Answers the next `count` REST requests with 500.
    pub fn fail_next_requests(&self, count: u32) {
        self.shared.fail_next.store(count, Ordering::SeqCst);
    }
}

/// Delivers a fault to every connection; returns how many there are.
fn fault(shared: &Shared, fault: WireFault) -> usize {
    // No receiver means no connection is open: nothing to act on.
    shared.wire_faults.send(fault).unwrap_or(0)
}

fn singular(kind: &str) -> &str {
    kind.strip_suffix('s').unwrap_or(kind)
}

fn apply_unit_state(shared: &Shared, network: &str, unit: i64, state: &Value) -> Result<(), ControlError> {
    let state = state.as_object().ok_or_else(|| ControlError::InvalidData("state must be an object".into()))?;
    let flag = |field: &str| match state.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ControlError::InvalidValueType(format!("{field} must be a boolean"))),
    };
    let (online, on) = (flag("online")?, flag("on")?);
    let controls = match state.get("controls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(c)) => c.as_slice(),
        Some(_) => return Err(ControlError::InvalidValueType("controls must be a list".into())),
    };
    shared.world().set_unit_state(network, unit, online, on, controls)
}

/// Routes of this interface: the `/_sim/` admin routes.
pub fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_sim/sockets/drop", post(drop_sockets))
        .route("/_sim/sessions/expire", post(expire_sessions))
        .route("/_sim/keys/{key}/exhaust", post(exhaust))
        .route("/_sim/fail", post(fail))
        .route("/_sim/networks/{id}/wire/drop", post(drop_wire))
        .route("/_sim/networks/{id}/gateway", post(gateway))
        .route("/_sim/networks/{id}/units", post(add_unit))
        .route("/_sim/networks/{id}/units/{unit}", delete(remove_unit))
        .route("/_sim/networks/{id}/units/{unit}/state", post(unit_state))
        .route("/_sim/networks/{id}/{kind}/{item}/rename", post(rename))
        .route("/_sim/networks/{id}/malformed", post(malformed))
        .route("/_sim/networks/{id}/oversized", post(oversized))
        .route("/_sim/log/requests", get(log_requests))
        .route("/_sim/log/ws", get(log_ws))
        .route("/_sim/log/clear", post(log_clear))
        .route("/_sim/truth/{network}", get(truth))
}

/// An admin route's refusal.
#[derive(Debug, thiserror::Error)]
enum AdminError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let status = match self {
            AdminError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminError::BadRequest(_) => StatusCode::BAD_REQUEST,
        };
        (status, Json(json!({"error": self.to_string()}))).into_response()
    }
}

impl From<ControlError> for AdminError {
    fn from(e: ControlError) -> AdminError {
        AdminError::BadRequest(e.to_string())
    }
}

type Answer = Result<Json<Value>, AdminError>;

fn ok() -> Answer {
    Ok(Json(json!({"ok": true})))
}

/// Parses a JSON body; an empty body reads as `{}`.
fn body<T: for<'de> Deserialize<'de>>(bytes: &Bytes) -> Result<T, AdminError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { bytes };
    serde_json::from_slice(bytes).map_err(|e| AdminError::BadRequest(format!("invalid body: {e}")))
}

fn known_network(shared: &Shared, network: &str) -> Result<(), AdminError> {
    if shared.world().networks.contains_key(network) {
        Ok(())
    } else {
        Err(AdminError::NotFound(format!("unknown network {network}")))
    }
}

fn connections(n: usize) -> Answer {
    Ok(Json(json!({"ok": true, "connections": n})))
}

async fn drop_sockets(State(shared): State<Arc<Shared>>) -> Answer {
    connections(fault(&shared, WireFault::DropSockets))
}

async fn expire_sessions(State(shared): State<Arc<Shared>>) -> Answer {
    shared.auth().expire_sessions();
    ok()
}

#[derive(Deserialize)]
struct Seconds {
    seconds: f64,
}

async fn exhaust(State(shared): State<Arc<Shared>>, Path(key): Path<String>, bytes: Bytes) -> Answer {
    let Seconds { seconds } = body(&bytes)?;
    let duration = Duration::try_from_secs_f64(seconds)
        .map_err(|_| AdminError::BadRequest("seconds must be a non-negative number".into()))?;
    let mut auth = shared.auth();
    if matches!(auth.check_key(Some(&key)), Err(super::auth::KeyError::Rejected)) {
        return Err(AdminError::NotFound("unknown key".into()));
    }
    auth.exhaust_quota(&key, Instant::now() + duration);
    ok()
}

#[derive(Deserialize)]
struct Count {
    count: u32,
}

async fn fail(State(shared): State<Arc<Shared>>, bytes: Bytes) -> Answer {
    let Count { count } = body(&bytes)?;
    shared.fail_next.store(count, Ordering::SeqCst);
    ok()
}

async fn drop_wire(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    known_network(&shared, &id)?;
    connections(fault(&shared, WireFault::DropWire { network: id }))
}

#[derive(Deserialize)]
struct Online {
    online: bool,
}

async fn gateway(State(shared): State<Arc<Shared>>, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let Online { online } = body(&bytes)?;
    known_network(&shared, &id)?;
    shared.world().set_gateway(&id, online)?;
    ok()
}

async fn add_unit(State(shared): State<Arc<Shared>>, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let unit: Unit = body(&bytes)?;
    known_network(&shared, &id)?;
    shared.world().add_unit(&id, unit)?;
    ok()
}

async fn remove_unit(State(shared): State<Arc<Shared>>, Path((id, unit)): Path<(String, i64)>) -> Answer {
    known_network(&shared, &id)?;
    shared.world().remove_unit(&id, unit).map_err(|e| AdminError::NotFound(e.to_string()))?;
    ok()
}

async fn unit_state(State(shared): State<Arc<Shared>>, Path((id, unit)): Path<(String, i64)>, bytes: Bytes) -> Answer {
    let state: Value = body(&bytes)?;
    known_network(&shared, &id)?;
    if !shared.world().networks.get(&id).is_some_and(|n| n.units.contains_key(&unit)) {
        return Err(AdminError::NotFound(format!("unknown unit {unit}")));
    }
    apply_unit_state(&shared, &id, unit, &state)?;
    ok()
}

#[derive(Deserialize)]
struct Name {
    name: String,
}

async fn rename(
    State(shared): State<Arc<Shared>>,
    Path((id, kind, item)): Path<(String, String, i64)>,
    bytes: Bytes,
) -> Answer {
    let Name { name } = body(&bytes)?;
    known_network(&shared, &id)?;
    let kind = singular(&kind);
    if !matches!(kind, "unit" | "scene" | "group") {
        return Err(AdminError::NotFound(format!("cannot rename {kind}s")));
    }
    shared.world().rename(&id, kind, item, &name).map_err(|e| AdminError::NotFound(e.to_string()))?;
    ok()
}

async fn malformed(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    known_network(&shared, &id)?;
    connections(fault(&shared, WireFault::Malformed { network: id }))
}

#[derive(Deserialize)]
struct Size {
    bytes: usize,
}

async fn oversized(State(shared): State<Arc<Shared>>, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let Size { bytes } = body(&bytes)?;
    known_network(&shared, &id)?;
    connections(fault(&shared, WireFault::Oversized { network: id, bytes }))
}

async fn log_requests(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(serde_json::to_value(shared.log.requests()).unwrap_or(Value::Null))
}

async fn log_ws(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(serde_json::to_value(shared.log.ws_records()).unwrap_or(Value::Null))
}

async fn log_clear(State(shared): State<Arc<Shared>>) -> Answer {
    shared.log.clear();
    ok()
}

async fn truth(State(shared): State<Arc<Shared>>, Path(network): Path<String>) -> Answer {
    let world = shared.world();
    let net = world.networks.get(&network).ok_or_else(|| AdminError::NotFound(format!("unknown network {network}")))?;
    Ok(Json(render::network(net, true)))
}
