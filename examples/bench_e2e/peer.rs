//! `--aiocasambi PYTHON`: aiocasambi, the cloud library of the Home Assistant integration before
//! this bridge, takes the same stream after the bridge's phases, so that the two clients' CPU per
//! event compare on one machine in one run. Its own code logs in, loads the networks and opens
//! the wires (`scripts/peer/aiocasambi_peer.py`, only the service's address changed); the bridge
//! has stopped by then, so neither shares the machine with the other.

use super::phase::{self, Pacing};
use super::support::{self, cpu_time};
use casambi2mqtt::sim::Simulator;
use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The peer's script, from the repository's root (where `cargo run --example` runs).
const SCRIPT: &str = "scripts/peer/aiocasambi_peer.py";

/// How long the peer may take to log in, load the site and open its wires.
const READY_WITHIN: Duration = Duration::from_secs(180);

/// The peer's counts since it started (the script's `mark` answer).
#[derive(Debug, Clone, Copy, serde::Deserialize)]
struct Counts {
    /// `unitChanged` frames handled.
    frames: u64,
    /// CPU seconds in aiocasambi's handling of frames: the parse and the controller's handler.
    handling_s: f64,
    /// CPU seconds in the parse and the unit's update alone.
    unit_s: f64,
}

/// aiocasambi in its Python process, every wire open.
pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    pid: u32,
    /// What the script said it is once ready (units loaded, versions).
    pub ready: String,
}

impl Peer {
    /// Starts the peer with `python` against the simulator (its demo key and network login,
    /// as the bridge's) and waits until every wire is open.
    pub async fn start(python: &Path, sim: &Simulator) -> anyhow::Result<Peer> {
        let mut child = Command::new(python)
            .arg(SCRIPT)
            .args([sim.base_url().as_str(), "demo-key", "demo@example.com", "demo"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| anyhow::anyhow!("--aiocasambi {}: {e}", python.display()))?;
        let pid = child.id().ok_or_else(|| anyhow::anyhow!("the aiocasambi peer ended at once"))?;
        support::register(pid);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            anyhow::bail!("the aiocasambi peer's pipes are missing");
        };
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(READY_WITHIN, lines.next_line())
            .await
            .map_err(|_| anyhow::anyhow!("the aiocasambi peer was not ready within {READY_WITHIN:?}"))??
            .ok_or_else(|| anyhow::anyhow!("the aiocasambi peer ended before it was ready (its error is above)"))?;
        let ready = ready
            .strip_prefix("ready ")
            .ok_or_else(|| anyhow::anyhow!("the aiocasambi peer said {ready:?}, not `ready …`"))?
            .to_string();
        let mut peer = Peer { child, stdin, lines, pid, ready };
        // Each wire opens with its network's state, unit by unit, after `ready`: those frames
        // are in once the count stands still for a while.
        let deadline = Instant::now() + READY_WITHIN;
        let mut frames = peer.mark().await?.frames;
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = peer.mark().await?.frames;
            if now == frames {
                return Ok(peer);
            }
            anyhow::ensure!(Instant::now() < deadline, "the aiocasambi peer still takes opening frames");
            frames = now;
        }
    }

    async fn mark(&mut self) -> anyhow::Result<Counts> {
        self.stdin.write_all(b"mark\n").await?;
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .map_err(|_| anyhow::anyhow!("the aiocasambi peer did not answer within 10 s"))??
            .ok_or_else(|| anyhow::anyhow!("the aiocasambi peer ended"))?;
        Ok(serde_json::from_str(&line)?)
    }

    /// Ends the peer.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
        support::unregister(self.pid);
    }
}

/// One phase of the peer at a fixed rate.
pub struct PeerResult {
    pub injected: usize,
    /// `unitChanged` frames the peer handled.
    pub frames: u64,
    /// Events the simulator skipped before the peer's wire, which fell behind.
    pub sim_dropped: u64,
    /// The peer's process CPU over the phase.
    pub process: Duration,
    /// Its CPU in aiocasambi's handling of the frames (the parse and the controller's handler).
    pub handling: Duration,
    /// Its CPU in the parse and the unit's update alone.
    pub unit: Duration,
    pub load: f64,
    pub steal: f64,
}

impl PeerResult {
    /// The process's CPU per frame it handled.
    pub fn process_us_per_event(&self) -> f64 {
        self.process.as_secs_f64() * 1e6 / self.frames.max(1) as f64
    }
    /// aiocasambi's handling (parse and handler) per frame.
    pub fn handling_us_per_event(&self) -> f64 {
        self.handling.as_secs_f64() * 1e6 / self.frames.max(1) as f64
    }
    /// The parse and the unit's update per frame.
    pub fn unit_us_per_event(&self) -> f64 {
        self.unit.as_secs_f64() * 1e6 / self.frames.max(1) as f64
    }
}

