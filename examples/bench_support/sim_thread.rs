//! The simulator on a thread of its own.
//!
//! The harness's runtime has one thread, which also runs the injector and the subscriber that
//! reads every message of a phase. On a runtime of its own the simulator gets its own share of
//! the machine's CPU from the kernel's scheduler, as the real service has machines of its own, so
//! its wires do not wait behind the subscriber's backlog near the broker's saturation. Measured
//! on 2026-11-26/27 (BENCHMARKS.md, "End to end → The simulator on a thread of its own"), it did
//! not move where loss begins: every lag then came with the bridge's socket full.

use casambi2mqtt::sim::{SimConfig, Simulator};
use tokio::sync::oneshot;

/// The simulator's thread: it runs until this is dropped (after `Simulator::stop`).
pub struct SimThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SimThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Starts the simulator on a loopback port, its tasks on a one-thread runtime of its own.
pub async fn start(config: SimConfig) -> std::io::Result<(Simulator, SimThread)> {
    let (started_tx, started_rx) = oneshot::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new().name("simulator".into()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => {
                let _ = started_tx.send(Err(e));
                return;
            }
        };
        runtime.block_on(async move {
            let _ = started_tx.send(Simulator::start_local(config).await);
            let _ = stop_rx.await;
        });
    })?;
    let thread = SimThread { stop: Some(stop_tx), thread: Some(thread) };
    let sim = started_rx.await.map_err(|_| std::io::Error::other("the simulator's thread ended"))??;
    Ok((sim, thread))
}
