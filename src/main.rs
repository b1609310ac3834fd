//! The `casambi2mqtt` command line: a thin shell over the library. Errors end here as `anyhow`
//! with the exit codes of the contract (0 clean, 2 bad configuration, 1 other fatal error).

mod cli;

use anyhow::Context;
use casambi2mqtt::sim::{SimConfig, Simulator, site::Site};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Bridge a lighting network cloud service to MQTT, with Home Assistant discovery.
///
/// Without a subcommand it runs the bridge with ./config.yaml (see `run --help`).
// No `Debug`: `demo --mqtt-url` may carry the broker's password.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the bridge (the default): cloud → MQTT with Home Assistant discovery.
    Run(cli::ConfigArgs),
    /// Zero setup: the simulated cloud with the demo site, an embedded MQTT broker and the
    /// bridge, in one process.
    Demo(cli::DemoArgs),
    /// Run the simulated cloud service alone (for tests, benchmarks and trying flows without
    /// hardware). Serves REST and the WebSocket channel on one port.
    Sim(SimArgs),
    /// Validate the configuration, log in, connect to the broker, and list the networks, units,
    /// scenes, groups and Home Assistant entities the bridge would create. Publishes nothing.
    Check(cli::CheckArgs),
    /// Ask a running bridge's /healthz (for container health checks); exit 0 when healthy.
    Healthcheck(cli::HealthcheckArgs),
    /// Print every logged datapoint of a range of one network (CSV or JSON lines) to stdout.
    /// Publishes nothing.
    Datapoints(cli::datapoints::DatapointsArgs),
}

#[derive(Debug, Args)]
struct SimArgs {
    /// Site file (YAML); default: the built-in demo site.
    #[arg(long, conflicts_with = "generate")]
    site: Option<PathBuf>,
    /// Generate a site of NETWORKSxUNITS (e.g. 100x250) instead of the demo site.
    #[arg(long, value_name = "NETWORKSxUNITS")]
    generate: Option<String>,
    /// Address to listen on; port 0 picks a free port (the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8765")]
    listen: SocketAddr,
    /// Seed for activity and datapoint history (runs with the same seed repeat).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Activity: changes per second (presence, lux drift, dimming, scenes); 0 = quiet.
    #[arg(long, default_value_t = 0.0, value_parser = cli::activity_rate)]
    activity: f64,
    /// Session lifetime (e.g. `1h`); default: sessions never expire by age.
    #[arg(long, value_parser = cli::duration)]
    session_lifetime: Option<Duration>,
    /// How long login stays locked after three failed logins.
    #[arg(long, value_parser = cli::duration, default_value = "60s")]
    lock_duration: Duration,
    /// Close a wire after this long without a client message.
    #[arg(long, value_parser = cli::duration, default_value = "300s")]
    idle_timeout: Duration,
    /// Send WebSocket frames as text instead of binary.
    #[arg(long)]
    text_frames: bool,
    /// Print the site as a YAML site file and exit (a complete example to edit).
    #[arg(long)]
    print_site: bool,
}

/// jemalloc instead of the system allocator: less CPU at a big site's start-up, where hundreds
/// of thousands of payloads are rendered and handed on (BENCHMARKS.md, "Allocator").
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options: pages freed are given back to the system at once instead of after ten
/// seconds, so the start-up's transient payloads do not stay resident and raise the peak
/// (BENCHMARKS.md, "Allocator").
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8] = b"dirty_decay_ms:0,muzzy_decay_ms:0\0";

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Run(cli::ConfigArgs::from_env()));
    // The simulator serves many clients at once and gets a worker per core; everything else
    // runs on the bridge's own runtime.
    let runtime = match &command {
        Command::Sim(_) => tokio::runtime::Runtime::new(),
        _ => casambi2mqtt::app::runtime(),
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async {
        match command {
            Command::Run(args) => cli::run(args).await,
            Command::Demo(args) => cli::demo(args).await,
            Command::Check(args) => cli::check(args).await,
            Command::Healthcheck(args) => cli::healthcheck(args).await,
            Command::Datapoints(args) => cli::datapoints::datapoints(args).await,
            Command::Sim(args) => {
                cli::init_logging("info", false);
                match run_sim(args).await {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("error: {e:#}");
                        ExitCode::from(1)
                    }
                }
            }
        }
    })
}

async fn run_sim(args: SimArgs) -> anyhow::Result<()> {
    let site = match (&args.site, &args.generate) {
        (Some(path), _) => Site::load(path)?,
        (None, Some(size)) => {
            let (networks, units) = Site::parse_size(size)?;
            Site::generate(networks, units)
        }
        (None, None) => Site::demo(),
    };
    if args.print_site {
        print!("{}", serde_yaml::to_string(&site).context("cannot write the site as YAML")?);
        return Ok(());
    }
    let mut config = SimConfig::new(site);
    config.seed = args.seed;
    config.activity_rate = args.activity;
    config.session_lifetime = args.session_lifetime;
    config.lock_duration = args.lock_duration;
    config.idle_timeout = args.idle_timeout;
    config.text_frames = args.text_frames;
    let networks = config.site.networks.len();
    let units: usize = config.site.networks.iter().map(|n| n.units.len()).sum();
    let sim =
        Simulator::start(config, args.listen).await.with_context(|| format!("cannot listen on {}", args.listen))?;
    println!("casambi2mqtt sim: {networks} networks, {units} units");
    println!("REST      {}", sim.base_url());
    println!("WebSocket {}", sim.ws_url());
    println!("API key demo-key; network login demo@example.com / demo; site login owner@example.com / demo");
    cli::shutdown_signal().await?;
    sim.stop().await;
    Ok(())
}
