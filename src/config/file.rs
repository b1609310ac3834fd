//! The serde schema of the sections this module owns (`cloud`, `networks`, `http`, `log`), with
//! the defaults of docs/configuration.md. The `mqtt`, `homeassistant` and `output` sections deserialise
//! straight into the MQTT layer's own settings types.
//!
//! These structs are the raw file form: secrets may still be `*_file` paths, URLs and addresses
//! are still strings. `validate` turns them into the typed settings the layers use, so every
//! semantic check can name its key in our own words.

use crate::cloud::model::Secret;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Default REST base of the real service.
pub const DEFAULT_BASE_URL: &str = "https://door.casambi.com";
/// Default WebSocket URL of the real service.
pub const DEFAULT_WS_URL: &str = "wss://door.casambi.com/v1/bridge/";
/// Default API key header of the real service.
pub const DEFAULT_KEY_HEADER: &str = "X-Casambi-Key";
/// Default session header of the real service.
pub const DEFAULT_SESSION_HEADER: &str = "X-Casambi-Session";
/// Default REST polling interval while a wire is down.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(10);
/// Default full resync interval while a wire is up.
pub const DEFAULT_RESYNC_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// Default client-side request quota.
pub const DEFAULT_MAX_REQUESTS_PER_MINUTE: u32 = 60;
/// Default number of concurrent REST requests.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 4;
/// Default app-level ping per wire; the service closes wires idle for about 5 minutes.
pub const DEFAULT_WIRE_PING_INTERVAL: Duration = Duration::from_secs(240);
/// The longest allowed wire ping interval (the contract: a ping at least every 240 s).
pub const MAX_WIRE_PING_INTERVAL: Duration = Duration::from_secs(240);
/// Default address of the HTTP listener (the web page, `/healthz`, `/metrics`).
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:8099";
/// Default cap on the HTTP listener's open connections (docs/web.md#limits).
pub const DEFAULT_HTTP_MAX_CONNECTIONS: usize = 256;
/// Default cap on open live streams (pages) of the HTTP listener.
pub const DEFAULT_HTTP_MAX_LIVE_STREAMS: usize = 32;
/// Default time for a request's headers on the HTTP listener.
pub const DEFAULT_HTTP_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time an HTTP connection may neither read nor write; above the live stream's 15 s
/// keep-alive, so an open page that reads is never idle.
pub const DEFAULT_HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default log level.
pub const DEFAULT_LOG_LEVEL: &str = "info";

/// `cloud:` as written in the file.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct CloudFile {
    pub base_url: String,
    pub ws_url: String,
    pub api_key: Option<Secret>,
    pub api_key_file: Option<PathBuf>,
    pub key_header: String,
    pub session_header: String,
    #[serde(deserialize_with = "duration")]
    pub poll_interval: Duration,
    #[serde(deserialize_with = "duration")]
    pub resync_interval: Duration,
    pub max_requests_per_minute: u32,
    pub max_concurrent_requests: usize,
    /// Advanced, not in the contract's example: the wire ping interval.
    #[serde(deserialize_with = "duration")]
    pub wire_ping_interval: Duration,
    /// Advanced, not in the contract: how long the bridge may wait after an event to take the
    /// next ones in with it (`0` turns it off; [`crate::wake_batch`]).
    #[serde(deserialize_with = "duration")]
    pub event_batch_window: Duration,
}

impl Default for CloudFile {
    fn default() -> Self {
        CloudFile {
            base_url: DEFAULT_BASE_URL.into(),
            ws_url: DEFAULT_WS_URL.into(),
            api_key: None,
            api_key_file: None,
            key_header: DEFAULT_KEY_HEADER.into(),
            session_header: DEFAULT_SESSION_HEADER.into(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            resync_interval: DEFAULT_RESYNC_INTERVAL,
            max_requests_per_minute: DEFAULT_MAX_REQUESTS_PER_MINUTE,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
            wire_ping_interval: DEFAULT_WIRE_PING_INTERVAL,
            event_batch_window: crate::wake_batch::DEFAULT_WINDOW,
        }
    }
}

/// One entry of `networks:` as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct NetworkFile {
    pub email: String,
    pub password: Option<Secret>,
    pub password_file: Option<PathBuf>,
    /// `ids:` with no value (null) means the same as `[]`.
    pub ids: Option<Vec<String>>,
}

