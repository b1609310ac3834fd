//! The binary's commands `run`, `demo`, `check` and `healthcheck`: argument types, logging set-up,
//! signals and exit codes. The work itself is in the library (`app`, `check`, `sim`, `broker`).

pub mod datapoints;

use anyhow::Context;
use casambi2mqtt::app::{self, Outcome};
use casambi2mqtt::config::{self, Config, ConfigError, LogFormat};
use casambi2mqtt::mqtt::broker_url;
use casambi2mqtt::sim::{SimConfig, Simulator, site::Site};
use clap::Args;
use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Exit code of a bad configuration.
const EXIT_CONFIG: u8 = 2;

/// The environment variable that names the configuration file when `-c` does not.
pub const CONFIG_VAR: &str = "CASAMBI2MQTT_CONFIG";

/// `-c FILE` of `run` and `check`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Configuration file (YAML). Default: ./config.yaml if present, else defaults + environment
    /// variables (CASAMBI2MQTT_<SECTION>__<KEY>).
    #[arg(short, long, value_name = "FILE", env = CONFIG_VAR)]
    config: Option<PathBuf>,
}

impl ConfigArgs {
    /// What `run` is given when the command line names no command: the file [`CONFIG_VAR`]
    /// names, if it names one (an empty value names none, as for `-c`).
    pub fn from_env() -> ConfigArgs {
        ConfigArgs { config: std::env::var_os(CONFIG_VAR).filter(|v| !v.is_empty()).map(PathBuf::from) }
    }
}

/// Arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// How long to wait for the cloud (log in, read every network) and the broker (connect)
    /// before giving up with the cause (e.g. `10s`, `1m`).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = positive_duration)]
    timeout: Duration,
}

/// A human duration (`30s`, `1m 30s`) of at most a year: every one is added to the present.
pub fn duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d > config::MAX_DURATION => Err("must be at most a year (365d)".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (expected a duration such as 30s or 1m)")),
    }
}

/// A [`duration`] of more than zero.
fn positive_duration(text: &str) -> Result<Duration, String> {
    duration(text).and_then(|d| if d.is_zero() { Err("must be more than 0s".into()) } else { Ok(d) })
}

/// Arguments of `demo`. No `Debug`: `--mqtt-url` may carry the broker's password.
#[derive(Args)]
pub struct DemoArgs {
    /// Port of the embedded MQTT broker (MQTT 3.1.1 and 5 on one port).
    #[arg(long, default_value_t = 1883, conflicts_with = "mqtt_url")]
    mqtt_port: u16,
    /// Address the embedded broker listens on. 0.0.0.0 lets other machines and containers (Home
    /// Assistant in Docker) connect; the broker has no authentication.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1", conflicts_with = "mqtt_url")]
    mqtt_listen: IpAddr,
    /// Use this existing broker instead of the embedded one (e.g. mqtt://127.0.0.1:1883).
    #[arg(long, value_name = "URL")]
    mqtt_url: Option<String>,
    /// Activity of the simulated site: changes per second.
    #[arg(long, default_value_t = 0.5, value_parser = activity_rate)]
    activity: f64,
}

/// The simulated site's changes per second: 0 (none), or one a day up to a million a second.
pub fn activity_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if r == 0.0 || (1.0 / 86_400.0..=1e6).contains(&r) => Ok(r),
        Ok(_) => Err("must be 0, or from 0.0000116 (one a day) to 1000000 changes per second".into()),
        Err(e) => Err(format!("{e} (expected a number of changes per second, such as 0.5)")),
    }
}

/// Arguments of `healthcheck`.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// Address of the bridge's health endpoint. Default: CASAMBI2MQTT_HTTP__LISTEN, else
    /// CASAMBI2MQTT_HEALTH__LISTEN (its former name), else 127.0.0.1:8099 (an unspecified
    /// address such as 0.0.0.0 is asked on loopback).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
}

/// Sets up logging to stderr; `RUST_LOG` overrides `level`. Text lines are coloured only when
/// stderr is a terminal and `NO_COLOR` is unset or empty (no-color.org): escape codes in a file,
/// a pipe or a container log are noise.
pub fn init_logging(level: &str, json: bool) {
    let from_env = tracing_subscriber::EnvFilter::try_from_default_env();
    // Unset or empty is the usual case; a value that does not parse is told once logging is up.
    let bad_rust_log = match &from_env {
        Err(e) if std::env::var("RUST_LOG").is_ok_and(|v| !v.trim().is_empty()) => Some(e.to_string()),
        _ => None,
    };
    let filter = from_env
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(format!("{level},rumqttd=off")))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let filter = casambi2mqtt::log_filter::without_secrets(filter);
    let ansi = colour_wanted(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
    if let Some(reason) = bad_rust_log {
        tracing::warn!(%reason, "RUST_LOG is not a valid filter; log.level applies");
    }
    if json {
        // A panic's message goes out as one JSON line too, so a log collector keeps it whole.
        std::panic::set_hook(Box::new(|info| tracing::error!(panic = %info, "panic")));
    }
}

