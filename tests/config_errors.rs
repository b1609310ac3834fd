//! Every configuration error names the key (and the environment variable it came from) and says
//! what is wrong, in exact words; secrets never appear in a message.

use casambi2mqtt::config::{self, ConfigError};
use std::path::Path;

/// The smallest valid configuration; tests append or replace sections.
const CLOUD: &str = "cloud:\n  api_key: k\n";
const NETWORKS: &str = "networks:\n  - email: a@example.com\n    password: p\n";

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn problems(yaml: &str, vars: &[(&str, &str)]) -> Vec<String> {
    match config::parse(yaml, env(vars)) {
        Ok(c) => panic!("expected an error for:\n{yaml}\ngot {c:?}"),
        Err(e) => {
            let lines: Vec<String> = e.problems().iter().map(ToString::to_string).collect();
            assert_eq!(e.to_string(), lines.join("\n"), "one line per problem");
            lines
        }
    }
}

/// The one problem of a configuration that has exactly one.
fn problem(yaml: &str, vars: &[(&str, &str)]) -> String {
    let mut all = problems(yaml, vars);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

/// The one problem of the minimal configuration plus `extra`.
fn with(extra: &str) -> String {
    problem(&format!("{CLOUD}{NETWORKS}{extra}"), &[])
}

#[test]
fn unknown_keys_are_named_with_the_valid_ones() {
    let e = with("mqtt:\n  prot: 1\n");
    assert!(e.starts_with("unknown key mqtt.prot; valid keys: url, username, password, "), "{e}");
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  pol_interval: 5s\n{NETWORKS}"), &[]),
        "unknown key cloud.pol_interval; valid keys: base_url, ws_url, api_key, api_key_file, key_header, \
         session_header, poll_interval, resync_interval, max_requests_per_minute, max_concurrent_requests, \
         wire_ping_interval, event_batch_window"
    );
    assert_eq!(
        with("mqt:\n  url: x\n"),
        "unknown key mqt; valid keys: cloud, networks, sites, mqtt, homeassistant, output, http, log, datapoints, \
         devices"
    );
    assert_eq!(
        problem(&format!("{CLOUD}networks:\n  - email: a@b\n    password: p\n    passwd: q\n"), &[]),
        "unknown key networks[0].passwd; valid keys: email, password, password_file, ids"
    );
}

#[test]
fn wrong_types_name_the_key_the_expectation_and_the_value() {
    assert_eq!(with("mqtt:\n  qos: high\n"), "mqtt.qos: expected an integer 0..2, got \"high\"");
    assert_eq!(with("mqtt:\n  qos: 300\n"), "mqtt.qos: expected an integer 0..2, got 300");
    assert_eq!(with("mqtt:\n  snapshot_qos: one\n"), "mqtt.snapshot_qos: expected an integer 0..2, got \"one\"");
    assert_eq!(with("mqtt:\n  max_inflight: 70000\n"), "mqtt.max_inflight: expected an integer 1..65535, got 70000");
    assert_eq!(
        with("mqtt:\n  tcp_nodelay: sometimes\n"),
        "mqtt.tcp_nodelay: expected true or false, got \"sometimes\""
    );
    assert_eq!(with("homeassistant:\n  enabled: yes\n"), "homeassistant.enabled: expected true or false, got \"yes\"");
    assert_eq!(
        with("mqtt:\n  username: 1234\n"),
        "mqtt.username: expected a string, got 1234 (put the value in quotes)"
    );
    assert_eq!(with("log:\n  format: xml\n"), "log.format: expected text or json, got \"xml\"");
    assert_eq!(
        with("homeassistant:\n  discovery: [a]\n"),
        "homeassistant.discovery: expected device or component, got a list"
    );
    // Sections that hold secrets say only what kind of value they got (it may be the secrets).
    assert_eq!(with("mqtt: 5\n"), "mqtt: expected a mapping of keys, got a number");
    assert_eq!(
        problem(&format!("{CLOUD}networks: admin\n"), &[]),
        "networks: expected a list of credentials entries (email, password, ids), got a string"
    );
    assert_eq!(
        problem(&format!("{CLOUD}networks:\n  - email: a@b\n    password: p\n    ids: [abc, 12]\n"), &[]),
        "networks[0].ids[1]: expected a string, got 12 (put the value in quotes)"
    );
}

