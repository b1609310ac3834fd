//! From the file form of each section to the typed settings the layers use, checking everything
//! that would only fail later (at connect time, or silently): URL schemes, header names, zero
//! durations and limits, missing or conflicting secrets, addresses, log filters.
//!
//! Each function records every problem it finds in the [`Reader`] and returns `None` when there
//! was at least one, so one run reports all problems of a section.

use super::error::{Detail, Problem};
use super::file::{CloudFile, HealthFile, HttpFile, LogFile, MAX_WIRE_PING_INTERVAL, NetworkFile};
use super::reader::Reader;
use super::secrets;
use super::{HttpSettings, LogSettings};
use crate::bridge::{CloudSettings, CredentialSettings};
use crate::mqtt::broker_url::redact_url;
use crate::mqtt::settings::{Config as MqttConfig, HaSettings, MqttSettings, OutputSettings, SettingsError};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;
use url::Url;

/// Checks `cloud:` and builds [`CloudSettings`].
pub(crate) fn cloud(reader: &mut Reader, c: CloudFile) -> Option<CloudSettings> {
    let before = reader.problems.len();
    let base_url = url(reader, "cloud.base_url", &c.base_url, &["http", "https"]);
    // The channel takes the URL as text; it is only checked here.
    url(reader, "cloud.ws_url", &c.ws_url, &["ws", "wss"]);
    header_name(reader, "cloud.key_header", &c.key_header);
    header_name(reader, "cloud.session_header", &c.session_header);
    if c.key_header.eq_ignore_ascii_case(&c.session_header) {
        reader.push(Problem::invalid("cloud.session_header", "must differ from cloud.key_header"));
    }
    positive_duration(reader, "cloud.poll_interval", c.poll_interval);
    positive_duration(reader, "cloud.resync_interval", c.resync_interval);
    if c.wire_ping_interval.is_zero() || c.wire_ping_interval > MAX_WIRE_PING_INTERVAL {
        reader.push(Problem::invalid(
            "cloud.wire_ping_interval",
            format!(
                "must be more than 0s and at most {}, got {}",
                humantime::format_duration(MAX_WIRE_PING_INTERVAL),
                humantime::format_duration(c.wire_ping_interval)
            ),
        ));
    }
    if c.event_batch_window > crate::wake_batch::MAX_WINDOW {
        reader.push(Problem::invalid(
            "cloud.event_batch_window",
            format!(
                "must be at most {} (0s turns it off), got {}",
                humantime::format_duration(crate::wake_batch::MAX_WINDOW),
                humantime::format_duration(c.event_batch_window)
            ),
        ));
    }
    within(reader, "cloud.max_requests_per_minute", c.max_requests_per_minute as usize, usize::MAX);
    within(reader, "cloud.max_concurrent_requests", c.max_concurrent_requests, MAX_CONCURRENT_REQUESTS);
    let api_key = secrets::resolve(reader, "cloud.api_key", c.api_key, c.api_key_file.as_deref(), true);
    if let Some(key) = &api_key
        && http::HeaderValue::from_str(key.expose()).is_err()
    {
        let key_name = if c.api_key_file.is_some() { "cloud.api_key_file" } else { "cloud.api_key" };
        reader.push(Problem::invalid(key_name, "the API key contains characters an HTTP header cannot carry"));
    }
    if let Some(key) = &api_key {
        placeholder(reader, "cloud.api_key", c.api_key_file.is_some(), key);
    }
    if reader.problems.len() > before {
        return None;
    }
    Some(CloudSettings {
        base_url: base_url?,
        ws_url: c.ws_url,
        api_key: api_key?,
        key_header: c.key_header,
        session_header: c.session_header,
        poll_interval: c.poll_interval,
        resync_interval: c.resync_interval,
        max_requests_per_minute: c.max_requests_per_minute,
        max_concurrent_requests: c.max_concurrent_requests,
        wire_ping_interval: c.wire_ping_interval,
        event_batch_window: c.event_batch_window,
    })
}

/// Checks `networks:` and `sites:` and builds one [`CredentialSettings`] per entry of each.
/// Together they need at least one entry.
pub(crate) fn logins(
    reader: &mut Reader,
    networks: Vec<NetworkFile>,
    sites: Vec<NetworkFile>,
) -> Option<(Vec<CredentialSettings>, Vec<CredentialSettings>)> {
    if networks.is_empty() && sites.is_empty() {
        reader.push(Problem::invalid(
            "networks",
            "at least one entry in networks or sites is required (the email and password of a network's admin, \
             or of a site user)",
        ));
        return None;
    }
    let networks = credentials(reader, "networks", networks);
    let sites = credentials(reader, "sites", sites);
    Some((networks?, sites?))
}

