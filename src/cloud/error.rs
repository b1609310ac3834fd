//! [`CloudError`]: every way a request to the cloud service can fail, one variant per status.
//!
//! The mapping from an HTTP status to a variant lives here ([`CloudError::from_status`]) so it can
//! be tested without a server. Two statuses need context:
//! - **401**: the spec says a rejected API key carries the status text `Api authorization failed.`;
//!   any other 401 on session creation means the user was not found (or the password is wrong).
//!   reqwest only offers the *canonical* phrase (`Unauthorized`); the real one is read from hyper's
//!   `ReasonPhrase` response extension (present only when the phrase is not the canonical one, and
//!   never over HTTP/2). As a fallback the phrase is also looked for in the error body
//!   (`{"error":"Api authorization failed."}`); see [`is_api_key_rejection`].
//! - **403**: on session creation it is the login lockout (three failed logins lock for one
//!   minute); elsewhere it means the API is not enabled for the key.
//!
//! No variant ever carries a secret: messages come from server error bodies (truncated) or from
//! transport errors stripped of their URL.

use std::time::Duration;

/// The phrase the service uses (as status text, and the simulator also in the body) when it
/// rejects an API key.
pub const API_KEY_REJECTED_PHRASE: &str = "Api authorization failed.";

/// Longest server-provided message kept in an error, in characters.
const MAX_MESSAGE_CHARS: usize = 200;

/// An error talking to the cloud service.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CloudError {
    /// 400: parameters invalid or a mandatory value missing.
    #[error("bad request (400): {message}")]
    BadRequest {
        /// The server's explanation, if any.
        message: String,
    },
    /// 401 with `Api authorization failed.`: the API key is invalid. Final for the key.
    #[error("API key rejected (Api authorization failed.)")]
    ApiKeyRejected,
    /// Any other 401 on session creation: wrong e-mail or password. Final for the credentials.
    #[error("user not found / wrong password for {email}")]
    UserNotFound {
        /// The e-mail that was rejected (fine to log; the password never is).
        email: String,
    },
    /// Any other 401 on a read (e.g. fixtures of foreign lamps answer 401).
    #[error("unauthorized (401): {message}")]
    Unauthorized {
        /// The server's explanation, if any.
        message: String,
    },
    /// 403 on session creation: login locked after failed attempts; wait at least 60 s.
    #[error("login locked (403): too many failed logins; waiting at least 60 s before the next try")]
    LoginLocked,
    /// 403 elsewhere, or a 403 on login that persists past the lockout window.
    #[error("API not enabled or login locked (403)")]
    ApiNotEnabled,
    /// 404: the resource (network, unit, image, icon, fixture) does not exist.
    #[error("not found (404)")]
    NotFound,
    /// 405: method not allowed.
    #[error("method not allowed (405)")]
    MethodNotAllowed,
    /// 410: the session is invalid or expired; create a new one and retry.
    #[error("session expired or invalid (410)")]
    SessionExpired,
    /// 416: the datapoint retrieval interval is too long.
    #[error("retrieval interval too long (416)")]
    RangeTooLong,
    /// 429: a per-key quota was exceeded; back off (at least `retry_after` when given).
    #[error("quota exceeded (429){}", retry_after.map(|d| format!(", retry after {} s", d.as_secs())).unwrap_or_default())]
    QuotaExceeded {
        /// The server's `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
    },
    /// 5xx: server error; back off and retry.
    #[error("server error ({status}): {message}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The server's explanation, if any.
        message: String,
    },
    /// Any other non-success status.
    #[error("unexpected HTTP status {status}: {message}")]
    UnexpectedStatus {
        /// The HTTP status.
        status: u16,
        /// The server's explanation, if any.
        message: String,
    },
    /// The request did not complete (connect, TLS, timeout, connection reset); retry with backoff.
    #[error("transport error: {0}")]
    Transport(String),
    /// The response did not have the expected shape.
    #[error("could not decode the {endpoint} response: {message}")]
    Decode {
        /// The endpoint label (see `rest::Endpoint`).
        endpoint: &'static str,
        /// What was wrong (position and kind; no payload content for session responses).
        message: String,
    },
    /// The request was refused before sending (e.g. more than 100 networks in a set, a datapoint
    /// query without `dataType` or `keys`).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The client is misconfigured (bad base URL, a header name or key with invalid characters).
    #[error("invalid cloud client configuration: {0}")]
    Config(String),
}

