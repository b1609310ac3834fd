//! The REST interface of the simulated service (docs/simulator.md): session
//! creation, network reads, images, fixtures and datapoints, with the service's rules and
//! failures.
//!
//! Every request passes one gate, in this order:
//! 1. API key header: unknown or missing → 401 with the reason phrase `Api authorization failed.`;
//! 2. API not enabled for the key → 403;
//! 3. an injected failure ([`Shared::fail_next`]) → 500;
//! 4. the key's quotas ([`Auth::admit`](super::auth::Auth::admit)) → 429 with `Retry-After`;
//! 5. the route: unknown path → 404, known path with another method → 405;
//! 6. for reads other than fixtures, the session: missing, unknown, expired or for another
//!    network → 410 (an unknown network with a valid session → 404);
//! 7. the handler (unknown ids → 404, invalid parameters → 400, ...).
//!
//! Every request, whatever its status, is appended to the request log; session creations carry
//! the login e-mail. Every answer is JSON (`{"error": "..."}` for errors) except images, which
//! are PNG. Session ids and passwords are never logged.
//!
//! Routing is done here rather than by axum's router: the gate needs the shared state, which
//! [`router`] does not have when it is built (it is supplied later by `with_state`), and routing
//! after the key and quota checks is what gives 401/429 precedence over 404/405. The interface
//! is therefore the router's fallback; the WebSocket and admin routes merged beside it keep
//! their own paths.

mod reads;
mod sessions;

use super::Shared;
use super::auth::KeyError;
use super::log::RequestRecord;
use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Reason phrase of the 401 for an unknown API key (the real service's status text).
pub const KEY_REJECTED_REASON: &str = "Api authorization failed.";

/// Largest session-creation body read; longer ones are refused with 400.
const MAX_BODY: usize = 64 * 1024;

/// Routes of this interface: everything the other simulator routers do not claim.
pub fn router() -> Router<Arc<Shared>> {
    Router::new().fallback(entry)
}

/// Why a request was refused; each variant is one status of the spec's error table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Unknown or missing API key: 401 with reason phrase [`KEY_REJECTED_REASON`].
    #[error("Api authorization failed.")]
    KeyRejected,
    /// The API is not enabled for the key: 403.
    #[error("Api not enabled")]
    NotEnabled,
    /// An injected server failure: 500.
    #[error("Internal server error")]
    Injected,
    /// A quota of the key is exhausted: 429, with `Retry-After` when the simulator sends it.
    #[error("Quota limits exceeded")]
    Quota {
        /// When to try again.
        retry_after: Option<Duration>,
    },
    /// Unknown path, id, network or image: 404.
    #[error("{0}")]
    NotFound(String),
    /// Known path, other method: 405 with `Allow`.
    #[error("Method not allowed")]
    MethodNotAllowed {
        /// The one method the path accepts.
        allow: &'static str,
    },
    /// Invalid parameter or body, or a missing mandatory value: 400.
    #[error("{0}")]
    BadRequest(String),
    /// Wrong login credentials: 401 (with the ordinary reason phrase).
    #[error("User not found")]
    BadCredentials,
    /// Login locked after failed attempts: 403.
    #[error("Session creation attempted too soon after failed attempts")]
    Locked,
    /// Missing, unknown or expired session, or one for another network: 410.
    #[error("Invalid session")]
    InvalidSession,
    /// Datapoint interval too long: 416.
    #[error("Retrieval interval too long")]
    IntervalTooLong,
    /// A fault of the simulator itself: 500.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::KeyRejected | ApiError::BadCredentials => StatusCode::UNAUTHORIZED,
            ApiError::NotEnabled | ApiError::Locked => StatusCode::FORBIDDEN,
            ApiError::Injected | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Quota { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::InvalidSession => StatusCode::GONE,
            ApiError::IntervalTooLong => StatusCode::RANGE_NOT_SATISFIABLE,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(json!({"error": self.to_string()}))).into_response();
        match &self {
            ApiError::KeyRejected => {
                let reason = hyper::ext::ReasonPhrase::from_static(KEY_REJECTED_REASON.as_bytes());
                response.extensions_mut().insert(reason);
            }
            ApiError::Quota { retry_after: Some(retry_after) } => {
                let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
            }
            ApiError::MethodNotAllowed { allow } => {
                response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            _ => {}
        }
        response
    }
}

/// Login e-mail of a session creation, carried from the handler to the request log in the
/// response's extensions.
#[derive(Debug, Clone)]
struct LoginEmail(String);

