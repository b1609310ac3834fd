//! The configuration (docs/configuration.md, a contract): a YAML file, every key overridable by an
//! environment variable `CASAMBI2MQTT_<SECTION>__<KEY>`, secrets also readable from files.
//!
//! Loading runs in three steps, each reporting problems by key:
//! 1. the file is parsed into a YAML tree and the environment overrides are applied to that tree
//!    (the `env` submodule), so the environment always wins;
//! 2. each section is deserialised on its own (unknown keys, wrong types, bad durations);
//! 3. `validate` checks what would only fail later (URLs, zero limits, secrets) and builds the
//!    typed settings of the layers: [`CloudSettings`], [`CredentialSettings`], the MQTT layer's
//!    settings, [`HttpSettings`] and [`LogSettings`].
//!
//! Every problem found is reported, one line each ([`ConfigError`]); the binary exits with code 2
//! before connecting anywhere. Secrets are [`crate::cloud::model::Secret`]s: never in messages,
//! logs or `Debug` output.
//!
//! The file: [`load`] reads the file it is given and fails when it is missing. [`load_default`]
//! reads `./config.yaml` when it exists and otherwise starts from the defaults, so a container can
//! be configured by environment variables alone.

mod datapoints;
pub mod devices;
mod env;
mod error;
mod file;
mod reader;
mod secrets;
mod validate;

pub use datapoints::DATA_TYPES;
pub use env::{PREFIX as ENV_PREFIX, var_for as env_var_for};
pub use error::{ConfigError, Detail, Problem};
pub use file::{
    DEFAULT_BASE_URL, DEFAULT_HTTP_LISTEN, DEFAULT_KEY_HEADER, DEFAULT_LOG_LEVEL, DEFAULT_MAX_CONCURRENT_REQUESTS,
    DEFAULT_MAX_REQUESTS_PER_MINUTE, DEFAULT_POLL_INTERVAL, DEFAULT_RESYNC_INTERVAL, DEFAULT_SESSION_HEADER,
    DEFAULT_WIRE_PING_INTERVAL, DEFAULT_WS_URL, LogFormat, MAX_DURATION, fields_of,
};
pub(crate) use secrets::io_reason;

use crate::bridge::{CloudSettings, CredentialSettings};
use crate::cloud::model::Secret;
use crate::mqtt::broker_url::redact_url;
use crate::mqtt::settings::{Config as MqttConfig, DiscoveryMode, HaSettings, MqttSettings, OutputSettings, Protocol};
use file::{CloudFile, HealthFile, HttpFile, LogFile, NetworkFile};
use reader::Reader;
use serde_yaml::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The file read when no path is given.
pub const DEFAULT_PATH: &str = "config.yaml";

/// `http:` (formerly `health:`) — the HTTP listener: the web page (docs/web.md), `/healthz` and
/// `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// Where to listen; `None` = no listener (`listen: ""`).
    pub listen: Option<SocketAddr>,
    /// The token a page must present to control anything when `listen` is not a loopback
    /// address (`token_file` already read into it); `None` = not set.
    pub token: Option<Secret>,
    /// Host names the listener answers to besides IP addresses and `localhost`, lower-case,
    /// without a port (docs/web.md#security).
    pub public_host: Vec<String>,
    /// The listener's connection and time limits (docs/web.md#limits).
    pub limits: crate::web::listener::Limits,
    /// Open live streams at most.
    pub max_live_streams: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            listen: DEFAULT_HTTP_LISTEN.parse().ok(),
            token: None,
            public_host: Vec::new(),
            limits: crate::web::listener::Limits {
                max_connections: file::DEFAULT_HTTP_MAX_CONNECTIONS,
                header_timeout: file::DEFAULT_HTTP_HEADER_TIMEOUT,
                idle_timeout: file::DEFAULT_HTTP_IDLE_TIMEOUT,
            },
            max_live_streams: file::DEFAULT_HTTP_MAX_LIVE_STREAMS,
        }
    }
}

/// `log:` — logging. `RUST_LOG`, when set, replaces `level` (applied by the binary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// A level (`info`) or a filter (`info,casambi2mqtt=debug`).
    pub level: String,
    /// Line format.
    pub format: LogFormat,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings { level: DEFAULT_LOG_LEVEL.into(), format: LogFormat::Text }
    }
}

