//! Bounded resources: a stuck broker (a mosquitto frozen with SIGSTOP: its sockets stay open but
//! it reads and answers nothing) must not make the bridge buffer without limit. The publisher
//! stops taking updates once the MQTT client's bounded request queue is full, so the producer
//! (the bridge core, and through it the WebSocket reader) blocks instead of memory growing.
//!
//! One test per file: it measures the process's RSS, which parallel tests would disturb.
//! `cargo test --test resources_backpressure -- --nocapture` prints the figures.

mod common;

use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::cloud::model::{Control, UnitState, ValueControl};
use casambi2mqtt::mqtt::{self, DiscoveryMode, Protocol};
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The app's queue between the core and the publisher (`src/app.rs` `UPDATE_QUEUE`).
const UPDATE_QUEUE: usize = 4096;
/// How much the RSS may grow while the broker is frozen. Unbounded buffering of the updates
/// pushed here (each renders several topics) would pass this within seconds.
const RSS_GROWTH_LIMIT_KB: u64 = 64 * 1024;

/// The process's resident set size in KiB (Linux).
fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A unit of the view with its Dimmer at `level` (a new state every time).
fn dimmed(unit: &UnitState, level: f64) -> Arc<UnitState> {
    let mut u = unit.clone();
    u.controls = Some(vec![Control::Dimmer(ValueControl { value: level, name: None, extra: Default::default() })]);
    u.on = Some(true);
    Arc::new(u)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_broker_makes_the_producer_wait_instead_of_growing_memory() {
    let broker = Mosquitto::start();
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let ids = demo_network_ids(&sim);
    let home = ids[0].clone();
    let view = view_of(&sim, &home);
    let lamp = UnitState::clone(&view.units[&1]);

    let (updates, updates_rx) = mpsc::channel(UPDATE_QUEUE);
    let (commands_tx, _commands_rx) = mpsc::channel(64);
    let shutdown = CancellationToken::new();
    let cfg = config(&broker.url(), DiscoveryMode::Device, Protocol::V5);
    let task = tokio::spawn(mqtt::run(cfg, updates_rx, commands_tx, shutdown.clone()));
    for id in &ids {
        updates.send(network_update(&view_of(&sim, id), Default::default())).await.unwrap();
    }
    retained_until(broker.port(), Duration::from_secs(15), |r| {
        r.get("casambi/home/unit/kitchen-ceiling/brightness").is_some()
    })
    .await;

    let rss_before = rss_kb();
    broker.pause();
    let network: Arc<str> = home.as_str().into();
    let started = Instant::now();
    let mut accepted = 0u64;
    let mut first_block = None;
    // Push as fast as the queue takes them; a send that waits 500 ms means backpressure.
    while started.elapsed() < Duration::from_secs(12) {
        let level = (accepted % 1000) as f64 / 1000.0;
        let update = Update::Unit { network: network.clone(), unit: dimmed(&lamp, level) };
        match tokio::time::timeout(Duration::from_millis(500), updates.send(update)).await {
            Ok(sent) => {
                sent.unwrap();
                accepted += 1;
            }
            Err(_) => {
                if first_block.is_none() {
                    first_block = Some((started.elapsed(), accepted, rss_kb()));
                }
                // Still blocked after several more seconds?
                if started.elapsed() > first_block.map_or(Duration::ZERO, |b| b.0) + Duration::from_secs(4) {
                    break;
                }
            }
        }
    }
    let rss_frozen = rss_kb();
    let (blocked_at, accepted_at_block, rss_at_block) = first_block.expect("the producer was never held back");
    println!(
        "frozen broker: {accepted_at_block} updates accepted before the first 500 ms wait (after {:.2} s); \
         {accepted} accepted in total; RSS {rss_before} kB before, {rss_at_block} kB at the first wait, \
         {rss_frozen} kB at the end (+{} kB)",
        blocked_at.as_secs_f64(),
        rss_frozen.saturating_sub(rss_before)
    );
    assert_eq!(accepted, accepted_at_block, "updates kept flowing into a frozen broker's bridge");
    assert!(
        rss_frozen.saturating_sub(rss_before) < RSS_GROWTH_LIMIT_KB,
        "RSS grew by {} kB while the broker was frozen",
        rss_frozen.saturating_sub(rss_before)
    );

    // Thawed, the backlog drains and the last state wins.
    broker.resume();
    let last = ((accepted - 1) % 1000) as f64 / 1000.0;
    let thawed = Instant::now();
    let expected = ((last * 255.0).round() as u8).to_string();
    retained_until(broker.port(), Duration::from_secs(20), |r| {
        r.get("casambi/home/unit/kitchen-ceiling/brightness") == Some(&expected)
    })
    .await;
    println!("after SIGCONT the last state was on the broker within {:.2} s", thawed.elapsed().as_secs_f64());
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}
