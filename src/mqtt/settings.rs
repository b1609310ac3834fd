//! The `mqtt`, `homeassistant` and `output` sections of the configuration (docs/configuration.md).
//!
//! Each struct deserialises from its YAML section with every key optional (the defaults are the
//! ones the design names) and rejects unknown keys, so a typo is reported with the key's name.
//! The password is a [`Secret`]: it never shows in `Debug` output or logs.

use crate::cloud::model::Secret;
use serde::Deserialize;
use std::path::PathBuf;

/// Default of `mqtt.max_inflight` (see [`crate::mqtt::MqttSettings::inflight`]): most
/// unacknowledged QoS 1/2 publications of the publishing connection (MQTT 5; the broker's
/// Receive Maximum can lower it). rumqttc allocates a slot for each up front (~216 B), so its
/// default of 65,535 is memory spent for nothing. With snapshots at QoS 0 (the default) only
/// changes are acknowledged, and this covers a 250-unit scene's burst (BENCHMARKS.md, "Figures
/// behind constants").
pub const PUBLISHING_INFLIGHT: u16 = 1024;
/// Default of `mqtt.max_inflight` with `snapshot_qos` 1 or 2. A small window costs CPU there:
/// once it is full the event loop goes in lock-step, one acknowledgement read for each
/// publication written (BENCHMARKS.md, "Figures behind constants").
pub const SNAPSHOT_INFLIGHT: u16 = 8192;
/// Errors in the MQTT-related configuration; each names the key that is wrong.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A key has a value that cannot work.
    #[error("{key}: {reason}")]
    Invalid {
        /// The configuration key, e.g. `mqtt.url`.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A `*_file` could not be read.
    #[error("{key}: cannot read {path}: {source}")]
    File {
        /// The configuration key.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// MQTT protocol version spoken to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum Protocol {
    /// MQTT 5 first, MQTT 3.1.1 when the broker refuses or closes an MQTT 5 CONNECT before its
    /// CONNACK (the default; docs/brokers.md, "Protocol").
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// MQTT 5 only.
    #[serde(rename = "v5", alias = "5", alias = "5.0")]
    V5,
    /// MQTT 3.1.1, for older brokers.
    #[serde(rename = "v3", alias = "3", alias = "3.1.1", alias = "v311", alias = "v3.1.1")]
    V311,
}

/// `mqtt:` — how to reach the broker and where to publish. Its `Debug` shows `url` without its
/// user info and `password` as `***`.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MqttSettings {
    /// Broker URL: `mqtt://host[:port]` or `mqtts://host[:port]` (TLS).
    pub url: String,
    /// User name; empty = anonymous.
    pub username: String,
    /// Password (never logged).
    pub password: Secret,
    /// File holding the password (container secrets); read by [`MqttSettings::resolve_files`].
    pub password_file: Option<PathBuf>,
    /// Extra CA certificate (PEM) trusted for `mqtts://`, besides the system roots.
    pub ca_file: Option<PathBuf>,
    /// MQTT client id; stable, so the broker does not keep stale sessions.
    pub client_id: String,
    /// First level of every topic the bridge publishes.
    pub base_topic: String,
    /// QoS of publications and subscriptions (0, 1 or 2).
    pub qos: u8,
    /// QoS of whole-network snapshots: everything published at start-up, after a reconnection
    /// or Home Assistant's birth, and when a network is reloaded (0, 1 or 2; default 0). The
    /// store never waits for acknowledgements and every connection sends the snapshot again, so
    /// QoS 1 buys nothing on the way to the broker; it costs the bridge and the broker CPU
    /// at a big site's start-up (acknowledgements read and written one by one).
    /// Changes keep `qos`.
    pub snapshot_qos: u8,
    /// Protocol version: `auto` (default: MQTT 5, else 3.1.1), `v5` or `v3` (3.1.1).
    pub protocol: Protocol,
    /// Most unacknowledged QoS 1/2 publications (MQTT 5; the broker's Receive Maximum can lower
    /// it). Each slot costs ~216 bytes up front; a larger window helps only a broker with a long
    /// round trip. Unset: [`MqttSettings::inflight`] picks one from `snapshot_qos`.
    pub max_inflight: Option<u16>,
    /// Whether the bridge's own topics (`<base>/bridge/…`) and its Home Assistant device carry
    /// `client_id`, for several bridges sharing one `base_topic` (docs/brokers.md, "Scaling
    /// out"). Off: the layout of a bridge alone on its base topic.
    pub instance_topics: bool,
    /// Whether every packet leaves at once (`TCP_NODELAY`) or the kernel may gather the small
    /// packets written while an earlier one is unacknowledged (`false`: Nagle's algorithm).
    /// Unset: [`MqttSettings::nodelay`] picks one from `qos`.
    pub tcp_nodelay: Option<bool>,
}