/// `http:` as written in the file.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct HttpFile {
    /// `None` (null) or `""` turns the listener off.
    pub listen: Option<String>,
    /// What a page beyond loopback must present to control anything.
    pub token: Option<Secret>,
    /// A file holding `token`.
    pub token_file: Option<PathBuf>,
    /// Host names (besides IP addresses and `localhost`) the listener answers to.
    pub public_host: Vec<String>,
    /// Open connections at most.
    pub max_connections: usize,
    /// Open live streams at most.
    pub max_live_streams: usize,
    /// Time for a request's headers.
    #[serde(deserialize_with = "duration")]
    pub header_timeout: Duration,
    /// Time a connection may neither read nor write.
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
}

impl Default for HttpFile {
    fn default() -> Self {
        HttpFile {
            listen: Some(DEFAULT_HTTP_LISTEN.into()),
            token: None,
            token_file: None,
            public_host: Vec::new(),
            max_connections: DEFAULT_HTTP_MAX_CONNECTIONS,
            max_live_streams: DEFAULT_HTTP_MAX_LIVE_STREAMS,
            header_timeout: DEFAULT_HTTP_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_HTTP_IDLE_TIMEOUT,
        }
    }
}

/// `health:`, the former name of `http:`, as written in the file: only its `listen` is read.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct HealthFile {
    /// As `http.listen`.
    pub listen: Option<String>,
}

impl Default for HealthFile {
    fn default() -> Self {
        HealthFile { listen: Some(DEFAULT_HTTP_LISTEN.into()) }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// `log:` as written in the file.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LogFile {
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogFile {
    fn default() -> Self {
        LogFile { level: DEFAULT_LOG_LEVEL.into(), format: LogFormat::Text }
    }
}

/// The longest duration any key takes: every one of them is added to the present (a timer, a
/// deadline), and far past what any of them means.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Deserialises a human duration (`10s`, `15m`, `1h 30m`, at most [`MAX_DURATION`]) with humantime. The error quotes the
/// value and humantime's reason, e.g. `invalid duration "10 parsecs": unknown time unit ...`.
pub(crate) fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    struct HumanDuration;

    impl Visitor<'_> for HumanDuration {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration like 10s or 15m")
        }

        fn visit_str<E: de::Error>(self, value: &str) -> Result<Duration, E> {
            let d = humantime::parse_duration(value.trim())
                .map_err(|e| E::custom(format!("invalid duration {value:?}: {e}")))?;
            if d > MAX_DURATION {
                return Err(E::custom(format!("invalid duration {value:?}: at most a year (365d)")));
            }
            Ok(d)
        }

        /// A bare `0` needs no unit (`event_batch_window: 0` turns the batching off); any other
        /// number does.
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<Duration, E> {
            match value {
                0 => Ok(Duration::ZERO),
                _ => Err(E::invalid_type(de::Unexpected::Unsigned(value), &self)),
            }
        }
    }

    deserializer.deserialize_any(HumanDuration)
}

/// The field names a `#[derive(Deserialize)]` struct accepts.
///
/// Serde hands the list to `Deserializer::deserialize_struct`; this asks the type to deserialise
/// from a probe that records the list and then fails. `None` for types that do not go through
/// `deserialize_struct` (maps, `#[serde(flatten)]`). Used to name the valid keys in an
/// unknown-key error and to check that the docs cover every key, without a hand-kept list that
/// could drift from the structs (the MQTT settings belong to another module).
pub fn fields_of<T: for<'de> Deserialize<'de>>() -> Option<&'static [&'static str]> {
    let mut found = None;
    // The probe always fails; only the recorded list matters.
    let _ = T::deserialize(FieldProbe(&mut found));
    found
}

/// A deserializer that only records the field list of a struct.
struct FieldProbe<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("probe"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found() {
        assert_eq!(fields_of::<NetworkFile>(), Some(&["email", "password", "password_file", "ids"][..]));
        assert_eq!(fields_of::<String>(), None);
    }

    #[test]
    fn durations_are_human() {
        #[derive(Deserialize)]
        struct D {
            #[serde(deserialize_with = "duration")]
            d: Duration,
        }
        let d: D = serde_yaml::from_str("d: 1h 30m").unwrap();
        assert_eq!(d.d, Duration::from_secs(5400));
        let e = serde_yaml::from_str::<D>("d: 10 parsecs").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("d: invalid duration \"10 parsecs\": unknown time unit"), "{e}");
        let zero: D = serde_yaml::from_str("d: 0").unwrap();
        assert_eq!(zero.d, Duration::ZERO, "a bare 0 needs no unit");
        let e = serde_yaml::from_str::<D>("d: 10").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("d: invalid type: integer `10`, expected a duration like 10s"), "{e}");
        // Past any meaning, and an overflow once added to the present.
        let e = serde_yaml::from_str::<D>("d: 300000000000y").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("d: invalid duration \"300000000000y\": at most a year"), "{e}");
        assert!(serde_yaml::from_str::<D>("d: 365d").is_ok());
    }
}