/// Whether the environment asks for JSON logs (`CASAMBI2MQTT_LOG__FORMAT=json`, as the
/// container image sets): what an error found before the configuration is loaded goes by.
fn json_from_env() -> bool {
    std::env::var("CASAMBI2MQTT_LOG__FORMAT").is_ok_and(|v| v.trim().eq_ignore_ascii_case("json"))
}

/// The log level the environment asks for (`CASAMBI2MQTT_LOG__LEVEL`), else `info`: for the demo,
/// which logs before its configuration exists (a bad level is reported once it does).
fn level_from_env() -> String {
    std::env::var("CASAMBI2MQTT_LOG__LEVEL").ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| "info".into())
}

/// Whether log lines get colour: on a terminal, unless `NO_COLOR` has a value.
fn colour_wanted(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM (container stop).
pub async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot wait for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

fn load(args: &ConfigArgs) -> Result<Config, ExitCode> {
    config::load_from_process_env(args.config.as_deref()).map_err(|e: ConfigError| {
        eprintln!("configuration error:\n{e}");
        ExitCode::from(EXIT_CONFIG)
    })
}

/// [`load`] for `run`, whose output a log collector may read: with JSON logs asked for by the
/// environment, a configuration error is one JSON line as well.
fn load_for_run(args: &ConfigArgs) -> Result<Config, ExitCode> {
    if !json_from_env() {
        return load(args);
    }
    config::load_from_process_env(args.config.as_deref()).map_err(|e: ConfigError| {
        init_logging("info", true);
        tracing::error!(error = %e, "configuration error");
        ExitCode::from(EXIT_CONFIG)
    })
}

fn init_from(config: &Config) {
    init_logging(&config.log.level, config.log.format == LogFormat::Json);
}

/// `casambi2mqtt run`.
pub async fn run(args: ConfigArgs) -> ExitCode {
    let config = match load_for_run(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    init_from(&config);
    let json = config.log.format == LogFormat::Json;
    run_config(config, json).await
}

/// Runs the bridge with a loaded configuration until a signal; maps the outcome to an exit code.
/// `json`: the logs are JSON lines, so errors go out only as log lines.
async fn run_config(config: Config, json: bool) -> ExitCode {
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "casambi2mqtt starting");
    exit_code(app::run(config, on_signal(), None).await, json)
}

/// A token cancelled on SIGINT or SIGTERM.
fn on_signal() -> CancellationToken {
    let shutdown = CancellationToken::new();
    let signal_token = shutdown.clone();
    tokio::spawn(async move {
        if let Err(e) = shutdown_signal().await {
            tracing::error!(error = %e, "signal handling failed");
        }
        tracing::info!("shutting down");
        signal_token.cancel();
    });
    shutdown
}

/// The exit code of a run's outcome, with its error logged (and, unless the logs are JSON
/// lines, printed as a plain last line too).
fn exit_code(outcome: Result<Outcome, app::AppError>, json: bool) -> ExitCode {
    match outcome {
        Ok(Outcome::Stopped) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "fatal");
            if !json {
                eprintln!("error: {e}");
            }
            ExitCode::from(1)
        }
    }
}

