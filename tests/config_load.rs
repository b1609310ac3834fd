//! Loading the configuration: defaults, every key, environment layering, secret files, the
//! example file and the documentation of every key. The error messages are in `config_errors.rs`.

use casambi2mqtt::config::{self, Config, LogFormat};
use casambi2mqtt::mqtt::{DiscoveryMode, Protocol};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/config").join(name)
}

fn root(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

fn load(name: &str, vars: &[(&str, &str)]) -> Config {
    match config::load(&fixture(name), env(vars)) {
        Ok(c) => c,
        Err(e) => panic!("{name} should load:\n{e}"),
    }
}

/// Asserts every documented default of the sections that have no secret or e-mail in them.
fn assert_defaults(c: &Config) {
    assert_eq!(c.cloud.base_url.as_str(), "https://door.casambi.com/");
    assert_eq!(c.cloud.ws_url, "wss://door.casambi.com/v1/bridge/");
    assert_eq!(c.cloud.key_header, "X-Casambi-Key");
    assert_eq!(c.cloud.session_header, "X-Casambi-Session");
    assert_eq!(c.cloud.poll_interval, Duration::from_secs(10));
    assert_eq!(c.cloud.resync_interval, Duration::from_secs(15 * 60));
    assert_eq!(c.cloud.max_requests_per_minute, 60);
    assert_eq!(c.cloud.max_concurrent_requests, 4);
    assert_eq!(c.cloud.wire_ping_interval, Duration::from_secs(240));
    assert_eq!(c.cloud.event_batch_window, Duration::from_millis(1));
    assert_eq!(c.mqtt.url, "mqtt://127.0.0.1:1883");
    assert_eq!(c.mqtt.username, "");
    assert_eq!(c.mqtt.password.expose(), "");
    assert_eq!(c.mqtt.password_file, None);
    assert_eq!(c.mqtt.ca_file, None);
    assert_eq!(c.mqtt.client_id, "casambi2mqtt");
    assert_eq!(c.mqtt.base_topic, "casambi");
    assert_eq!(c.mqtt.qos, 1);
    assert_eq!(c.mqtt.snapshot_qos, 0);
    assert_eq!(c.mqtt.protocol, Protocol::Auto);
    assert_eq!(c.mqtt.max_inflight, None);
    assert_eq!(c.mqtt.inflight(), 1024, "snapshots at QoS 0: a window for changes");
    assert_eq!(c.mqtt.tcp_nodelay, None);
    assert!(!c.mqtt.nodelay(), "changes at QoS 1: Nagle's algorithm gathers the packets");
    assert!(c.homeassistant.enabled);
    assert_eq!(c.homeassistant.discovery_prefix, "homeassistant");
    assert_eq!(c.homeassistant.status_topic, "homeassistant/status");
    assert_eq!(c.homeassistant.discovery, DiscoveryMode::Device);
    assert!(c.output.attribute_topics);
    assert_eq!(c.http.listen, Some("127.0.0.1:8099".parse().unwrap()));
    assert_eq!(c.log.level, "info");
    assert_eq!(c.log.format, LogFormat::Text);
}

#[test]
fn a_minimal_file_gets_the_documented_defaults() {
    let c = load("minimal.yaml", &[]);
    assert_defaults(&c);
    assert_eq!(c.cloud.api_key.expose(), "test-api-key");
    assert_eq!(c.networks.len(), 1);
    assert_eq!(c.networks[0].email, "admin@example.com");
    assert_eq!(c.networks[0].password.expose(), "test-password");
    assert!(c.networks[0].ids.is_empty());
    assert_eq!(c.file, Some(fixture("minimal.yaml")));
}

/// The example with its placeholder secrets replaced (here by the environment) loads and
/// yields the documented defaults.
#[test]
fn the_example_file_loads_and_yields_the_documented_defaults() {
    let secrets =
        [("CASAMBI2MQTT_CLOUD__API_KEY", "real-key"), ("CASAMBI2MQTT_NETWORKS__0__PASSWORD", "real-password")];
    let c = match config::load(&root("config.example.yaml"), env(&secrets)) {
        Ok(c) => c,
        Err(e) => panic!("config.example.yaml should load:\n{e}"),
    };
    assert_defaults(&c);
    assert_eq!(c.cloud.api_key.expose(), "real-key");
    assert_eq!(c.networks.len(), 1);
    assert_eq!(c.networks[0].email, "admin@example.com");
    assert_eq!(c.networks[0].password.expose(), "real-password");
    assert!(c.networks[0].ids.is_empty());
}

/// A copy of the example whose placeholder secrets were not replaced is refused, naming each
/// key (it could only fail later, at login).
#[test]
fn the_example_file_as_shipped_names_its_placeholders() {
    let e = match config::load(&root("config.example.yaml"), env(&[])) {
        Ok(c) => panic!("the placeholders should be refused, got {c:?}"),
        Err(e) => e.to_string(),
    };
    let placeholder = "is still the placeholder of config.example.yaml: put the real value here";
    assert_eq!(
        e.lines().collect::<Vec<_>>(),
        [format!("cloud.api_key: {placeholder}"), format!("networks[0].password: {placeholder}")],
        "{e}"
    );
}

#[test]
fn every_key_is_read() {
    let c = load("full.yaml", &[]);
    assert_eq!(c.cloud.base_url.as_str(), "http://127.0.0.1:8765/api");
    assert_eq!(c.cloud.ws_url, "ws://127.0.0.1:8765/v1/bridge/");
    assert_eq!(c.cloud.api_key.expose(), "full-api-key");
    assert_eq!(c.cloud.key_header, "X-Service-Key");
    assert_eq!(c.cloud.session_header, "X-Service-Session");
    assert_eq!(c.cloud.poll_interval, Duration::from_secs(3));
    assert_eq!(c.cloud.resync_interval, Duration::from_secs(5400));
    assert_eq!(c.cloud.max_requests_per_minute, 120);
    assert_eq!(c.cloud.max_concurrent_requests, 8);
    assert_eq!(c.cloud.wire_ping_interval, Duration::from_secs(30));
    assert_eq!(c.cloud.event_batch_window, Duration::from_millis(5));
    let emails: Vec<&str> = c.networks.iter().map(|n| n.email.as_str()).collect();
    assert_eq!(emails, ["one@example.com", "two@example.com"]);
    assert_eq!(c.networks[0].ids, ["net-a", "net-b"]);
    assert!(c.networks[1].ids.is_empty(), "`ids:` with no value means all networks");
    assert_eq!(c.networks[1].password.expose(), "two-password");
    assert_eq!(c.mqtt.url, "mqtts://broker.example.com:8884");
    assert_eq!(c.mqtt.username, "bridge");
    assert_eq!(c.mqtt.password.expose(), "mqtt-password");
    assert_eq!(c.mqtt.client_id, "site-7");
    assert_eq!(c.mqtt.base_topic, "lights");
    assert_eq!(c.mqtt.qos, 2);
    assert_eq!(c.mqtt.protocol, Protocol::V311);
    assert!(!c.homeassistant.enabled);
    assert_eq!(c.homeassistant.discovery_prefix, "ha");
    assert_eq!(c.homeassistant.status_topic, "ha/status");
    assert_eq!(c.homeassistant.discovery, DiscoveryMode::Component);
    assert!(!c.output.attribute_topics);
    assert_eq!(c.http.listen, Some("0.0.0.0:9100".parse().unwrap()));
    assert_eq!(c.log.level, "info,casambi2mqtt=debug");
    assert_eq!(c.log.format, LogFormat::Json);
    let mqtt = c.mqtt_config();
    assert_eq!(mqtt.mqtt.base_topic, "lights");
}

#[test]
fn env_overrides_win_over_keys_present_in_the_file() {
    let c = load(
        "full.yaml",
        &[
            ("CASAMBI2MQTT_MQTT__URL", "mqtt://other:1884"),
            ("CASAMBI2MQTT_CLOUD__POLL_INTERVAL", "7s"),
            ("CASAMBI2MQTT_MQTT__QOS", "0"),
            ("CASAMBI2MQTT_MQTT__MAX_INFLIGHT", "65535"),
            ("CASAMBI2MQTT_MQTT__TCP_NODELAY", "false"),
            ("CASAMBI2MQTT_HOMEASSISTANT__ENABLED", "true"),
            ("CASAMBI2MQTT_CLOUD__API_KEY", "env-key"),
            ("CASAMBI2MQTT_NETWORKS__1__EMAIL", "env@example.com"),
        ],
    );
    assert_eq!(c.mqtt.url, "mqtt://other:1884");
    assert_eq!(c.cloud.poll_interval, Duration::from_secs(7));
    assert_eq!(c.mqtt.qos, 0);
    assert_eq!(c.mqtt.max_inflight, Some(65535));
    assert_eq!(c.mqtt.inflight(), 65535);
    assert_eq!(c.mqtt.tcp_nodelay, Some(false), "set, it holds even at QoS 0");
    assert!(!c.mqtt.nodelay());
    assert!(c.homeassistant.enabled);
    assert_eq!(c.cloud.api_key.expose(), "env-key");
    assert_eq!(c.networks[1].email, "env@example.com");
    assert_eq!(c.networks[1].password.expose(), "two-password", "the rest of the entry stays");
    // Keys the env did not name keep the file's values.
    assert_eq!(c.mqtt.base_topic, "lights");
}

#[test]
fn env_sets_nested_keys_absent_from_the_file() {
    let c = load(
        "minimal.yaml",
        &[
            ("CASAMBI2MQTT_HOMEASSISTANT__DISCOVERY_PREFIX", "ha2"),
            ("CASAMBI2MQTT_HOMEASSISTANT__DISCOVERY", "component"),
            ("CASAMBI2MQTT_OUTPUT__ATTRIBUTE_TOPICS", "false"),
            ("CASAMBI2MQTT_HEALTH__LISTEN", ""),
            ("CASAMBI2MQTT_LOG__FORMAT", "json"),
            ("CASAMBI2MQTT_CLOUD__MAX_CONCURRENT_REQUESTS", "2"),
            ("CASAMBI2MQTT_CLOUD__EVENT_BATCH_WINDOW", "0"),
            ("CASAMBI2MQTT_CONFIG", "ignored: not a key variable"),
            ("OTHER_MQTT__URL", "ignored: other prefix"),
        ],
    );
    assert_eq!(c.homeassistant.discovery_prefix, "ha2");
    assert_eq!(c.homeassistant.discovery, DiscoveryMode::Component);
    assert!(!c.output.attribute_topics);
    assert_eq!(c.http.listen, None, "an empty listen turns the endpoint off");
    assert_eq!(c.log.format, LogFormat::Json);
    assert_eq!(c.cloud.max_concurrent_requests, 2);
    assert_eq!(c.cloud.event_batch_window, Duration::ZERO, "a bare 0 turns the batching off");
    assert_eq!(c.mqtt.url, "mqtt://127.0.0.1:1883");
}

#[test]
fn env_values_stay_strings_unless_the_key_needs_more() {
    let c = load(
        "minimal.yaml",
        &[
            ("CASAMBI2MQTT_MQTT__PASSWORD", "123456"),
            ("CASAMBI2MQTT_MQTT__USERNAME", "true"),
            ("CASAMBI2MQTT_NETWORKS__0__IDS", "[abc, \"123\"]"),
            ("CASAMBI2MQTT_MQTT__PROTOCOL", "3.1.1"),
        ],
    );
    assert_eq!(c.mqtt.password.expose(), "123456");
    assert_eq!(c.mqtt.username, "true");
    assert_eq!(c.networks[0].ids, ["abc", "123"]);
    assert_eq!(c.mqtt.protocol, Protocol::V311);
}

#[test]
fn a_container_can_be_configured_by_the_environment_alone() {
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "net-secret\n").unwrap();
    let pw = pw.display().to_string();
    let vars = env(&[
        ("CASAMBI2MQTT_CLOUD__API_KEY", "k"),
        ("CASAMBI2MQTT_NETWORKS__0__EMAIL", "a@example.com"),
        ("CASAMBI2MQTT_NETWORKS__0__PASSWORD_FILE", &pw),
        ("CASAMBI2MQTT_NETWORKS__1__EMAIL", "b@example.com"),
        ("CASAMBI2MQTT_NETWORKS__1__PASSWORD", "b-pw"),
    ]);
    let c = config::parse("", vars).unwrap();
    assert_eq!(c.networks.len(), 2);
    assert_eq!(c.networks[0].password.expose(), "net-secret");
    assert_eq!(c.networks[1].email, "b@example.com");
    assert_eq!(c.file, None);
    assert_defaults(&c);

    let whole = "[{email: c@example.com, password: c-pw, ids: [x]}]";
    let c = config::parse("", env(&[("CASAMBI2MQTT_CLOUD__API_KEY", "k"), ("CASAMBI2MQTT_NETWORKS", whole)])).unwrap();
    assert_eq!(c.networks[0].email, "c@example.com");
    assert_eq!(c.networks[0].ids, ["x"]);
}

