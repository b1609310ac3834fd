//! Scale benchmark: start-up of the bridge against a big generated site (default 100 networks ×
//! 250 units = 25,000 units), its memory, its idle CPU and its start-up REST requests.
//!
//! ```text
//! cargo run --release --example bench_scale -- --site 100x250 --runs 3
//! ```
//!
//! Each run starts a fresh simulator (in this process), a fresh mosquitto and the bridge in a
//! child process (`app::run`, the code of `casambi2mqtt run`; this binary with `--bridge CONFIG`),
//! so the bridge's peak RSS and CPU time come from `/proc/<pid>/` alone. A subscriber that is
//! connected before the bridge starts timestamps everything the bridge publishes.
//!
//! - Start-up time: from spawning the bridge to the last retained message of the start-up
//!   (every device config, unit JSON and availability, group, scene and network topic), checked
//!   against the counts the site implies and against what a fresh subscriber then gets from the
//!   broker's retained store. With `--datapoints true` (the default), to the message that
//!   completes it: the datapoints' topics follow at once. The units' plain attribute topics
//!   come after the rest (docs/mqtt.md#publishing-order); with `--subscriber all` the time of the last
//!   is reported too.
//! - Peak RSS: `VmHWM` of the bridge process after start-up and after the idle period.
//! - Idle CPU: the bridge's CPU time over `--idle` seconds with every wire open and quiet, from
//!   20 s after the start-up (after the scan for stale retained topics).
//! - Requests: the simulator's request log (`GET /_sim/log/requests`) against the contract's
//!   formula: sessions + 2 per network + 1 per distinct fixture.

#[path = "bench_support/mod.rs"]
mod support;

use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use clap::Parser;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};
use support::{BridgeProcess, Broker, cpu_time, fmt_spread, status_mib};

#[derive(Debug, Parser)]
#[command(about = "Scale benchmark of casambi2mqtt (see BENCHMARKS.md)")]
struct Args {
    /// Generated site, NETWORKSxUNITS.
    #[arg(long, default_value = "100x250")]
    site: String,
    /// Runs (min / median / max are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds of idle CPU measurement.
    #[arg(long, default_value_t = 20.0)]
    idle: f64,
    /// Wait (up to 20 minutes) until the 1-minute load is at most this before each run.
    #[arg(long, default_value_t = 1.0)]
    max_load: f64,
    /// Publish the per-attribute topics (`output.attribute_topics`, on by default).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    attribute_topics: bool,
    /// What the timing subscriber subscribes to: `all` (`#`: every message, 400,000 at the
    /// default size, which doubles the broker's work) or `ha` (what Home Assistant reads:
    /// discovery, the unit, group, scene and network JSON, availability; not the attribute
    /// topics). Each owner's last topic is in both sets and one connection keeps the bridge's
    /// order, so both see the end of the start-up; the retained check reads every topic either way.
    #[arg(long, value_enum, default_value_t = Subscriber::All)]
    subscriber: Subscriber,
    /// After each run, start a second bridge on the same broker, which then holds everything the
    /// first one retained (a restart), and measure its start-up, CPU and peak RSS too (the peak
    /// after its scan for stale topics, which reads all of them).
    #[arg(long)]
    restart: bool,
    /// Fetch and publish the logged datapoints (`datapoints.enabled`, on by default); they
    /// begin after the start-up, which ends before their first topic.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    datapoints: bool,
    /// Stop everything after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
}

/// The timing subscriber's topic filters.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Subscriber {
    /// `#`.
    All,
    /// What Home Assistant subscribes to.
    Ha,
}

impl Subscriber {
    fn filters(self) -> &'static [&'static str] {
        match self {
            Subscriber::All => &["#"],
            Subscriber::Ha => &[
                "homeassistant/#",
                "casambi/+",
                "casambi/+/+/+",
                "casambi/+/unit/+/availability",
                "casambi/+/unit/+/data",
                "casambi/bridge/#",
            ],
        }
    }
}

fn main() -> anyhow::Result<()> {
    if support::bridge_child() {
        return Ok(());
    }
    let args = Args::parse();
    support::block_on(args.timeout, run(args))
}