/// Checks the entries of one list of credentials (`networks` or `sites`): e-mail, password, ids.
/// A network id may appear once in the list.
fn credentials(reader: &mut Reader, list: &str, entries: Vec<NetworkFile>) -> Option<Vec<CredentialSettings>> {
    let before = reader.problems.len();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        let prefix = format!("{list}[{i}]");
        let email = entry.email.trim().to_string();
        if email.is_empty() {
            reader.push(Problem::new(format!("{prefix}.email"), Detail::Required { alternative: None }));
        }
        let password = secrets::resolve(
            reader,
            &format!("{prefix}.password"),
            entry.password,
            entry.password_file.as_deref(),
            true,
        );
        if let Some(password) = &password {
            placeholder(reader, &format!("{prefix}.password"), entry.password_file.is_some(), password);
        }
        let ids = entry.ids.unwrap_or_default();
        for (j, id) in ids.iter().enumerate() {
            let key = format!("{prefix}.ids[{j}]");
            if id.trim().is_empty() {
                reader.push(Problem::invalid(key, "must not be empty"));
            } else if let Some(first) = seen.get(id.trim()) {
                reader.push(Problem::invalid(key, format!("network id {id:?} is already listed in {list}[{first}]")));
            } else {
                seen.insert(id.trim().to_string(), i);
            }
        }
        if let Some(password) = password {
            out.push(CredentialSettings { email, password, ids });
        }
    }
    (reader.problems.len() == before).then_some(out)
}

/// Resolves `mqtt.password_file`, then runs the MQTT layer's own checks.
///
/// The password is read here (one trailing newline dropped, like every secret file) and
/// `password_file` is cleared, so the MQTT layer does not read it a second time.
pub(crate) fn mqtt(
    reader: &mut Reader,
    mut mqtt: MqttSettings,
    homeassistant: HaSettings,
    output: OutputSettings,
) -> Option<MqttConfig> {
    let before = reader.problems.len();
    let password =
        secrets::resolve(reader, "mqtt.password", Some(mqtt.password.clone()), mqtt.password_file.as_deref(), false);
    // A password that is itself a problem (given twice, unreadable) is not checked again below.
    let password_refused = reader.problems.len() > before;
    if let Some(password) = password {
        placeholder(reader, "mqtt.password", mqtt.password_file.is_some(), &password);
        mqtt.password = password;
        mqtt.password_file = None;
    }
    if let Some(ca) = &mqtt.ca_file
        && let Err(e) = std::fs::metadata(ca)
    {
        reader.push(Problem::invalid(
            "mqtt.ca_file",
            format!("cannot read {}: {}", ca.display(), secrets::io_reason(&e)),
        ));
    }
    let config = MqttConfig { mqtt, homeassistant, output, ..MqttConfig::default() };
    let problems = config.problems().into_iter();
    for problem in problems.filter(|p| !(password_refused && p.key() == "mqtt.password")) {
        match problem {
            SettingsError::Invalid { key, reason } => reader.push(Problem::invalid(key, reason)),
            SettingsError::File { key, path, source } => reader.push(Problem::invalid(
                key,
                format!("cannot read {}: {}", path.display(), secrets::io_reason(&source)),
            )),
        }
    }
    (reader.problems.len() == before).then_some(config)
}

/// Checks `http:` and the former `health.listen`, read as `http.listen` when `http.listen` is not
/// given (both given is a conflict); an empty or null `listen` turns the listener off. The token
/// is `token` or `token_file`, and may be missing (a page beyond loopback is then read-only).
pub(crate) fn http(reader: &mut Reader, h: HttpFile, former: HealthFile) -> Option<HttpSettings> {
    let before = reader.problems.len();
    // The environment wins over the file here too: an image that sets one name does not clash
    // with a file that uses the other.
    let from_env = |key: &str| reader.origin(key).is_some();
    let (http_env, health_env) = (from_env("http.listen"), from_env("health.listen"));
    let (key, listen) = match (reader.is_given("http", "listen"), reader.is_given("health", "listen")) {
        (true, true) if health_env && !http_env => ("health.listen", former.listen),
        (true, true) if http_env == health_env => {
            reader.push(Problem::new("http.listen", Detail::Conflict { other: "health.listen".into() }));
            ("http.listen", h.listen)
        }
        (true, true) | (true, false) | (false, false) => ("http.listen", h.listen),
        (false, true) => ("health.listen", former.listen),
    };
    let listen = listen.as_deref().map(str::trim).unwrap_or("");
    let listen = if listen.is_empty() {
        None
    } else {
        match listen.parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                reader.push(Problem::invalid(
                    key,
                    format!("expected IP:PORT (like 127.0.0.1:8099 or 0.0.0.0:8099), or \"\" for off, got {listen:?}"),
                ));
                None
            }
        }
    };
    let token =
        secrets::resolve(reader, "http.token", h.token, h.token_file.as_deref(), false).filter(|t| !t.is_empty());
    if let Some(token) = &token {
        placeholder(reader, "http.token", h.token_file.is_some(), token);
        let length = token.expose().chars().count();
        if length < MIN_TOKEN_CHARS {
            let key = if h.token_file.is_some() { "http.token_file" } else { "http.token" };
            reader.push(Problem::invalid(
                key,
                format!("must be at least {MIN_TOKEN_CHARS} characters (a long random string), got {length}"),
            ));
        }
    }
    let public_host = public_hosts(reader, &h.public_host);
    within(reader, "http.max_connections", h.max_connections, MAX_HTTP_CONNECTIONS);
    within(reader, "http.max_live_streams", h.max_live_streams, MAX_HTTP_CONNECTIONS);
    positive_duration(reader, "http.header_timeout", h.header_timeout);
    positive_duration(reader, "http.idle_timeout", h.idle_timeout);
    let limits = crate::web::listener::Limits {
        max_connections: h.max_connections,
        header_timeout: h.header_timeout,
        idle_timeout: h.idle_timeout,
    };
    (reader.problems.len() == before).then_some(HttpSettings {
        listen,
        token,
        public_host,
        limits,
        max_live_streams: h.max_live_streams,
    })
}