#[test]
fn site_credentials_load_from_the_file_the_environment_and_secret_files() {
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("site_pw");
    std::fs::write(&pw, "site-secret\n").unwrap();
    let yaml = "cloud: {api_key: k}\nsites:\n  - email: owner@example.com\n    password: demo\n    ids: [n1]\n";
    let c = config::parse(yaml, env(&[])).unwrap();
    assert!(c.networks.is_empty(), "a site alone is enough");
    assert_eq!(c.sites.len(), 1);
    assert_eq!((c.sites[0].email.as_str(), c.sites[0].password.expose()), ("owner@example.com", "demo"));
    assert_eq!(c.sites[0].ids, ["n1"]);
    assert!(
        c.summary().contains("0 credentials entries + 1 site login (1 network id, 0 open to all)"),
        "{}",
        c.summary()
    );
    let debug = format!("{c:?}");
    assert!(!debug.contains("demo\""), "the site password is not in Debug: {debug}");

    // The environment replaces the file's password with a file, and appends an entry.
    let vars = env(&[
        ("CASAMBI2MQTT_SITES__0__PASSWORD_FILE", &pw.display().to_string()),
        ("CASAMBI2MQTT_SITES__1__EMAIL", "second@example.com"),
        ("CASAMBI2MQTT_SITES__1__PASSWORD", "second-pw"),
        ("CASAMBI2MQTT_SITES__1__IDS", "[a, b]"),
    ]);
    let c = config::parse(yaml, vars).unwrap();
    assert_eq!(c.sites[0].password.expose(), "site-secret");
    assert_eq!(c.sites[1].email, "second@example.com");
    assert_eq!(c.sites[1].ids, ["a", "b"]);

    let whole = "[{email: w@example.com, password: w-pw}]";
    let c = config::parse("", env(&[("CASAMBI2MQTT_CLOUD__API_KEY", "k"), ("CASAMBI2MQTT_SITES", whole)])).unwrap();
    assert_eq!(c.sites[0].email, "w@example.com");
    assert!(c.sites[0].ids.is_empty());
}