/// `casambi2mqtt check`: exit 0 when everything answered, 2 for a configuration at fault (bad
/// settings, every credentials entry rejected, no network opened), 1 when the cloud or the broker
/// did not answer in time (the last line says why).
pub async fn check(args: CheckArgs) -> ExitCode {
    let config = match load(&args.config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    init_logging("warn", false);
    println!("configuration OK: {}", config.summary());
    if let Some(warning) = config.mqtt.latency_warning() {
        println!("warning: {warning}");
    }
    let mut progress = |line: String| println!("{line}");
    match casambi2mqtt::check::run(&config, args.timeout, &mut progress).await {
        Ok(report) => {
            let renderer = casambi2mqtt::mqtt::render::Renderer::of(&config.mqtt_config());
            print!("{}", casambi2mqtt::check::render(&report, &renderer));
            if report.ok() {
                ExitCode::SUCCESS
            } else if report.all_rejected || (!report.timed_out && report.networks.is_empty()) {
                ExitCode::from(EXIT_CONFIG)
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// `casambi2mqtt healthcheck`.
pub async fn healthcheck(args: HealthcheckArgs) -> ExitCode {
    let listen = args
        .listen
        .or_else(|| {
            ["CASAMBI2MQTT_HTTP__LISTEN", "CASAMBI2MQTT_HEALTH__LISTEN"]
                .iter()
                .find_map(|var| std::env::var(var).ok().and_then(|v| v.parse().ok()))
        })
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8099)));
    let ask = if listen.ip().is_unspecified() { SocketAddr::from(([127, 0, 0, 1], listen.port())) } else { listen };
    match casambi2mqtt::health::check(ask).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unhealthy: {e}");
            ExitCode::from(1)
        }
    }
}

/// `casambi2mqtt demo`.
pub async fn demo(args: DemoArgs) -> ExitCode {
    init_logging(&level_from_env(), json_from_env());
    match demo_inner(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn demo_inner(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let mut sim_config = SimConfig::new(Site::demo());
    sim_config.activity_rate = args.activity;
    let sim = Simulator::start_local(sim_config).await.context("cannot start the simulated cloud")?;
    let broker = match &args.mqtt_url {
        Some(url) => Broker::External(url.clone()),
        None => {
            if !args.mqtt_listen.is_loopback() {
                tracing::warn!(
                    listen = %args.mqtt_listen,
                    "the embedded broker listens beyond this machine's loopback and has no authentication: \
                     whoever reaches it can read and command the demo's lights"
                );
            }
            let bound = start_embedded_broker(SocketAddr::new(args.mqtt_listen, args.mqtt_port)).await?;
            Broker::Embedded(bound)
        }
    };
    let (mqtt_url, protocol) = match &broker {
        // An existing broker is negotiated with as `run` does: MQTT 5, else 3.1.1 (NATS).
        Broker::External(url) => (url.clone(), "auto"),
        // The bridge takes the loopback way in even when the broker listens on every interface.
        Broker::Embedded(bound) => {
            (format!("mqtt://{}", SocketAddr::new(reachable_ip(bound.ip()), bound.port())), "v3")
        }
    };
    let shutdown = on_signal();
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "casambi2mqtt starting");
    // The health endpoint where `healthcheck` asks by default; elsewhere when that is taken.
    for health in [DEMO_HEALTH, SocketAddr::new(DEMO_HEALTH.ip(), 0)] {
        let yaml = format!(
            "cloud:\n  base_url: {base}\n  ws_url: {ws}\n  api_key: demo-key\n  poll_interval: 5s\n\
             networks:\n  - email: demo@example.com\n    password: demo\n\
             mqtt:\n  url: {mqtt_url}\n  protocol: {protocol}\n  client_id: casambi2mqtt-demo\n\
             http:\n  listen: {health}\n",
            base = sim.base_url(),
            ws = sim.ws_url(),
        );
        let config = config::parse(&yaml, std::env::vars()).context("demo configuration")?;
        let json = config.log.format == LogFormat::Json;
        let (started_tx, started_rx) = oneshot::channel::<app::Running>();
        let (base_url, shown, topic) = (sim.base_url(), broker.clone(), config.mqtt.base_topic.clone());
        tokio::spawn(async move {
            if let Ok(running) = started_rx.await {
                print!("{}", banner(&base_url, &shown, &topic, running.health_addr));
            }
        });
        match app::run(config, shutdown.clone(), Some(started_tx)).await {
            Err(app::AppError::Http { addr, source }) if addr == DEMO_HEALTH => {
                tracing::info!(%addr, error = %source, "the default health address is taken; using a free port");
            }
            outcome => return Ok(exit_code(outcome, json)),
        }
    }
    anyhow::bail!("no address for the HTTP listener")
}

/// The health endpoint of the demo: where `casambi2mqtt healthcheck` asks by default, when free.
const DEMO_HEALTH: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8099);

/// Loopback for an unspecified address (0.0.0.0, ::), which cannot be connected to.
fn reachable_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    }
}

/// The broker the demo's bridge publishes to.
#[derive(Clone)]
enum Broker {
    /// The embedded one, on this address.
    Embedded(SocketAddr),
    /// One given with `--mqtt-url`.
    External(String),
}