/// One endpoint of the spec, with its path parameters (still text: ids are checked by the
/// handlers, so a malformed id is a 404 like an unknown one).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    UserSession,
    NetworkSessions,
    SessionSet,
    NetworkSession(String),
    Network(String),
    Units(String),
    UnitState(String, String),
    UnitIcon(String, String),
    NetworkState(String),
    Groups(String),
    Scenes(String),
    Gallery(String),
    Image(String, String),
    Fixture(String),
    FixtureIcon(String),
    Datapoints(String),
}

impl Route {
    /// Finds the endpoint of a path (one trailing slash tolerated, segments percent-decoded),
    /// then checks the method (HEAD is served like GET).
    fn parse(method: &Method, path: &str) -> Result<Route, ApiError> {
        let not_found = || ApiError::NotFound(format!("No such resource: {path}"));
        let trimmed = path.strip_suffix('/').unwrap_or(path);
        let segments = trimmed
            .strip_prefix('/')
            .ok_or_else(not_found)?
            .split('/')
            .map(|s| super::datapoints::percent_decode(s).ok().filter(|s| !s.is_empty()))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(not_found)?;
        let s: Vec<&str> = segments.iter().map(String::as_str).collect();
        let own = |x: &str| x.to_string();
        let (allowed, route) = match s.as_slice() {
            ["v1", "users", "session"] => (Method::POST, Route::UserSession),
            ["v1", "networks", "session"] => (Method::POST, Route::NetworkSessions),
            ["v1", "networks", "set", "session"] => (Method::POST, Route::SessionSet),
            ["v1", "networks", n, "session"] => (Method::POST, Route::NetworkSession(own(n))),
            ["v1", "networks", n] => (Method::GET, Route::Network(own(n))),
            ["v1", "networks", n, "units"] => (Method::GET, Route::Units(own(n))),
            ["v1", "networks", n, "units", u, "state"] => (Method::GET, Route::UnitState(own(n), own(u))),
            ["v1", "networks", n, "units", u, "icon"] => (Method::GET, Route::UnitIcon(own(n), own(u))),
            ["v1", "networks", n, "state"] => (Method::GET, Route::NetworkState(own(n))),
            ["v1", "networks", n, "groups"] => (Method::GET, Route::Groups(own(n))),
            ["v1", "networks", n, "scenes"] => (Method::GET, Route::Scenes(own(n))),
            ["v1", "networks", n, "gallery"] => (Method::GET, Route::Gallery(own(n))),
            ["v1", "networks", n, "images", i] => (Method::GET, Route::Image(own(n), own(i))),
            ["v1", "fixtures", f] => (Method::GET, Route::Fixture(own(f))),
            ["v1", "fixtures", f, "icon"] => (Method::GET, Route::FixtureIcon(own(f))),
            ["datapoints", "networks", n, "datapoints"] => (Method::GET, Route::Datapoints(own(n))),
            _ => return Err(not_found()),
        };
        if method == allowed || (allowed == Method::GET && method == Method::HEAD) {
            Ok(route)
        } else {
            Err(ApiError::MethodNotAllowed { allow: if allowed == Method::GET { "GET, HEAD" } else { "POST" } })
        }
    }
}

/// Serves one request and logs it.
async fn entry(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let at = shared.started.elapsed();
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let mut response = serve(&shared, request).await.unwrap_or_else(IntoResponse::into_response);
    let login_email = response.extensions_mut().remove::<LoginEmail>().map(|e| e.0);
    let status = response.status().as_u16();
    tracing::debug!(%method, %path, status, "REST request");
    shared.log.request(RequestRecord { at, method, path, status, login_email });
    response
}