#[test]
fn secret_files_are_read_and_lose_one_trailing_newline() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, content: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path.display().to_string()
    };
    let key = write("key", "file-key\n");
    let net = write("net", "net-pw\r\n");
    let mqtt = write("mqtt", "mqtt-pw\n\n");
    let yaml = format!(
        "cloud:\n  api_key_file: {key}\nnetworks:\n  - email: a@example.com\n    password_file: {net}\n\
         mqtt:\n  username: bridge\n  password: \"\"\n  password_file: {mqtt}\n"
    );
    let c = config::parse(&yaml, env(&[])).unwrap();
    assert_eq!(c.cloud.api_key.expose(), "file-key");
    assert_eq!(c.networks[0].password.expose(), "net-pw");
    assert_eq!(c.mqtt.password.expose(), "mqtt-pw\n", "only one newline is dropped");
    assert_eq!(c.mqtt.password_file, None, "read once, here");
}

#[test]
fn an_env_secret_replaces_the_files_secret_in_either_form() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key");
    std::fs::write(&path, "from-file\n").unwrap();
    let file_var = path.display().to_string();
    let c = load("minimal.yaml", &[("CASAMBI2MQTT_CLOUD__API_KEY_FILE", &file_var)]);
    assert_eq!(c.cloud.api_key.expose(), "from-file");

    let yaml = format!("cloud:\n  api_key_file: {file_var}\nnetworks:\n  - email: a@example.com\n    password: p\n");
    let c = config::parse(&yaml, env(&[("CASAMBI2MQTT_CLOUD__API_KEY", "from-env")])).unwrap();
    assert_eq!(c.cloud.api_key.expose(), "from-env");
}