impl std::fmt::Debug for MqttSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttSettings")
            .field("url", &super::broker_url::redact_url(&self.url))
            .field("username", &self.username)
            .field("password", &self.password)
            .field("password_file", &self.password_file)
            .field("ca_file", &self.ca_file)
            .field("client_id", &self.client_id)
            .field("base_topic", &self.base_topic)
            .field("qos", &self.qos)
            .field("snapshot_qos", &self.snapshot_qos)
            .field("protocol", &self.protocol)
            .field("max_inflight", &self.max_inflight)
            .field("instance_topics", &self.instance_topics)
            .field("tcp_nodelay", &self.tcp_nodelay)
            .finish()
    }
}

impl MqttSettings {
    /// The connections' `TCP_NODELAY`: `tcp_nodelay` if set, else on only when changes go out at
    /// QoS 0.
    ///
    /// rumqttc writes each packet with a system call of its own; with Nagle's algorithm they no
    /// longer make a TCP segment each. That holds a packet only while an earlier one is
    /// unacknowledged, and at QoS 1 or 2 the broker answers every publication at once
    /// (PUBACK/PUBREC), its answer carrying the TCP acknowledgement back: under a stream of
    /// changes the bridge then takes less CPU with the same latency, and leaves more of a shared
    /// machine to the broker near its ceiling. A packet the broker does not answer makes the next
    /// one wait for its delayed acknowledgement (~40 ms on Linux): at QoS 0 every change is
    /// such a packet, so QoS 0 sends every packet at once; and the bridge subscribes at QoS 0,
    /// so that it never writes an acknowledgement of a command for its new state to wait behind.
    pub fn nodelay(&self) -> bool {
        self.tcp_nodelay.unwrap_or(self.qos == 0)
    }

    /// A warning for a combination that works but costs every change latency: Nagle's algorithm
    /// (`tcp_nodelay: false`) with changes at QoS 0, where nothing answers a publication and each
    /// one written while another is unacknowledged waits for the broker's delayed
    /// acknowledgement.
    /// Unset, `tcp_nodelay` never makes this combination.
    pub fn latency_warning(&self) -> Option<&'static str> {
        (!self.nodelay() && self.qos == 0).then_some(
            "mqtt.tcp_nodelay is false with mqtt.qos 0: nothing answers a QoS 0 publication, so changes \
             can wait ~40 ms for the broker's delayed acknowledgement; set mqtt.tcp_nodelay: true or mqtt.qos: 1",
        )
    }

    /// The publishing connection's in-flight window: `max_inflight` if set, else
    /// [`SNAPSHOT_INFLIGHT`] when snapshots go out at QoS 1 or 2 (a big
    /// site's start-up then has tens of thousands of publications in flight) and
    /// [`PUBLISHING_INFLIGHT`] otherwise (only changes, a scene's burst at
    /// most, are acknowledged).
    pub fn inflight(&self) -> u16 {
        self.max_inflight.unwrap_or(if self.snapshot_qos > 0 { SNAPSHOT_INFLIGHT } else { PUBLISHING_INFLIGHT })
    }
}

impl Default for MqttSettings {
    fn default() -> Self {
        MqttSettings {
            url: "mqtt://127.0.0.1:1883".into(),
            username: String::new(),
            password: Secret::default(),
            password_file: None,
            ca_file: None,
            client_id: "casambi2mqtt".into(),
            base_topic: "casambi".into(),
            qos: 1,
            snapshot_qos: 0,
            protocol: Protocol::Auto,
            max_inflight: None,
            instance_topics: false,
            tcp_nodelay: None,
        }
    }
}

/// How Home Assistant discovery messages are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiscoveryMode {
    /// One `<prefix>/device/<id>/config` per device with all its components (`cmps`).
    #[default]
    Device,
    /// One `<prefix>/<component>/<id>/config` per entity (older HA, openHAB).
    Component,
}

/// `homeassistant:` — discovery.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HaSettings {
    /// Publish discovery at all.
    pub enabled: bool,
    /// HA's discovery prefix.
    pub discovery_prefix: String,
    /// Where HA announces `online` (birth) and `offline`.
    pub status_topic: String,
    /// Device-based or per-component discovery.
    pub discovery: DiscoveryMode,
}

