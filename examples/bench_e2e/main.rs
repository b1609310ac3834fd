//! End-to-end benchmark: simulator → WebSocket → bridge → mosquitto → subscriber, through real
//! sockets on loopback.
//!
//! ```text
//! cargo run --release --example bench_e2e -- --rate 1000,5000 --seconds 10 --runs 3
//! ```
//!
//! - The simulator (in this process) serves a generated site; a driver thread changes the Dimmer
//!   of `Dimmer + CCT` luminaires (`--fixture`) at a controlled rate through the simulator's
//!   world mutations (`set_unit_state`), and each change goes out as a `unitChanged` frame on the
//!   network's wire.
//!   The driver sleeps between changes (`--pacing sleep`); `--pacing spin` is the earlier
//!   busy-waiting driver, kept to compare with figures measured with it.
//! - The bridge runs in a child process (`app::run`, the code of `casambi2mqtt run`), so its CPU
//!   time is read from `/proc/<pid>/stat` without the simulator's, the driver's or the
//!   subscriber's share.
//! - mosquitto runs in its own process on a free port; a subscriber (here) timestamps every
//!   message. Each change carries a unique Dimmer value, so every unit JSON received is matched to
//!   the change that caused it: latency = injection (just before the mutation that sends the
//!   frame) → arrival at the subscriber.
//! - In the same run: mosquitto's own ceiling (a plain rumqttc publisher → the subscriber, QoS 1,
//!   retained, at the size of the bridge's unit JSON) and mosquitto's CPU per message; a burst:
//!   one scene activation changing 250 units of a network at once; and commands sent on MQTT,
//!   timed until the unit's new state is back ([`commands`]), during every phase (under the
//!   stream of events) and once more on a quiet bridge. The commanded luminaire is not driven by
//!   the phases.
//! - For each phase, the share of one core the bridge, the broker and the harness needed to keep
//!   up with its rate (each one's CPU over the time the changes went in); for the ceiling, the
//!   broker's. mosquitto runs on one thread, so where it nears 1.0 it is saturated in this
//!   pipeline, whatever message rate the ceiling run reached; where all three near the machine's
//!   cores, the machine is.
//! - For each phase, the broker's demand on its core at the CPU per message it took in that run
//!   (the host's speed moves within minutes, so the ceiling run, in another minute, is not the
//!   broker's saturation at the phase's time) and the share of its runnable time it waited for a
//!   CPU; at the end, the demand of the runs that lost nothing and of those that lost changes.
//!   `--broker-cpu N` gives the broker CPU `N` to itself, so it does not wait behind the
//!   simulator, the subscriber and the bridge.
//! - For each phase, the events the simulator dropped before its wire (a wire that fell more than
//!   its network's buffer behind, `--sim-event-buffer`), so that a loss can be told from the
//!   simulator's own: a run that lost more changes than the simulator dropped lost the rest past
//!   it.
//! - `--aiocasambi PYTHON`: after the phases, the bridge stopped, aiocasambi's own client takes
//!   the same kind of stream, and its CPU per event is set against the bridge's ([`peer`]).
//!
//! Results and how to read them: BENCHMARKS.md.

#[path = "../bench_support/mod.rs"]
mod support;

mod burst;
mod ceiling;
mod commands;
mod peer;
mod phase;

use casambi2mqtt::sim::site::{Group, Scene, SceneUnit, Site};
use casambi2mqtt::sim::{SimConfig, Simulator};
use ceiling::{Ceiling, ceiling};
use clap::Parser;
use phase::{Pacing, PhaseResult, is_unit_json};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{BridgeProcess, Broker, Recorder, fmt_spread, quantile};