#[test]
fn durations_must_be_human_and_not_zero() {
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  poll_interval: 10 parsecs\n{NETWORKS}"), &[]),
        "cloud.poll_interval: invalid duration \"10 parsecs\": unknown time unit \"parsecs\", supported units: \
         ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations)"
    );
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  resync_interval: 10\n{NETWORKS}"), &[]),
        "cloud.resync_interval: expected a duration like 10s or 15m, got 10"
    );
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  poll_interval: 0s\n{NETWORKS}"), &[]),
        "cloud.poll_interval: must be more than 0s"
    );
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  wire_ping_interval: 5m\n{NETWORKS}"), &[]),
        "cloud.wire_ping_interval: must be more than 0s and at most 4m, got 5m"
    );
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  event_batch_window: 11ms\n{NETWORKS}"), &[]),
        "cloud.event_batch_window: must be at most 10ms (0s turns it off), got 11ms"
    );
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  poll_interval: 0\n{NETWORKS}"), &[]),
        "cloud.poll_interval: must be more than 0s",
        "a bare 0 is a duration, and not one this key accepts"
    );
    assert_eq!(
        problem(&format!("{CLOUD}{NETWORKS}"), &[("CASAMBI2MQTT_CLOUD__EVENT_BATCH_WINDOW", "1s")]),
        "cloud.event_batch_window (from CASAMBI2MQTT_CLOUD__EVENT_BATCH_WINDOW): must be at most 10ms (0s turns it \
         off), got 1s"
    );
}

#[test]
fn urls_must_have_the_right_scheme() {
    let cloud = |line: &str| problem(&format!("cloud:\n  api_key: k\n  {line}\n{NETWORKS}"), &[]);
    assert_eq!(
        cloud("base_url: ftp://door.example.com"),
        "cloud.base_url: expected a URL starting with http:// or https://, got \"ftp://door.example.com\""
    );
    assert_eq!(cloud("base_url: not a url"), "cloud.base_url: invalid URL \"not a url\": relative URL without a base");
    assert_eq!(
        cloud("ws_url: https://door.casambi.com/v1/bridge/"),
        "cloud.ws_url: expected a URL starting with ws:// or wss://, got \"https://door.casambi.com/v1/bridge/\""
    );
    assert_eq!(cloud("key_header: X Key"), "cloud.key_header: \"X Key\" is not a valid HTTP header name");
    let e = with("mqtt:\n  url: http://broker:1883\n");
    assert!(e.starts_with("mqtt.url: ") && e.contains("\"http://broker:1883\""), "{e}");
    let e = with("mqtt:\n  url: \"http://user:hunter2@broker\"\n");
    assert!(!e.contains("hunter2"), "{e}");
}

#[test]
fn limits_must_be_usable() {
    assert_eq!(with("mqtt:\n  qos: 3\n"), "mqtt.qos: must be 0, 1 or 2, got 3");
    assert_eq!(with("mqtt:\n  snapshot_qos: 3\n"), "mqtt.snapshot_qos: must be 0, 1 or 2, got 3");
    assert_eq!(with("mqtt:\n  max_inflight: 0\n"), "mqtt.max_inflight: must be 1..65535, got 0");
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  max_requests_per_minute: 0\n{NETWORKS}"), &[]),
        "cloud.max_requests_per_minute: must be at least 1, got 0"
    );
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  max_concurrent_requests: -1\n{NETWORKS}"), &[]),
        "cloud.max_concurrent_requests: expected a positive integer, got -1"
    );
    // Counts past any use, which the semaphores behind them could not hold.
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  max_concurrent_requests: 2305843009213693952\n{NETWORKS}"), &[]),
        "cloud.max_concurrent_requests: must be at most 10000, got 2305843009213693952"
    );
    assert_eq!(
        with("http:\n  max_live_streams: 2305843009213693952\n"),
        "http.max_live_streams: must be at most 1000000, got 2305843009213693952"
    );
    assert_eq!(
        with("health:\n  listen: localhost:8099\n"),
        "health.listen: expected IP:PORT (like 127.0.0.1:8099 or 0.0.0.0:8099), or \"\" for off, got \"localhost:8099\""
    );
    assert_eq!(
        with("log:\n  level: loud\n"),
        "log.level: expected one of trace, debug, info, warn, error, off or a filter like info,casambi2mqtt=debug, \
         got \"loud\""
    );
}

#[test]
fn secrets_must_be_given_once_and_readable() {
    assert_eq!(problem(NETWORKS, &[]), "cloud.api_key is required (or cloud.api_key_file)");
    assert_eq!(
        problem(&format!("cloud:\n  api_key_file: /x/y\n{NETWORKS}"), &[]),
        "cloud.api_key_file: cannot read /x/y: No such file or directory"
    );
    assert_eq!(
        problem(&format!("cloud:\n  api_key: k\n  api_key_file: /x/y\n{NETWORKS}"), &[]),
        "cloud.api_key and cloud.api_key_file are both set; use only one"
    );
    assert_eq!(
        problem(&format!("{CLOUD}networks:\n  - email: a@example.com\n"), &[]),
        "networks[0].password is required (or networks[0].password_file)"
    );
    assert_eq!(problem(&format!("{CLOUD}networks:\n  - password: p\n"), &[]), "networks[0].email is required");
    assert_eq!(
        with("mqtt:\n  password: m\n  password_file: /x/y\n"),
        "mqtt.password and mqtt.password_file are both set; use only one"
    );
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    assert_eq!(
        problem(&format!("cloud:\n  api_key_file: {}\n{NETWORKS}", empty.display()), &[]),
        format!("cloud.api_key_file: {} is empty", empty.display())
    );
}

