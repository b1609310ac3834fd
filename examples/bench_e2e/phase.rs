//! One measured phase: changes injected at a fixed rate into the simulator's world, each matched
//! to the unit JSON it causes on MQTT, with the CPU each process took meanwhile.

use super::Rig;
use super::support::{self, cpu_time, quantile};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How the injector waits for a change's due time (`--pacing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pacing {
    /// Sleep until the due time.
    Sleep,
    /// Sleep until 2 ms before, then yield in a loop.
    Spin,
}

/// Waits until `due`.
fn wait_until(due: Instant, pacing: Pacing) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        match pacing {
            Pacing::Sleep => std::thread::sleep(left),
            Pacing::Spin if left > Duration::from_millis(2) => std::thread::sleep(left - Duration::from_millis(1)),
            Pacing::Spin => std::thread::yield_now(),
        }
    }
}

/// Dimmer values carry the change's sequence number: 0.1 + seq × 1e-7 (distinct, in (0, 1)).
fn encode(seq: u64) -> f64 {
    0.1 + seq as f64 * 1e-7
}

fn decode(value: f64) -> u64 {
    ((value - 0.1) * 1e7).round().max(0.0) as u64
}

/// The Dimmer value of a unit JSON payload.
///
/// Read into borrowed fields, the others skipped, rather than into a `serde_json::Value` (a map
/// of every field): the harness reads every unit JSON of a phase on the machine the bridge and the
/// broker are measured on, and the whole `Value` took 8 % of its CPU per event.
pub fn dimmer(payload: &[u8]) -> Option<f64> {
    #[derive(serde::Deserialize)]
    struct UnitJson<'a> {
        #[serde(borrow, default)]
        controls: Vec<ControlJson<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct ControlJson<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
        /// Any JSON: a control's `value` need not be a number.
        value: Option<Value>,
    }
    let unit: UnitJson<'_> = serde_json::from_slice(payload).ok()?;
    unit.controls.into_iter().find(|c| c.kind.as_deref() == Some("Dimmer"))?.value?.as_f64()
}

/// `casambi/<net>/unit/<unit>`: a unit JSON topic.
pub fn is_unit_json(topic: &str) -> bool {
    let mut parts = topic.split('/');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next()),
        (Some("casambi"), Some(_), Some("unit"), Some(_), None)
    )
}

/// One measured phase at a fixed rate.
pub struct PhaseResult {
    pub rate: f64,
    pub injected: usize,
    pub achieved_rate: f64,
    pub received: usize,
    pub lost: usize,
    /// Events the simulator's wires skipped during the phase, having fallen more than their
    /// network's buffer behind ([`casambi2mqtt::sim::Shared::events_dropped`]): changes that
    /// never went out on a wire, whatever the bridge did.
    pub sim_dropped: u64,
    /// How many times the simulator's wires fell behind in the phase, each dropping what its
    /// buffer held and resending the network.
    pub sim_lags: u64,
    /// Of those, the lags with the bridge behind (the wire's last frame had waited for room in
    /// the full queue to its socket); the others are the simulator's own (its forwarder did not
    /// run in time).
    pub sim_lags_bridge_behind: u64,
    pub duplicates: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub bridge_cpu: Duration,
    pub broker_cpu: Duration,
    /// This process's CPU: the simulator, the injector and the subscriber, all of which share the
    /// machine's cores with the bridge and the broker.
    pub harness_cpu: Duration,
    /// The broker's time runnable but waiting for a CPU over the phase ([`support::run_queue_wait`]).
    pub broker_wait: Duration,
    /// The bridge's, summed over its threads.
    pub bridge_wait: Duration,
    pub messages: usize,
    pub unit_json_bytes: f64,
    pub load: f64,
    /// CPU time stolen by the hypervisor during the phase, % of the machine's CPU time.
    pub steal: f64,
}

