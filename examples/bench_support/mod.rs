//! Shared pieces of the `bench_e2e` and `bench_scale` examples: a mosquitto broker of their own,
//! the bridge in a child process (the same example binary started with `--bridge CONFIG`, which
//! runs `app::run`), a subscriber that timestamps every message, `/proc` readings (CPU time, peak
//! RSS) and statistics.
//!
//! The bridge runs alone in its process so that its CPU time and memory are read from
//! `/proc/<pid>/` without the simulator's, the driver's or the subscriber's share.
#![allow(dead_code)]

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub mod sim_thread;
mod subscriber;
// Each example uses a part of these, as of the rest of this module (`dead_code` above).
#[allow(unused_imports)]
pub use subscriber::{Received, Recorder, Subscriber, publisher, subscribe};

/// The allocator of the `casambi2mqtt` binary and its options (src/main.rs), so the bridge child
/// measures what the product runs.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8] = b"dirty_decay_ms:0,muzzy_decay_ms:0\0";

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/// Pids of the children, killed by the watchdog if the run overstays.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

pub fn register(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
}

pub fn unregister(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).retain(|p| *p != pid);
}

/// The `main` of a benchmark after its arguments are parsed: a watchdog of `timeout_secs`, then
/// `run` on one thread. The simulator, the driver and the subscriber share this process, and its
/// CPU is taken from the same cores as the bridge and the broker: one thread passes no wake-ups
/// between workers, which would otherwise cost the harness a large share of its CPU and leave
/// less of the machine to what is measured.
pub fn block_on(timeout_secs: u64, run: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    watchdog(Duration::from_secs(timeout_secs));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(run)
}

/// Ends the whole run (children included) after `limit`: every run is bounded in time.
pub fn watchdog(limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("error: the run took longer than {limit:?}; stopping it");
        for pid in CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
        }
        std::process::exit(3);
    });
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free port")
}

fn wait_listening(port: u16, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited with {status}");
        }
        assert!(Instant::now() < deadline, "{what} did not start listening on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A mosquitto broker of the run, on a free loopback port; killed on drop.
pub struct Broker {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Broker {
    /// Starts `/usr/sbin/mosquitto` (or the one in PATH) with no persistence, no limit on queued
    /// messages and TCP_NODELAY (so that Nagle's algorithm in the broker does not add to the
    /// latencies measured through it).
    pub fn start() -> Broker {
        Broker::start_on(None)
    }

    /// [`Broker::start`], on CPU `cpu` alone when one is given (through `taskset`, which runs
    /// mosquitto in its own process, so its pid is the broker's). With
    /// [`confine_to_other_cpus`] the broker then has a core of its own.
    pub fn start_on(cpu: Option<usize>) -> Broker {
        let bin = ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/usr/bin/mosquitto"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("mosquitto"));
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let conf = dir.path().join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n\
                 max_inflight_messages 0\nset_tcp_nodelay true\n"
            ),
        )
        .expect("write mosquitto.conf");
        let log = std::fs::File::create(dir.path().join("mosquitto.log")).expect("log file");
        let mut command = match cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.arg("-c").arg(cpu.to_string()).arg(&bin);
                c
            }
            None => Command::new(&bin),
        };
        let mut child = command
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        register(child.id());
        wait_listening(port, &mut child, "mosquitto");
        Broker { child, port, _dir: dir }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// `mosquitto -h` first line (the version).
    pub fn version() -> String {
        Command::new("/usr/sbin/mosquitto")
            .arg("-h")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
            .unwrap_or_else(|| "mosquitto (version unknown)".into())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        unregister(self.child.id());
    }
}

/// The bridge in a child process: this example's binary started with `--bridge CONFIG`, or with
/// `BENCH_BRIDGE_BIN=PATH` that binary's `run --config CONFIG` (the release binary as it ships:
/// its code is laid out for a running bridge, docs/cli.md#build, and this example's copy is not).
pub struct BridgeProcess {
    child: Child,
    pub started: Instant,
    /// Whether the child is a `casambi2mqtt run`, which stops on SIGTERM rather than when its
    /// stdin closes.
    shipped: bool,
    /// Whether the child is a wrapper (`BENCH_BRIDGE_WRAP`) that may run the bridge in a process
    /// of its own (`strace -f`, `perf record`).
    wrapped: bool,
    _dir: tempfile::TempDir,
}

