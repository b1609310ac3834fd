//! [`RestClient`]: one typed method per endpoint of the service, every status mapped to
//! [`CloudError`], every request through the per-key [`QuotaGuard`] and counted in
//! [`RequestStats`].
//!
//! Each method makes exactly one request; retrying (after 429/5xx/transport) and renewing sessions
//! (after 410) are decisions of the caller ([`crate::cloud::backoff::retry`],
//! [`crate::cloud::session::SessionManager`]). The API key and session ids travel only in headers
//! marked sensitive, and no error or log line carries them.

mod datapoints;
mod stats;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use url::Url;

pub use datapoints::{DataType, DatapointQuery, MAX_LIMIT as MAX_DATAPOINT_LIMIT};
pub use stats::{Endpoint, Outcome, RequestCount, RequestStats};

use super::CloudError;
use super::backoff::parse_retry_after;
use super::error::RequestKind;
use super::model::{
    Credentials, DatapointResult, Fixture, Group, Network, NetworkSessions, NetworkState, Photo, Scene, Secret, Unit,
    UnitState, UserSession,
};
use super::quota::QuotaGuard;

/// Default name of the API key header (the spec writes `X-Service-Key`).
pub const DEFAULT_KEY_HEADER: &str = "X-Casambi-Key";
/// Default name of the session header (the spec writes `X-Service-Session`).
pub const DEFAULT_SESSION_HEADER: &str = "X-Casambi-Session";
/// Most networks one `POST /v1/networks/set/session` may name.
pub const MAX_SESSION_SET: usize = 100;
/// Most bytes of an error body read for its message.
const MAX_ERROR_BODY: usize = 16 * 1024;
/// Idle connections kept for the next request. Each keeps the read buffer it grew while
/// reading a network's documents, so keeping every connection of a start-up's concurrent
/// requests (`cloud.max_concurrent_requests`) would hold all those buffers for nothing. After
/// the start-up, requests are a poll or a resync now and then, which two connections serve.
const IDLE_CONNECTIONS: usize = 2;
/// Most bytes of a successful response body. The largest real responses (the state of a big
/// network, a page of 100 000 datapoints) are a few MiB; a larger body is refused as a transport
/// error (retried with backoff) instead of being buffered whole.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// Settings of a [`RestClient`].
#[derive(Clone, Debug)]
pub struct RestConfig {
    /// REST base such as `https://door.casambi.com`; `/v1/...` and `/datapoints/...` are appended
    /// to its path.
    pub base_url: Url,
    /// The API key ([`Secret`]: never logged).
    pub api_key: Secret,
    /// Name of the API key header.
    pub key_header: String,
    /// Name of the session header.
    pub session_header: String,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
}