struct RunResult {
    startup_s: f64,
    bridge_cpu_s: f64,
    broker_cpu_s: f64,
    own_cpu_s: f64,
    first_s: f64,
    messages: usize,
    retained: usize,
    rss_startup_mib: f64,
    rss_idle_mib: f64,
    /// `VmRSS` after the idle period.
    rss_now_mib: f64,
    idle_percent: f64,
    requests: usize,
    expected_requests: usize,
    load: f64,
    /// When the last unit attribute topic came (`None` unless the subscriber reads them).
    attributes_s: Option<f64>,
    /// With `--restart`: the second bridge's.
    restart: Option<Restart>,
}

/// What a restart (`--restart`) measured.
#[derive(Clone, Copy)]
struct Restart {
    startup_s: f64,
    bridge_cpu_s: f64,
    broker_cpu_s: f64,
    rss_mib: f64,
}

async fn run(args: Args) -> anyhow::Result<()> {
    println!("# bench_scale");
    println!("machine: {}", support::machine());
    println!("broker: {}", Broker::version());
    let (networks, units) = Site::parse_size(&args.site)?;
    println!("site: {networks} networks × {units} units = {} units", networks * units);
    println!("timing subscriber: {:?} {:?}", args.subscriber, args.subscriber.filters());
    let mut results = Vec::new();
    for run in 0..args.runs {
        let load = support::wait_quiet(args.max_load, Duration::from_secs(1200));
        let r = one_run(&args, load).await?;
        println!(
            "run {}: start-up {:.2} s (first message {:.2} s, {} messages, {} retained; CPU bridge {:.2} s, broker {:.2} s, simulator + subscriber {:.2} s), peak RSS {:.1} MiB after start-up, \
             {:.1} MiB after idle ({:.1} MiB resident then), idle CPU {:.3} % of a core, {} REST requests (formula: {}), load {:.2}",
            run + 1,
            r.startup_s,
            r.first_s,
            r.messages,
            r.retained,
            r.bridge_cpu_s,
            r.broker_cpu_s,
            r.own_cpu_s,
            r.rss_startup_mib,
            r.rss_idle_mib,
            r.rss_now_mib,
            r.idle_percent,
            r.requests,
            r.expected_requests,
            r.load
        );
        if let Some(a) = r.attributes_s {
            println!("run {}: the last unit attribute topic {a:.2} s after spawning", run + 1);
        }
        if let Some(x) = r.restart {
            println!(
                "run {} restart: start-up {:.2} s (CPU bridge {:.2} s, broker {:.2} s), peak RSS {:.1} MiB after the scan",
                run + 1,
                x.startup_s,
                x.bridge_cpu_s,
                x.broker_cpu_s,
                x.rss_mib
            );
        }
        results.push(r);
    }
    let f = |g: fn(&RunResult) -> f64| results.iter().map(g).collect::<Vec<_>>();
    println!();
    println!("## Summary (min / median / max over {} runs)", results.len());
    println!("  start-up s            {}", fmt_spread(&f(|r| r.startup_s), 2));
    let attributes: Vec<f64> = results.iter().filter_map(|r| r.attributes_s).collect();
    if !attributes.is_empty() {
        println!("  attribute topics s    {}", fmt_spread(&attributes, 2));
    }
    println!("  start-up CPU bridge s {}", fmt_spread(&f(|r| r.bridge_cpu_s), 2));
    println!("  start-up CPU broker s {}", fmt_spread(&f(|r| r.broker_cpu_s), 2));
    println!("  start-up CPU sim+sub s {}", fmt_spread(&f(|r| r.own_cpu_s), 2));
    println!("  peak RSS MiB          {}", fmt_spread(&f(|r| r.rss_idle_mib), 1));
    println!("  idle CPU % of a core  {}", fmt_spread(&f(|r| r.idle_percent), 3));
    println!("  REST requests         {}", fmt_spread(&f(|r| r.requests as f64), 0));
    println!("  formula               {}", fmt_spread(&f(|r| r.expected_requests as f64), 0));
    println!("  load at start         {}", fmt_spread(&f(|r| r.load), 2));
    if args.restart {
        let restarts: Vec<Restart> = results.iter().filter_map(|r| r.restart).collect();
        let g = |g: fn(&Restart) -> f64| restarts.iter().map(g).collect::<Vec<_>>();
        println!("  restart start-up s    {}", fmt_spread(&g(|r| r.startup_s), 2));
        println!("  restart CPU bridge s  {}", fmt_spread(&g(|r| r.bridge_cpu_s), 2));
        println!("  restart CPU broker s  {}", fmt_spread(&g(|r| r.broker_cpu_s), 2));
        println!("  restart peak RSS MiB  {}", fmt_spread(&g(|r| r.rss_mib), 1));
    }
    Ok(())
}