impl PhaseResult {
    pub fn bridge_s_per_100k(&self) -> f64 {
        self.bridge_cpu.as_secs_f64() / self.injected as f64 * 100_000.0
    }
    pub fn bridge_us_per_event(&self) -> f64 {
        self.bridge_cpu.as_secs_f64() * 1e6 / self.injected as f64
    }
    pub fn broker_us_per_message(&self) -> f64 {
        self.broker_cpu.as_secs_f64() * 1e6 / self.messages as f64
    }
    pub fn harness_us_per_event(&self) -> f64 {
        self.harness_cpu.as_secs_f64() * 1e6 / self.injected as f64
    }
    /// The share of one core the bridge needed to keep up with this rate ([`core_share`]).
    pub fn bridge_cores(&self) -> f64 {
        self.core_share(self.bridge_cpu)
    }
    /// The share of one core the broker needed: mosquitto runs on one thread, so near 1.0 it is
    /// saturated in this pipeline, whatever message rate the ceiling run reached.
    pub fn broker_cores(&self) -> f64 {
        self.core_share(self.broker_cpu)
    }
    /// The share of one core the harness (simulator, injector, subscriber) needed.
    pub fn harness_cores(&self) -> f64 {
        self.core_share(self.harness_cpu)
    }
    /// A process's CPU over the phase (the drain after the last change included) spread over the
    /// time the changes went in: what it needed per second of this rate.
    fn core_share(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() * self.achieved_rate / self.injected.max(1) as f64
    }
    /// The share of its one core the broker would need to pass on every change of this rate, at
    /// the CPU per message it took in this run: its CPU per message × the messages each change
    /// that got through made (a lost change made none, so per injected change would read low
    /// in a run that lost some) × the rate. Above 1.0 mosquitto cannot keep up, whatever the
    /// bridge does: this is its saturation in the run's own minute, on the pipeline's own
    /// messages, where the ceiling run measures it with a plain publisher in another minute (and
    /// the host's speed moves within minutes).
    pub fn broker_demand(&self) -> f64 {
        let per_change = self.messages as f64 / self.received.max(1) as f64;
        self.broker_us_per_message() * per_change * self.achieved_rate / 1e6
    }
    /// Of the time the broker was runnable (running or waiting for a CPU), the share it waited:
    /// near 0 it ran whenever it had work, so a loss beside it is the broker's own speed; a large
    /// share means the machine's cores, taken by the others, held it back.
    pub fn broker_wait_share(&self) -> f64 {
        wait_share(self.broker_wait, self.broker_cpu)
    }
    /// [`PhaseResult::broker_demand`] on the share of its core the broker could get
    /// ([`demand_on_share`]): above 1.0 mosquitto was saturated on the CPU the machine gave it,
    /// even where it asked less than a whole core.
    pub fn broker_demand_on_its_share(&self) -> f64 {
        demand_on_share(self.broker_demand(), self.broker_wait_share())
    }
    /// The same for the bridge: where it is large, the bridge was held back by the machine.
    pub fn bridge_wait_share(&self) -> f64 {
        wait_share(self.bridge_wait, self.bridge_cpu)
    }
    /// The rate of changes at which the broker's thread would be saturated in this run
    /// ([`PhaseResult::broker_demand`] = 1.0).
    pub fn broker_saturation_rate(&self) -> f64 {
        self.achieved_rate / self.broker_demand()
    }
}

/// Of a process's runnable time (its CPU time and its wait for a CPU), the share it waited.
fn wait_share(wait: Duration, cpu: Duration) -> f64 {
    let wait = wait.as_secs_f64();
    wait / (wait + cpu.as_secs_f64()).max(f64::MIN_POSITIVE)
}

/// A demand on a whole core set against the share of it a process could get, when it waited for
/// a CPU `wait_share` of its runnable time: one runnable all the time then runs `1 − wait_share`
/// of it. Placed by the scheduler beside the others on a machine of few cores, mosquitto is
/// saturated where this passes 1.0, before its demand on a whole core does.
pub fn demand_on_share(demand: f64, wait_share: f64) -> f64 {
    demand / (1.0 - wait_share).max(f64::MIN_POSITIVE)
}

/// Loss against the broker's saturation, over every run of the set, from `(the broker's demand,
/// lost)` of each run: the range of the demand in the runs that lost nothing and in those that
/// lost changes. "Zero loss up to mosquitto's saturation" holds where every run that lost
/// changes asked the broker for more than 1.0, and every run that asked for less lost nothing.
pub fn loss_against_saturation(runs: &[(f64, usize)], of: &str) -> String {
    let part = |lossy: bool, what: &str| {
        let d: Vec<f64> = runs.iter().filter(|(_, lost)| (*lost > 0) == lossy).map(|(demand, _)| *demand).collect();
        let (lo, _, hi) = support::spread(&d);
        match d.len() {
            0 => format!("{what} in no run"),
            n => format!("{what} in {n} at {lo:.3}–{hi:.3} of {of}"),
        }
    };
    format!("{}; {}", part(false, "no loss"), part(true, "loss"))
}

