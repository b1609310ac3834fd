//! A real browser for the web page's tests (the `web_*` tests include this file with `#[path]`):
//! Debian's headless `chromium`, driven through `chromedriver` (WebDriver, with fantoccini).
//! chromedriver runs on a free loopback port; on drop it is killed, and so is every process of
//! the chromium it started (found by the session's own profile directory), by process id. A
//! missing binary fails the test: these tests must run, never pass silently (Debian: apt-get
//! install chromium chromium-driver).

use crate::common::{find_binary, free_port};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// chromedriver and one browser session.
pub struct Browser {
    driver: Child,
    /// The WebDriver session.
    pub client: Client,
    _profile: tempfile::TempDir,
}

fn binary(names: &[&str]) -> std::path::PathBuf {
    names.iter().find_map(|n| find_binary(n, &["/usr/bin", "/usr/lib/chromium", "/usr/local/bin"])).unwrap_or_else(
        || {
            panic!(
                "{} not found in PATH or /usr/bin: the web page tests need a real browser \
                 (Debian/Ubuntu: apt-get install -y chromium chromium-driver)",
                names.join(" or ")
            )
        },
    )
}

impl Browser {
    /// Starts chromedriver and a headless chromium with a window of `width`×`height`.
    pub async fn start(width: u32, height: u32) -> Browser {
        let driver_bin = binary(&["chromedriver"]);
        let chromium = binary(&["chromium", "chromium-browser"]);
        let port = free_port();
        let mut command = Command::new(driver_bin);
        command.arg(format!("--port={port}")).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let driver = command.spawn().expect("start chromedriver");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen on port {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-extensions", "--hide-scrollbars",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        });
        let Value::Object(capabilities) = capabilities else { unreachable!() };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a chromium session through chromedriver");
        Browser { driver, client, _profile: profile }
    }

    /// Waits until `script` (a JavaScript expression's body, `return …;`) returns `true`; panics
    /// after `max` with `what`.
    pub async fn wait_for(&self, max: Duration, what: &str, script: &str) {
        let deadline = Instant::now() + max;
        loop {
            let value = self.client.execute(script, vec![]).await.expect("run a script in the page");
            if value == Value::Bool(true) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: still not true after {max:?}: {script}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The result of `script` (`return …;`).
    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.expect("run a script in the page")
    }

    /// Clicks the element `css` names.
    pub async fn click(&self, css: &str) {
        self.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no {css}: {e}")).click().await.unwrap();
    }

    /// Ends the session (chromium closes); chromedriver is killed on drop.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // A test that failed before `close` leaves its chromium running: its processes are the
        // ones whose command line names this session's profile directory.
        let profile = format!("--user-data-dir={}", self._profile.path().display());
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if cmdline.split(|b| *b == 0).any(|arg| arg == profile.as_bytes()) {
                let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
            }
        }
    }
}
