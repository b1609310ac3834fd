//! Who may read and who may control from the page (docs/web.md#security).
//!
//! - Every request (the page, its data, its live stream, `/healthz`, `/metrics`) must name the
//!   bridge in its `Host`: an IP address, `localhost`, or a name of `http.public_host`. A web site
//!   whose name an attacker points at the bridge's address (DNS rebinding) names itself instead,
//!   so a browser that visits it reads nothing and controls nothing.
//! - A request that presents `http.token` (`Authorization: Bearer <token>`, the scheme in any
//!   case) may control.
//! - Without it, only when the listener is a loopback address (`127.0.0.1`, `::1`): then only
//!   processes of this machine reach it, and its `Host` must name loopback too.
//! - Any other request is read-only, and the page says why. A wrong token is answered only
//!   after [`FAILED_TOKEN_DELAY`], one at a time, so guessing is slow.
//!
//! Whatever the rule, a request that carries an `Origin` must come from the page itself: the
//! origin (`http://` or `https://`, as behind a TLS proxy) names the `Host` it was sent to or a
//! name of `http.public_host`. Control requests are JSON (`Content-Type: application/json`),
//! which a cross-site form cannot send without the browser asking first.

use crate::cloud::model::Secret;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How long a request with a wrong token waits for its answer; such requests wait one after
/// the other, so every client together guesses at most once per this time.
pub const FAILED_TOKEN_DELAY: Duration = Duration::from_secs(1);
/// How much of a request's text a refusal quotes.
pub const QUOTED: usize = 64;

/// The rule of one listener.
#[derive(Debug)]
pub struct Access {
    listen: SocketAddr,
    token: Option<Secret>,
    public_hosts: Vec<String>,
    failures: tokio::sync::Mutex<()>,
}

/// Why a request may not control.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refusal {
    /// What the page shows.
    pub reason: String,
    /// The request presented a token, and not the right one.
    pub wrong_token: bool,
}

impl Refusal {
    fn new(reason: impl Into<String>) -> Refusal {
        Refusal { reason: reason.into(), wrong_token: false }
    }
}

/// At most [`QUOTED`] characters of `text`, for a refusal or a log line.
pub fn quote(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(QUOTED).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

impl Access {
    /// The rule for a listener on `listen` with `http.token` = `token`, answering to the names
    /// `public_hosts` (lower-case) besides IP addresses and `localhost`.
    pub fn new(listen: SocketAddr, token: Option<Secret>, public_hosts: Vec<String>) -> Access {
        Access { listen, token: token.filter(|t| !t.is_empty()), public_hosts, failures: tokio::sync::Mutex::new(()) }
    }

    /// Whether the listener is a loopback address (control without a token).
    pub fn is_loopback(&self) -> bool {
        self.listen.ip().is_loopback()
    }

    /// Whether a request with `headers` may be answered at all: its `Host` names the bridge (an
    /// IP address, `localhost`, a name of `http.public_host`), or it has none (no browser sends
    /// a request without one).
    pub fn check_host(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let Some(host) = headers.get(HOST) else { return Ok(()) };
        let name = host.to_str().ok().map(host_name).unwrap_or("");
        if name.parse::<IpAddr>().is_ok() || name.eq_ignore_ascii_case("localhost") || self.is_public(name) {
            Ok(())
        } else {
            Err(Refusal::new(format!(
                "this bridge does not answer to the name {:?}; list it in http.public_host",
                quote(name)
            )))
        }
    }

    fn is_public(&self, name: &str) -> bool {
        self.public_hosts.iter().any(|p| p.eq_ignore_ascii_case(name))
    }

    /// Waits before a wrong token's answer: one such request at a time, each
    /// [`FAILED_TOKEN_DELAY`].
    pub async fn slow_down(&self, refusal: &Refusal) {
        if refusal.wrong_token {
            let _turn = self.failures.lock().await;
            tokio::time::sleep(FAILED_TOKEN_DELAY).await;
        }
    }

    /// Whether a request with `headers` may control; why not otherwise.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_host(headers)?;
        let host = headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let site = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
            let same = site.is_some_and(|o| o.eq_ignore_ascii_case(host) || self.is_public(host_name(o)));
            if !same {
                return Err(Refusal::new(format!("a request from another origin ({}) may not control", quote(origin))));
            }
        }
        let presented = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|t| !t.is_empty());
        match (&self.token, presented) {
            (Some(token), Some(given)) if same_secret(token.expose(), given) => return Ok(()),
            (_, Some(_)) => {
                return Err(Refusal { reason: "the token is not the bridge's http.token".into(), wrong_token: true });
            }
            _ => {}
        }
        if self.is_loopback() {
            return if names_loopback(host) {
                Ok(())
            } else {
                Err(Refusal::new(format!("the page was opened as {:?}, not as a loopback address", quote(host))))
            };
        }
        Err(Refusal::new(match self.token {
            Some(_) => format!(
                "read-only: the bridge listens on {} (beyond this machine), so control needs its http.token; \
                 open the page as …/#token=<token>",
                self.listen
            ),
            None => format!(
                "read-only: the bridge listens on {} (beyond this machine) and http.token is not set, \
                 so nobody may control from the page",
                self.listen
            ),
        }))
    }
}