async fn one_run(args: &Args, load: f64) -> anyhow::Result<RunResult> {
    let (networks, units) = Site::parse_size(&args.site)?;
    let site = Site::generate(networks, units);
    let total_units = networks * units;
    let fixtures: BTreeSet<i64> = site.networks.iter().flat_map(|n| n.units.iter().map(|u| u.fixture)).collect();
    let sim = Simulator::start_local(SimConfig::new(site)).await?;
    let broker = Broker::start();
    let base = Instant::now();
    let own_cpu0 = cpu_time(std::process::id());
    let (recorder, _sub) =
        support::subscribe(broker.port, "bench-scale-subscriber", args.subscriber.filters(), base).await;
    let bridge = BridgeProcess::start(&bridge_config(&sim, &broker, args));
    let spawned = bridge.started.saturating_duration_since(base);

    wait_startup(&recorder, 0, networks, total_units, &bridge).await?;
    let all = recorder.since(0);
    let first = all.first().map_or(Duration::ZERO, |m| m.at);
    // The last message of the start-up: logged datapoints begin only after every network's
    // start-up snapshot, so the start-up ends before the first datapoint topic.
    let (startup, data) = split_at_datapoints(&all);
    let last = startup_end(&all, networks, total_units, args.datapoints);
    let data_last = data.iter().filter(|m| is_data_topic(&m.topic)).map(|m| m.at).max();
    // The plain attribute topics follow the rest of a unit's topics (docs/mqtt.md#publishing-order).
    let attributes_s = all
        .iter()
        .filter(|m| is_attribute_topic(&m.topic))
        .map(|m| m.at.saturating_sub(spawned).as_secs_f64())
        .reduce(f64::max);
    println!(
        "  datapoints after start-up: {} messages ({} data topics), the last {:.2} s after spawning",
        data.len(),
        data.iter().filter(|m| is_data_topic(&m.topic)).count(),
        data_last.map_or(0.0, |t| t.saturating_sub(spawned).as_secs_f64())
    );
    let rss_startup = status_mib(bridge.pid(), "VmHWM");
    let (bridge_cpu, broker_cpu) = (cpu_time(bridge.pid()), cpu_time(broker.pid()));
    let own_cpu = cpu_time(std::process::id()).saturating_sub(own_cpu0);
    let mut bytes: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for m in startup {
        let kind = match m.topic.split('/').collect::<Vec<_>>().as_slice() {
            ["homeassistant", ..] => "discovery",
            ["casambi", _, "unit", _] => "unit JSON",
            ["casambi", _, "unit", _, "availability"] => "unit availability",
            ["casambi", _, "unit", _, _] => "unit attributes",
            ["casambi", _, "group", _] => "group JSON",
            ["casambi", _, "scene", _] => "scene",
            _ => "network and bridge",
        };
        let e = bytes.entry(kind).or_default();
        e.0 += 1;
        e.1 += m.topic.len() + m.payload.len();
    }
    println!("  start-up messages by kind (count, topic + payload bytes): {bytes:?}");

    // Idle: every wire open, nothing happening, after the scan for stale topics (it starts 10 s
    // after the last network loaded and reads every retained message).
    tokio::time::sleep(Duration::from_secs(20)).await;
    let cpu0 = cpu_time(bridge.pid());
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(args.idle)).await;
    let idle_percent = cpu_time(bridge.pid()).saturating_sub(cpu0).as_secs_f64() / t0.elapsed().as_secs_f64() * 100.0;
    let rss_idle = status_mib(bridge.pid(), "VmHWM");
    // What stays once the start-up's transient buffers are gone: the peak less this is theirs.
    let rss_now = status_mib(bridge.pid(), "VmRSS");

    // What the broker retained: a fresh subscriber gets every retained topic once.
    let (retained_rec, retained_sub) =
        support::subscribe(broker.port, "bench-scale-retained", &["#"], Instant::now()).await;
    retained_rec.settle(Duration::from_secs(2), Duration::from_secs(60)).await;
    let mut retained_topics = HashSet::new();
    retained_rec.scan(0, |m| {
        if m.retain && !m.payload.is_empty() {
            retained_topics.insert(m.topic.clone());
        }
    });
    // Gone before a restart: a subscriber left on `#` would double the broker's work during it
    // (every one of the 400,000 messages delivered a second time), which is what `--subscriber
    // all` measures, not a restart.
    drop(retained_rec);
    drop(retained_sub);
    let live_topics: HashSet<&str> = all.iter().filter(|m| !m.payload.is_empty()).map(|m| m.topic.as_str()).collect();
    let missing: Vec<&&str> =
        live_topics.iter().filter(|t| !retained_topics.contains(**t) && !t.ends_with("/error")).take(5).collect();
    anyhow::ensure!(missing.is_empty(), "published but not retained: {missing:?}");

    // The simulator's request log.
    let log: Value = reqwest::get(format!("{}/_sim/log/requests", sim.base_url())).await?.json().await?;
    let records = log.as_array().cloned().unwrap_or_default();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        let (method, path) = (r["method"].as_str().unwrap_or(""), r["path"].as_str().unwrap_or(""));
        let kind = if method == "POST" && path.ends_with("/session") {
            "sessions".to_string()
        } else if path.starts_with("/v1/fixtures/") {
            "fixtures".to_string()
        } else if path.starts_with("/datapoints/") {
            "datapoints (after start-up)".to_string()
        } else if path.ends_with("/gallery") || path.contains("/images/") {
            "photos (after start-up)".to_string()
        } else if path.ends_with("/state") {
            "network state".to_string()
        } else if path.starts_with("/v1/networks/") && path.matches('/').count() == 3 {
            "network".to_string()
        } else {
            format!("{method} {path}")
        };
        *kinds.entry(kind).or_default() += 1;
    }
    let sessions = kinds.get("sessions").copied().unwrap_or(0);
    let background: usize = kinds.iter().filter(|(k, _)| k.ends_with("(after start-up)")).map(|(_, n)| n).sum();
    let expected = sessions + 2 * networks + fixtures.len();
    println!("  requests by kind: {kinds:?} (distinct fixtures: {})", fixtures.len());

    bridge.stop();
    // A restart: the broker still holds everything the first bridge retained, which the new
    // bridge's start-up scan for stale topics receives in full.
    let restart = if args.restart {
        let from = recorder.len();
        let broker_cpu0 = cpu_time(broker.pid());
        let again = BridgeProcess::start(&bridge_config(&sim, &broker, args));
        let spawned = again.started.saturating_duration_since(base);
        wait_startup(&recorder, from, networks, total_units, &again).await?;
        let last = startup_end(&recorder.since(from), networks, total_units, args.datapoints);
        let cpu = (cpu_time(again.pid()), cpu_time(broker.pid()).saturating_sub(broker_cpu0));
        // The scan for stale topics (`gc`) starts 10 s after the last network loaded and reads
        // all 400,000 retained messages: measure after it.
        tokio::time::sleep(Duration::from_secs(20)).await;
        let r = Restart {
            startup_s: last.saturating_sub(spawned).as_secs_f64(),
            bridge_cpu_s: cpu.0.as_secs_f64(),
            broker_cpu_s: cpu.1.as_secs_f64(),
            rss_mib: status_mib(again.pid(), "VmHWM"),
        };
        again.stop();
        Some(r)
    } else {
        None
    };
    drop(broker);
    sim.stop().await;
    Ok(RunResult {
        startup_s: last.saturating_sub(spawned).as_secs_f64(),
        bridge_cpu_s: bridge_cpu.as_secs_f64(),
        broker_cpu_s: broker_cpu.as_secs_f64(),
        own_cpu_s: own_cpu.as_secs_f64(),
        first_s: first.saturating_sub(spawned).as_secs_f64(),
        messages: all.len(),
        retained: retained_topics.len(),
        rss_startup_mib: rss_startup,
        rss_idle_mib: rss_idle,
        rss_now_mib: rss_now,
        idle_percent,
        requests: records.len() - background,
        expected_requests: expected,
        load,
        attributes_s,
        restart,
    })
}

