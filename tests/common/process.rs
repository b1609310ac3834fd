//! The binary as a process: spawned with a configuration against the simulator, signalled,
//! waited for, and killed if a test fails before it ends.

use casambi2mqtt::sim::Simulator;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_casambi2mqtt");

/// A configuration against `sim` with the demo's network credentials and `password`.
pub fn write_config(sim: &Simulator, mqtt_url: &str, password: &str) -> tempfile::NamedTempFile {
    write_config_with(sim, mqtt_url, &format!("networks:\n  - email: demo@example.com\n    password: {password}\n"))
}

/// A configuration against `sim` whose credentials are `logins` (`networks:` and `sites:`),
/// without the HTTP listener.
pub fn write_config_with(sim: &Simulator, mqtt_url: &str, logins: &str) -> tempfile::NamedTempFile {
    write_config_listening(sim, mqtt_url, logins, "")
}

/// [`write_config_with`] with the HTTP listener (web page, `/healthz`) on `http_listen`; `""`
/// turns it off.
pub fn write_config_listening(
    sim: &Simulator,
    mqtt_url: &str,
    logins: &str,
    http_listen: &str,
) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\n{logins}mqtt:\n  url: {mqtt_url}\nhttp:\n  listen: \"{http_listen}\"\n",
        sim.base_url(),
        sim.ws_url()
    )
    .unwrap();
    f
}

/// A child process that is killed if the test fails before it ends.
pub struct Proc(Option<Child>);

impl Proc {
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }
    pub fn take(mut self) -> Child {
        self.0.take().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Spawns the binary with `args`, its output captured.
pub fn spawn(args: &[&str]) -> Proc {
    spawn_env(args, &[])
}

/// [`spawn`] with environment variables set for the child.
pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Proc {
    let mut command = Command::new(BIN);
    command.args(args).env_remove("RUST_LOG").envs(env.iter().copied());
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    Proc(Some(child.unwrap()))
}

/// Sends SIGTERM to the child.
pub fn sigterm(child: &mut Proc) {
    signal(child, "TERM");
}

/// Sends the signal `name` (`TERM`, `INT`) to the child.
pub fn signal(child: &mut Proc, name: &str) {
    let child = child.child();
    let status = Command::new("kill").arg(format!("-{name}")).arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
}

/// Waits for the child to exit, at most `limit`.
pub fn wait_exit(child: &mut Proc, limit: Duration) -> Option<std::process::ExitStatus> {
    let child = child.child();
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

/// Everything the child wrote, stdout then stderr (after it ended).
pub fn output_of(child: Proc) -> String {
    let out = child.take().wait_with_output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