/// What the demo prints once it runs: where everything is and how to watch it (`base_topic`: the
/// bridge's topics, `mqtt.base_topic`).
fn banner(cloud: &str, broker: &Broker, base_topic: &str, health: Option<SocketAddr>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("casambi2mqtt demo\n");
    let _ = writeln!(out, "  simulated cloud  {cloud} (API key demo-key, login demo@example.com / demo)");
    // Where Home Assistant finds the broker, and what to do when it runs in a container (where
    // 127.0.0.1 is the container itself).
    let (host, port, ha_host, container_hint, sub_options) = match broker {
        Broker::Embedded(bound) => {
            let _ = writeln!(out, "  MQTT broker      mqtt://{bound} (embedded; MQTT 3.1.1 and 5, no login)");
            let host = reachable_ip(bound.ip()).to_string();
            let (ha_host, hint) = if bound.ip().is_unspecified() {
                (
                    "this machine's address".to_string(),
                    "on every interface: reachable from other machines and containers",
                )
            } else if bound.ip().is_loopback() {
                (host.clone(), "in a container, Home Assistant needs --mqtt-listen 0.0.0.0 and this machine's address")
            } else {
                (host.clone(), "")
            };
            (host, bound.port().to_string(), ha_host, hint, String::new())
        }
        Broker::External(url) => {
            // The URL is shown without its user info: the banner is printed, and often shared.
            let _ = writeln!(out, "  MQTT broker      {}", broker_url::redact_url(url));
            let (host, port, tls) = broker_url::broker_address(url).unwrap_or(("127.0.0.1".into(), 1883, false));
            let mut options = String::new();
            if tls {
                options.push_str(" --tls-use-os-certs");
            }
            if url.split_once("://").is_some_and(|(_, rest)| rest.contains('@')) {
                options.push_str(" -u USER -P PASSWORD");
            }
            (host.clone(), port.to_string(), host, "", options)
        }
    };
    let _ = writeln!(out, "  watch it         mosquitto_sub -h {host} -p {port}{sub_options} -t '{base_topic}/#' -v");
    let _ = writeln!(out, "  Home Assistant   Settings → Devices & services → MQTT → broker {ha_host}, port {port};");
    let _ = writeln!(out, "                   the demo's lights and sensors appear under MQTT devices");
    if !container_hint.is_empty() {
        let _ = writeln!(out, "                   ({container_hint})");
    }
    if let Some(health) = health {
        let check = if health == DEMO_HEALTH {
            "casambi2mqtt healthcheck".to_string()
        } else {
            format!("casambi2mqtt healthcheck --listen {health}")
        };
        let _ = writeln!(out, "  web page         http://{health}/ (what the bridge sees; switch lights there)");
        let _ = writeln!(out, "  health           http://{health}/healthz ({check})");
    }
    let _ = writeln!(out, "  stop             Ctrl-C");
    out
}

#[cfg(feature = "embedded-broker")]
async fn start_embedded_broker(listen: SocketAddr) -> anyhow::Result<SocketAddr> {
    casambi2mqtt::broker::start(listen).await.map_err(anyhow::Error::from)
}

#[cfg(not(feature = "embedded-broker"))]
async fn start_embedded_broker(_listen: SocketAddr) -> anyhow::Result<SocketAddr> {
    anyhow::bail!("this build has no embedded broker (feature `embedded-broker`); pass --mqtt-url")
}

#[cfg(test)]
mod tests {
    use super::{Broker, banner, colour_wanted};

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_wanted(true, None));
        assert!(colour_wanted(true, Some("".into())), "an empty NO_COLOR counts as unset");
        assert!(!colour_wanted(true, Some("1".into())));
        assert!(!colour_wanted(false, None));
    }

    #[test]
    fn the_banner_hides_the_broker_login_and_watches_the_base_topic() {
        let broker = Broker::External("mqtts://bob:s3cret@broker.example:8884".into());
        let text = banner("http://127.0.0.1:1", &broker, "home/lights", None);
        assert!(!text.contains("s3cret") && !text.contains("bob"), "{text}");
        assert!(text.contains("MQTT broker      mqtts://broker.example:8884\n"), "{text}");
        assert!(
            text.contains(
                "mosquitto_sub -h broker.example -p 8884 --tls-use-os-certs -u USER -P PASSWORD -t 'home/lights/#' -v"
            ),
            "{text}"
        );
        let embedded = Broker::Embedded("127.0.0.1:1883".parse().unwrap());
        let text = banner("http://127.0.0.1:1", &embedded, "casambi", None);
        assert!(text.contains("mosquitto_sub -h 127.0.0.1 -p 1883 -t 'casambi/#' -v"), "{text}");
    }
}