/// What of the start-up a subscriber has seen: every unit JSON and availability, device config
/// and network JSON.
#[derive(Default)]
struct Completion {
    unit_json: HashSet<String>,
    availability: HashSet<String>,
    configs: HashSet<String>,
    network_json: HashSet<String>,
}

impl Completion {
    fn note(&mut self, m: &support::Received) {
        match m.topic.split('/').collect::<Vec<_>>().as_slice() {
            ["casambi", _, "unit", _] => {
                self.unit_json.insert(m.topic.clone());
            }
            ["casambi", _, "unit", _, "availability"] => {
                self.availability.insert(m.topic.clone());
            }
            ["homeassistant", "device", _, "config"] if !m.payload.is_empty() => {
                self.configs.insert(m.topic.clone());
            }
            ["casambi", net] if *net != "bridge" => {
                self.network_json.insert(m.topic.clone());
            }
            _ => {}
        }
    }

    fn done(&self, networks: usize, total_units: usize) -> bool {
        self.unit_json.len() >= total_units
            && self.availability.len() >= total_units
            && self.configs.len() > total_units + networks
            && self.network_json.len() >= networks
    }
}

/// When the start-up of `msgs` ended. Without datapoints: its last message. With them, their
/// topics, and the unit configs they extend with sensors, follow the start-up at once, so it ends
/// at the message that completes it ([`Completion`]).
fn startup_end(msgs: &[support::Received], networks: usize, total_units: usize, datapoints: bool) -> Duration {
    if !datapoints {
        return msgs.last().map_or(Duration::ZERO, |m| m.at);
    }
    let mut seen = Completion::default();
    for m in msgs {
        seen.note(m);
        if seen.done(networks, total_units) {
            return m.at;
        }
    }
    msgs.last().map_or(Duration::ZERO, |m| m.at)
}