/// What kind of request produced a status; the same status means different things.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind<'a> {
    /// Session creation with the credentials of this e-mail.
    Login {
        /// The e-mail of the credentials.
        email: &'a str,
    },
    /// Any other request.
    Read,
}

impl CloudError {
    /// Maps a non-success HTTP status to an error.
    ///
    /// `reason` is the status line's reason phrase when the HTTP stack exposes it, `body` the
    /// response body text (may be empty), `retry_after` the parsed `Retry-After` header.
    pub fn from_status(
        status: u16,
        reason: Option<&str>,
        body: &str,
        retry_after: Option<Duration>,
        kind: RequestKind<'_>,
    ) -> Self {
        let message = body_message(body);
        match status {
            400 => Self::BadRequest { message },
            401 if is_api_key_rejection(reason, &message) => Self::ApiKeyRejected,
            401 => match kind {
                RequestKind::Login { email } => Self::UserNotFound { email: email.to_owned() },
                RequestKind::Read => Self::Unauthorized { message },
            },
            403 => match kind {
                RequestKind::Login { .. } => Self::LoginLocked,
                RequestKind::Read => Self::ApiNotEnabled,
            },
            404 => Self::NotFound,
            405 => Self::MethodNotAllowed,
            410 => Self::SessionExpired,
            416 => Self::RangeTooLong,
            429 => Self::QuotaExceeded { retry_after },
            500..=599 => Self::Server { status, message },
            _ => Self::UnexpectedStatus { status, message },
        }
    }

    /// The HTTP status behind the error, if it came from one.
    pub fn status(&self) -> Option<u16> {
        Some(match self {
            Self::BadRequest { .. } => 400,
            Self::ApiKeyRejected | Self::UserNotFound { .. } | Self::Unauthorized { .. } => 401,
            Self::LoginLocked | Self::ApiNotEnabled => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::SessionExpired => 410,
            Self::RangeTooLong => 416,
            Self::QuotaExceeded { .. } => 429,
            Self::Server { status, .. } | Self::UnexpectedStatus { status, .. } => *status,
            Self::Transport(_) | Self::Decode { .. } | Self::InvalidRequest(_) | Self::Config(_) => {
                return None;
            }
        })
    }

    /// True for errors worth retrying after a backoff: 429, 5xx and transport failures.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::QuotaExceeded { .. } | Self::Server { .. } | Self::Transport(_))
    }

    /// True for 410: the caller should renew the session once and retry.
    pub fn is_session_expired(&self) -> bool {
        matches!(self, Self::SessionExpired)
    }

    /// True when retrying with the same key or credentials can never succeed (401 on login, a
    /// rejected key, a bad configuration).
    pub fn is_final(&self) -> bool {
        matches!(self, Self::ApiKeyRejected | Self::UserNotFound { .. } | Self::Config(_))
    }

    /// The server's `Retry-After` for a 429.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::QuotaExceeded { retry_after } => *retry_after,
            _ => None,
        }
    }

    /// Builds a transport error from a reqwest error without its URL, keeping the cause chain
    /// ("connection refused", "operation timed out").
    pub fn transport(err: reqwest::Error) -> Self {
        let err = err.without_url();
        let mut text = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !text.contains(&cause_text) {
                text.push_str(": ");
                text.push_str(&cause_text);
            }
            source = cause.source();
        }
        Self::Transport(text)
    }
}

/// True when a 401 is the API-key rejection: the reason phrase or the body message says
/// `Api authorization failed.` (compared case-insensitively, trailing dot optional).
pub fn is_api_key_rejection(reason: Option<&str>, body_message: &str) -> bool {
    let matches = |s: &str| s.to_ascii_lowercase().contains("api authorization failed");
    reason.is_some_and(matches) || matches(body_message)
}