/// The shortest `http.token` taken: the page's control is reachable beyond this machine.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Checks `http.public_host`: host names (no scheme, port or path), lower-cased.
fn public_hosts(reader: &mut Reader, names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let name = name.trim().to_ascii_lowercase();
        let valid = !name.is_empty()
            && name.len() <= 253
            && name
                .split('.')
                .all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
        if valid {
            out.push(name);
        } else {
            let shown: String = name.chars().take(40).collect();
            reader.push(Problem::invalid(
                format!("http.public_host[{i}]"),
                format!("expected a host name like bridge.example.com (no scheme, port or path), got {shown:?}"),
            ));
        }
    }
    out
}

/// The level names `log.level` takes besides a full `RUST_LOG`-style filter.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Checks `log:`: a level name, or a filter with targets (`info,casambi2mqtt=debug`).
pub(crate) fn log(reader: &mut Reader, l: LogFile) -> Option<LogSettings> {
    let level = l.level.trim().to_string();
    let is_filter = level.contains(['=', ',', '[']);
    let ok = if is_filter {
        tracing_subscriber::EnvFilter::try_new(&level).is_ok()
    } else {
        LEVELS.iter().any(|name| name.eq_ignore_ascii_case(&level))
    };
    if !ok {
        reader.push(Problem::invalid(
            "log.level",
            format!("expected one of {} or a filter like info,casambi2mqtt=debug, got {level:?}", LEVELS.join(", ")),
        ));
        return None;
    }
    Some(LogSettings { level, format: l.format })
}

/// Parses a URL and checks its scheme and host.
fn url(reader: &mut Reader, key: &str, text: &str, schemes: &[&str]) -> Option<Url> {
    let shown = redact_url(text);
    let wanted = schemes.iter().map(|s| format!("{s}://")).collect::<Vec<_>>().join(" or ");
    let wrong = || format!("expected a URL starting with {wanted}, got {shown:?}");
    match Url::parse(text) {
        Err(e) => {
            reader.push(Problem::invalid(key, format!("invalid URL {shown:?}: {e}")));
            None
        }
        Ok(url) if !schemes.contains(&url.scheme()) || url.host_str().is_none_or(str::is_empty) => {
            reader.push(Problem::invalid(key, wrong()));
            None
        }
        Ok(url) => Some(url),
    }
}

/// The secrets config.example.yaml ships with. A copy of the example that still holds one would
/// only fail at login (after retries, as an authentication error); refused here, it names the key.
const PLACEHOLDERS: [&str; 2] = ["your-api-key", "change-me"];

/// Refuses a secret that is still a placeholder of config.example.yaml. `from_file`: the secret
/// came from `<key>_file`, which is then the key named.
fn placeholder(reader: &mut Reader, key: &str, from_file: bool, secret: &crate::cloud::model::Secret) {
    if PLACEHOLDERS.contains(&secret.expose()) {
        let key = if from_file { format!("{key}_file") } else { key.to_string() };
        reader.push(Problem::invalid(key, "is still the placeholder of config.example.yaml: put the real value here"));
    }
}

/// Checks that a header name is one HTTP allows.
fn header_name(reader: &mut Reader, key: &str, name: &str) {
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        reader.push(Problem::invalid(key, format!("{name:?} is not a valid HTTP header name")));
    }
}

/// A zero interval would mean a busy loop.
fn positive_duration(reader: &mut Reader, key: &str, value: Duration) {
    if value.is_zero() {
        reader.push(Problem::invalid(key, "must be more than 0s"));
    }
}

/// A zero limit would mean no requests at all.
/// The most concurrent requests `cloud.max_concurrent_requests` takes: far above any API key's
/// quota, and a count the request gate's semaphore holds.
const MAX_CONCURRENT_REQUESTS: usize = 10_000;
/// The most `http.max_connections` and `http.max_live_streams` take: far above the open files any
/// process gets, and a count the listener's semaphores hold.
const MAX_HTTP_CONNECTIONS: usize = 1_000_000;

/// A count of at least 1 and at most `max` (`usize::MAX`: no ceiling).
fn within(reader: &mut Reader, key: &str, value: usize, max: usize) {
    if value == 0 {
        reader.push(Problem::invalid(key, "must be at least 1, got 0"));
    } else if value > max {
        reader.push(Problem::invalid(key, format!("must be at most {max}, got {value}")));
    }
}
