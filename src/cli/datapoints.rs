//! `casambi2mqtt datapoints`: every logged datapoint of a range of one network, to stdout as CSV
//! or JSON lines (docs/cli.md#datapoints). Publishes nothing; logs go to stderr.

use super::init_logging;
use anyhow::Context;
use casambi2mqtt::bridge::CredentialSettings;
use casambi2mqtt::bridge::session_source::SessionSource;
use casambi2mqtt::cloud::backoff::BackoffPolicy;
use casambi2mqtt::cloud::datapoints::{Datapoint, FetchOptions, Fetcher};
use casambi2mqtt::cloud::model::Credentials;
use casambi2mqtt::cloud::rest::{DataType, DatapointQuery, RestClient};
use casambi2mqtt::cloud::session::LoginPolicy;
use casambi2mqtt::config::{self, Config, LogFormat};
use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use clap::{Args, ValueEnum};
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code of bad arguments or configuration (clap uses it for its own errors too).
const EXIT_USAGE: u8 = 2;

/// Arguments of `datapoints`.
#[derive(Debug, Args)]
pub struct DatapointsArgs {
    /// Configuration file (YAML), as for `run`.
    #[arg(short, long, value_name = "FILE", env = super::CONFIG_VAR)]
    config: Option<PathBuf>,
    /// Network id.
    #[arg(long, value_name = "ID")]
    network: String,
    /// Start of the range (inclusive): RFC 3339 (2026-11-20T08:00:00+01:00), or a UTC date or
    /// date and time (2026-11-20, 2026-11-20T08:00), or `now`.
    #[arg(long, value_name = "T", value_parser = parse_time)]
    from: DateTime<Utc>,
    /// End of the range (exclusive), in the same forms.
    #[arg(long, value_name = "T", value_parser = parse_time)]
    to: DateTime<Utc>,
    /// Only these keys (e.g. lux,power).
    #[arg(long, value_name = "K,…", value_delimiter = ',')]
    keys: Vec<String>,
    /// Only these data types; default: datapoints.data_types of the configuration, unless
    /// --keys is given.
    #[arg(long, value_name = "D,…", value_delimiter = ',', value_parser = parse_data_type)]
    data_types: Vec<DataType>,
    /// Only these unit ids.
    #[arg(long, value_name = "U,…", value_delimiter = ',')]
    units: Vec<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Csv)]
    format: Format,
}

/// How points are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// `time,unit,key,value` with a header row.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

/// `casambi2mqtt datapoints`.
pub async fn datapoints(args: DatapointsArgs) -> ExitCode {
    let config = match config::load_from_process_env(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("configuration error:\n{e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    init_logging(&config.log.level, config.log.format == LogFormat::Json);
    if args.from >= args.to {
        eprintln!("error: --from must be before --to");
        return ExitCode::from(EXIT_USAGE);
    }
    match run(&config, &args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(config: &Config, args: &DatapointsArgs) -> anyhow::Result<ExitCode> {
    let rest = rest_client(config)?;
    let Some(sessions) = open_network(config, &rest, &args.network).await? else {
        eprintln!("error: no credentials entry of the configuration opens network {}", args.network);
        return Ok(ExitCode::from(EXIT_USAGE));
    };
    let data_types = match (&args.data_types[..], &args.keys[..]) {
        ([], []) => config.datapoints.data_types.clone(),
        (types, _) => types.to_vec(),
    };
    let filter =
        DatapointQuery { data_types, keys: args.keys.clone(), units: args.units.clone(), ..DatapointQuery::default() };
    let fetcher = Fetcher::new(&rest, &sessions, &args.network, FetchOptions { filter, ..FetchOptions::default() });
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut written: io::Result<()> = match args.format {
        Format::Csv => writeln!(out, "time,unit,key,value"),
        Format::Jsonl => Ok(()),
    };
    let summary = fetcher
        .fetch(args.from, args.to, |points| {
            written = write_points(&mut out, &points, args.format).and_then(|()| out.flush());
            if written.is_ok() { ControlFlow::Continue(()) } else { ControlFlow::Break(()) }
        })
        .await?;
    match written.and_then(|()| out.flush()) {
        // A reader that stops early (`| head`) is not a failure.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        other => other.context("cannot write to stdout")?,
    }
    tracing::info!(
        network = %args.network,
        points = summary.points,
        pages = summary.pages,
        splits = summary.splits,
        renewals = summary.renewals,
        unreadable_times = summary.unreadable_times,
        "datapoints fetched"
    );
    Ok(ExitCode::SUCCESS)
}

/// The REST client of the configuration's `cloud:` section.
fn rest_client(config: &Config) -> anyhow::Result<RestClient> {
    config.cloud.rest_client().context("cannot set up the REST client")
}

/// The sessions of the first credentials entry that opens `network`, tried in the bridge's
/// order (docs/cloud.md): `networks:` entries before `sites:` entries, and in each list those that
/// name the network before those open to every network. `None` when none does.
async fn open_network(config: &Config, rest: &RestClient, network: &str) -> anyhow::Result<Option<SessionSource>> {
    let naming = |list: &'_ [CredentialSettings]| -> Vec<CredentialSettings> {
        let listing: Vec<_> = list.iter().filter(|n| n.ids.iter().any(|id| id == network)).cloned().collect();
        if listing.is_empty() { list.iter().filter(|n| n.ids.is_empty()).cloned().collect() } else { listing }
    };
    // An installer at a terminal wants an answer in seconds: one retry of a failed login, not the
    // bridge's patient schedule (a third failure would wait out the lockout guard's minute).
    let policy = LoginPolicy {
        transient: BackoffPolicy { max_retries: Some(1), ..BackoffPolicy::default() },
        ..LoginPolicy::default()
    };
    let only = || vec![network.to_string()];
    let login = |entry: &CredentialSettings| Credentials::new(entry.email.clone(), entry.password.clone());
    let candidates = naming(&config.networks)
        .into_iter()
        .map(|e| (e.email.clone(), SessionSource::network_login(rest, login(&e), only(), policy.clone())))
        .chain(
            naming(&config.sites)
                .into_iter()
                .map(|e| (e.email.clone(), SessionSource::site_login(rest, login(&e), only(), policy.clone()))),
        );
    for (email, sessions) in candidates {
        match sessions.open().await {
            Ok(opened) if opened.networks.iter().any(|n| n.id == network) => return Ok(Some(sessions)),
            Ok(_) => tracing::info!(%email, network, "these credentials do not open the network"),
            Err(e) if e.is_final() || e.status() == Some(404) => {
                tracing::warn!(%email, network, error = %e, "login failed; trying the next entry");
            }
            Err(e) => return Err(e).with_context(|| format!("cannot log in as {email}")),
        }
    }
    Ok(None)
}

fn write_points(out: &mut impl Write, points: &[Datapoint], format: Format) -> io::Result<()> {
    for p in points {
        match format {
            Format::Csv => {
                let unit = p.unit.map(|u| u.to_string()).unwrap_or_default();
                let time = p.time.to_rfc3339_opts(SecondsFormat::AutoSi, true);
                let value = p.value.to_string();
                writeln!(out, "{time},{unit},{},{}", csv_field(&p.key), csv_field(&value))?;
            }
            Format::Jsonl => {
                serde_json::to_writer(&mut *out, p)?;
                out.write_all(b"\n")?;
            }
        }
    }
    Ok(())
}

/// A CSV field (RFC 4180): quoted when it holds a comma, a quote, a line break or leading or
/// trailing spaces, with quotes doubled.
fn csv_field(text: &str) -> std::borrow::Cow<'_, str> {
    let needs = text.contains([',', '"', '\n', '\r']) || text.starts_with(' ') || text.ends_with(' ');
    if needs { format!("\"{}\"", text.replace('"', "\"\"")).into() } else { text.into() }
}

/// `--from`/`--to`: RFC 3339, a UTC date, a UTC date and time, or `now`.
fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if text == "now" {
        return Ok(Utc::now());
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.to_utc());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| {
            format!("expected RFC 3339 (2026-11-20T08:00:00+01:00), a UTC date or date and time, or now; got {text:?}")
        })
}

