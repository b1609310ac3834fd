//! Session manager tests against a tiny in-process HTTP server that plays the session endpoints.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::*;
use crate::cloud::backoff::BackoffPolicy;
use crate::cloud::quota::{QuotaConfig, QuotaGuard};
use crate::cloud::rest::RestConfig;

/// What the mock server does and saw.
#[derive(Default)]
struct Mock {
    /// Statuses to answer with, in order; 200 once empty.
    plan: VecDeque<u16>,
    /// (path, body) of every request.
    calls: Vec<(String, Value)>,
    /// Session ids handed out so far.
    issued: u64,
    /// Network ids the credentials do not open.
    forbidden: Vec<String>,
    /// Delay before answering.
    delay: Duration,
}

type Shared = Arc<Mutex<Mock>>;

async fn handle(State(mock): State<Shared>, uri: Uri, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri.path().to_owned();
    let (status, delay) = {
        let mut m = mock.lock().unwrap();
        m.calls.push((path.clone(), body.clone()));
        (m.plan.pop_front().unwrap_or(200), m.delay)
    };
    tokio::time::sleep(delay).await;
    if status != 200 {
        let msg = if status == 401 && body["password"] == "bad-key" { "Api authorization failed." } else { "nope" };
        return (StatusCode::from_u16(status).unwrap(), axum::Json(json!({ "error": msg }))).into_response();
    }
    let mut m = mock.lock().unwrap();
    let forbidden = m.forbidden.clone();
    let mut issued = m.issued;
    let mut entry = |id: &str| {
        issued += 1;
        (
            id.to_owned(),
            json!({"id": id, "name": format!("Net {id}"), "type": "OPEN", "sessionId": format!("sid-{issued}__")}),
        )
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let out: serde_json::Map<String, Value> = match parts.as_slice() {
        ["v1", "networks", "session"] => [entry("n1"), entry("n2")].into_iter().collect(),
        ["v1", "networks", "set", "session"] => {
            let ids: Vec<String> = serde_json::from_value(body["networks"].clone()).unwrap_or_default();
            ids.iter().filter(|id| !forbidden.contains(id)).map(|id| entry(id)).collect()
        }
        ["v1", "networks", id, "session"] => [entry(id)].into_iter().collect(),
        ["v1", "users", "session"] => {
            m.issued += 1;
            return axum::Json(json!({"sessionId": format!("user-{}__", m.issued), "sites": {}, "networks": {}}))
                .into_response();
        }
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    m.issued = issued;
    axum::Json(Value::Object(out)).into_response()
}

async fn server(mock: Shared) -> String {
    let app = Router::new().fallback(handle).with_state(mock);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    format!("http://{addr}")
}

fn fast_policy() -> LoginPolicy {
    LoginPolicy {
        failure_window: Duration::from_millis(400),
        max_failures: 2,
        lockout_wait: Duration::from_millis(150),
        locked_attempts: 2,
        not_enabled_backoff: Duration::from_millis(50),
        not_enabled_max: Duration::from_millis(200),
        rejected_max: Duration::from_millis(300),
        transient: BackoffPolicy {
            min_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            factor: 2.0,
            max_retries: Some(3),
            max_retry_after: Duration::from_millis(50),
        },
    }
}

async fn manager(mock: &Shared, ids: &[&str], password: &str) -> SessionManager {
    let base = server(mock.clone()).await;
    let quota = Arc::new(QuotaGuard::new(&QuotaConfig::default()));
    let rest = RestClient::new(RestConfig::new(base.parse().unwrap(), Secret::new("demo-key")), quota).unwrap();
    let ids = ids.iter().map(|s| s.to_string()).collect();
    SessionManager::new(rest, Credentials::new("demo@example.com", password), ids, fast_policy())
}

fn paths(mock: &Shared) -> Vec<String> {
    mock.lock().unwrap().calls.iter().map(|(p, _)| p.clone()).collect()
}

#[tokio::test]
async fn one_id_uses_the_per_network_endpoint() {
    let mock = Shared::default();
    let m = manager(&mock, &["n7"], "demo").await;
    let opened = m.open().await.unwrap();
    assert_eq!(paths(&mock), ["/v1/networks/n7/session"]);
    assert_eq!(opened.sessions.len(), 1);
    assert!(opened.inaccessible.is_empty());
    let s = m.current("n7").unwrap();
    assert_eq!((s.generation, s.session_id.expose(), s.name.as_str()), (1, "sid-1__", "Net n7"));
    assert_eq!(mock.lock().unwrap().calls[0].1, json!({"email": "demo@example.com", "password": "demo"}));
    assert!(!format!("{m:?}").contains("sid-1") && !format!("{m:?}").contains("\"demo\""));
}

#[tokio::test]
async fn no_ids_opens_every_network() {
    let mock = Shared::default();
    let m = manager(&mock, &[], "demo").await;
    let opened = m.open().await.unwrap();
    assert_eq!(paths(&mock), ["/v1/networks/session"]);
    assert_eq!(opened.sessions.iter().map(|s| s.network_id.as_str()).collect::<Vec<_>>(), ["n1", "n2"]);
    assert_eq!(m.all().len(), 2);
}

#[tokio::test]
async fn many_ids_use_session_sets_of_at_most_100() {
    let mock = Shared::default();
    mock.lock().unwrap().forbidden = vec!["n042".into()];
    let ids: Vec<String> = (0..250).map(|i| format!("n{i:03}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let m = manager(&mock, &refs, "demo").await;
    let opened = m.open().await.unwrap();
    let calls = mock.lock().unwrap().calls.clone();
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|(p, _)| p == "/v1/networks/set/session"));
    let sizes: Vec<usize> = calls.iter().map(|(_, b)| b["networks"].as_array().unwrap().len()).collect();
    assert_eq!(sizes, [100, 100, 50]);
    assert_eq!(opened.sessions.len(), 249);
    assert_eq!(opened.inaccessible, ["n042"]);
}

#[tokio::test]
async fn concurrent_renewals_coalesce_into_one_login() {
    let mock = Shared::default();
    let m = Arc::new(manager(&mock, &["n1"], "demo").await);
    let first = m.open().await.unwrap().sessions.remove(0);
    mock.lock().unwrap().delay = Duration::from_millis(30);
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let (m, seen) = (m.clone(), first.generation);
            tokio::spawn(async move { m.renew("n1", seen).await })
        })
        .collect();
    let mut renewed = Vec::new();
    for t in tasks {
        renewed.push(t.await.unwrap().unwrap());
    }
    assert_eq!(paths(&mock).len(), 2, "open + exactly one renewal");
    assert!(renewed.iter().all(|s| s.generation == 2 && s.session_id.expose() == "sid-2__"));
    // A caller that already holds generation 2 gets a real renewal.
    assert_eq!(m.renew("n1", 2).await.unwrap().generation, 3);
    assert_eq!(paths(&mock).len(), 3);
}