/// The whole, checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `cloud:` — the service and the client-side limits.
    pub cloud: CloudSettings,
    /// `networks:` — one entry per set of network (admin) credentials.
    pub networks: Vec<CredentialSettings>,
    /// `sites:` — one entry per set of site (user) credentials; `networks` and `sites` are never
    /// both empty.
    pub sites: Vec<CredentialSettings>,
    /// `mqtt:` — the broker (its `password_file` is already read into `password`).
    pub mqtt: MqttSettings,
    /// `homeassistant:` — discovery.
    pub homeassistant: HaSettings,
    /// `output:` — extra topics.
    pub output: OutputSettings,
    /// `http:` — the web page and the health endpoints.
    pub http: HttpSettings,
    /// `log:` — logging.
    pub log: LogSettings,
    /// `datapoints:` — fetching logged datapoints.
    pub datapoints: crate::bridge::datapoints::DatapointSettings,
    /// `datapoints.sensors` — Home Assistant sensors of extra datapoint keys.
    pub datapoint_sensors: crate::mqtt::settings::DatapointSensors,
    /// `devices:` — per-device settings.
    pub devices: std::sync::Arc<crate::mqtt::devices::Devices>,
    /// The file the configuration came from; `None` = defaults and environment only.
    pub file: Option<PathBuf>,
}

/// Loads `path` (which must exist) with the overrides found in `env` (name, value pairs; only
/// names starting with [`ENV_PREFIX`] matter). Taking the environment as a parameter keeps tests
/// away from the process environment.
pub fn load(path: &Path, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::Read { path: path.to_path_buf(), reason: secrets::io_reason(&e) })?;
    parse_with(Some(path), &text, env)
}

/// Loads [`DEFAULT_PATH`] when it exists; otherwise the defaults and `env` alone.
pub fn load_default(env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
    let path = Path::new(DEFAULT_PATH);
    if path.exists() { load(path, env) } else { parse_with(None, "", env) }
}

/// [`load`] (with `Some`, the `-c FILE` case) or [`load_default`] (with `None`), with the
/// process environment. Variables that are not valid Unicode are read lossily.
pub fn load_from_process_env(path: Option<&Path>) -> Result<Config, ConfigError> {
    let env = std::env::vars_os()
        .map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()))
        .filter(|(k, _)| k.starts_with(ENV_PREFIX));
    match path {
        Some(path) => load(path, env),
        None => load_default(env),
    }
}

/// Loads a configuration from YAML text (no file), e.g. for the demo or tests.
pub fn parse(text: &str, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
    parse_with(None, text, env)
}

/// Every key the configuration accepts, dotted (`networks[].password_file`), in file order.
/// `None` entries of [`fields_of`] (a section that cannot be listed) are skipped, and so are the
/// former names still read ([`reader::FORMER_SECTIONS`]).
pub fn known_keys() -> Vec<String> {
    section_fields()
        .iter()
        .filter(|(section, _)| !reader::FORMER_SECTIONS.contains(section))
        .flat_map(|(section, fields)| {
            let sep = if matches!(*section, "networks" | "sites") { "[]." } else { "." };
            fields.unwrap_or_default().iter().map(move |f| format!("{section}{sep}{f}"))
        })
        .collect()
}

