//! A real Home Assistant for the tests, driven through `scripts/ha/headless.py`, and the
//! processes around it (docs/homeassistant.md#checked-by-home-assistant).
//!
//! Home Assistant comes from the venv `scripts/ha/setup.sh` makes, named by
//! `CASAMBI2MQTT_HA_VENV` (`.ci/run` sets it) or found at the script's default place. Without it
//! the tests fail: they are the judge, not an option.
#![allow(dead_code)]

use crate::common::free_port;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Home Assistant venv: `CASAMBI2MQTT_HA_VENV`, or setup.sh's default.
pub fn venv() -> PathBuf {
    let venv = match std::env::var_os("CASAMBI2MQTT_HA_VENV") {
        Some(v) => PathBuf::from(v),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .unwrap_or_default();
            cache.join("casambi2mqtt/ha-venv-2026.2.3")
        }
    };
    assert!(
        venv.join("bin/hass").is_file(),
        "no Home Assistant in {}: run scripts/ha/setup.sh and set CASAMBI2MQTT_HA_VENV to the path it prints",
        venv.display()
    );
    venv
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ha").join(name)
}

/// Runs a script of scripts/ha with the venv's Python; its stdout, or a panic with its stderr.
fn python(args: &[&str]) -> String {
    let out = Command::new(venv().join("bin/python"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run the venv's python: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A headless Home Assistant with the MQTT integration on a broker; stopped on drop.
pub struct HomeAssistant {
    dir: tempfile::TempDir,
    http_port: u16,
    broker_port: u16,
}

impl HomeAssistant {
    /// Starts a fresh instance (new configuration, new owner) on the broker at `broker_port`.
    pub fn start(broker_port: u16) -> HomeAssistant {
        let ha = HomeAssistant { dir: tempfile::tempdir().expect("tempdir"), http_port: free_port(), broker_port };
        ha.launch();
        ha
    }

    fn config(&self) -> String {
        self.dir.path().join("ha").display().to_string()
    }

    fn launch(&self) {
        let started = Instant::now();
        let venv = venv().display().to_string();
        let (broker, http) = (self.broker_port.to_string(), self.http_port.to_string());
        let headless = script("headless.py").display().to_string();
        let config = self.config();
        python(&[
            &headless,
            "--config",
            &config,
            "start",
            "--venv",
            &venv,
            "--broker-port",
            &broker,
            "--http-port",
            &http,
        ]);
        println!("Home Assistant up in {:.1} s", started.elapsed().as_secs_f64());
    }

    /// Stops Home Assistant and starts it again on the same configuration.
    pub fn restart(&self) {
        self.stop();
        self.launch();
    }

    fn stop(&self) {
        let headless = script("headless.py").display().to_string();
        python(&[&headless, "--config", &self.config(), "stop"]);
    }

    fn headless(&self, args: &[&str]) -> String {
        let headless = script("headless.py").display().to_string();
        let config = self.config();
        let mut all = vec![headless.as_str(), "--config", config.as_str()];
        all.extend_from_slice(args);
        python(&all)
    }

    /// Every MQTT entity (id, platform, device, state, attributes), waiting up to `wait` for
    /// `count` of them.
    pub fn entities(&self, count: usize, wait: Duration) -> Vec<Value> {
        let out = self.headless(&["entities", "--count", &count.to_string(), "--timeout", &wait.as_secs().to_string()]);
        serde_json::from_str::<Vec<Value>>(&out).unwrap_or_else(|e| panic!("entities: {e}: {out}"))
    }

    /// Calls `service` with `data` and waits until `entity` matches `expect`; milliseconds taken.
    pub fn roundtrip(&self, entity: &str, service: &str, data: Value, expect: Value) -> f64 {
        let out = self.headless(&["roundtrip", entity, service, &data.to_string(), &expect.to_string()]);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("roundtrip: {e}: {out}"));
        v["ms"].as_f64().unwrap_or_else(|| panic!("roundtrip without ms: {out}"))
    }

    /// Waits until `entity` matches `expect` (panics after `max`).
    pub fn wait(&self, entity: &str, expect: Value, max: Duration) {
        self.headless(&["wait", entity, &expect.to_string(), "--timeout", &max.as_secs_f64().to_string()]);
    }

    /// The MQTT device triggers Home Assistant registered: (device name, type, subtype).
    pub fn triggers(&self) -> BTreeSet<(String, String, String)> {
        let out = self.headless(&["triggers"]);
        let list: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("triggers: {e}: {out}"));
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        list.iter().map(|t| (text(&t["device"]), text(&t["type"]), text(&t["subtype"]))).collect()
    }

    /// The WARNING and ERROR records of Home Assistant's log.
    pub fn log(&self) -> Vec<String> {
        let out = self.headless(&["log"]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("log: {e}: {out}"))
    }
}

impl Drop for HomeAssistant {
    fn drop(&mut self) {
        let headless = script("headless.py");
        if let Ok(python) = std::panic::catch_unwind(|| venv().join("bin/python")) {
            let _ = Command::new(python).arg(headless).arg("--config").arg(self.config()).arg("stop").status();
        }
    }
}

/// The discovery summary of `scripts/ha/check_discovery.py` over `retained` (topic → payload);
/// panics when Home Assistant's schemas refuse or drop anything.
pub fn check_discovery(retained: &BTreeMap<String, String>) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("retained.txt");
    let lines: String =
        retained.iter().filter(|(t, _)| t.starts_with("homeassistant/")).map(|(t, p)| format!("{t}\t{p}\n")).collect();
    std::fs::write(&file, lines).expect("write retained configs");
    check_discovery_files(&[&file])
}