/// Changes the Dimmer of `targets` in turn, one change per slot of `times` at `rate` a second,
/// the first carrying sequence number `seq0` ([`encode`]); each slot gets the time (since
/// `base`, in nanoseconds) its change went in. Ends with when the first was due and when the
/// last went in.
pub fn inject(
    sim: Arc<casambi2mqtt::sim::Shared>,
    targets: Vec<(String, i64)>,
    seq0: u64,
    rate: f64,
    pacing: Pacing,
    times: Arc<Vec<AtomicU64>>,
    base: Instant,
) -> tokio::task::JoinHandle<(Instant, Instant)> {
    tokio::task::spawn_blocking(move || {
        let start = Instant::now() + Duration::from_millis(20);
        for (i, slot) in times.iter().enumerate() {
            wait_until(start + Duration::from_secs_f64(i as f64 / rate), pacing);
            let (net, unit) = &targets[i % targets.len()];
            let value = encode(seq0 + i as u64);
            slot.store(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
            let _ = sim.world().set_unit_state(net, *unit, None, None, &[json!({"type": "Dimmer", "value": value})]);
        }
        (start, Instant::now())
    })
}

/// One phase: `rate` changes per second for `seconds`, then up to 10 s for the last ones to
/// arrive.
pub async fn phase(rig: &Rig, rate: f64, seconds: f64, pacing: Pacing) -> anyhow::Result<PhaseResult> {
    let total = (rate * seconds).round() as usize;
    let seq0 = rig.next_seq.get();
    rig.next_seq.set(seq0 + total as u64);
    let injected_at: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let load = support::load1();
    let steal0 = support::steal_ticks();
    let from = rig.recorder.len();
    let (bridge0, broker0) = (cpu_time(rig.bridge.pid()), cpu_time(rig.broker.pid()));
    let (broker_wait0, bridge_wait0) =
        (support::run_queue_wait(rig.broker.pid()), support::run_queue_wait(rig.bridge.pid()));
    let harness0 = cpu_time(std::process::id());
    let sim = rig.sim.shared();
    let (dropped0, lags0, behind0) = (sim.events_dropped(), sim.wire_lags(), sim.wire_lags_client_behind());

    let base = rig.recorder.base;
    let mut injector = Some(inject(sim.clone(), rig.targets.clone(), seq0, rate, pacing, injected_at.clone(), base));

    // Collect arrivals while the changes go in (a few hundred messages a pass: the subscriber,
    // which timestamps them, shares this thread), until every change is in or 10 s after the last
    // injection.
    let mut arrived: Vec<Option<Duration>> = vec![None; total];
    let (mut received, mut duplicates, mut scanned, mut messages) = (0usize, 0usize, from, 0usize);
    let (mut json_bytes, mut json_count) = (0usize, 0usize);
    let mut injected: Option<(Instant, Instant)> = None;
    let (start, end) = loop {
        if let Some(done) = injector.take_if(|h| h.is_finished()) {
            injected = Some(done.await?);
        }
        scanned = rig.recorder.scan(scanned, |m| {
            messages += 1;
            // The commanded unit is not driven; its JSON must not be read as a driven change.
            if !is_unit_json(&m.topic) || rig.command_topic.as_deref() == Some(m.topic.as_str()) {
                return;
            }
            json_bytes += m.payload.len();
            json_count += 1;
            let Some(seq) = dimmer(&m.payload).map(decode) else { return };
            let Some(i) = seq.checked_sub(seq0).map(|i| i as usize).filter(|i| *i < total) else { return };
            match arrived[i] {
                None => {
                    arrived[i] = Some(m.at);
                    received += 1;
                }
                Some(_) => duplicates += 1,
            }
        });
        if let Some(times @ (_, end)) = injected
            && (received == total || Instant::now() > end + Duration::from_secs(10))
        {
            break times;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (bridge1, broker1) = (cpu_time(rig.bridge.pid()), cpu_time(rig.broker.pid()));
    let broker_wait = support::run_queue_wait(rig.broker.pid()).saturating_sub(broker_wait0);
    let bridge_wait = support::run_queue_wait(rig.bridge.pid()).saturating_sub(bridge_wait0);
    let harness1 = cpu_time(std::process::id());
    let steal = support::steal_percent(steal0, support::steal_ticks());
    let mut latencies: Vec<f64> = arrived
        .iter()
        .zip(injected_at.iter())
        .filter_map(|(a, t)| {
            let sent = Duration::from_nanos(t.load(Ordering::Relaxed));
            a.map(|a| a.saturating_sub(sent).as_secs_f64() * 1000.0)
        })
        .collect();
    if let Some(path) = std::env::var_os("BENCH_LATENCY_TRACE") {
        write_trace(std::path::Path::new(&path), rig.recorder.base, &injected_at, &arrived);
    }
    latencies.sort_by(f64::total_cmp);
    Ok(PhaseResult {
        rate,
        injected: total,
        achieved_rate: total as f64 / (end - start).as_secs_f64(),
        received,
        lost: total - received,
        sim_dropped: sim.events_dropped().saturating_sub(dropped0),
        sim_lags: sim.wire_lags().saturating_sub(lags0),
        sim_lags_bridge_behind: sim.wire_lags_client_behind().saturating_sub(behind0),
        duplicates,
        p50_ms: quantile(&latencies, 0.5),
        p99_ms: quantile(&latencies, 0.99),
        max_ms: latencies.last().copied().unwrap_or(f64::NAN),
        bridge_cpu: bridge1.saturating_sub(bridge0),
        broker_cpu: broker1.saturating_sub(broker0),
        harness_cpu: harness1.saturating_sub(harness0),
        broker_wait,
        bridge_wait,
        messages,
        unit_json_bytes: if json_count > 0 { json_bytes as f64 / json_count as f64 } else { f64::NAN },
        load,
        steal,
    })
}

/// With `BENCH_LATENCY_TRACE=PATH`, appends each change's injection (UTC, to line up with the
/// bridge's log) and its latency in ms (`lost` when it never arrived), one per line.
fn write_trace(path: &std::path::Path, base: Instant, injected_at: &[AtomicU64], arrived: &[Option<Duration>]) {
    use std::io::Write;
    let base_utc = chrono::Utc::now() - base.elapsed();
    let lines: String = injected_at
        .iter()
        .zip(arrived)
        .map(|(t, a)| {
            let sent = Duration::from_nanos(t.load(Ordering::Relaxed));
            let at = base_utc + sent;
            let latency =
                a.map_or("lost".to_string(), |a| format!("{:.3}", (a.saturating_sub(sent)).as_secs_f64() * 1e3));
            format!("{} {latency}\n", at.format("%H:%M:%S%.6f"))
        })
        .collect();
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(lines.as_bytes()));
    if let Err(e) = written {
        eprintln!("warning: latency trace {}: {e}", path.display());
    }
}

/// The sustained rate with zero loss that a set of runs shows: the highest rate at which, and at
/// every rate below which, every run lost nothing; and the rate where loss began. From `(rate,
/// lost)` of each run, in any order.
pub fn sustained_zero_loss(runs: &[(f64, usize)]) -> String {
    let mut rates: Vec<f64> = runs.iter().map(|(rate, _)| *rate).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let lossy = |rate: f64| runs.iter().any(|(r, lost)| *r == rate && *lost > 0);
    let (Some(&lowest), Some(&highest)) = (rates.first(), rates.last()) else {
        return "no run".into();
    };
    let Some(first_loss) = rates.iter().copied().find(|r| lossy(*r)) else {
        return format!(
            "no loss at any rate of this set: sustained at least {highest:.0}/s (a higher --rate finds where loss begins)"
        );
    };
    let above: Vec<&(f64, usize)> = runs.iter().filter(|(r, _)| *r >= first_loss).collect();
    let lost_runs = above.iter().filter(|(_, lost)| *lost > 0).count();
    let from = format!("loss from {first_loss:.0}/s ({lost_runs} of {} runs from there lost changes)", above.len());
    match rates.iter().copied().take_while(|r| *r < first_loss).last() {
        Some(clean) => {
            format!("sustained with zero loss up to {clean:.0}/s (every run at every rate up to it); {from}")
        }
        None => format!("no rate of this set without loss (the lowest, {lowest:.0}/s, lost changes); {from}"),
    }
}

/// Where the changes of a set were lost, from `(lost, dropped by the simulator)` of each run.
/// A run that lost more changes than the simulator dropped before its wire lost at least the
/// difference past the simulator (in the bridge or the broker). One that lost no more may still
/// have lost some there: a dropped change can reach MQTT anyway, in the resend of the network
/// that follows the drop, when it was its unit's latest.
pub fn loss_beside_simulator(runs: &[(usize, u64)]) -> String {
    let dropping = runs.iter().filter(|(_, dropped)| *dropped > 0).count();
    let drops = format!("the simulator dropped events before its wire in {dropping} of {} runs", runs.len());
    let lossy: Vec<(u64, u64)> =
        runs.iter().filter(|(lost, _)| *lost > 0).map(|(lost, dropped)| (*lost as u64, *dropped)).collect();
    if lossy.is_empty() {
        return format!("no run lost changes; {drops}");
    }
    let within = lossy.iter().filter(|(lost, dropped)| lost <= dropped).count();
    let past: Vec<u64> = lossy.iter().filter(|(lost, dropped)| lost > dropped).map(|(l, d)| l - d).collect();
    let past = match (past.iter().min(), past.iter().max()) {
        (Some(lo), Some(hi)) => format!("{} lost more, at least {lo}–{hi} changes past the simulator", past.len()),
        _ => "none lost more".into(),
    };
    format!("{} runs lost changes: {within} no more than the simulator dropped, {past}; {drops}", lossy.len())
}

#[cfg(test)]
mod tests {
    use super::{demand_on_share, loss_against_saturation, loss_beside_simulator, sustained_zero_loss};

    #[test]
    fn a_demand_is_set_against_the_share_of_the_core_the_broker_got() {
        assert!((demand_on_share(0.8, 0.2) - 1.0).abs() < 1e-12);
        assert!((demand_on_share(0.5, 0.0) - 0.5).abs() < 1e-12);
        assert!(demand_on_share(0.9, 0.15) > 1.0);
        assert!(demand_on_share(0.1, 1.0).is_finite());
    }

    #[test]
    fn loss_is_set_against_the_demand_of_the_runs() {
        assert_eq!(
            loss_against_saturation(&[(0.74, 0), (1.1, 5), (0.98, 0), (1.2, 0), (1.05, 1)], "its share"),
            "no loss in 3 at 0.740–1.200 of its share; loss in 2 at 1.050–1.100 of its share"
        );
        assert_eq!(
            loss_against_saturation(&[(0.5, 0)], "the broker's core"),
            "no loss in 1 at 0.500–0.500 of the broker's core; loss in no run"
        );
    }

    #[test]
    fn loss_is_told_from_the_simulators_drops() {
        assert_eq!(
            loss_beside_simulator(&[(0, 0), (8_000, 8_192), (0, 9_000)]),
            "1 runs lost changes: 1 no more than the simulator dropped, none lost more; \
             the simulator dropped events before its wire in 2 of 3 runs"
        );
        assert_eq!(
            loss_beside_simulator(&[(120, 100), (5, 0), (10, 10)]),
            "3 runs lost changes: 1 no more than the simulator dropped, 2 lost more, at least 5–20 changes past \
             the simulator; the simulator dropped events before its wire in 2 of 3 runs"
        );
        assert_eq!(
            loss_beside_simulator(&[(0, 0), (0, 0)]),
            "no run lost changes; the simulator dropped events before its wire in 0 of 2 runs"
        );
    }

    #[test]
    fn the_sustained_rate_is_the_highest_below_the_first_loss() {
        let runs =
            [(20_000.0, 10), (10_000.0, 0), (18_000.0, 0), (10_000.0, 0), (18_000.0, 0), (20_000.0, 0), (22_000.0, 0)];
        assert_eq!(
            sustained_zero_loss(&runs),
            "sustained with zero loss up to 18000/s (every run at every rate up to it); \
             loss from 20000/s (1 of 3 runs from there lost changes)"
        );
    }

    #[test]
    fn one_lossy_run_at_a_rate_is_enough() {
        let runs = [(5_000.0, 0), (15_000.0, 0), (15_000.0, 1), (1_000.0, 0)];
        assert!(sustained_zero_loss(&runs).starts_with("sustained with zero loss up to 5000/s"));
    }

    #[test]
    fn a_set_without_loss_gives_a_floor_and_one_lossy_from_the_start_none() {
        assert_eq!(
            sustained_zero_loss(&[(1_000.0, 0), (5_000.0, 0)]),
            "no loss at any rate of this set: sustained at least 5000/s (a higher --rate finds where loss begins)"
        );
        assert_eq!(
            sustained_zero_loss(&[(8_000.0, 3), (9_000.0, 0)]),
            "no rate of this set without loss (the lowest, 8000/s, lost changes); \
             loss from 8000/s (1 of 2 runs from there lost changes)"
        );
        assert_eq!(sustained_zero_loss(&[]), "no run");
    }
}