impl BridgeProcess {
    /// Writes `yaml` to a file and starts the child. The child stops when its stdin closes
    /// (when this handle is dropped, or when the parent dies).
    pub fn start(yaml: &str) -> BridgeProcess {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, yaml).expect("write config");
        let log = std::fs::File::create(dir.path().join("bridge.log")).expect("log file");
        let shipped = std::env::var_os("BENCH_BRIDGE_BIN").map(PathBuf::from);
        let (exe, bridge_args) = match shipped.clone() {
            Some(bin) => (bin, vec!["run", "--config"]),
            None => (std::env::current_exe().expect("own path"), vec!["--bridge"]),
        };
        // BENCH_BRIDGE_WRAP runs the bridge under a profiler, e.g.
        // `BENCH_BRIDGE_WRAP="valgrind --tool=massif --massif-out-file=/tmp/massif.out"`.
        let wrap: Vec<String> = std::env::var("BENCH_BRIDGE_WRAP")
            .map(|w| w.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let mut command = match wrap.split_first() {
            Some((tool, tool_args)) => {
                let mut c = Command::new(tool);
                c.args(tool_args).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let started = Instant::now();
        let child = command
            .args(&bridge_args)
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the bridge process");
        register(child.id());
        BridgeProcess { child, started, shipped: shipped.is_some(), wrapped: !wrap.is_empty(), _dir: dir }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks the child to shut down cleanly: closes its stdin, and sends a shipped binary SIGTERM.
    /// Under a wrapper that runs the bridge as its own child, the signal goes to that child: the
    /// wrapper would otherwise end alone (strace detaches, without its summary) and leave the
    /// bridge running.
    fn ask_to_stop(&mut self) {
        drop(self.child.stdin.take());
        if self.shipped && matches!(self.child.try_wait(), Ok(None)) {
            let pid = self.child.id().to_string();
            let to_children =
                self.wrapped && Command::new("pkill").args(["-TERM", "-P", &pid]).status().is_ok_and(|s| s.success());
            if !to_children {
                let _ = Command::new("kill").args(["-TERM", &pid]).status();
            }
        }
    }

    /// What the bridge logged (warnings and errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("bridge.log")).unwrap_or_default()
    }

    /// Asks the child to shut down cleanly ([`BridgeProcess::ask_to_stop`]) and waits up to 10 s,
    /// then kills it.
    pub fn stop(mut self) {
        self.ask_to_stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("warning: the bridge did not stop within 10 s; killing it");
    }
}

impl Drop for BridgeProcess {
    fn drop(&mut self) {
        self.ask_to_stop();
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        unregister(self.child.id());
    }
}

/// The child side of [`BridgeProcess`]: when `--bridge CONFIG` is the first argument, runs the
/// bridge (`app::run`, as `casambi2mqtt run -c CONFIG` does) until stdin closes, and returns
/// `true`; otherwise returns `false` at once.
pub fn bridge_child() -> bool {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some("--bridge") {
        return false;
    }
    let path = args.get(2).expect("--bridge CONFIG");
    // `CASAMBI2MQTT_*` variables apply as they do to `casambi2mqtt run` (e.g.
    // `CASAMBI2MQTT_MQTT__MAX_INFLIGHT=65535` to compare in-flight windows).
    let config = casambi2mqtt::config::load(Path::new(path), std::env::vars()).expect("bench configuration");
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&config.log.level))
        .with_writer(std::io::stderr)
        .init();
    // The runtime `casambi2mqtt run` uses (BENCH_RUNTIME=multi: a worker per core instead, to
    // compare).
    let runtime = match std::env::var("BENCH_RUNTIME").as_deref() {
        Ok("multi") => tokio::runtime::Runtime::new(),
        _ => casambi2mqtt::app::runtime(),
    }
    .expect("runtime");
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 64];
            while matches!(std::io::stdin().read(&mut sink), Ok(n) if n > 0) {}
            stop.cancel();
        });
        if let Err(e) = casambi2mqtt::app::run(config, shutdown, None).await {
            eprintln!("bridge error: {e}");
        }
    });
    true
}

/// The bridge's configuration for a run: the simulator's demo key and credentials (every network
/// they open), a client-side request limit far above what start-up needs (the generated sites'
/// key allows 100,000 requests a minute), no health endpoint, warnings only.
pub fn bridge_config(sim: &casambi2mqtt::sim::Simulator, broker: &Broker, attribute_topics: bool) -> String {
    [
        "cloud:".to_string(),
        format!("  base_url: {}", sim.base_url()),
        format!("  ws_url: {}", sim.ws_url()),
        "  api_key: demo-key".into(),
        "  max_requests_per_minute: 100000".into(),
        "  max_concurrent_requests: 16".into(),
        "networks:".into(),
        "  - email: demo@example.com".into(),
        "    password: demo".into(),
        "mqtt:".into(),
        format!("  url: {}", broker.url()),
        "  client_id: casambi2mqtt-bench".into(),
        "health:".into(),
        "  listen: \"\"".into(),
        "output:".into(),
        format!("  attribute_topics: {attribute_topics}"),
        "log:".into(),
        "  level: warn".into(),
        String::new(),
    ]
    .join("\n")
}