#[derive(Debug, Parser)]
#[command(about = "End-to-end benchmark of casambi2mqtt (see BENCHMARKS.md)")]
struct Args {
    /// Event rates to measure, events per second (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1000,5000")]
    rate: Vec<f64>,
    /// Length of each measured phase.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Runs of each phase (min / median / max are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Generated site, NETWORKSxUNITS (network 1 is rewritten to 250 tunable luminaires in one
    /// scene for the burst).
    #[arg(long, default_value = "4x250")]
    site: String,
    /// The fixture of the luminaires the phases drive: 1002 (`Dimmer + CCT`, a frame of two
    /// controls) or 1001 (`Dimmer` alone; network 1, rewritten for the burst, has none).
    #[arg(long, default_value_t = 1002)]
    fixture: i64,
    /// Scene activations of the burst measurement (0 = none).
    #[arg(long, default_value_t = 30)]
    bursts: usize,
    /// Commands sent on MQTT (QoS 1, 100 ms apart) to one luminaire, each timed until the
    /// unit's new state is back on MQTT: this many during every phase and as many again on a
    /// quiet bridge after the phases (0 = none).
    #[arg(long, default_value_t = 20)]
    commands: usize,
    /// Messages of the broker-ceiling measurement per run (0 = none).
    #[arg(long, default_value_t = 100_000)]
    ceiling: usize,
    /// Wait (up to 20 minutes) until the 1-minute load is at most this before starting.
    #[arg(long, default_value_t = 1.0)]
    max_load: f64,
    /// How the injector waits for each change's due time: `sleep` (the thread sleeps; the
    /// kernel's timer slack makes a change up to ~60 µs late, and a late change is followed at
    /// once by the next one, so the rate holds) or `spin` (sleeps until 2 ms before, then yields
    /// in a loop: exact times, but at 5,000/s and more it keeps one of the machine's cores busy,
    /// the CPU the bridge and the broker need; the figures before 2026-11-22 11:20 used it).
    #[arg(long, value_enum, default_value_t = Pacing::Sleep)]
    pacing: Pacing,
    /// Give mosquitto this CPU to itself: the broker runs on it alone, and the simulator, the
    /// subscriber and the bridge on the others (`taskset`). Unset, the scheduler places them all,
    /// and on a machine of few cores the broker waits for a CPU beside the others.
    #[arg(long)]
    broker_cpu: Option<usize>,
    /// Events each simulated network buffers for a wire that falls behind; past it the wire
    /// skips them (counted as dropped by the simulator) and resends the network. The default is
    /// the simulator's own.
    #[arg(long, default_value_t = casambi2mqtt::sim::world::EVENT_BUFFER)]
    sim_event_buffer: usize,
    /// Run the simulator on the harness's one thread, beside the subscriber, as the figures up to
    /// 2026-11-24 were measured (by default it has a thread of its own, as the real service has its own
    /// machines).
    #[arg(long)]
    sim_on_harness_thread: bool,
    /// A Python with aiocasambi (`scripts/peer/setup.sh` prints one): after the bridge's phases
    /// and with the bridge stopped, aiocasambi's own client takes the same kind of stream
    /// (`--aiocasambi-rate`, `--seconds`, `--runs`), and its CPU per event is set against the
    /// bridge's.
    #[arg(long)]
    aiocasambi: Option<std::path::PathBuf>,
    /// Events per second of aiocasambi's runs: a rate its one thread keeps up with (its handling
    /// alone takes a few hundred µs of CPU an event on this project's test machines).
    #[arg(long, default_value_t = 1000.0)]
    aiocasambi_rate: f64,
    /// Stop everything after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
}

fn main() -> anyhow::Result<()> {
    if support::bridge_child() {
        return Ok(());
    }
    let args = Args::parse();
    if let Some(cpu) = args.broker_cpu {
        support::confine_to_other_cpus(cpu)?;
    }
    support::block_on(args.timeout, run(args))
}

/// The generated site, with network 1 rewritten for the burst: 250 (or all) `Dimmer + CCT`
/// luminaires, groups of ten, scene 1 holding every unit at level 0.6.
fn site(size: &str) -> anyhow::Result<Site> {
    let (networks, units) = Site::parse_size(size)?;
    let mut site = Site::generate(networks, units);
    let net = &mut site.networks[0];
    let template = net.units.iter().find(|u| u.id == 3).cloned().ok_or_else(|| anyhow::anyhow!("site too small"))?;
    for u in &mut net.units {
        let (id, name, address) = (u.id, u.name.clone(), u.address.clone());
        *u = template.clone();
        u.id = id;
        u.name = name;
        u.address = address;
        u.group = (id - 1) / 10 + 1;
    }
    net.groups = (1..=net.units.len().div_ceil(10) as i64)
        .map(|g| Group {
            id: g,
            name: format!("Group {g}"),
            position: g,
            units: net.units.iter().filter(|u| u.group == g).map(|u| u.id).collect(),
        })
        .collect();
    let all: Vec<SceneUnit> = net.units.iter().map(|u| SceneUnit { id: u.id, level: 0.6 }).collect();
    if let Some(scene) = net.scenes.iter_mut().find(|s| s.id == 1) {
        scene.units = all;
    }
    for s in net.scenes.iter_mut().filter(|s| s.id != 1) {
        let members: Vec<SceneUnit> =
            net.units.iter().filter(|u| u.group == s.id).map(|u| SceneUnit { id: u.id, level: 0.6 }).collect();
        *s = Scene { units: members, ..s.clone() };
    }
    Ok(site)
}

