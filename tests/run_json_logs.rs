//! With JSON logs, `run` writes nothing but JSON lines, its fatal errors included
//! (docs/cli.md#logging): a log collector never meets a plain `error:` line among them.

mod common;

use common::process::BIN;
use std::io::Write;
use std::process::Command;

/// Runs `run -c <yaml>` with `CASAMBI2MQTT_LOG__FORMAT=json`; returns the exit code and stderr.
fn run_json(yaml: &str) -> (Option<i32>, String) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(yaml.as_bytes()).unwrap();
    let out = Command::new(BIN)
        .args(["run", "-c", f.path().to_str().unwrap()])
        .env_remove("RUST_LOG")
        .env("CASAMBI2MQTT_LOG__FORMAT", "json")
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Every line of `text` is a JSON object; returns them.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    assert!(!text.trim().is_empty(), "no output");
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{text}")))
        .collect()
}

#[test]
fn a_configuration_error_is_a_json_line() {
    let (code, text) = run_json("cloud: [\n");
    assert_eq!(code, Some(2));
    let lines = json_lines(&text);
    assert!(lines.iter().any(|l| l["level"] == "ERROR" && l["fields"]["message"] == "configuration error"), "{text}");
}

#[test]
fn a_fatal_error_is_a_json_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let yaml = format!(
        "cloud:\n  api_key: k\n  base_url: http://127.0.0.1:9\nnetworks:\n  - email: a@example.com\n    password: p\n\
         http:\n  listen: \"{addr}\"\n"
    );
    let (code, text) = run_json(&yaml);
    assert_eq!(code, Some(1));
    let lines = json_lines(&text);
    let fatal = lines.iter().find(|l| l["fields"]["message"] == "fatal").unwrap_or_else(|| panic!("{text}"));
    assert!(fatal["fields"]["error"].as_str().is_some_and(|e| e.contains(&addr.to_string())), "{text}");
}