#[test]
fn networks_must_not_be_empty_or_overlap() {
    let none = "at least one entry in networks or sites is required (the email and password of a network's \
                admin, or of a site user)";
    assert_eq!(problem(CLOUD, &[]), format!("networks: {none}"));
    assert_eq!(problem(&format!("{CLOUD}networks: []\n"), &[]), format!("networks: {none}"));
    let twice = "networks:\n  - {email: a@b, password: p, ids: [n1]}\n  - {email: c@d, password: q, ids: [n2, n1]}\n";
    assert_eq!(
        problem(&format!("{CLOUD}{twice}"), &[]),
        "networks[1].ids[1]: network id \"n1\" is already listed in networks[0]"
    );
}

#[test]
fn site_entries_are_checked_like_network_entries() {
    let none = "networks: at least one entry in networks or sites is required (the email and password of a \
                network's admin, or of a site user)";
    assert_eq!(problem(&format!("{CLOUD}networks: []\nsites: []\n"), &[]), none);
    assert_eq!(problem(&format!("{CLOUD}sites:\n  - password: p\n"), &[]), "sites[0].email is required");
    assert_eq!(
        problem(&format!("{CLOUD}sites:\n  - email: owner@example.com\n"), &[]),
        "sites[0].password is required (or sites[0].password_file)"
    );
    assert_eq!(
        problem(&format!("{CLOUD}sites:\n  - email: owner@example.com\n    password: change-me\n"), &[]),
        "sites[0].password: is still the placeholder of config.example.yaml: put the real value here"
    );
    assert_eq!(
        problem(&format!("{CLOUD}{NETWORKS}"), &[("CASAMBI2MQTT_SITES__0__EMAIL", "owner@example.com")]),
        "sites[0].password is required (or sites[0].password_file)"
    );
    let twice = "sites:\n  - {email: a@b, password: p, ids: [n1]}\n  - {email: c@d, password: q, ids: [n1]}\n";
    assert_eq!(
        problem(&format!("{CLOUD}{twice}"), &[]),
        "sites[1].ids[0]: network id \"n1\" is already listed in sites[0]"
    );
    let e = problem(&format!("{CLOUD}sites:\n  - {{email: a@b, password: p, site: x}}\n"), &[]);
    assert_eq!(e, "unknown key sites[0].site; valid keys: email, password, password_file, ids");
    // A network in both lists is allowed: the network credentials win at run time.
    let both = "networks: [{email: a@b, password: p, ids: [n1]}]\nsites: [{email: c@d, password: q, ids: [n1]}]\n";
    assert!(config::parse(&format!("{CLOUD}{both}"), env(&[])).is_ok());
}

