//! Session creation: the four endpoints and their response shapes.
//!
//! - `POST /v1/users/session` (site credentials): `{sessionId, sites: {<siteId>: {name, address,
//!   role, networks}}, networks: {<netId>: {id, address, name, type, grade, role}}}`.
//! - `POST /v1/networks/session` (network credentials): `{<netId>: {id, address, name, type,
//!   grade, sessionId}}` for every network the credentials open, one session per network.
//! - `POST /v1/networks/set/session`: the same shape, only for the listed networks (`networks`,
//!   at most 100 ids, else 400) that the credentials open.
//! - `POST /v1/networks/{id}/session`: the same shape with the one network (unknown → 404).
//!
//! Wrong credentials are 401 and count toward the lockout (403 for its duration). Every answer
//! carries the login e-mail (when the body has one) for the request log.

use super::{ApiError, LoginEmail, json_response};
use crate::sim::Shared;
use crate::sim::auth::LoginError;
use crate::sim::world::NetworkTruth;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::time::Instant;

/// Which session endpoint was called.
#[derive(Debug, Clone)]
pub(super) enum Kind {
    /// `POST /v1/users/session`.
    User,
    /// `POST /v1/networks/session`.
    AllNetworks,
    /// `POST /v1/networks/set/session`.
    Set,
    /// `POST /v1/networks/{id}/session`.
    One(String),
}

/// A checked request body.
struct Login {
    email: String,
    password: String,
    networks: Vec<String>,
}

/// Creates a session of `kind` from a request body (`None` = the body could not be read).
pub(super) fn create(shared: &Shared, kind: Kind, body: Option<&[u8]>) -> Response {
    let value: Option<Value> = body.and_then(|b| serde_json::from_slice(b).ok());
    let email = value.as_ref().and_then(|v| v.get("email")).and_then(Value::as_str).map(str::to_string);
    let mut response = match parse(value.as_ref(), &kind).and_then(|login| answer(shared, &kind, &login)) {
        Ok(v) => json_response(v),
        Err(e) => {
            tracing::debug!(error = %e, "session creation refused");
            e.into_response()
        }
    };
    if let Some(email) = email {
        response.extensions_mut().insert(LoginEmail(email));
    }
    response
}

fn parse(value: Option<&Value>, kind: &Kind) -> Result<Login, ApiError> {
    let bad = |what: &str| ApiError::BadRequest(format!("Invalid request body: {what}"));
    let obj = value.and_then(Value::as_object).ok_or_else(|| bad("expected a JSON object"))?;
    let text = |name: &str| {
        obj.get(name).and_then(Value::as_str).map(str::to_string).ok_or_else(|| bad(&format!("{name} missing")))
    };
    let networks = match kind {
        Kind::Set => {
            let list = obj.get("networks").and_then(Value::as_array).ok_or_else(|| bad("networks missing"))?;
            if list.len() > 100 {
                return Err(ApiError::BadRequest("At most 100 networks in a session set".into()));
            }
            list.iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("networks must be strings"))?
        }
        _ => Vec::new(),
    };
    Ok(Login { email: text("email")?, password: text("password")?, networks })
}

fn login_error(e: LoginError) -> ApiError {
    match e {
        LoginError::BadCredentials => ApiError::BadCredentials,
        LoginError::Locked => ApiError::Locked,
        LoginError::TooManyNetworks => ApiError::BadRequest("At most 100 networks in a session set".into()),
        LoginError::UnknownNetwork => ApiError::NotFound("Network not found".into()),
    }
}

/// Logs in and renders the answer.
fn answer(shared: &Shared, kind: &Kind, login: &Login) -> Result<Value, ApiError> {
    let now = Instant::now();
    let (email, password) = (login.email.as_str(), login.password.as_str());
    let sessions: Vec<(String, String)> = match kind {
        Kind::User => {
            let (session, user) = shared.auth().login_user(email, password, now).map_err(login_error)?;
            let world = shared.world();
            let networks: Map<String, Value> = user
                .networks
                .iter()
                .filter_map(|id| world.networks.get(id))
                .map(|n| (n.def.id.clone(), summary(n)))
                .collect();
            let site = json!({"name": user.site_name, "address": "", "role": "ADMIN", "networks": networks});
            return Ok(json!({"sessionId": session, "sites": {user.site_id: site}, "networks": networks}));
        }
        Kind::AllNetworks => shared.auth().login_networks(email, password, None, now).map_err(login_error)?,
        Kind::Set => shared.auth().login_networks(email, password, Some(&login.networks), now).map_err(login_error)?,
        Kind::One(network) => {
            let session = shared.auth().login_network(email, password, network, now).map_err(login_error)?;
            vec![(network.clone(), session)]
        }
    };
    let world = shared.world();
    let entries: Map<String, Value> = sessions
        .into_iter()
        .filter_map(|(id, session)| {
            let mut entry = summary(world.networks.get(&id)?);
            let obj = entry.as_object_mut()?;
            obj.remove("role");
            obj.insert("sessionId".into(), Value::String(session));
            Some((id, entry))
        })
        .collect();
    Ok(Value::Object(entries))
}

/// A network as listed in a user session.
fn summary(net: &NetworkTruth) -> Value {
    let d = &net.def;
    json!({"id": d.id, "address": d.address, "name": d.name, "type": d.kind, "grade": d.grade, "role": "ADMIN"})
}