/// The keys of each section (for `networks` and `sites`, of one entry).
fn section_fields() -> [(&'static str, Option<&'static [&'static str]>); 11] {
    [
        ("cloud", fields_of::<CloudFile>()),
        ("networks", fields_of::<NetworkFile>()),
        ("sites", fields_of::<NetworkFile>()),
        ("mqtt", fields_of::<MqttSettings>()),
        ("homeassistant", fields_of::<HaSettings>()),
        ("output", fields_of::<OutputSettings>()),
        ("http", fields_of::<HttpFile>()),
        ("health", fields_of::<HealthFile>()),
        ("log", fields_of::<LogFile>()),
        ("datapoints", fields_of::<datapoints::DatapointsFile>()),
        // Keyed by unit, group, scene or network: each entry is checked on its own.
        ("devices", None),
    ]
}

/// Parses, overrides, deserialises and validates; see the module documentation.
fn parse_with(
    path: Option<&Path>,
    text: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    let source_name = path.map_or_else(|| "configuration".to_string(), |p| p.display().to_string());
    let yaml_error = |reason: String| ConfigError::Yaml { source_name: source_name.clone(), reason };
    let mut tree: Value = serde_yaml::from_str(text).map_err(|e| yaml_error(e.to_string()))?;
    tree.apply_merge().map_err(|e| yaml_error(e.to_string()))?;
    if !matches!(tree, Value::Mapping(_) | Value::Null) {
        return Err(yaml_error(format!(
            "the top level must be a mapping of sections ({})",
            reader::SECTIONS.join(", ")
        )));
    }
    let mut reader = Reader::new(tree, env);
    reader.check_keys(&section_fields());
    let cloud = reader.section::<CloudFile>("cloud");
    let networks = reader.section::<Vec<NetworkFile>>("networks");
    let sites = reader.section::<Vec<NetworkFile>>("sites");
    let mqtt = reader.section::<MqttSettings>("mqtt");
    let homeassistant = reader.section::<HaSettings>("homeassistant");
    let output = reader.section::<OutputSettings>("output");
    let http = reader.section::<HttpFile>("http");
    let health = reader.section::<HealthFile>("health");
    let log = reader.section::<LogFile>("log");
    let datapoints = reader.section::<datapoints::DatapointsFile>("datapoints");
    let devices = reader.section::<devices::DevicesFile>("devices");

    let cloud = cloud.and_then(|c| validate::cloud(&mut reader, c));
    let logins = match (networks, sites) {
        (Some(n), Some(s)) => validate::logins(&mut reader, n, s),
        _ => None,
    };
    let mqtt = match (mqtt, homeassistant, output) {
        (Some(m), Some(h), Some(o)) => validate::mqtt(&mut reader, m, h, o),
        _ => None,
    };
    let http = match (http, health) {
        (Some(http), Some(health)) => validate::http(&mut reader, http, health),
        _ => None,
    };
    let log = log.and_then(|l| validate::log(&mut reader, l));
    let datapoints = datapoints.and_then(|d| datapoints::validate(&mut reader, d));
    let devices = devices.and_then(|d| devices::validate(&mut reader, d));

    match (cloud, logins, mqtt, http, log, datapoints, devices) {
        (
            Some(cloud),
            Some((networks, sites)),
            Some(m),
            Some(http),
            Some(log),
            Some((datapoints, datapoint_sensors)),
            Some(devices),
        ) if reader.problems.is_empty() => Ok(Config {
            cloud,
            networks,
            sites,
            mqtt: m.mqtt,
            homeassistant: m.homeassistant,
            output: m.output,
            http,
            log,
            datapoints,
            datapoint_sensors,
            devices: std::sync::Arc::new(devices),
            file: path.map(Path::to_path_buf),
        }),
        _ if reader.problems.is_empty() => Err(ConfigError::Invalid(vec![Problem::invalid(
            "configuration",
            "could not be read (no details; please report this)",
        )])),
        _ => Err(ConfigError::Invalid(reader.problems)),
    }
}

impl Config {
    /// The MQTT layer's view: `mqtt`, `homeassistant` and `output` together.
    pub fn mqtt_config(&self) -> MqttConfig {
        MqttConfig {
            mqtt: self.mqtt.clone(),
            homeassistant: self.homeassistant.clone(),
            output: self.output.clone(),
            datapoint_sensors: self.datapoint_sensors.clone(),
            devices: self.devices.clone(),
        }
    }

    /// One line for the start-up log: where the configuration came from and what it says, with
    /// no secrets and no e-mail addresses (URLs lose any `user:password@`).
    pub fn summary(&self) -> String {
        let source = self.file.as_ref().map_or_else(|| "environment only".to_string(), |p| p.display().to_string());
        let entries = self.networks.iter().chain(&self.sites);
        let ids: usize = entries.clone().map(|n| n.ids.len()).sum();
        let open = entries.filter(|n| n.ids.is_empty()).count();
        let c = &self.cloud;
        let ha = &self.homeassistant;
        let discovery = match (ha.enabled, ha.discovery) {
            (false, _) => "off".to_string(),
            (true, DiscoveryMode::Device) => format!("on (device, prefix {})", ha.discovery_prefix),
            (true, DiscoveryMode::Component) => format!("on (component, prefix {})", ha.discovery_prefix),
        };
        let protocol = match self.mqtt.protocol {
            Protocol::Auto => "auto",
            Protocol::V5 => "v5",
            Protocol::V311 => "v3",
        };
        let format = match self.log.format {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        };
        let sites = match self.sites.len() {
            0 => String::new(),
            1 => " + 1 site login".to_string(),
            n => format!(" + {n} site logins"),
        };
        let http = self.http.listen.map_or_else(|| "off".to_string(), |a| a.to_string());
        format!(
            "config {source}: cloud {} (ws {}), {} credentials entr{}{sites} ({ids} network id{}, {open} open to all), \
             poll {}, resync {}, {} req/min, {} concurrent; mqtt {} ({protocol}, qos {}, base topic {}), \
             discovery {discovery}, attribute topics {}; http {http}; log {} {format}",
            redact_url(c.base_url.as_str()),
            redact_url(&c.ws_url),
            self.networks.len(),
            if self.networks.len() == 1 { "y" } else { "ies" },
            if ids == 1 { "" } else { "s" },
            humantime::format_duration(c.poll_interval),
            humantime::format_duration(c.resync_interval),
            c.max_requests_per_minute,
            c.max_concurrent_requests,
            redact_url(&self.mqtt.url),
            self.mqtt.qos,
            self.mqtt.base_topic,
            if self.output.attribute_topics { "on" } else { "off" },
            self.log.level,
        )
    }
}