#[test]
fn env_problems_name_the_variable_and_the_key() {
    let base = format!("{CLOUD}{NETWORKS}");
    assert_eq!(
        problem(&base, &[("CASAMBI2MQTT_MQTT__QOS", "high")]),
        "mqtt.qos (from CASAMBI2MQTT_MQTT__QOS): expected an integer 0..2, got \"high\""
    );
    assert_eq!(
        problem(&base, &[("CASAMBI2MQTT_MQTT__QOS", "7")]),
        "mqtt.qos (from CASAMBI2MQTT_MQTT__QOS): must be 0, 1 or 2, got 7"
    );
    assert_eq!(
        problem(&base, &[("CASAMBI2MQTT_CLOUD__POLL_INTERVAL", "soon")]),
        "cloud.poll_interval (from CASAMBI2MQTT_CLOUD__POLL_INTERVAL): invalid duration \"soon\": \
         expected number at 0"
    );
    let e = problem(&base, &[("CASAMBI2MQTT_MQTT__PROT", "5")]);
    assert!(e.starts_with("unknown key mqtt.prot (from CASAMBI2MQTT_MQTT__PROT); valid keys: url, "), "{e}");
    assert_eq!(
        problem(&base, &[("CASAMBI2MQTT_MQQT__URL", "x")]),
        "unknown key mqqt (from CASAMBI2MQTT_MQQT__URL); valid keys: cloud, networks, sites, mqtt, homeassistant, \
         output, http, log, datapoints, devices"
    );
    assert_eq!(
        problem(&base, &[("CASAMBI2MQTT_CLOUD__API_KEY_FILE", "/x/y")]),
        "cloud.api_key_file (from CASAMBI2MQTT_CLOUD__API_KEY_FILE): cannot read /x/y: No such file or directory"
    );
    assert_eq!(
        problem(&base, &[("CASAMBI2MQTT_NETWORKS__0__IDS", "[a, 5]")]),
        "networks[0].ids[1] (from CASAMBI2MQTT_NETWORKS__0__IDS): expected a string, got 5 (put the value in quotes)"
    );
    assert_eq!(
        problem(&base, &[("CASAMBI2MQTT_MQTT__", "x")]),
        "CASAMBI2MQTT_MQTT__: not a configuration variable (expected CASAMBI2MQTT_<SECTION>__<KEY>)"
    );
    assert_eq!(
        problem(&base, &[("CASAMBI2MQTT_CLOUD__API_KEY__X", "x")]),
        "cloud.api_key.x (from CASAMBI2MQTT_CLOUD__API_KEY__X): cannot set it: cloud.api_key is not a mapping"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let yaml = "cloud:\n  poll_interval: 0s\n  max_requests_per_minute: 0\nmqtt:\n  qos: high\nfoo: 1\n";
    assert_eq!(
        problems(yaml, &[("CASAMBI2MQTT_LOG__LEVEL", "shout")]),
        [
            "unknown key foo; valid keys: cloud, networks, sites, mqtt, homeassistant, output, http, log, datapoints, \
             devices",
            "mqtt.qos: expected an integer 0..2, got \"high\"",
            "cloud.poll_interval: must be more than 0s",
            "cloud.max_requests_per_minute: must be at least 1, got 0",
            "cloud.api_key is required (or cloud.api_key_file)",
            "networks: at least one entry in networks or sites is required (the email and password of a network's admin, \
             or of a site user)",
            "log.level (from CASAMBI2MQTT_LOG__LEVEL): expected one of trace, debug, info, warn, error, off or a \
             filter like info,casambi2mqtt=debug, got \"shout\"",
        ]
    );
}

#[test]
fn secrets_never_appear_in_errors() {
    let yaml =
        "cloud:\n  api_key: [sekrit-key]\n  api_key_file: /x/y\nnetworks:\n  - email: a@b\n    password: 424242\n";
    let err =
        config::parse(yaml, env(&[("CASAMBI2MQTT_MQTT__PASSWORD", "env-sekrit"), ("CASAMBI2MQTT_MQTT__QOS", "9")]))
            .unwrap_err();
    let text = format!("{err}\n{err:?}");
    for secret in ["sekrit-key", "424242", "env-sekrit"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert!(text.contains("networks[0].password: expected a string, got a number (put the value in quotes)"), "{text}");

    // A section written as one value may be all of its secrets: a list of logins in a variable
    // that is not YAML, a broker URL where the `mqtt:` mapping goes.
    let broken = "[{email: a@b.c, password: @hunter2}]";
    for (yaml, vars, secret) in [
        ("", vec![("CASAMBI2MQTT_NETWORKS", broken)], "hunter2"),
        ("", vec![("CASAMBI2MQTT_SITES", broken)], "hunter2"),
        ("", vec![("CASAMBI2MQTT_NETWORKS__0", "a@b.c:hunter2")], "hunter2"),
        ("mqtt: mqtt://user:s3cret@broker\n", vec![], "s3cret"),
        ("cloud: sekrit-key\n", vec![], "sekrit-key"),
    ] {
        let text = problems(yaml, &vars).join("\n");
        assert!(!text.is_empty() && !text.contains(secret), "{secret} leaked: {text}");
    }
}

#[test]
fn file_and_yaml_errors_are_clear() {
    let e = config::load(Path::new("/nonexistent/config.yaml"), env(&[])).unwrap_err();
    assert_eq!(e.to_string(), "cannot read configuration file /nonexistent/config.yaml: No such file or directory");
    assert!(matches!(e, ConfigError::Read { .. }));
    let e = config::parse("mqtt: [1\n", env(&[])).unwrap_err().to_string();
    assert!(e.starts_with("configuration: invalid YAML: "), "{e}");
    let e = config::parse("- a\n- b\n", env(&[])).unwrap_err().to_string();
    assert_eq!(
        e,
        "configuration: invalid YAML: the top level must be a mapping of sections (cloud, networks, sites, \
         mqtt, homeassistant, output, http, log, datapoints, devices)"
    );
    assert_eq!(ConfigError::EXIT_CODE, 2);
}