/// [`check_discovery`] of files in the golden format.
pub fn check_discovery_files(files: &[&Path]) -> Value {
    let checker = script("check_discovery.py").display().to_string();
    let mut args = vec![checker];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = Command::new(venv().join("bin/python")).args(&refs).output().expect("run check_discovery.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "Home Assistant's schemas refuse or drop parts of the discovery:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("check_discovery.py: {e}: {text}"))
}

/// The retained discovery configs and bridge states on the broker at `port` (topic → payload),
/// read by `mosquitto_sub`, the reference client, whatever the broker.
pub fn retained_configs(port: u16) -> BTreeMap<String, String> {
    let out = Command::new("mosquitto_sub")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-t", "homeassistant/#", "-t", "+/bridge/state"])
        // The broker sends the retained set in one burst, but a busy machine may stretch it past
        // a second; a read cut short would count too few entities.
        .args(["--retained-only", "-v", "-W", "3"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run mosquitto_sub (Debian: mosquitto-clients): {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.trim().is_empty() || err.contains("Timed out"), "mosquitto_sub: {err}");
    text.lines().filter_map(|l| l.split_once(' ')).map(|(t, p)| (t.to_string(), p.to_string())).collect()
}

/// The entity configs (not triggers) among retained discovery configs: what Home Assistant
/// must list.
pub fn published_entities(retained: &BTreeMap<String, String>) -> usize {
    let mut n = 0;
    for (topic, payload) in retained {
        let mut levels = topic.split('/');
        let (Some("homeassistant"), Some(platform)) = (levels.next(), levels.next()) else { continue };
        let Ok(v) = serde_json::from_str::<Value>(payload) else { continue };
        match platform {
            "device" => {
                n += v["cmps"]
                    .as_object()
                    .map(|c| {
                        c.values().filter(|c| c["p"] != "device_automation" && c.get("unique_id").is_some()).count()
                    })
                    .unwrap_or(0)
            }
            "device_automation" => {}
            _ => n += 1,
        }
    }
    n
}

/// A child process killed on drop (and stopped like a service by [`Process::terminate`]).
pub struct Process {
    child: Child,
    name: String,
}

impl Process {
    /// Starts the bridge's binary with `args`; `env` adds variables.
    pub fn bridge(name: &str, args: &[&str], env: &[(&str, &str)]) -> (Process, BufReader<std::process::ChildStdout>) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_casambi2mqtt"));
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        (Process { child, name: name.into() }, stdout)
    }

    /// Reads `stdout` until a line containing `needle`; returns that line. The rest of the
    /// output is drained in the background, so the process never blocks on it.
    pub fn line_with(mut stdout: BufReader<std::process::ChildStdout>, needle: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = stdout.read_line(&mut line).expect("read stdout");
            assert!(n > 0, "the process ended before printing {needle:?}");
            if line.contains(needle) {
                Process::drain(stdout);
                return line.trim().to_string();
            }
        }
    }

    /// Reads and drops the rest of `stdout` in the background.
    pub fn drain(stdout: BufReader<std::process::ChildStdout>) {
        std::thread::spawn(move || for _ in stdout.lines().map_while(Result::ok) {});
    }

    /// SIGTERM, as a service manager stops it, then waits for the exit.
    pub fn terminate(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "{} exited with {status} on SIGTERM", self.name);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{} did not stop within 10 s of SIGTERM", self.name);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Entities per platform and state ("available" for any state but `unavailable`, which is kept
/// apart, as is `unknown`).
pub fn by_platform_and_state(entities: &[Value]) -> BTreeMap<String, BTreeMap<String, usize>> {
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for e in entities {
        let state = match e["state"].as_str() {
            Some("unavailable") => "unavailable",
            Some("unknown") => "unknown",
            Some(_) => "available",
            None => "not set up",
        };
        *out.entry(e["platform"].as_str().unwrap_or("?").to_string()).or_default().entry(state.into()).or_default() +=
            1;
    }
    out
}

/// The ids of entities that are unavailable.
pub fn unavailable(entities: &[Value]) -> BTreeSet<String> {
    entities
        .iter()
        .filter(|e| e["state"].as_str().is_none_or(|s| s == "unavailable"))
        .filter_map(|e| e["entity_id"].as_str().map(str::to_string))
        .collect()
}
