//! [`Secret`]: a string that must never be printed (session ids, passwords, API keys).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A secret string (session id, password, API key).
///
/// `Debug` prints `"***"` so a secret can sit inside any struct that derives `Debug` and still never
/// reach a log line or an error message. There is deliberately no `Display`: code that needs the
/// value (an HTTP header, the WebSocket `open` message) calls [`Secret::expose`], which is easy to
/// find in review. Serialisation is transparent because the wire formats need the real value.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(Box<str>);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<Box<str>>) -> Self {
        Self(value.into())
    }

    /// The secret value itself; only for putting it on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when the secret is the empty string (e.g. a field missing from a response).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value.into_boxed_str())
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_redacted() {
        let s = Secret::new("top-secret-session__");
        assert_eq!(format!("{s:?}"), "\"***\"");
        assert_eq!(format!("{:?}", Some(&s)), "Some(\"***\")");
        assert_eq!(s.expose(), "top-secret-session__");
    }

    #[test]
    fn serde_is_transparent() {
        let s: Secret = serde_json::from_str("\"abc__\"").unwrap();
        assert_eq!(s.expose(), "abc__");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"abc__\"");
    }
}