impl RestConfig {
    /// Settings with the default header names and timeouts.
    pub fn new(base_url: Url, api_key: Secret) -> Self {
        Self {
            base_url,
            api_key,
            key_header: DEFAULT_KEY_HEADER.into(),
            session_header: DEFAULT_SESSION_HEADER.into(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A PNG (or other) image returned by the image and icon endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// The `Content-Type` the server sent (`image/png`).
    pub content_type: Option<String>,
    /// The image bytes.
    pub bytes: Vec<u8>,
}

/// A successful response body.
struct Body {
    content_type: Option<String>,
    bytes: Vec<u8>,
}

/// Which credentials a request carries besides the API key.
#[derive(Clone, Copy)]
enum Auth<'a> {
    /// Only the key (session creation, fixtures).
    KeyOnly,
    /// The key and a session id.
    Session(&'a Secret),
}

/// The REST client for one API key. Cheap to clone (shared state behind an `Arc`).
#[derive(Clone, Debug)]
pub struct RestClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    base: Url,
    key_header: HeaderName,
    key_value: HeaderValue,
    session_header: HeaderName,
    quota: Arc<QuotaGuard>,
    stats: Arc<RequestStats>,
}

impl RestClient {
    /// Builds a client; fails on a base URL that cannot take a path, or header names or a key
    /// with characters HTTP does not allow.
    pub fn new(config: RestConfig, quota: Arc<QuotaGuard>) -> Result<Self, CloudError> {
        let mut base = config.base_url;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(CloudError::Config(format!("REST base URL must be http(s)://host[/path], got {base}")));
        }
        base.set_query(None);
        base.set_fragment(None);
        let header = |name: &str, what: &str| {
            HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| CloudError::Config(format!("{what} header name {name:?} is not a valid HTTP header name")))
        };
        let key_header = header(&config.key_header, "key")?;
        let session_header = header(&config.session_header, "session")?;
        let key_value = sensitive_header(&config.api_key, "the API key")?;
        // No redirects: one to another host would carry the key and session headers there (only
        // `Authorization` and cookies are dropped on the way), and the service's API has none.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(config.timeout)
            .connect_timeout(config.connect_timeout)
            .pool_max_idle_per_host(IDLE_CONNECTIONS)
            .user_agent(concat!("casambi2mqtt/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CloudError::Config(format!("HTTP client: {}", CloudError::transport(e))))?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base,
                key_header,
                key_value,
                session_header,
                quota,
                stats: Arc::new(RequestStats::default()),
            }),
        })
    }

    /// The request counters of this client (for the health module).
    pub fn stats(&self) -> Arc<RequestStats> {
        Arc::clone(&self.inner.stats)
    }

    /// The per-key guard this client uses.
    pub fn quota(&self) -> &Arc<QuotaGuard> {
        &self.inner.quota
    }

    // -- sessions --------------------------------------------------------------------------------

    /// `POST /v1/users/session`: a user (site) session for site credentials.
    pub async fn create_user_session(&self, creds: &Credentials) -> Result<UserSession, CloudError> {
        let url = self.url(&["v1", "users", "session"])?;
        self.login(Endpoint::UserSession, url, creds, &LoginBody::from(creds)).await
    }

    /// `POST /v1/networks/session`: sessions for every network the credentials open.
    pub async fn create_network_sessions(&self, creds: &Credentials) -> Result<NetworkSessions, CloudError> {
        let url = self.url(&["v1", "networks", "session"])?;
        self.login(Endpoint::NetworkSessionAll, url, creds, &LoginBody::from(creds)).await
    }

    /// `POST /v1/networks/set/session`: sessions for up to 100 named networks; only the
    /// accessible ones come back.
    pub async fn create_network_session_set(
        &self,
        creds: &Credentials,
        network_ids: &[String],
    ) -> Result<NetworkSessions, CloudError> {
        if network_ids.is_empty() || network_ids.len() > MAX_SESSION_SET {
            return Err(CloudError::InvalidRequest(format!(
                "a session set names 1..={MAX_SESSION_SET} networks, got {}",
                network_ids.len()
            )));
        }
        let url = self.url(&["v1", "networks", "set", "session"])?;
        let body = SetBody { email: &creds.email, password: &creds.password, networks: network_ids };
        self.login(Endpoint::NetworkSessionSet, url, creds, &body).await
    }

    /// `POST /v1/networks/{id}/session`: a session for one network (the fastest kind).
    pub async fn create_network_session(
        &self,
        creds: &Credentials,
        network_id: &str,
    ) -> Result<NetworkSessions, CloudError> {
        let url = self.url(&["v1", "networks", network_id, "session"])?;
        self.login(Endpoint::NetworkSession, url, creds, &LoginBody::from(creds)).await
    }

    // -- reads -----------------------------------------------------------------------------------

    /// `GET /v1/networks/{id}`: the network configuration.
    pub async fn network(&self, session: &Secret, network_id: &str) -> Result<Network, CloudError> {
        self.get_json(Endpoint::Network, &["v1", "networks", network_id], Auth::Session(session)).await
    }

    /// `GET /v1/networks/{id}/units`: units by id.
    pub async fn units(&self, session: &Secret, network_id: &str) -> Result<BTreeMap<String, Unit>, CloudError> {
        self.get_json(Endpoint::Units, &["v1", "networks", network_id, "units"], Auth::Session(session)).await
    }

    /// `GET /v1/networks/{networkId}/units/{unitId}/state`: one unit's state.
    pub async fn unit_state(&self, session: &Secret, network_id: &str, unit_id: u32) -> Result<UnitState, CloudError> {
        let unit = unit_id.to_string();
        let path = ["v1", "networks", network_id, "units", unit.as_str(), "state"];
        self.get_json(Endpoint::UnitState, &path, Auth::Session(session)).await
    }

    /// `GET /v1/networks/{networkId}/state`: the whole network with unit states.
    pub async fn network_state(&self, session: &Secret, network_id: &str) -> Result<NetworkState, CloudError> {
        self.get_json(Endpoint::NetworkState, &["v1", "networks", network_id, "state"], Auth::Session(session)).await
    }

    /// `GET /v1/networks/{id}/groups`: groups by id.
    pub async fn groups(&self, session: &Secret, network_id: &str) -> Result<BTreeMap<String, Group>, CloudError> {
        self.get_json(Endpoint::Groups, &["v1", "networks", network_id, "groups"], Auth::Session(session)).await
    }

    /// `GET /v1/networks/{id}/scenes`: scenes by key (the key need not equal the scene id).
    pub async fn scenes(&self, session: &Secret, network_id: &str) -> Result<BTreeMap<String, Scene>, CloudError> {
        self.get_json(Endpoint::Scenes, &["v1", "networks", network_id, "scenes"], Auth::Session(session)).await
    }

    /// `GET /v1/networks/{id}/gallery`: the network's photos.
    pub async fn gallery(&self, session: &Secret, network_id: &str) -> Result<Vec<Photo>, CloudError> {
        self.get_json(Endpoint::Gallery, &["v1", "networks", network_id, "gallery"], Auth::Session(session)).await
    }

    /// `GET /v1/networks/{networkId}/units/{unitId}/icon`: the unit image, or its fixture's icon.
    pub async fn unit_icon(&self, session: &Secret, network_id: &str, unit_id: u32) -> Result<Image, CloudError> {
        let unit = unit_id.to_string();
        let path = ["v1", "networks", network_id, "units", unit.as_str(), "icon"];
        self.get_image(Endpoint::UnitIcon, &path, Auth::Session(session)).await
    }

    /// `GET /v1/networks/{networkId}/images/{imageId}`: an image of the network.
    pub async fn image(&self, session: &Secret, network_id: &str, image_id: &str) -> Result<Image, CloudError> {
        let path = ["v1", "networks", network_id, "images", image_id];
        self.get_image(Endpoint::Image, &path, Auth::Session(session)).await
    }

    /// `GET /v1/fixtures/{id}`: fixture metadata (needs only the API key).
    pub async fn fixture(&self, fixture_id: u32) -> Result<Fixture, CloudError> {
        let id = fixture_id.to_string();
        self.get_json(Endpoint::Fixture, &["v1", "fixtures", id.as_str()], Auth::KeyOnly).await
    }

    /// `GET /v1/fixtures/{id}/icon`: the fixture's icon (needs only the API key).
    pub async fn fixture_icon(&self, fixture_id: u32) -> Result<Image, CloudError> {
        let id = fixture_id.to_string();
        self.get_image(Endpoint::FixtureIcon, &["v1", "fixtures", id.as_str(), "icon"], Auth::KeyOnly).await
    }

    /// `GET /datapoints/networks/{id}/datapoints`: logged values (the query is validated first).
    pub async fn datapoints(
        &self,
        session: &Secret,
        network_id: &str,
        query: &DatapointQuery,
    ) -> Result<DatapointResult, CloudError> {
        let mut url = self.url(&["datapoints", "networks", network_id, "datapoints"])?;
        query.apply(&mut url)?;
        let body = self
            .send(Endpoint::Datapoints, Method::GET, url, Auth::Session(session), None::<&()>, RequestKind::Read)
            .await?;
        decode(Endpoint::Datapoints, &body.bytes)
    }

    // -- plumbing --------------------------------------------------------------------------------

    /// The base URL with `segments` appended, each percent-encoded as a path segment.
    fn url(&self, segments: &[&str]) -> Result<Url, CloudError> {
        endpoint_url(&self.inner.base, segments)
    }

    async fn get_json<T: DeserializeOwned>(
        &self,
        ep: Endpoint,
        path: &[&str],
        auth: Auth<'_>,
    ) -> Result<T, CloudError> {
        let url = self.url(path)?;
        let body = self.send(ep, Method::GET, url, auth, None::<&()>, RequestKind::Read).await?;
        decode(ep, &body.bytes)
    }

    async fn get_image(&self, ep: Endpoint, path: &[&str], auth: Auth<'_>) -> Result<Image, CloudError> {
        let url = self.url(path)?;
        let body = self.send(ep, Method::GET, url, auth, None::<&()>, RequestKind::Read).await?;
        Ok(Image { content_type: body.content_type, bytes: body.bytes })
    }

    async fn login<T: DeserializeOwned, B: Serialize>(
        &self,
        ep: Endpoint,
        url: Url,
        creds: &Credentials,
        body: &B,
    ) -> Result<T, CloudError> {
        let kind = RequestKind::Login { email: &creds.email };
        let body = self.send(ep, Method::POST, url, Auth::KeyOnly, Some(body), kind).await?;
        // A decode error message may quote the payload, which holds session ids: keep only where.
        serde_json::from_slice(&body.bytes).map_err(|e| CloudError::Decode {
            endpoint: ep.as_str(),
            message: format!("{:?} error at line {} column {}", e.classify(), e.line(), e.column()),
        })
    }

    /// Sends one request through the quota guard and maps the status.
    async fn send<B: Serialize>(
        &self,
        ep: Endpoint,
        method: Method,
        url: Url,
        auth: Auth<'_>,
        json: Option<&B>,
        kind: RequestKind<'_>,
    ) -> Result<Body, CloudError> {
        let inner = &self.inner;
        let mut request = inner.http.request(method, url).header(inner.key_header.clone(), inner.key_value.clone());
        if let Auth::Session(session) = auth {
            request = request.header(inner.session_header.clone(), sensitive_header(session, "the session id")?);
        }
        if let Some(json) = json {
            request = request.json(json);
        }
        let permit =
            if ep.is_background() { inner.quota.acquire_background().await } else { inner.quota.acquire().await };
        let started = Instant::now();
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                inner.stats.record(ep, Outcome::Transport, started.elapsed());
                let err = CloudError::transport(e);
                tracing::debug!(endpoint = ep.as_str(), error = %err, "cloud request failed");
                return Err(err);
            }
        };
        let status = response.status();
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
        if status.is_success() {
            inner.quota.note_success();
            let bytes = read_body(response).await;
            inner.stats.record(ep, Outcome::Status(status.as_u16()), started.elapsed());
            tracing::debug!(
                endpoint = ep.as_str(),
                status = status.as_u16(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "cloud request"
            );
            return Ok(Body { content_type, bytes: bytes? });
        }
        let reason = reason_phrase(&response);
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let text = read_error_body(response).await;
        inner.stats.record(ep, Outcome::Status(status.as_u16()), started.elapsed());
        let err = CloudError::from_status(status.as_u16(), reason.as_deref(), &text, retry_after, kind);
        if status == StatusCode::TOO_MANY_REQUESTS {
            inner.quota.note_quota_exceeded(&permit, retry_after);
        }
        tracing::debug!(endpoint = ep.as_str(), status = status.as_u16(), error = %err, "cloud request refused");
        Err(err)
    }
}