/// The bridge's configuration for this run.
fn bridge_config(sim: &Simulator, broker: &Broker, args: &Args) -> String {
    let config = support::bridge_config(sim, broker, args.attribute_topics);
    if args.datapoints { config } else { format!("{config}datapoints:\n  enabled: false\n") }
}

/// Whether `topic` is one of a unit's plain attribute topics (`…/unit/<unit>/<key>`, not its
/// availability nor its datapoints).
fn is_attribute_topic(topic: &str) -> bool {
    matches!(topic.split('/').collect::<Vec<_>>().as_slice(), ["casambi", _, "unit", _, leaf] if *leaf != "availability" && *leaf != "data")
}

/// Whether `topic` is a unit's logged datapoints (`…/data` or `…/data/<key>`).
fn is_data_topic(topic: &str) -> bool {
    matches!(topic.split('/').collect::<Vec<_>>().as_slice(), ["casambi", _, "unit", _, "data", ..])
}

/// The messages of the start-up, and those from the first datapoint topic on.
fn split_at_datapoints(all: &[support::Received]) -> (&[support::Received], &[support::Received]) {
    all.split_at(all.iter().position(|m| is_data_topic(&m.topic)).unwrap_or(all.len()))
}

/// Waits until the start-up of `bridge` is complete in what `recorder` got from its message
/// `from` on: every unit has its device config, its JSON and its availability, and every network
/// its device config and JSON; then nothing more arrives for 3 s.
async fn wait_startup(
    recorder: &support::Recorder,
    from: usize,
    networks: usize,
    total_units: usize,
    bridge: &BridgeProcess,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = Completion::default();
    let mut scanned = from;
    loop {
        scanned = recorder.scan(scanned, |m| seen.note(m));
        if seen.done(networks, total_units) && recorder.quiet_for().is_some_and(|q| q >= Duration::from_secs(3)) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "start-up incomplete after 120 s: {} unit JSON, {} configs, {} networks\n{}",
            seen.unit_json.len(),
            seen.configs.len(),
            seen.network_json.len(),
            bridge.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