#[tokio::test]
async fn a_401_on_login_is_named_and_tried_again_only_after_the_lock_window() {
    let mock = Shared::default();
    mock.lock().unwrap().plan = VecDeque::from([401, 401]);
    let m = manager(&mock, &["n1"], "demo").await;
    let err = m.open().await.unwrap_err();
    assert_eq!(err, CloudError::UserNotFound { email: "demo@example.com".into() });
    assert_eq!(err.to_string(), "user not found / wrong password for demo@example.com");
    assert_eq!(paths(&mock).len(), 1);
    // The next attempt waits the lock window (150 ms here), the one after twice that.
    let start = std::time::Instant::now();
    assert_eq!(m.renew("n1", 0).await.unwrap_err(), err);
    let first = start.elapsed();
    assert!(m.open().await.is_ok(), "credentials fixed at the service are taken");
    let second = start.elapsed() - first;
    assert!(first >= Duration::from_millis(150), "{first:?}");
    assert!(second >= Duration::from_millis(300), "{second:?}");
    assert_eq!(paths(&mock).len(), 3);
}

#[tokio::test]
async fn a_rejected_api_key_is_told_apart() {
    let mock = Shared::default();
    mock.lock().unwrap().plan = VecDeque::from([401]);
    let m = manager(&mock, &["n1"], "bad-key").await;
    let err = m.open().await.unwrap_err();
    assert_eq!(err, CloudError::ApiKeyRejected);
    assert_eq!(err.to_string(), "API key rejected (Api authorization failed.)");
}

