//! Who may control lights from the page (docs/web.md#security).
//!
//! - A request that presents `http.token` (`Authorization: Bearer <token>`) may control.
//! - Without it, only when the listener is a loopback address (`127.0.0.1`, `::1`): then only
//!   processes of this machine reach it. Its `Host` must then name loopback too (`localhost`, a
//!   loopback IP), so a web site whose name an attacker points at 127.0.0.1 (DNS rebinding)
//!   cannot use a browser on this machine to switch lights.
//! - Any other request is read-only, and the page says why.
//!
//! Whatever the rule, a request that carries an `Origin` must come from the page itself (the
//! origin names the `Host` it was sent to): another site's script cannot send commands through a
//! visitor's browser. Control requests are JSON (`Content-Type: application/json`), which a
//! cross-site form cannot send without the browser asking first.
//!
//! Reading (the page, its live stream, icons) needs nothing: it is what `/healthz` already tells.

use crate::cloud::model::Secret;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use std::net::{IpAddr, SocketAddr};

/// The rule of one listener.
#[derive(Debug, Clone)]
pub struct Access {
    listen: SocketAddr,
    token: Option<Secret>,
}

/// Why a request may not control.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl Access {
    /// The rule for a listener on `listen` with `http.token` = `token`.
    pub fn new(listen: SocketAddr, token: Option<Secret>) -> Access {
        Access { listen, token: token.filter(|t| !t.is_empty()) }
    }

    /// Whether the listener is a loopback address (control without a token).
    pub fn is_loopback(&self) -> bool {
        self.listen.ip().is_loopback()
    }

    /// Whether a request with `headers` may control; why not otherwise.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let same = origin.strip_prefix("http://").is_some_and(|o| o.eq_ignore_ascii_case(host));
            if !same {
                return Err(Refusal(format!("a request from another origin ({origin}) may not control")));
            }
        }
        let presented = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        match (&self.token, presented) {
            (Some(token), Some(given)) if same_secret(token.expose(), given) => return Ok(()),
            (Some(_), Some(_)) => return Err(Refusal("the token is not the bridge's http.token".into())),
            _ => {}
        }
        if self.is_loopback() {
            return if names_loopback(host) {
                Ok(())
            } else {
                Err(Refusal(format!("the page was opened as {host:?}, not as a loopback address")))
            };
        }
        Err(Refusal(match self.token {
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

/// Whether a `Host` header names this machine's loopback: `localhost` or a loopback IP, with or
/// without a port.
fn names_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
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
        let a = Access::new("127.0.0.1:8099".parse().unwrap(), None);
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
        let open = Access::new("0.0.0.0:8099".parse().unwrap(), None);
        let e = open.check(&headers(&[("host", "127.0.0.1:8099")])).unwrap_err();
        assert!(e.0.contains("http.token is not set"), "{e}");
        let a = Access::new("0.0.0.0:8099".parse().unwrap(), Some(Secret::new("s3cret-token")));
        assert!(a.check(&headers(&[("host", "10.0.0.2:8099")])).is_err());
        assert!(a.check(&headers(&[("host", "10.0.0.2:8099"), ("authorization", "Bearer s3cret-token")])).is_ok());
        let wrong = a.check(&headers(&[("host", "10.0.0.2:8099"), ("authorization", "Bearer s3cret-tokem")]));
        assert_eq!(wrong.unwrap_err().0, "the token is not the bridge's http.token");
        assert!(!format!("{a:?}").contains("s3cret"), "the token stays out of Debug");
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "ab"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("abc", "abd"));
    }
}