/// The gate and the dispatch. The quota guard lives until the response is produced, so a
/// request counts as concurrent for its whole duration (body reading included).
async fn serve(shared: &Arc<Shared>, request: Request) -> Result<Response, ApiError> {
    let now = Instant::now();
    let _in_flight = {
        let mut auth = shared.auth();
        let key = header_str(request.headers(), &shared.config.key_header);
        match auth.check_key(key) {
            Err(KeyError::Rejected) => return Err(ApiError::KeyRejected),
            Err(KeyError::NotEnabled) => return Err(ApiError::NotEnabled),
            Ok(_) => {}
        }
        if shared.fail_next.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            return Err(ApiError::Injected);
        }
        let key = key.unwrap_or_default();
        match auth.admit(key, now) {
            Some(guard) => guard,
            None => {
                let retry_after = shared.config.quota_retry_after.then(|| auth.retry_after(key, now));
                return Err(ApiError::Quota { retry_after });
            }
        }
    };
    let route = Route::parse(request.method(), request.uri().path())?;
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let login = |kind| async move {
        let body = axum::body::to_bytes(body, MAX_BODY).await;
        Ok(sessions::create(shared, kind, body.ok().as_deref()))
    };
    match route {
        Route::UserSession => login(sessions::Kind::User).await,
        Route::NetworkSessions => login(sessions::Kind::AllNetworks).await,
        Route::SessionSet => login(sessions::Kind::Set).await,
        Route::NetworkSession(n) => login(sessions::Kind::One(n)).await,
        Route::Network(n) => reads::network(shared, headers, &n, false),
        Route::NetworkState(n) => reads::network(shared, headers, &n, true),
        Route::Units(n) => reads::units(shared, headers, &n),
        Route::UnitState(n, u) => reads::unit_state(shared, headers, &n, &u),
        Route::UnitIcon(n, u) => off_thread(shared, headers, move |s, h| reads::unit_icon(s, h, &n, &u)).await,
        Route::Groups(n) => reads::groups(shared, headers, &n),
        Route::Scenes(n) => reads::scenes(shared, headers, &n),
        Route::Gallery(n) => reads::gallery(shared, headers, &n),
        Route::Image(n, i) => off_thread(shared, headers, move |s, h| reads::image(s, h, &n, &i)).await,
        Route::Fixture(f) => reads::fixture(shared, &f),
        Route::FixtureIcon(f) => off_thread(shared, headers, move |s, _| reads::fixture_icon(s, &f)).await,
        Route::Datapoints(n) => {
            let query = parts.uri.query().map(str::to_owned);
            off_thread(shared, headers, move |s, h| reads::datapoints(s, h, &n, query.as_deref())).await
        }
    }
}

/// Runs a read that is CPU work (PNG encoding; datapoint generation, whose first energy reading
/// of a unit sums every slot of the retention) on the blocking pool: on the server's own thread
/// it would hold back every wire's events for as long as it runs.
async fn off_thread(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    read: impl FnOnce(&Shared, &HeaderMap) -> Result<Response, ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    let (shared, headers) = (Arc::clone(shared), headers.clone());
    tokio::task::spawn_blocking(move || read(&shared, &headers))
        .await
        .unwrap_or_else(|e| Err(ApiError::Internal(format!("the read failed: {e}"))))
}

/// A header's value as text (`None` when absent or not visible ASCII).
fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The session rule of reads: a live session that covers `network`. An unknown network is 404
/// once the session itself is known to be valid.
fn authorize(shared: &Shared, headers: &HeaderMap, network: &str) -> Result<(), ApiError> {
    let session = header_str(headers, &shared.config.session_header);
    let now = Instant::now();
    shared.auth().check_session(session, None, now).map_err(|_| ApiError::InvalidSession)?;
    if !shared.world().networks.contains_key(network) {
        return Err(ApiError::NotFound(format!("Network {network} not found")));
    }
    shared.auth().check_session(session, Some(network), now).map_err(|_| ApiError::InvalidSession)
}

/// A JSON answer.
fn json_response(value: serde_json::Value) -> Response {
    Json(value).into_response()
}

/// A PNG answer.
fn png_response(bytes: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("image/png"))], bytes).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_methods() {
        let get = |p: &str| Route::parse(&Method::GET, p);
        assert_eq!(get("/v1/networks/abc"), Ok(Route::Network("abc".into())));
        assert_eq!(get("/v1/networks/abc/"), Ok(Route::Network("abc".into())));
        assert_eq!(get("/v1/networks/abc/units/3/state"), Ok(Route::UnitState("abc".into(), "3".into())));
        assert_eq!(get("/datapoints/networks/abc/datapoints"), Ok(Route::Datapoints("abc".into())));
        assert_eq!(get("/v1/networks/a%62c"), Ok(Route::Network("abc".into())));
        assert_eq!(Route::parse(&Method::POST, "/v1/users/session/"), Ok(Route::UserSession));
        assert_eq!(Route::parse(&Method::POST, "/v1/networks/set/session"), Ok(Route::SessionSet));
        assert_eq!(Route::parse(&Method::POST, "/v1/networks/x/session"), Ok(Route::NetworkSession("x".into())));
        assert!(matches!(get("/v1/networks/session"), Err(ApiError::MethodNotAllowed { allow: "POST" })));
        assert!(matches!(Route::parse(&Method::DELETE, "/v1/networks/x"), Err(ApiError::MethodNotAllowed { .. })));
        assert!(matches!(get("/v1/networks//units"), Err(ApiError::NotFound(_))));
        assert!(matches!(get("/v1/networks/x/lights"), Err(ApiError::NotFound(_))));
        assert!(matches!(get("/v2/networks/x"), Err(ApiError::NotFound(_))));
        assert!(matches!(get("/"), Err(ApiError::NotFound(_))));
        assert_eq!(Route::parse(&Method::HEAD, "/v1/fixtures/1"), Ok(Route::Fixture("1".into())));
    }
}