#[test]
fn secrets_stay_out_of_debug_and_summary() {
    let c = load("full.yaml", &[]);
    let debug = format!("{c:?}");
    let summary = c.summary();
    for secret in ["full-api-key", "one-password", "two-password", "mqtt-password"] {
        assert!(!debug.contains(secret), "{secret} in Debug: {debug}");
        assert!(!summary.contains(secret), "{secret} in summary: {summary}");
    }
    assert!(!summary.contains("one@example.com"), "{summary}");
    assert!(summary.contains("mqtts://broker.example.com:8884"), "{summary}");
    assert!(summary.contains("2 credentials entries (2 network ids, 1 open to all)"), "{summary}");
    let one = config::parse("cloud: {api_key: k}\nnetworks: [{email: a@b, password: p, ids: [n1]}]\n", env(&[]));
    let one = one.unwrap().summary();
    assert!(one.contains("1 credentials entry (1 network id, 0 open to all)"), "{one}");

    let c = config::parse(
        "cloud: {api_key: k}\nnetworks: [{email: a@b, password: p}]\nmqtt: {url: \"mqtt://user:hunter2@broker\"}\n",
        env(&[]),
    )
    .unwrap();
    assert!(!c.summary().contains("hunter2"), "{}", c.summary());
}

/// Keys as written in a YAML file: `(section, key)` for each `key:` line under a section,
/// commented-out lines included (the `*_file` alternatives are documented that way).
fn yaml_keys(text: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut keys = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_suffix(':').filter(|n| !n.starts_with([' ', '#'])) {
            section = name.to_string();
            keys.push((String::new(), section.clone()));
            continue;
        }
        let body = line.trim_start().trim_start_matches('#').trim_start().trim_start_matches("- ");
        if line.starts_with(' ')
            && let Some((key, _)) = body.split_once(':')
            && !key.is_empty()
            && key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        {
            keys.push((section.clone(), key.to_string()));
        }
    }
    keys
}