#[tokio::test]
async fn a_403_waits_out_the_lock_then_succeeds() {
    let mock = Shared::default();
    mock.lock().unwrap().plan = VecDeque::from([403]);
    let m = manager(&mock, &["n1"], "demo").await;
    let start = std::time::Instant::now();
    assert!(m.open().await.is_ok());
    assert!(start.elapsed() >= Duration::from_millis(150), "{:?}", start.elapsed());
    assert_eq!(paths(&mock).len(), 2);
}

#[tokio::test]
async fn a_persisting_403_is_reported_as_api_not_enabled() {
    let mock = Shared::default();
    mock.lock().unwrap().plan = VecDeque::from([403, 403]);
    let m = manager(&mock, &["n1"], "demo").await;
    assert_eq!(m.open().await.unwrap_err(), CloudError::ApiNotEnabled);
    assert_eq!(paths(&mock).len(), 2);
    // The next call waits the long backoff, then works.
    assert!(m.open().await.is_ok());
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    let mock = Shared::default();
    mock.lock().unwrap().plan = VecDeque::from([503, 500, 429]);
    let m = manager(&mock, &["n1"], "demo").await;
    assert!(m.open().await.is_ok());
    assert_eq!(paths(&mock).len(), 4);

    mock.lock().unwrap().plan = VecDeque::from([503, 503, 503, 503, 503]);
    let err = m.renew("n1", 1).await.unwrap_err();
    assert!(matches!(err, CloudError::Server { status: 503, .. }), "{err}");
}

#[tokio::test]
async fn failed_logins_stay_under_the_lockout() {
    // Every login is locked out: the guard must keep attempts at <= 2 per window.
    let mock = Shared::default();
    mock.lock().unwrap().plan = VecDeque::from(vec![403; 50]);
    let m = manager(&mock, &["n1"], "demo").await;
    let _ = tokio::time::timeout(Duration::from_millis(1500), async {
        loop {
            let _ = m.open().await;
        }
    })
    .await;
    // With a 400 ms window and 2 failures allowed, 1.5 s allows at most 2 * ceil(1.5 / 0.4) = 8.
    let n = paths(&mock).len();
    assert!((2..=8).contains(&n), "{n} attempts");
}

#[tokio::test]
async fn user_sessions_open_and_renew() {
    let mock = Shared::default();
    let base = server(mock.clone()).await;
    let quota = Arc::new(QuotaGuard::new(&QuotaConfig::default()));
    let rest = RestClient::new(RestConfig::new(base.parse().unwrap(), Secret::new("demo-key")), quota).unwrap();
    let u = UserSessionManager::new(rest, Credentials::new("owner@example.com", "demo"), fast_policy());
    let first = u.open().await.unwrap();
    assert_eq!((first.generation, first.session.session_id.expose()), (1, "user-1__"));
    assert_eq!(u.open().await.unwrap().generation, 1);
    assert_eq!(u.renew(1).await.unwrap().generation, 2);
    assert_eq!(u.renew(1).await.unwrap().generation, 2, "coalesced");
    assert_eq!(paths(&mock), ["/v1/users/session", "/v1/users/session"]);
}