/// `--data-types` entries, as the service spells them.
fn parse_data_type(text: &str) -> Result<DataType, String> {
    config::DATA_TYPES.iter().find(|t| t.as_str() == text.trim()).copied().ok_or_else(|| {
        let all: Vec<&str> = config::DATA_TYPES.iter().map(|t| t.as_str()).collect();
        format!("expected one of {}, got {text:?}", all.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use casambi2mqtt::cloud::datapoints::DatapointValue;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("lux"), "lux");
        assert_eq!(csv_field("12.5"), "12.5");
        assert_eq!(csv_field(""), "");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field("cr\r"), "\"cr\r\"");
        assert_eq!(csv_field(" padded"), "\" padded\"");
    }

    #[test]
    fn rows_in_both_formats() {
        let time = DateTime::parse_from_rfc3339("2026-11-20T10:15:00+00:00").unwrap().to_utc();
        let points = [
            Datapoint { time, unit: Some(3), key: "lux".into(), value: DatapointValue::parse("12.5") },
            Datapoint { time, unit: None, key: "note".into(), value: DatapointValue::parse("a, \"b\"") },
        ];
        let mut csv = Vec::new();
        write_points(&mut csv, &points, Format::Csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "2026-11-20T10:15:00Z,3,lux,12.5\n2026-11-20T10:15:00Z,,note,\"a, \"\"b\"\"\"\n"
        );
        let mut jsonl = Vec::new();
        write_points(&mut jsonl, &points, Format::Jsonl).unwrap();
        assert_eq!(
            String::from_utf8(jsonl).unwrap(),
            "{\"time\":\"2026-11-20T10:15:00Z\",\"unit\":3,\"key\":\"lux\",\"value\":12.5}\n\
             {\"time\":\"2026-11-20T10:15:00Z\",\"unit\":null,\"key\":\"note\",\"value\":\"a, \\\"b\\\"\"}\n"
        );
    }

    #[test]
    fn times_in_every_accepted_form() {
        let utc = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        assert_eq!(parse_time("2026-11-20T08:00:00+02:00"), Ok(utc("2026-11-20T06:00:00Z")));
        assert_eq!(parse_time("2026-11-20T08:00:00Z"), Ok(utc("2026-11-20T08:00:00Z")));
        assert_eq!(parse_time("2026-11-20T08:00"), Ok(utc("2026-11-20T08:00:00Z")));
        assert_eq!(parse_time("2026-11-20 08:00:30.5"), Ok(utc("2026-11-20T08:00:30.5Z")));
        assert_eq!(parse_time("2026-11-20"), Ok(utc("2026-11-20T00:00:00Z")));
        assert!(parse_time("now").is_ok());
        for bad in ["yesterday", "2026-13-01", "20261120", ""] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_data_type("energy"), Ok(DataType::Energy));
        assert!(parse_data_type("weather").unwrap_err().contains("sensors, vendor"));
    }
}