/// Keeps this process, and the processes and threads it starts from now on, off CPU `cpu`, so
/// that a broker started on it ([`Broker::start_on`]) has that core to itself. Call it first
/// thing, before any thread is started: `taskset -p` sets the calling thread's affinity, which
/// the threads and children started later inherit.
pub fn confine_to_other_cpus(cpu: usize) -> anyhow::Result<()> {
    let cpus = machine_cpus();
    anyhow::ensure!(cpu < cpus, "--broker-cpu {cpu}: this machine has CPUs 0 to {}", cpus - 1);
    anyhow::ensure!(cpus >= 2, "--broker-cpu needs 2 CPUs or more: this machine has {cpus}");
    let others: Vec<String> = (0..cpus).filter(|c| *c != cpu).map(|c| c.to_string()).collect();
    let status = Command::new("taskset")
        .args(["-p", "-c", &others.join(","), &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| anyhow::anyhow!("--broker-cpu needs `taskset` (util-linux): {e}"))?;
    anyhow::ensure!(status.success(), "taskset could not keep this process off CPU {cpu}: {status}");
    Ok(())
}

/// CPU time (user + system) of a process so far, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = [11, 12].iter().filter_map(|i| fields.get(*i)?.parse::<u64>().ok()).sum();
    Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
}

/// Time a process's threads have spent runnable but waiting for a CPU so far (the second field
/// of `/proc/<pid>/task/<tid>/schedstat`, summed over its threads; threads that have ended are
/// not counted). Beside its CPU time it tells a process too slow for its load from one the
/// machine did not run when it could have.
pub fn run_queue_wait(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Duration::ZERO };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100)
    })
}

/// A `kB` field of `/proc/<pid>/status` (`VmHWM` = peak RSS, `VmRSS` = current), in MiB.
pub fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// The 1-minute load average.
pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The machine's CPU time stolen by the hypervisor and its total CPU time, in ticks since boot
/// (`/proc/stat`). On a shared virtual machine, stolen time is when other tenants ran instead:
/// latency outliers of a run go with it.
pub fn steal_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> =
        stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    (fields.get(7).copied().unwrap_or(0), fields.iter().take(8).sum())
}

/// The share of CPU time stolen between two [`steal_ticks`] readings, in percent.
pub fn steal_percent(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 { 0.0 } else { after.0.saturating_sub(before.0) as f64 * 100.0 / total as f64 }
}

/// Waits (30 s at a time, up to `max`) while the 1-minute load is above `threshold`; returns the
/// load it starts with.
pub fn wait_quiet(threshold: f64, max: Duration) -> f64 {
    let deadline = Instant::now() + max;
    loop {
        let load = load1();
        if load <= threshold || Instant::now() >= deadline {
            return load;
        }
        eprintln!("  load {load:.2} > {threshold}: waiting 30 s for a quieter machine");
        std::thread::sleep(Duration::from_secs(30));
    }
}

/// The machine, for the report.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, m)| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines().find_map(|l| l.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
        })
        .map_or("?".into(), |kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0));
    format!("{} cores ({model}), {mem} RAM", machine_cpus())
}

/// The machine's online CPUs, whatever this process's affinity (`available_parallelism` counts
/// only the CPUs this process may run on, one fewer with `--broker-cpu`): the `cpuN` lines of
/// `/proc/stat`.
pub fn machine_cpus() -> usize {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let n = stat
        .lines()
        .filter(|l| l.strip_prefix("cpu").is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())))
        .count();
    if n > 0 { n } else { std::thread::available_parallelism().map_or(1, usize::from) }
}

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

/// The value at quantile `q` (0..=1) of sorted values (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// `min / median / max` of several runs' figures.
pub fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    (v[0], quantile(&v, 0.5), v[v.len() - 1])
}

pub fn fmt_spread(values: &[f64], digits: usize) -> String {
    let (min, med, max) = spread(values);
    format!("{min:.digits$} / {med:.digits$} / {max:.digits$}")
}