#[test]
fn every_key_is_in_the_example_and_the_docs() {
    let example = std::fs::read_to_string(root("config.example.yaml")).unwrap();
    let docs = std::fs::read_to_string(root("docs/configuration.md")).unwrap();
    let in_example = yaml_keys(&example);
    let keys = config::known_keys();
    assert!(keys.len() >= 30, "{keys:?}");
    for key in &keys {
        let (section, name) = key.split_once(['.', '[']).unwrap();
        let name = name.trim_start_matches("].");
        assert!(in_example.iter().any(|(s, k)| s == section && k == name), "{key} is not in config.example.yaml");
        assert!(docs.contains(&format!("| `{key}` |")), "{key} has no row in docs/configuration.md");
        if !key.contains("[]") {
            let var = config::env_var_for(key);
            assert!(docs.contains(&format!("`{var}`")), "{var} is not in docs/configuration.md");
        }
    }
    // And nothing documented that the configuration does not know.
    for (section, name) in in_example.iter().filter(|(s, _)| !s.is_empty()) {
        let dotted = if section == "networks" || section == "sites" {
            format!("{section}[].{name}")
        } else {
            format!("{section}.{name}")
        };
        assert!(keys.contains(&dotted), "config.example.yaml documents {dotted}, which is not a key");
    }
}

#[test]
fn the_process_environment_variant_reads_an_explicit_file() {
    // The test process sets no CASAMBI2MQTT_ variables; the file alone decides.
    let c = config::load_from_process_env(Some(&fixture("minimal.yaml"))).unwrap();
    assert_eq!(c.cloud.api_key.expose(), "test-api-key");
    assert!(config::load_from_process_env(Some(Path::new("/nonexistent/config.yaml"))).is_err());
}

#[test]
fn the_readme_links_the_configuration_reference_instead_of_repeating_it() {
    // docs/configuration.md is the one reference (the key test above holds it to the code); the
    // README links it, and a second copy of the key table there would drift from it.
    let readme = std::fs::read_to_string(root("README.md")).unwrap();
    assert!(readme.contains("](docs/configuration.md)"), "README.md does not link docs/configuration.md");
    for key in config::known_keys() {
        assert!(!readme.contains(&format!("| `{key}` |")), "README.md repeats the row of {key}");
    }
}
