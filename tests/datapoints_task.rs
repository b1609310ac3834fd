//! The per-network datapoints task against the simulated service: the first interval reaches
//! the lookback, later ones bring only what is new, a full channel loses nothing, and the task
//! ends on shutdown or when its receiver is gone.

mod datapoints_support;

use std::time::Duration;

use casambi2mqtt::bridge::datapoints::{self, Batch, Schedule, TaskEnd};
use casambi2mqtt::cloud::datapoints::Datapoint;
use chrono::{TimeDelta, Utc};
use datapoints_support::Harness;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn schedule(interval_ms: u64, lookback: Duration) -> Schedule {
    Schedule { interval: Duration::from_millis(interval_ms), lookback }
}

/// Batches until none arrives for `quiet`, taking `pause` over each (a slow consumer).
async fn drain(rx: &mut mpsc::Receiver<Batch>, quiet: Duration, pause: Duration) -> Vec<Datapoint> {
    let mut points = Vec::new();
    while let Ok(Some(batch)) = tokio::time::timeout(quiet, rx.recv()).await {
        tokio::time::sleep(pause).await;
        points.extend(batch.points);
    }
    points
}

#[tokio::test]
async fn the_first_interval_reaches_the_lookback_and_later_ones_only_what_is_new() {
    let h = Harness::demo().await;
    let fetcher = h.fetcher(10_000);
    let (tx, mut rx) = mpsc::channel(64);
    let shutdown = CancellationToken::new();
    let started = Utc::now();
    let task = datapoints::run(&fetcher, schedule(300, Duration::from_secs(3600)), tx, shutdown.clone());
    let check = async {
        let first = drain(&mut rx, Duration::from_millis(200), Duration::ZERO).await;
        assert!(!first.is_empty());
        assert!(first.iter().all(|p| p.time >= started - TimeDelta::hours(1) - TimeDelta::seconds(1)));
        let newest = first.iter().map(|p| p.time).max().unwrap();
        let later = drain(&mut rx, Duration::from_millis(800), Duration::ZERO).await;
        assert!(later.iter().all(|p| p.time > newest), "only what is new");
        let asked = h.statuses().len();
        assert!(asked >= 3, "a fetch every interval: {asked}");
        shutdown.cancel();
    };
    let (end, ()) = tokio::join!(task, check);
    assert_eq!(end, TaskEnd::Shutdown);
}

#[tokio::test]
async fn a_full_channel_loses_nothing_and_the_task_ends_with_its_receiver() {
    let h = Harness::demo().await;
    let fetcher = h.fetcher(100);
    let (tx, mut rx) = mpsc::channel(1);
    let shutdown = CancellationToken::new();
    let task = datapoints::run(&fetcher, schedule(3_600_000, Duration::from_secs(86_400)), tx, shutdown);
    let check = async {
        // A slow consumer: the task has to wait for room again and again.
        let got = drain(&mut rx, Duration::from_millis(500), Duration::from_millis(2)).await;
        drop(rx);
        got
    };
    let (end, got) = tokio::join!(task, check);
    assert_eq!(end, TaskEnd::ReceiverGone);
    let (first, last) = (got[0].time, got[got.len() - 1].time);
    assert!(last - first >= TimeDelta::hours(23), "{first} .. {last}");
    let expected = h.reference(first, last + TimeDelta::milliseconds(1), TimeDelta::days(1)).await;
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "every point once, in order");
    let pages = h.statuses().len();
    assert!(pages > got.len() / 100, "{pages} pages for {} points", got.len());
}