struct Rig {
    sim: Simulator,
    broker: Broker,
    bridge: BridgeProcess,
    recorder: Arc<Recorder>,
    /// The luminaires the phases drive (`--fixture`): (network id, unit id).
    targets: Vec<(String, i64)>,
    /// The sequence number of the next injected change.
    next_seq: Cell<u64>,
    /// The unit JSON topic of the luminaire the commands go to (`--commands`), which the phases
    /// do not drive.
    command_topic: Option<String>,
}

async fn run(args: Args) -> anyhow::Result<()> {
    println!("# bench_e2e");
    println!("machine: {}", support::machine());
    println!("injector pacing: {:?}", args.pacing);
    println!("broker: {}", Broker::version());
    match args.broker_cpu {
        Some(cpu) => {
            println!("CPUs: the broker alone on CPU {cpu}, the simulator, subscriber and bridge on the others")
        }
        None => println!("CPUs: as the scheduler places them"),
    }
    println!(
        "simulator: {} events buffered per network for a wire that falls behind; {}",
        args.sim_event_buffer,
        if args.sim_on_harness_thread { "on the harness's thread" } else { "on a thread of its own" }
    );
    let load = support::wait_quiet(args.max_load, Duration::from_secs(1200));
    println!("1-minute load at start: {load:.2}");

    let site = site(&args.site)?;
    let units: usize = site.networks.iter().map(|n| n.units.len()).sum();
    let burst_net = site.networks[0].id.clone();
    let burst_units = site.networks[0].units.len();
    let targets: Vec<(String, i64)> = site
        .networks
        .iter()
        .flat_map(|n| {
            n.units
                .iter()
                .filter(|u| u.fixture == args.fixture && u.kind == "Luminaire")
                .map(|u| (n.id.clone(), u.id))
                .collect::<Vec<_>>()
        })
        .collect();
    anyhow::ensure!(!targets.is_empty(), "--fixture {}: no luminaire of that fixture to drive", args.fixture);
    let sim_config = SimConfig { event_buffer: args.sim_event_buffer, ..SimConfig::new(site) };
    let (sim, sim_thread) = if args.sim_on_harness_thread {
        (Simulator::start_local(sim_config).await?, None)
    } else {
        let (sim, thread) = support::sim_thread::start(sim_config).await?;
        (sim, Some(thread))
    };
    let broker = Broker::start_on(args.broker_cpu);
    let base = Instant::now();
    let (recorder, _subscriber) = support::subscribe(broker.port, "bench-e2e-subscriber", &["#"], base).await;
    let commander = support::publisher(broker.port, "bench-e2e-commands");
    let yaml = support::bridge_config(&sim, &broker, true);
    let bridge = BridgeProcess::start(&yaml);
    println!(
        "site: {} networks, {units} units; {} luminaires of fixture {} driven",
        args.site,
        targets.len(),
        args.fixture
    );

    // Start-up: every unit's JSON published once.
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut seen, mut scanned) = (std::collections::HashSet::new(), 0);
    loop {
        scanned = recorder.scan(scanned, |m| {
            if is_unit_json(&m.topic) {
                seen.insert(m.topic.clone());
            }
        });
        if seen.len() >= units {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "start-up incomplete: {} of {units} units\n{}",
            seen.len(),
            bridge.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("bridge up: every unit published after {:.2} s", bridge.started.elapsed().as_secs_f64());
    // The commanded unit's topic, looked up while the subscriber holds the start-up's messages
    // only (after the phases it holds hundreds of thousands). The phases do not drive that unit,
    // so its state changes only by command.
    let mut targets = targets;
    let command_topic = if args.commands > 0 {
        anyhow::ensure!(targets.len() > 1, "no luminaire to command besides the driven ones");
        let (net, unit) = targets.remove(0);
        let prefix = format!("casambi/{}/unit/", network_slug(&sim, &net));
        let topic = commands::state_topic(&recorder, &prefix, unit)
            .ok_or_else(|| anyhow::anyhow!("no unit JSON of unit {unit} under {prefix}"))?;
        Some(topic)
    } else {
        None
    };
    recorder.settle(Duration::from_secs(2), Duration::from_secs(30)).await;
    // The bridge's scan for stale retained topics starts 10 s after its last network loaded and
    // reads every retained message: over before the first phase, so no phase counts its CPU.
    tokio::time::sleep(Duration::from_secs(12)).await;

    let rig = Rig { sim, broker, bridge, recorder, targets, next_seq: Cell::new(1), command_topic };
    let mut results: Vec<Vec<PhaseResult>> = Vec::new();
    // Per rate: the commands sent while the phases ran (a command's round trip under a stream of
    // events; the phases' accounting skips the commanded unit).
    let mut loaded_trips: Vec<commands::RoundTrips> = Vec::new();
    let gap = Duration::from_millis(100);
    for &rate in &args.rate {
        let mut runs = Vec::new();
        let mut trips = commands::RoundTrips::default();
        for run in 0..args.runs {
            let under_load = async {
                match &rig.command_topic {
                    Some(topic) => commands::round_trips(&commander, &rig.recorder, topic, args.commands, gap).await,
                    None => Ok(commands::RoundTrips::default()),
                }
            };
            let (r, t) = tokio::join!(phase::phase(&rig, rate, args.seconds, args.pacing), under_load);
            let (r, t) = (r?, t?);
            println!(
                "rate {rate:>6.0}/s run {}: injected {} at {:.0}/s, received {}, lost {} (the simulator dropped {} in {} lags, {} with the bridge behind), dup {}, latency p50 {:.2} ms p99 {:.2} ms max {:.2} ms, \
                 bridge {:.2} s CPU/100k events ({:.1} µs/event), broker {:.1} µs CPU/message ({} messages, {:.2}/event), \
                 harness {:.1} µs/event, load {:.2}, stolen {:.1} %, cores needed: bridge {:.2} broker {:.2} harness {:.2}, \
                 broker demand {:.3} of its core (saturating at {:.0}/s), {:.3} of the share of it the broker got, broker waited for a CPU {:.1} % of its runnable time, the bridge {:.1} %",
                run + 1,
                r.injected,
                r.achieved_rate,
                r.received,
                r.lost,
                r.sim_dropped,
                r.sim_lags,
                r.sim_lags_bridge_behind,
                r.duplicates,
                r.p50_ms,
                r.p99_ms,
                r.max_ms,
                r.bridge_s_per_100k(),
                r.bridge_us_per_event(),
                r.broker_us_per_message(),
                r.messages,
                r.messages as f64 / r.injected as f64,
                r.harness_us_per_event(),
                r.load,
                r.steal,
                r.bridge_cores(),
                r.broker_cores(),
                r.harness_cores(),
                r.broker_demand(),
                r.broker_saturation_rate(),
                r.broker_demand_on_its_share(),
                r.broker_wait_share() * 100.0,
                r.bridge_wait_share() * 100.0
            );
            if rig.command_topic.is_some() {
                println!("  commands during the run: round trip {}", t.summary());
            }
            trips.extend(t);
            runs.push(r);
            rig.recorder.settle(Duration::from_secs(2), Duration::from_secs(30)).await;
        }
        results.push(runs);
        loaded_trips.push(trips);
    }

    let size = results.iter().flatten().map(|r| r.unit_json_bytes).find(|b| b.is_finite()).unwrap_or(450.0) as usize;
    let mut ceilings = Vec::new();
    if args.ceiling > 0 {
        for run in 0..args.runs {
            let c = ceiling(&rig, args.ceiling, size).await?;
            println!(
                "broker ceiling run {}: {} messages of {size} B, {:.0} msg/s, lost {}, broker {:.1} µs CPU/message \
                 ({:.2} of a core), harness {:.1} µs/message",
                run + 1,
                c.sent,
                c.rate,
                c.lost,
                c.cpu_us_per_message,
                c.broker_cores(),
                c.harness_us_per_message
            );
            ceilings.push(c);
            rig.recorder.settle(Duration::from_secs(2), Duration::from_secs(30)).await;
        }
    }

    let mut quiet_trips = None;
    if let Some(topic) = &rig.command_topic {
        let trips = commands::round_trips(&commander, &rig.recorder, topic, args.commands, gap).await?;
        anyhow::ensure!(trips.missed.is_empty(), "commands {:?}: no state within 2 s on a quiet bridge", trips.missed);
        quiet_trips = Some(trips);
        rig.recorder.settle(Duration::from_secs(2), Duration::from_secs(30)).await;
    }

    let mut bursts = Vec::new();
    for i in 0..args.bursts {
        let level = if i % 2 == 0 { 1.0 } else { 0.5 };
        match burst::activate(&rig, &burst_net, burst_units, level).await {
            Ok(b) => bursts.push(b),
            Err(e) => println!("burst {}: {e}", i + 1),
        }
    }

    println!();
    println!("## Summary (min / median / max over {} runs)", args.runs);
    let cores = support::machine_cpus();
    for (runs, trips) in results.iter().zip(&loaded_trips) {
        let f = |g: fn(&PhaseResult) -> f64| runs.iter().map(g).collect::<Vec<_>>();
        println!("rate {:.0}/s:", runs[0].rate);
        println!("  achieved rate/s       {}", fmt_spread(&f(|r| r.achieved_rate), 0));
        println!("  lost                  {}", fmt_spread(&f(|r| r.lost as f64), 0));
        println!("  dropped by simulator  {}", fmt_spread(&f(|r| r.sim_dropped as f64), 0));
        println!("  latency p50 ms        {}", fmt_spread(&f(|r| r.p50_ms), 2));
        println!("  latency p99 ms        {}", fmt_spread(&f(|r| r.p99_ms), 2));
        println!("  latency max ms        {}", fmt_spread(&f(|r| r.max_ms), 2));
        println!("  bridge CPU s/100k ev  {}", fmt_spread(&f(|r| r.bridge_s_per_100k()), 2));
        println!("  bridge CPU µs/event   {}", fmt_spread(&f(|r| r.bridge_us_per_event()), 1));
        println!("  broker CPU µs/message {}", fmt_spread(&f(|r| r.broker_us_per_message()), 1));
        println!("  messages/event        {}", fmt_spread(&f(|r| r.messages as f64 / r.injected as f64), 2));
        println!("  harness CPU µs/event  {}", fmt_spread(&f(|r| r.harness_us_per_event()), 1));
        println!("  unit JSON bytes       {}", fmt_spread(&f(|r| r.unit_json_bytes), 0));
        println!("  CPU stolen %          {}", fmt_spread(&f(|r| r.steal), 1));
        println!("  cores needed, bridge  {}", fmt_spread(&f(PhaseResult::bridge_cores), 2));
        println!("  cores needed, broker  {}", fmt_spread(&f(PhaseResult::broker_cores), 2));
        println!("  cores needed, harness {}", fmt_spread(&f(PhaseResult::harness_cores), 2));
        println!(
            "  cores needed, all     {} of {cores}",
            fmt_spread(&f(|r| r.bridge_cores() + r.broker_cores() + r.harness_cores()), 2)
        );
        println!("  broker demand, cores  {}", fmt_spread(&f(PhaseResult::broker_demand), 3));
        println!("  broker saturates at/s {}", fmt_spread(&f(PhaseResult::broker_saturation_rate), 0));
        println!(
            "  broker demand, on the share of its core it got {}",
            fmt_spread(&f(PhaseResult::broker_demand_on_its_share), 3)
        );
        println!(
            "  broker waiting for CPU {} % of its runnable time",
            fmt_spread(&f(|r| r.broker_wait_share() * 100.0), 1)
        );
        println!(
            "  bridge waiting for CPU {} % of its runnable time",
            fmt_spread(&f(|r| r.bridge_wait_share() * 100.0), 1)
        );
        println!(
            "  ratio broker µs/msg ÷ bridge µs/event {}",
            fmt_spread(&f(|r| r.broker_us_per_message() / r.bridge_us_per_event()), 2)
        );
        if rig.command_topic.is_some() {
            println!("  commands, round trip  {} over the {} runs", trips.summary(), runs.len());
        }
    }
    let rate_and_loss: Vec<(f64, usize)> = results.iter().flatten().map(|r| (r.rate, r.lost)).collect();
    println!("zero loss: {}", phase::sustained_zero_loss(&rate_and_loss));
    let lost_and_dropped: Vec<(usize, u64)> = results.iter().flatten().map(|r| (r.lost, r.sim_dropped)).collect();
    println!("loss beside the simulator's drops: {}", phase::loss_beside_simulator(&lost_and_dropped));
    let demand = |f: fn(&PhaseResult) -> f64| results.iter().flatten().map(|r| (f(r), r.lost)).collect::<Vec<_>>();
    println!(
        "loss against the broker's saturation: {}",
        phase::loss_against_saturation(&demand(PhaseResult::broker_demand), "the broker's core")
    );
    println!(
        "loss against the CPU the broker got: {}",
        phase::loss_against_saturation(
            &demand(PhaseResult::broker_demand_on_its_share),
            "the share of its core it got (its demand ÷ (1 − its wait for a CPU))"
        )
    );
    if !ceilings.is_empty() {
        println!("broker ceiling ({size} B, QoS 1, retained, one publisher → one subscriber):");
        println!("  msg/s                 {}", fmt_spread(&ceilings.iter().map(|c| c.rate).collect::<Vec<_>>(), 0));
        println!(
            "  lost                  {}",
            fmt_spread(&ceilings.iter().map(|c| c.lost as f64).collect::<Vec<_>>(), 0)
        );
        println!(
            "  broker CPU µs/message {}",
            fmt_spread(&ceilings.iter().map(|c| c.cpu_us_per_message).collect::<Vec<_>>(), 1)
        );
        println!(
            "  broker cores          {}",
            fmt_spread(&ceilings.iter().map(Ceiling::broker_cores).collect::<Vec<_>>(), 2)
        );
        println!(
            "  harness CPU µs/msg    {}",
            fmt_spread(&ceilings.iter().map(|c| c.harness_us_per_message).collect::<Vec<_>>(), 1)
        );
    }
    if let Some(trips) = &quiet_trips {
        println!(
            "commands on a quiet bridge: {} sent on MQTT, round trip to the unit's new state {}",
            args.commands,
            trips.summary()
        );
    }
    if !bursts.is_empty() {
        let mut all: Vec<f64> = bursts.iter().map(|b| b.all_ms).collect();
        all.sort_by(f64::total_cmp);
        let mut first: Vec<f64> = bursts.iter().map(|b| b.first_ms).collect();
        first.sort_by(f64::total_cmp);
        println!("burst: scene activation of {burst_units} units, {} activations", bursts.len());
        println!(
            "  all units received ms p50 {:.1} p99 {:.1} max {:.1} (first unit p50 {:.1})",
            quantile(&all, 0.5),
            quantile(&all, 0.99),
            all[all.len() - 1],
            quantile(&first, 0.5)
        );
    }
    println!("1-minute load at the end: {:.2}", support::load1());
    let Rig { sim, bridge, broker, targets, next_seq, .. } = rig;
    print_log("the bridge's warnings and errors", &bridge.log());
    bridge.stop();
    if let Some(python) = &args.aiocasambi {
        let bridge: Vec<(f64, f64)> = results
            .iter()
            .map(|runs| {
                (
                    runs[0].rate,
                    support::spread(&runs.iter().map(PhaseResult::bridge_us_per_event).collect::<Vec<_>>()).1,
                )
            })
            .collect();
        peer::compare(python, &args, &sim, &targets, &next_seq, &bridge).await?;
    }
    drop(broker);
    sim.stop().await;
    drop(sim_thread);
    Ok(())
}

/// A child's log, its first and last lines when it is long (a reconnection or a dropped
/// connection in it explains a loss the figures show).
fn print_log(what: &str, log: &str) {
    const HEAD: usize = 20;
    const TAIL: usize = 10;
    let lines: Vec<&str> = log.lines().collect();
    println!("{what}: {} lines", lines.len());
    if lines.len() <= HEAD + TAIL {
        lines.iter().for_each(|l| println!("  {l}"));
        return;
    }
    lines[..HEAD].iter().for_each(|l| println!("  {l}"));
    println!("  … {} lines …", lines.len() - HEAD - TAIL);
    lines[lines.len() - TAIL..].iter().for_each(|l| println!("  {l}"));
}

/// The topic slug of a network of the simulated site.
fn network_slug(sim: &Simulator, network: &str) -> String {
    let world = sim.shared().world();
    casambi2mqtt::mqtt::topics::slug(&world.networks[network].def.name)
}
