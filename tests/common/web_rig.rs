//! The rig of the web page's tests (tests/web_page.rs, tests/web_hostile.rs): the simulator on
//! the demo site, a mosquitto, and a running bridge whose `http:` section the test gives.

use super::Mosquitto;
use casambi2mqtt::app;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use std::net::SocketAddr;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The simulator, a broker and a running bridge; the bridge's HTTP listener at `addr`.
pub struct WebRig {
    pub sim: Simulator,
    pub broker: Mosquitto,
    /// The listener's address on loopback (a listener on 0.0.0.0 is reached there, as a browser
    /// on this machine would).
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<app::Outcome, app::AppError>>,
}

impl WebRig {
    /// Starts the three, the bridge with `http` (the lines of its `http:` section, indented);
    /// returns once the bridge runs: what it must have done by then is the test's to wait for.
    pub async fn start(http: &str) -> WebRig {
        let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.expect("the simulator starts");
        let broker = Mosquitto::start();
        let (running, shutdown, task) = super::start_app(&sim, &broker.url(), &format!("http:\n{http}")).await;
        let bound = running.health_addr.expect("the HTTP listener");
        let addr = SocketAddr::from(([127, 0, 0, 1], bound.port()));
        WebRig { sim, broker, addr, shutdown, task }
    }

    /// `http://<addr>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    /// Stops the bridge (SIGTERM's path) and waits up to 6 s for it.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(6), self.task).await;
    }
}