impl Default for HaSettings {
    fn default() -> Self {
        HaSettings {
            enabled: true,
            discovery_prefix: "homeassistant".into(),
            status_topic: "homeassistant/status".into(),
            discovery: DiscoveryMode::Device,
        }
    }
}

/// `output:` — extra topics for Node-RED and friends.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputSettings {
    /// Publish a plain-value topic per scalar key of the unit JSON, one level below it.
    pub attribute_topics: bool,
}

impl Default for OutputSettings {
    fn default() -> Self {
        OutputSettings { attribute_topics: true }
    }
}

/// Everything the MQTT side needs, gathered from the four sections.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `mqtt:`.
    pub mqtt: MqttSettings,
    /// `homeassistant:`.
    pub homeassistant: HaSettings,
    /// `output:`.
    pub output: OutputSettings,
    /// `datapoints.sensors`: Home Assistant sensors for further datapoint keys.
    pub datapoint_sensors: DatapointSensors,
    /// `devices:` (shared by every network's mirror).
    pub devices: std::sync::Arc<super::devices::Devices>,
}

impl MqttSettings {
    /// The user name and password the broker is given (docs/configuration.md): each from its key
    /// (`mqtt.username`, `mqtt.password`) when that is not empty, else from `mqtt.url`'s user info;
    /// `None` without a user name.
    pub(crate) fn credentials(&self) -> Option<(String, String)> {
        let (url_user, url_password) = super::broker_url::url_credentials(&self.url).unwrap_or_default();
        let user = if self.username.is_empty() { url_user } else { self.username.clone() };
        let password = self.password.expose();
        let password = if password.is_empty() { url_password } else { password.to_string() };
        (!user.is_empty()).then_some((user, password))
    }

    /// Reads `password_file` into `password` (a trailing newline is dropped). Call once while
    /// loading the configuration, before anything connects.
    pub fn resolve_files(&mut self) -> Result<(), SettingsError> {
        if let Some(path) = &self.password_file {
            let text = std::fs::read_to_string(path).map_err(|source| SettingsError::File {
                key: "mqtt.password_file",
                path: path.clone(),
                source,
            })?;
            self.password = Secret::new(text.trim_end_matches(['\r', '\n']));
        }
        Ok(())
    }
}

impl SettingsError {
    /// The configuration key the problem is about.
    pub fn key(&self) -> &'static str {
        match self {
            SettingsError::Invalid { key, .. } | SettingsError::File { key, .. } => key,
        }
    }
}

/// Whether `s` may be used as (part of) a topic the bridge publishes to.
fn valid_topic_prefix(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('/') && !s.ends_with('/') && !s.contains(['+', '#', '\0'])
}

impl Config {
    /// Checks what cannot work, naming the key: the first of [`Config::problems`].
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.problems().into_iter().next().map_or(Ok(()), Err)
    }

    /// Every value that cannot work, each naming its key: URL scheme, credentials, QoS, topics.
    pub fn problems(&self) -> Vec<SettingsError> {
        let mut problems = Vec::new();
        let mut invalid = |key: &'static str, reason: String| problems.push(SettingsError::Invalid { key, reason });
        let m = &self.mqtt;
        let url = super::broker_url::redact_url(&m.url);
        match m.url.split_once("://") {
            Some(("mqtt" | "tcp" | "mqtts" | "ssl", rest)) if !rest.is_empty() => {
                if super::broker_url::broker_address(&m.url).is_none() {
                    invalid("mqtt.url", format!("no host or a bad port in {url:?}"));
                }
            }
            _ => invalid("mqtt.url", format!("expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT], got {url:?}")),
        }
        if !m.password.expose().is_empty() && m.credentials().is_none() {
            invalid(
                "mqtt.password",
                "is given without a user name: set mqtt.username, or the user in mqtt.url (mqtt://USER@HOST)".into(),
            );
        }
        for (key, qos) in [("mqtt.qos", m.qos), ("mqtt.snapshot_qos", m.snapshot_qos)] {
            if qos > 2 {
                invalid(key, format!("must be 0, 1 or 2, got {qos}"));
            }
        }
        if m.max_inflight == Some(0) {
            invalid("mqtt.max_inflight", "must be 1..65535, got 0".into());
        }
        if m.client_id.is_empty() {
            invalid("mqtt.client_id", "must not be empty".into());
        } else if m.instance_topics && !super::topics::valid_level(&m.client_id) {
            invalid(
                "mqtt.client_id",
                format!("{:?} names a topic level with mqtt.instance_topics: no / + # or NUL", m.client_id),
            );
        }
        if !valid_topic_prefix(&m.base_topic) {
            invalid(
                "mqtt.base_topic",
                format!(
                    "{:?} is not a usable topic (empty, or contains + # NUL or a leading/trailing /)",
                    m.base_topic
                ),
            );
        }
        let ha = &self.homeassistant;
        if ha.enabled {
            if !valid_topic_prefix(&ha.discovery_prefix) {
                invalid("homeassistant.discovery_prefix", format!("{:?} is not a usable topic", ha.discovery_prefix));
            } else if ha.discovery_prefix == m.base_topic {
                invalid("homeassistant.discovery_prefix", "must differ from mqtt.base_topic".into());
            }
            if !valid_topic_prefix(&ha.status_topic) {
                invalid("homeassistant.status_topic", format!("{:?} is not a usable topic", ha.status_topic));
            }
        }
        problems
    }
}