/// `rate` changes a second for `seconds` (the bridge's phases' changes, numbered on from `seq`),
/// then up to 10 s for the peer to take the last ones.
pub async fn phase(
    peer: &mut Peer,
    sim: &Simulator,
    targets: &[(String, i64)],
    seq: &Cell<u64>,
    rate: f64,
    seconds: f64,
    pacing: Pacing,
) -> anyhow::Result<PeerResult> {
    let total = (rate * seconds).round() as usize;
    let seq0 = seq.get();
    seq.set(seq0 + total as u64);
    let (load, steal0) = (support::load1(), support::steal_ticks());
    let shared = sim.shared();
    let dropped0 = shared.events_dropped();
    let before = peer.mark().await?;
    let cpu0 = cpu_time(peer.pid);
    let times = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
    let (_, end) = phase::inject(shared.clone(), targets.to_vec(), seq0, rate, pacing, times, Instant::now()).await?;
    let mut after = peer.mark().await?;
    while after.frames - before.frames < total as u64 && Instant::now() < end + Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = peer.mark().await?;
    }
    let cpu1 = cpu_time(peer.pid);
    Ok(PeerResult {
        injected: total,
        frames: after.frames - before.frames,
        sim_dropped: shared.events_dropped().saturating_sub(dropped0),
        process: cpu1.saturating_sub(cpu0),
        handling: Duration::from_secs_f64((after.handling_s - before.handling_s).max(0.0)),
        unit: Duration::from_secs_f64((after.unit_s - before.unit_s).max(0.0)),
        load,
        steal: support::steal_percent(steal0, support::steal_ticks()),
    })
}

/// The peer's runs (`--aiocasambi`: `--runs` of `--aiocasambi-rate` changes a second for
/// `--seconds`), printed with their summary set against the bridge's median CPU per event at
/// each rate it ran (`bridge`: rate, µs).
pub async fn compare(
    python: &Path,
    args: &super::Args,
    sim: &Simulator,
    targets: &[(String, i64)],
    seq: &Cell<u64>,
    bridge: &[(f64, f64)],
) -> anyhow::Result<()> {
    let (rate, runs) = (args.aiocasambi_rate, args.runs);
    let mut peer = Peer::start(python, sim).await?;
    println!();
    println!("## aiocasambi ({}), the bridge stopped", peer.ready);
    let mut results = Vec::new();
    for run in 0..runs {
        let r = phase(&mut peer, sim, targets, seq, rate, args.seconds, args.pacing).await?;
        println!(
            "aiocasambi run {}: injected {} at {rate:.0}/s, handled {} unitChanged frames (the simulator dropped {} \
             before its wire), process {:.1} µs CPU/event, aiocasambi's handling {:.1} µs/event (the unit's update \
             {:.1}), load {:.2}, stolen {:.1} %",
            run + 1,
            r.injected,
            r.frames,
            r.sim_dropped,
            r.process_us_per_event(),
            r.handling_us_per_event(),
            r.unit_us_per_event(),
            r.load,
            r.steal
        );
        results.push(r);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    peer.stop().await;
    let f = |g: fn(&PeerResult) -> f64| results.iter().map(g).collect::<Vec<_>>();
    let process = f(PeerResult::process_us_per_event);
    let handling = f(PeerResult::handling_us_per_event);
    let unit = f(PeerResult::unit_us_per_event);
    println!("aiocasambi at {rate:.0}/s (min / median / max over {runs} runs):");
    println!("  process CPU µs/event   {}", support::fmt_spread(&process, 1));
    println!(
        "  handling CPU µs/event  {} (json.loads and the controller's handler)",
        support::fmt_spread(&handling, 1)
    );
    println!("  unit update µs/event   {} (json.loads and the unit's update alone)", support::fmt_spread(&unit, 1));
    let median = |v: &[f64]| support::spread(v).1;
    let (process, handling, unit) = (median(&process), median(&handling), median(&unit));
    for (bridge_rate, bridge_us) in bridge {
        println!(
            "  the bridge at {bridge_rate:.0}/s, {bridge_us:.1} µs/event (median), takes {:.1}× less CPU an event than \
             aiocasambi's process, {:.1}× less than its handling, {:.1}× less than the unit's update alone",
            process / bridge_us,
            handling / bridge_us,
            unit / bridge_us
        );
    }
    Ok(())
}