/// The human message of an error body: the `error` or `message` field of a JSON object, else the
/// text itself; trimmed, single-line and at most `MAX_MESSAGE_CHARS` (200) characters.
pub fn body_message(body: &str) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        #[serde(default)]
        error: Option<serde_json::Value>,
        #[serde(default)]
        message: Option<serde_json::Value>,
    }
    let from_json = serde_json::from_str::<ErrorBody>(body).ok().and_then(|b| b.error.or(b.message)).map(|v| match v {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    });
    let text = from_json.as_deref().unwrap_or(body).trim();
    text.chars().filter(|c| !c.is_control()).take(MAX_MESSAGE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOGIN: RequestKind<'static> = RequestKind::Login { email: "admin@example.com" };

    #[test]
    fn status_mapping_reads() {
        let e = |s| CloudError::from_status(s, None, r#"{"error":"nope"}"#, None, RequestKind::Read);
        assert_eq!(e(400), CloudError::BadRequest { message: "nope".into() });
        assert_eq!(e(401), CloudError::Unauthorized { message: "nope".into() });
        assert_eq!(e(403), CloudError::ApiNotEnabled);
        assert_eq!(e(404), CloudError::NotFound);
        assert_eq!(e(405), CloudError::MethodNotAllowed);
        assert_eq!(e(410), CloudError::SessionExpired);
        assert_eq!(e(416), CloudError::RangeTooLong);
        assert_eq!(e(429), CloudError::QuotaExceeded { retry_after: None });
        assert_eq!(e(500), CloudError::Server { status: 500, message: "nope".into() });
        assert_eq!(e(503), CloudError::Server { status: 503, message: "nope".into() });
        assert_eq!(e(418), CloudError::UnexpectedStatus { status: 418, message: "nope".into() });
        for s in [400, 401, 403, 404, 405, 410, 416, 429, 500, 503, 418] {
            assert_eq!(e(s).status(), Some(s));
        }
    }

    #[test]
    fn status_mapping_login() {
        let e = |s, reason, body| CloudError::from_status(s, reason, body, None, LOGIN);
        assert_eq!(e(401, None, ""), CloudError::UserNotFound { email: "admin@example.com".into() });
        assert_eq!(e(401, Some("Unauthorized"), r#"{"error":"User not found"}"#), e(401, None, ""));
        assert_eq!(e(401, Some(API_KEY_REJECTED_PHRASE), ""), CloudError::ApiKeyRejected);
        assert_eq!(e(401, None, r#"{"error":"Api authorization failed."}"#), CloudError::ApiKeyRejected);
        assert_eq!(e(401, None, "Api authorization failed"), CloudError::ApiKeyRejected);
        assert_eq!(e(403, None, ""), CloudError::LoginLocked);
        let msg = e(401, None, "").to_string();
        assert_eq!(msg, "user not found / wrong password for admin@example.com");
        assert_eq!(CloudError::ApiKeyRejected.to_string(), "API key rejected (Api authorization failed.)");
    }

    #[test]
    fn api_key_rejection_on_reads_too() {
        let e = CloudError::from_status(401, None, r#"{"error":"Api authorization failed."}"#, None, RequestKind::Read);
        assert_eq!(e, CloudError::ApiKeyRejected);
        assert!(e.is_final());
    }

    #[test]
    fn classification() {
        let q = CloudError::QuotaExceeded { retry_after: Some(Duration::from_secs(7)) };
        assert!(q.is_transient());
        assert_eq!(q.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(q.to_string(), "quota exceeded (429), retry after 7 s");
        assert!(CloudError::Server { status: 502, message: String::new() }.is_transient());
        assert!(CloudError::Transport("reset".into()).is_transient());
        assert!(!CloudError::SessionExpired.is_transient());
        assert!(CloudError::SessionExpired.is_session_expired());
        assert!(CloudError::UserNotFound { email: "a".into() }.is_final());
        assert!(!CloudError::LoginLocked.is_final());
    }

    #[test]
    fn body_messages_are_trimmed_and_capped() {
        assert_eq!(body_message(r#"{"message":"bad from"}"#), "bad from");
        assert_eq!(body_message("  plain text\n"), "plain text");
        assert_eq!(body_message(&"x".repeat(1000)).len(), MAX_MESSAGE_CHARS);
        assert_eq!(body_message(""), "");
    }
}
