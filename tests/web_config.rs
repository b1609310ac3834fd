//! The `http:` section (docs/configuration.md): `listen` (formerly `health.listen`, still read),
//! and the page's control token, inline or from a file, never shown.

use casambi2mqtt::config;
use std::net::SocketAddr;

const BASE: &str = "cloud:\n  api_key: k\nnetworks:\n  - email: a@example.com\n    password: p\n";

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn listen(yaml: &str, vars: &[(&str, &str)]) -> Option<SocketAddr> {
    config::parse(&format!("{BASE}{yaml}"), env(vars)).unwrap().http.listen
}

fn error(yaml: &str, vars: &[(&str, &str)]) -> String {
    config::parse(&format!("{BASE}{yaml}"), env(vars)).unwrap_err().to_string()
}

#[test]
fn http_listen_and_its_former_name() {
    let addr = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
    assert_eq!(listen("", &[]), addr("127.0.0.1:8099"), "the default");
    assert_eq!(listen("http:\n  listen: 0.0.0.0:9000\n", &[]), addr("0.0.0.0:9000"));
    assert_eq!(listen("health:\n  listen: 0.0.0.0:9001\n", &[]), addr("0.0.0.0:9001"), "the former name");
    assert_eq!(listen("http:\n  listen: \"\"\n", &[]), None, "off");
    assert_eq!(listen("health:\n  listen: \"\"\n", &[]), None, "off by its former name");
    assert_eq!(listen("", &[("CASAMBI2MQTT_HEALTH__LISTEN", "127.0.0.1:9002")]), addr("127.0.0.1:9002"));
    assert_eq!(
        error("http:\n  listen: 0.0.0.0:9000\nhealth:\n  listen: 0.0.0.0:9001\n", &[]),
        "http.listen and health.listen are both set; use only one"
    );
    // The environment wins over the other name in the file (an image setting one, an older file).
    assert_eq!(
        listen("health:\n  listen: 0.0.0.0:9001\n", &[("CASAMBI2MQTT_HTTP__LISTEN", "0.0.0.0:9003")]),
        addr("0.0.0.0:9003")
    );
    assert_eq!(
        listen("http:\n  listen: 0.0.0.0:9000\n", &[("CASAMBI2MQTT_HEALTH__LISTEN", "0.0.0.0:9004")]),
        addr("0.0.0.0:9004")
    );
    assert_eq!(
        error("http:\n  listen: nowhere\n", &[]),
        "http.listen: expected IP:PORT (like 127.0.0.1:8099 or 0.0.0.0:8099), or \"\" for off, got \"nowhere\""
    );
    assert!(
        error("http:\n  port: 1\n", &[]).starts_with("unknown key http.port; valid keys: listen, token, token_file")
    );
    let summary = config::parse(&format!("{BASE}http:\n  listen: 0.0.0.0:9000\n"), env(&[])).unwrap().summary();
    assert!(summary.contains("http 0.0.0.0:9000"), "{summary}");
}

#[test]
fn the_token_is_a_secret_inline_or_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "from-a-file-7731\n").unwrap();
    let c = config::parse(&format!("{BASE}http:\n  token_file: {}\n", file.display()), env(&[])).unwrap();
    assert_eq!(c.http.token.as_ref().map(|t| t.expose()), Some("from-a-file-7731"));
    let shown = format!("{c:?}\n{}", c.summary());
    assert!(!shown.contains("from-a-file-7731"), "the token leaked: {shown}");

    let c = config::parse(BASE, env(&[("CASAMBI2MQTT_HTTP__TOKEN", "from-env-8842-long")])).unwrap();
    assert_eq!(c.http.token.as_ref().map(|t| t.expose()), Some("from-env-8842-long"));
    assert_eq!(config::parse(BASE, env(&[])).unwrap().http.token, None, "no token by default");

    let both = format!("{BASE}http:\n  token: inline-9953\n  token_file: {}\n", file.display());
    let e = config::parse(&both, env(&[])).unwrap_err().to_string();
    assert_eq!(e, "http.token and http.token_file are both set; use only one");
    let wrong = config::parse(&format!("{BASE}http:\n  token: [inline-9953]\n"), env(&[])).unwrap_err().to_string();
    assert!(!wrong.contains("inline-9953"), "{wrong}");
}

#[test]
fn the_listener_s_names_and_limits() {
    let c = config::parse(BASE, env(&[])).unwrap();
    assert_eq!(c.http.limits.max_connections, 256);
    assert_eq!(c.http.max_live_streams, 32);
    assert_eq!(c.http.limits.header_timeout, std::time::Duration::from_secs(10));
    assert_eq!(c.http.limits.idle_timeout, std::time::Duration::from_secs(60));
    assert!(c.http.public_host.is_empty());
    let yaml = "http:\n  public_host: [Bridge.Example.com, casambi2mqtt]\n  max_connections: 8\n  \
                max_live_streams: 2\n  header_timeout: 2s\n  idle_timeout: 5s\n";
    let c = config::parse(&format!("{BASE}{yaml}"), env(&[])).unwrap();
    assert_eq!(c.http.public_host, ["bridge.example.com", "casambi2mqtt"]);
    assert_eq!((c.http.limits.max_connections, c.http.max_live_streams), (8, 2));
    assert_eq!(c.http.limits.idle_timeout, std::time::Duration::from_secs(5));
    let c = config::parse(BASE, env(&[("CASAMBI2MQTT_HTTP__PUBLIC_HOST", "[a.example]")])).unwrap();
    assert_eq!(c.http.public_host, ["a.example"]);

    assert_eq!(
        error("http:\n  public_host: [\"https://bridge.example.com/\"]\n", &[]),
        "http.public_host[0]: expected a host name like bridge.example.com (no scheme, port or path), \
         got \"https://bridge.example.com/\""
    );
    assert_eq!(error("http:\n  max_connections: 0\n", &[]), "http.max_connections: must be at least 1, got 0");
    assert_eq!(error("http:\n  header_timeout: 0s\n", &[]), "http.header_timeout: must be more than 0s");
}

#[test]
fn a_short_token_is_refused_without_being_shown() {
    let e = error("http:\n  token: short-7731\n", &[]);
    assert_eq!(e, "http.token: must be at least 16 characters (a long random string), got 10");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "short-7731\n").unwrap();
    let e = error(&format!("http:\n  token_file: {}\n", file.display()), &[]);
    assert!(e.starts_with("http.token_file: must be at least 16 characters"), "{e}");
    assert!(!e.contains("short-7731"), "{e}");
}