/// The reason phrase of the status line when it is not the canonical one for the status.
///
/// reqwest's `StatusCode::canonical_reason` only knows the standard phrases; hyper keeps a
/// non-canonical phrase (such as the service's `Api authorization failed.`) in a
/// `hyper::ext::ReasonPhrase` response extension, which reqwest passes through. HTTP/2 has no
/// reason phrases, hence the body fallback in [`crate::cloud::error::is_api_key_rejection`].
fn reason_phrase(response: &reqwest::Response) -> Option<String> {
    let phrase = response.extensions().get::<hyper::ext::ReasonPhrase>()?;
    std::str::from_utf8(phrase.as_bytes()).ok().map(str::to_owned)
}

/// Reads a successful response body of at most [`MAX_BODY`] bytes.
async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, CloudError> {
    let too_large = || CloudError::Transport(format!("response body larger than {} MiB", MAX_BODY / (1024 * 1024)));
    if response.content_length().is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    let mut buf = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(CloudError::transport)? {
        if buf.len() + chunk.len() > MAX_BODY {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of an error response as text.
async fn read_error_body(mut response: reqwest::Response) -> String {
    let mut buf = Vec::new();
    while buf.len() < MAX_ERROR_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    buf.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&buf).into_owned()
}

/// `base` with `segments` appended to its path, each percent-encoded.
fn endpoint_url(base: &Url, segments: &[&str]) -> Result<Url, CloudError> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| CloudError::Config(format!("REST base URL {base} cannot take a path")))?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

/// A header value that hyper and reqwest treat as sensitive (never printed).
fn sensitive_header(secret: &Secret, what: &str) -> Result<HeaderValue, CloudError> {
    let mut value = HeaderValue::from_str(secret.expose())
        .map_err(|_| CloudError::Config(format!("{what} contains characters not allowed in an HTTP header")))?;
    value.set_sensitive(true);
    Ok(value)
}

fn decode<T: DeserializeOwned>(ep: Endpoint, bytes: &[u8]) -> Result<T, CloudError> {
    serde_json::from_slice(bytes).map_err(|e| CloudError::Decode { endpoint: ep.as_str(), message: e.to_string() })
}

/// `{"email":…,"password":…}`.
#[derive(Serialize)]
struct LoginBody<'a> {
    email: &'a str,
    password: &'a Secret,
}