/// The name of a `Host` header (or of an origin's host part): without its port, and without the
/// brackets of an IPv6 address.
fn host_name(host: &str) -> &str {
    match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    }
}

/// Whether a `Host` header names this machine's loopback: `localhost` or a loopback IP, with or
/// without a port.
fn names_loopback(host: &str) -> bool {
    let name = host_name(host);
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Compares a presented token with the secret in time independent of where they differ.
fn same_secret(secret: &str, given: &str) -> bool {
    let (a, b) = (secret.as_bytes(), given.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_controls_without_a_token_when_the_host_is_loopback() {
        let a = Access::new("127.0.0.1:8099".parse().unwrap(), None, vec![]);
        assert!(a.check(&headers(&[("host", "127.0.0.1:8099")])).is_ok());
        assert!(a.check(&headers(&[("host", "localhost:8099")])).is_ok());
        assert!(a.check(&headers(&[("host", "[::1]:8099")])).is_ok());
        assert!(a.check(&headers(&[("host", "evil.example:8099")])).is_err(), "DNS rebinding");
        let cross = headers(&[("host", "127.0.0.1:8099"), ("origin", "http://evil.example")]);
        assert!(a.check(&cross).is_err());
        let same = headers(&[("host", "127.0.0.1:8099"), ("origin", "http://127.0.0.1:8099")]);
        assert!(a.check(&same).is_ok());
    }

    #[test]
    fn beyond_loopback_only_the_token_controls() {
        let open = Access::new("0.0.0.0:8099".parse().unwrap(), None, vec![]);
        let e = open.check(&headers(&[("host", "127.0.0.1:8099")])).unwrap_err();
        assert!(e.reason.contains("http.token is not set"), "{e}");
        let a = Access::new("0.0.0.0:8099".parse().unwrap(), Some(Secret::new("s3cret-token")), vec![]);
        assert!(a.check(&headers(&[("host", "10.0.0.2:8099")])).is_err());
        assert!(a.check(&headers(&[("host", "10.0.0.2:8099"), ("authorization", "Bearer s3cret-token")])).is_ok());
        let wrong = a.check(&headers(&[("host", "10.0.0.2:8099"), ("authorization", "Bearer s3cret-tokem")]));
        let wrong = wrong.unwrap_err();
        assert_eq!(wrong.reason, "the token is not the bridge's http.token");
        assert!(wrong.wrong_token);
        let lower = headers(&[("host", "10.0.0.2:8099"), ("authorization", "bearer s3cret-token")]);
        assert!(a.check(&lower).is_ok(), "the scheme in any case");
        assert!(!format!("{a:?}").contains("s3cret"), "the token stays out of Debug");
    }

    #[test]
    fn only_the_bridge_s_names_are_answered() {
        let a = Access::new("0.0.0.0:8099".parse().unwrap(), None, vec!["bridge.example.com".into()]);
        for host in ["127.0.0.1:8099", "10.0.0.2:8099", "[fd00::2]:8099", "localhost", "Bridge.Example.com:443"] {
            assert!(a.check_host(&headers(&[("host", host)])).is_ok(), "{host}");
        }
        assert!(a.check_host(&HeaderMap::new()).is_ok(), "no Host: no browser");
        let e = a.check_host(&headers(&[("host", "rebind.attacker.example:8099")])).unwrap_err();
        assert!(e.reason.contains("http.public_host"), "{e}");
        let long = "x".repeat(5000);
        let e = a.check_host(&headers(&[("host", &long)])).unwrap_err();
        assert!(e.reason.len() < 200, "a refusal quotes a short prefix: {}", e.reason.len());
    }

    #[test]
    fn control_behind_a_tls_proxy_with_the_token() {
        let token = Some(Secret::new("s3cret-token-0123"));
        let a = Access::new("0.0.0.0:8099".parse().unwrap(), token, vec!["bridge.example.com".into()]);
        let auth = ("authorization", "Bearer s3cret-token-0123");
        // The proxy passes the public name on, or names the bridge's own address.
        let passed = headers(&[("host", "bridge.example.com"), ("origin", "https://bridge.example.com"), auth]);
        assert!(a.check(&passed).is_ok());
        let rewritten = headers(&[("host", "127.0.0.1:8099"), ("origin", "https://bridge.example.com"), auth]);
        assert!(a.check(&rewritten).is_ok());
        let other = headers(&[("host", "127.0.0.1:8099"), ("origin", "https://evil.example"), auth]);
        assert!(a.check(&other).is_err());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "ab"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("abc", "abd"));
    }
}
