//! `casambi2mqtt datapoints` as an installer runs it against the simulated service: every point
//! of a range as CSV or JSON lines on stdout (all pages, ranges split after 416), logs on stderr,
//! and exit code 2 for bad arguments or configuration, 1 for other failures.

mod datapoints_support;

use std::io::Write;
use std::time::Duration;

use casambi2mqtt::cloud::rest::{DataType, DatapointQuery};
use casambi2mqtt::sim::SimConfig;
use casambi2mqtt::sim::site::Site;
use chrono::{SecondsFormat, TimeDelta};
use datapoints_support::{HOME, Harness, past_day};

const BIN: &str = env!("CARGO_BIN_EXE_casambi2mqtt");

fn config_for(base_url: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        "cloud:\n  base_url: {base_url}\n  api_key: demo-key\n  max_requests_per_minute: 6000\n\
         networks:\n  - email: demo@example.com\n    password: demo\nhealth:\n  listen: \"\"\n"
    )
    .unwrap();
    f
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run(config: &tempfile::NamedTempFile, args: &[&str]) -> Run {
    let out = tokio::process::Command::new(BIN)
        .arg("datapoints")
        .arg("-c")
        .arg(config.path())
        .args(args)
        .env_remove("RUST_LOG")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out).await.expect("ends").unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[tokio::test(flavor = "multi_thread")]
async fn csv_holds_every_point_of_the_range_with_a_header() {
    let h = Harness::demo().await;
    let config = config_for(&h.sim.base_url());
    let (from, to) = past_day();
    let r = run(&config, &["--network", HOME, "--from", &iso(from), "--to", &iso(to), "--keys", "lux,power"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let filter = DatapointQuery { keys: vec!["lux".into(), "power".into()], ..DatapointQuery::default() };
    let expected = h.reference_of(&filter, from, to, TimeDelta::days(1)).await;
    let mut lines = r.stdout.lines();
    assert_eq!(lines.next(), Some("time,unit,key,value"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), expected.len());
    let first = &expected[0];
    let want = format!(
        "{},{},{},{}",
        first.time.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        first.unit.unwrap(),
        first.key,
        first.value
    );
    assert_eq!(rows[0], want);
    assert!(rows.iter().all(|r| r.split(',').count() == 4), "no field needed quoting here");
    assert!(r.stderr.contains("datapoints fetched"), "the summary is logged to stderr: {}", r.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn jsonl_follows_every_page_and_splits_long_ranges() {
    let mut sim_config = SimConfig::new(Site::demo());
    sim_config.max_datapoint_interval = Duration::from_secs(6 * 3600);
    let h = Harness::start(sim_config).await;
    let config = config_for(&h.sim.base_url());
    let (from, to) = past_day();
    let args = ["--network", HOME, "--from", &iso(from), "--to", &iso(to), "--format", "jsonl"];
    let r =
        run(&config, &[&args[..], &["--data-types", "sensors,energy", "--units", "1,2,3,4,5,6,7,8"]].concat()).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let filter = DatapointQuery { data_types: vec![DataType::Sensors, DataType::Energy], ..DatapointQuery::default() };
    let expected = h.reference_of(&filter, from, to, TimeDelta::hours(6)).await;
    let got: Vec<serde_json::Value> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got.len(), expected.len());
    for (line, point) in got.iter().zip(&expected) {
        assert_eq!(line, &serde_json::to_value(point).unwrap());
    }
    assert!(h.statuses().contains(&416), "the day was split: {:?}", h.statuses());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_and_configuration_exit_two_other_failures_one() {
    let h = Harness::demo().await;
    let config = config_for(&h.sim.base_url());
    let (from, to) = (iso(past_day().0), iso(past_day().1));
    let r = run(&config, &["--network", HOME, "--from", "yesterday", "--to", &to]).await;
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--from"), "{}", r.stderr);
    let r = run(&config, &["--network", HOME, "--from", &to, "--to", &from]).await;
    assert_eq!((r.code, r.stderr.trim()), (Some(2), "error: --from must be before --to"));
    let r = run(&config, &["--network", HOME, "--from", &from, "--to", &to, "--data-types", "weather"]).await;
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let r = run(&config, &["--network", "0000", "--from", &from, "--to", &to]).await;
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("no credentials entry of the configuration opens network 0000"), "{}", r.stderr);
    assert!(r.stdout.is_empty());

    let mut bad = tempfile::NamedTempFile::new().unwrap();
    write!(bad, "cloud:\n  api_key: k\nnetworks: []\n").unwrap();
    let r = run(&bad, &["--network", HOME, "--from", &from, "--to", &to]).await;
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("networks"), "{}", r.stderr);

    // Nothing listens there: a failure that is not the user's arguments.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let closed = config_for(&format!("http://127.0.0.1:{port}"));
    let r = run(&closed, &["--network", HOME, "--from", &from, "--to", &to]).await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("error:"), "{}", r.stderr);
}

/// A configuration with a site login only: the command opens the network through the user's
/// session, as the bridge does (docs/cloud.md), and prints the same points.
#[tokio::test(flavor = "multi_thread")]
async fn a_site_login_alone_opens_the_network() {
    let h = Harness::demo().await;
    let mut config = tempfile::NamedTempFile::new().unwrap();
    write!(
        config,
        "cloud:\n  base_url: {}\n  api_key: demo-key\n  max_requests_per_minute: 6000\n\
         sites:\n  - email: owner@example.com\n    password: demo\nhealth:\n  listen: \"\"\n",
        h.sim.base_url()
    )
    .unwrap();
    let (from, to) = past_day();
    let r = run(&config, &["--network", HOME, "--from", &iso(from), "--to", &iso(to), "--keys", "lux"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let filter = DatapointQuery { keys: vec!["lux".into()], ..DatapointQuery::default() };
    let expected = h.reference_of(&filter, from, to, TimeDelta::days(1)).await;
    assert_eq!(r.stdout.lines().count(), expected.len() + 1, "{}", r.stderr);
}