/// How a datapoint key appears as a Home Assistant sensor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SensorSemantics {
    /// Home Assistant `device_class` (`voltage`, `energy`, …).
    pub device_class: Option<String>,
    /// Unit of measurement (`V`, `kWh`, …).
    pub unit: Option<String>,
    /// `measurement`, `total` or `total_increasing`.
    pub state_class: Option<String>,
    /// Shown among the device's diagnostic entities.
    pub diagnostic: bool,
}

/// The Home Assistant semantics of extra datapoint keys (`datapoints.sensors`), by key.
pub type DatapointSensors = std::collections::BTreeMap<String, SensorSemantics>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_design() {
        let c = Config::default();
        assert_eq!(c.mqtt.url, "mqtt://127.0.0.1:1883");
        assert_eq!(c.mqtt.client_id, "casambi2mqtt");
        assert_eq!(c.mqtt.base_topic, "casambi");
        assert_eq!(c.mqtt.qos, 1);
        assert_eq!(c.mqtt.protocol, Protocol::Auto);
        assert!(c.homeassistant.enabled);
        assert_eq!(c.homeassistant.discovery_prefix, "homeassistant");
        assert_eq!(c.homeassistant.status_topic, "homeassistant/status");
        assert_eq!(c.homeassistant.discovery, DiscoveryMode::Device);
        assert!(c.output.attribute_topics);
        c.validate().unwrap();
    }

    #[test]
    fn the_inflight_window_follows_the_snapshot_qos_unless_set() {
        let mut m = MqttSettings::default();
        assert_eq!(m.inflight(), PUBLISHING_INFLIGHT);
        m.snapshot_qos = 1;
        assert_eq!(m.inflight(), SNAPSHOT_INFLIGHT);
        const { assert!(SNAPSHOT_INFLIGHT > PUBLISHING_INFLIGHT) };
        m.max_inflight = Some(300);
        assert_eq!(m.inflight(), 300);
        m.snapshot_qos = 0;
        assert_eq!(m.inflight(), 300);
    }

    #[test]
    fn nagle_is_on_only_when_changes_are_acknowledged_unless_set() {
        let mut m = MqttSettings::default();
        assert_eq!((m.qos, m.tcp_nodelay), (1, None));
        assert!(!m.nodelay(), "QoS 1: the broker's PUBACK carries the TCP acknowledgement back");
        m.qos = 2;
        assert!(!m.nodelay());
        m.qos = 0;
        assert!(m.nodelay(), "QoS 0: nothing answers a publication, so nothing may wait");
        m.tcp_nodelay = Some(false);
        assert!(!m.nodelay(), "set, it is obeyed");
        (m.qos, m.tcp_nodelay) = (1, Some(true));
        assert!(m.nodelay());
        let parsed: MqttSettings = serde_yaml::from_str("tcp_nodelay: false\n").unwrap();
        assert_eq!(parsed.tcp_nodelay, Some(false));
        assert_eq!(parsed.qos, 1, "the other keys keep their defaults");
    }

    #[test]
    fn nagle_at_qos_0_is_warned_about_and_nothing_else_is() {
        let mut m = MqttSettings::default();
        let quiet =
            [(None, 0), (None, 1), (None, 2), (Some(true), 0), (Some(true), 1), (Some(false), 1), (Some(false), 2)];
        for (nodelay, qos) in quiet {
            (m.tcp_nodelay, m.qos) = (nodelay, qos);
            assert_eq!(m.latency_warning(), None, "tcp_nodelay {nodelay:?}, qos {qos}");
        }
        (m.tcp_nodelay, m.qos) = (Some(false), 0);
        let warning = m.latency_warning().unwrap_or_default();
        assert!(warning.contains("mqtt.tcp_nodelay") && warning.contains("mqtt.qos"), "{warning}");
    }

    #[test]
    fn yaml_sections_parse_and_unknown_keys_fail() {
        let m: MqttSettings =
            serde_yaml::from_str("url: mqtts://broker:8883\npassword: hunter2\nprotocol: \"3.1.1\"\n").unwrap();
        assert_eq!(m.protocol, Protocol::V311);
        assert!(!format!("{m:?}").contains("hunter2"), "password must not show in Debug");
        let m: MqttSettings = serde_yaml::from_str("url: mqtt://bob:s3cret@broker\n").unwrap();
        let shown = format!("{m:?}");
        assert!(shown.contains("mqtt://broker") && !shown.contains("s3cret"), "{shown}");
        for (text, protocol) in [("auto", Protocol::Auto), ("v5", Protocol::V5), ("v3", Protocol::V311)] {
            let m: MqttSettings = serde_yaml::from_str(&format!("protocol: {text}\n")).unwrap();
            assert_eq!(m.protocol, protocol, "{text}");
        }
        let err = serde_yaml::from_str::<MqttSettings>("urll: x\n").unwrap_err().to_string();
        assert!(err.contains("urll"), "{err}");
        let ha: HaSettings = serde_yaml::from_str("discovery: component\n").unwrap();
        assert_eq!(ha.discovery, DiscoveryMode::Component);
    }

    #[test]
    fn validation_names_the_key() {
        let mut c = Config::default();
        c.mqtt.base_topic = "a/#".into();
        assert!(c.validate().unwrap_err().to_string().starts_with("mqtt.base_topic"));
        let mut c = Config::default();
        c.mqtt.url = "http://x".into();
        assert!(c.validate().unwrap_err().to_string().starts_with("mqtt.url"));
        let mut c = Config::default();
        (c.mqtt.instance_topics, c.mqtt.client_id) = (true, "site/east".into());
        assert!(c.validate().unwrap_err().to_string().starts_with("mqtt.client_id"));
        let mut c = Config::default();
        c.homeassistant.discovery_prefix = "casambi".into();
        assert!(c.validate().unwrap_err().to_string().starts_with("homeassistant.discovery_prefix"));
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let mut c = Config::default();
        (c.mqtt.url, c.mqtt.qos, c.mqtt.base_topic) = ("http://x".into(), 3, "".into());
        c.mqtt.password = "hunter2".into();
        c.homeassistant.status_topic = "ha/#".into();
        let keys: Vec<&str> = c.problems().iter().map(SettingsError::key).collect();
        assert_eq!(keys, ["mqtt.url", "mqtt.password", "mqtt.qos", "mqtt.base_topic", "homeassistant.status_topic"]);
        assert!(c.problems().iter().all(|p| !p.to_string().contains("hunter2")));
        // A user name from the URL is enough for a password given apart.
        c.mqtt.url = "mqtt://bridge@broker".into();
        assert!(!c.problems().iter().any(|p| p.key() == "mqtt.password"));
    }

    #[test]
    fn password_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        std::fs::write(&path, "s3cret\n").unwrap();
        let mut m = MqttSettings { password_file: Some(path), ..MqttSettings::default() };
        m.resolve_files().unwrap();
        assert_eq!(m.password.expose(), "s3cret");
    }

    #[test]
    fn each_credential_comes_from_its_key_else_from_the_url() {
        let with = |url: &str, username: &str, password: &str| MqttSettings {
            url: url.into(),
            username: username.into(),
            password: password.into(),
            ..MqttSettings::default()
        };
        let pair = |u: &str, p: &str| Some((u.to_string(), p.to_string()));
        assert_eq!(with("mqtt://u:p@h", "", "").credentials(), pair("u", "p"));
        assert_eq!(with("mqtt://u:p@h", "bob", "").credentials(), pair("bob", "p"));
        assert_eq!(with("mqtt://u@h", "", "from-file").credentials(), pair("u", "from-file"));
        assert_eq!(with("mqtt://u:p@h", "bob", "pw").credentials(), pair("bob", "pw"));
        assert_eq!(with("mqtt://h", "bob", "").credentials(), pair("bob", ""));
        assert_eq!(with("mqtt://h", "", "pw").credentials(), None);
    }
}