impl<'a> From<&'a Credentials> for LoginBody<'a> {
    fn from(c: &'a Credentials) -> Self {
        Self { email: &c.email, password: &c.password }
    }
}

/// `{"email":…,"password":…,"networks":[…]}`.
#[derive(Serialize)]
struct SetBody<'a> {
    email: &'a str,
    password: &'a Secret,
    networks: &'a [String],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::quota::QuotaConfig;

    #[test]
    fn urls_append_and_encode_segments() {
        let base = Url::parse("https://door.example.com").unwrap();
        assert_eq!(
            endpoint_url(&base, &["v1", "networks", "abc", "state"]).unwrap().as_str(),
            "https://door.example.com/v1/networks/abc/state"
        );
        let prefixed = Url::parse("http://127.0.0.1:8080/cloud/").unwrap();
        assert_eq!(
            endpoint_url(&prefixed, &["v1", "fixtures", "12"]).unwrap().as_str(),
            "http://127.0.0.1:8080/cloud/v1/fixtures/12"
        );
        let odd = endpoint_url(&base, &["v1", "networks", "a/b?c#d", "images", "x y"]).unwrap();
        assert_eq!(odd.as_str(), "https://door.example.com/v1/networks/a%2Fb%3Fc%23d/images/x%20y");
    }

    #[test]
    fn config_errors_name_the_problem_without_secrets() {
        let quota = Arc::new(QuotaGuard::new(&QuotaConfig::default()));
        let base = Url::parse("https://door.example.com").unwrap();
        let bad_key = RestClient::new(RestConfig::new(base.clone(), Secret::new("line\nbreak-secret")), quota.clone())
            .unwrap_err();
        assert!(!bad_key.to_string().contains("secret"), "{bad_key}");
        let mut cfg = RestConfig::new(base, Secret::new("k"));
        cfg.key_header = "bad header".into();
        assert!(matches!(RestClient::new(cfg, quota.clone()), Err(CloudError::Config(_))));
        let mailto = RestConfig::new(Url::parse("mailto:x@example.com").unwrap(), Secret::new("k"));
        assert!(matches!(RestClient::new(mailto, quota), Err(CloudError::Config(_))));
    }

    /// A one-shot HTTP/1.1 server that answers every connection with `response`.
    async fn raw_server(response: &'static str) -> Url {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = vec![0u8; 8192];
                let _ = socket.read(&mut buf).await;
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        Url::parse(&format!("http://{addr}")).unwrap()
    }

    fn client_for(base: Url) -> RestClient {
        let quota = Arc::new(QuotaGuard::new(&QuotaConfig::default()));
        RestClient::new(RestConfig::new(base, Secret::new("k3y-s3cr3t")), quota).unwrap()
    }

    #[tokio::test]
    async fn api_key_rejection_is_read_from_the_reason_phrase() {
        let base =
            raw_server("HTTP/1.1 401 Api authorization failed.\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await;
        let rest = client_for(base);
        let err = rest.create_network_session(&Credentials::new("a@example.com", "pw"), "n1").await.unwrap_err();
        assert_eq!(err, CloudError::ApiKeyRejected);
        let err = rest.network(&Secret::new("sid"), "n1").await.unwrap_err();
        assert_eq!(err, CloudError::ApiKeyRejected);
    }

    #[tokio::test]
    async fn plain_401_on_login_names_the_user() {
        let base = raw_server("HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
        let err = client_for(base).create_user_session(&Credentials::new("a@example.com", "pw")).await.unwrap_err();
        assert_eq!(err, CloudError::UserNotFound { email: "a@example.com".into() });
    }

    #[tokio::test]
    async fn quota_exceeded_carries_retry_after_and_pauses_the_key() {
        let base = raw_server(
            "HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )
        .await;
        let rest = client_for(base);
        let err = rest.fixture(7).await.unwrap_err();
        assert_eq!(err, CloudError::QuotaExceeded { retry_after: Some(Duration::from_secs(1)) });
        let start = std::time::Instant::now();
        let _ = rest.fixture(7).await;
        assert!(start.elapsed() >= Duration::from_millis(900), "{:?}", start.elapsed());
        assert_eq!(rest.stats().count(Endpoint::Fixture, Outcome::Status(429)), 2);
    }

    #[tokio::test]
    async fn transport_errors_carry_no_url_or_secret() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        drop(listener);
        let rest = client_for(base);
        let err = rest.network(&Secret::new("sess-s3cr3t"), "n1").await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, CloudError::Transport(_)), "{text}");
        assert!(!text.contains("s3cr3t") && !text.contains("127.0.0.1"), "{text}");
        assert_eq!(rest.stats().count(Endpoint::Network, Outcome::Transport), 1);
        assert!(!format!("{rest:?}").contains("s3cr3t"));
    }

    #[test]
    fn login_bodies_serialise_as_the_spec_says() {
        let creds = Credentials::new("a@example.com", "pw");
        assert_eq!(
            serde_json::to_string(&LoginBody::from(&creds)).unwrap(),
            r#"{"email":"a@example.com","password":"pw"}"#
        );
        let ids = vec!["n1".to_owned(), "n2".to_owned()];
        let set = SetBody { email: "a@example.com", password: &creds.password, networks: &ids };
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            r#"{"email":"a@example.com","password":"pw","networks":["n1","n2"]}"#
        );
        assert!(!format!("{creds:?}").contains("pw\""));
    }
}
