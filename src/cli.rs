//! The binary's commands `run`, `demo`, `check` and `healthcheck`: argument types, logging set-up,
//! signals and exit codes. The work itself is in the library (`app`, `check`, `sim`, `broker`).

use anyhow::Context;
use casambi2mqtt::app::{self, Outcome};
use casambi2mqtt::config::{self, Config, ConfigError, LogFormat};
use casambi2mqtt::sim::{SimConfig, Simulator, site::Site};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Exit code of a bad configuration or of credentials all rejected for good.
const EXIT_CONFIG: u8 = 2;

/// `-c FILE` of `run` and `check`.
#[derive(Debug, Args, Default)]
pub struct ConfigArgs {
    /// Configuration file (YAML). Default: ./config.yaml if present, else defaults + environment
    /// variables (CASAMBI2MQTT_<SECTION>__<KEY>).
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Port of the embedded MQTT broker on 127.0.0.1.
    #[arg(long, default_value_t = 1883)]
    mqtt_port: u16,
    /// Use this existing broker instead of the embedded one (e.g. mqtt://127.0.0.1:1883).
    #[arg(long, value_name = "URL")]
    mqtt_url: Option<String>,
    /// Activity of the simulated site: changes per second.
    #[arg(long, default_value_t = 0.5)]
    activity: f64,
}

/// Arguments of `healthcheck`.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// Address of the bridge's health endpoint. Default: CASAMBI2MQTT_HEALTH__LISTEN, else
    /// 127.0.0.1:8099 (an unspecified address such as 0.0.0.0 is asked on loopback).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
}

/// Sets up logging; `RUST_LOG` overrides `level`.
pub fn init_logging(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(format!("{level},rumqttd=off")))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
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

fn init_from(config: &Config) {
    init_logging(&config.log.level, config.log.format == LogFormat::Json);
}

/// `casambi2mqtt run`.
pub async fn run(args: ConfigArgs) -> ExitCode {
    let config = match load(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    init_from(&config);
    run_config(config).await
}

/// Runs the bridge with a loaded configuration until a signal; maps the outcome to an exit code.
async fn run_config(config: Config) -> ExitCode {
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "casambi2mqtt starting");
    let shutdown = CancellationToken::new();
    let signal_token = shutdown.clone();
    tokio::spawn(async move {
        if let Err(e) = shutdown_signal().await {
            tracing::error!(error = %e, "signal handling failed");
        }
        tracing::info!("shutting down");
        signal_token.cancel();
    });
    match app::run(config, shutdown, None).await {
        Ok(Outcome::Stopped) => ExitCode::SUCCESS,
        Ok(Outcome::AllRejected(reasons)) => {
            for r in reasons {
                tracing::error!(reason = %r, "credentials rejected");
                eprintln!("error: {r}");
            }
            eprintln!("error: every credentials entry was rejected; nothing to bridge");
            ExitCode::from(EXIT_CONFIG)
        }
        Err(e) => {
            tracing::error!(error = %e, "fatal");
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `casambi2mqtt check`.
pub async fn check(args: ConfigArgs) -> ExitCode {
    let config = match load(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    init_logging("warn", false);
    println!("configuration OK: {}", config.summary());
    if let Some(warning) = config.mqtt.latency_warning() {
        println!("warning: {warning}");
    }
    match casambi2mqtt::check::run(&config, Duration::from_secs(60)).await {
        Ok(report) => {
            print!("{}", casambi2mqtt::check::render(&report));
            if report.ok() {
                ExitCode::SUCCESS
            } else if report.networks.is_empty() {
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
        .or_else(|| std::env::var("CASAMBI2MQTT_HEALTH__LISTEN").ok().and_then(|v| v.parse().ok()))
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
    init_logging("info", false);
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
    let (mqtt_url, protocol) = match &args.mqtt_url {
        Some(url) => (url.clone(), "v5"),
        None => {
            let listen = SocketAddr::from(([127, 0, 0, 1], args.mqtt_port));
            start_embedded_broker(listen).await?;
            // The embedded broker speaks MQTT 3.1.1.
            (format!("mqtt://{listen}"), "v3")
        }
    };
    let yaml = format!(
        "cloud:\n  base_url: {base}\n  ws_url: {ws}\n  api_key: demo-key\n  poll_interval: 5s\n\
         networks:\n  - email: demo@example.com\n    password: demo\n\
         mqtt:\n  url: {mqtt_url}\n  protocol: {protocol}\n  client_id: casambi2mqtt-demo\n\
         health:\n  listen: 127.0.0.1:0\n",
        base = sim.base_url(),
        ws = sim.ws_url(),
    );
    let config = config::parse(&yaml, std::env::vars()).context("demo configuration")?;
    let (host, port) = mqtt_url
        .trim_start_matches("mqtt://")
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap_or_else(|| ("127.0.0.1".into(), "1883".into()));
    println!("casambi2mqtt demo");
    println!("  simulated cloud  {} (API key demo-key, login demo@example.com / demo)", sim.base_url());
    println!("  MQTT broker      {mqtt_url}");
    println!("  watch it         mosquitto_sub -h {host} -p {port} -t 'casambi/#' -v");
    println!("  Home Assistant   Settings → Devices & services → MQTT → broker {host}, port {port};");
    println!("                   the demo's lights and sensors appear under MQTT devices");
    println!("  stop             Ctrl-C");
    Ok(run_config(config).await)
}

#[cfg(feature = "embedded-broker")]
async fn start_embedded_broker(listen: SocketAddr) -> anyhow::Result<()> {
    casambi2mqtt::broker::start(listen).await.map_err(anyhow::Error::from)
}

#[cfg(not(feature = "embedded-broker"))]
async fn start_embedded_broker(_listen: SocketAddr) -> anyhow::Result<()> {
    anyhow::bail!("this build has no embedded broker (feature `embedded-broker`); pass --mqtt-url")
}
