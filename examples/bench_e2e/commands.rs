//! Commands: how long a command sent on MQTT takes to come back as the unit's new state.
//!
//! The round trip is the path a Home Assistant user waits on: the command on `…/set` (QoS 1) →
//! broker → bridge → the service's control channel → the unit's `unitChanged` → bridge → broker →
//! subscriber. It is also where Nagle's algorithm cost ~40 ms while the bridge subscribed at QoS
//! 1: its PUBACK for the command was a packet the broker never answers, and the state written
//! after it waited for the broker's delayed TCP acknowledgement. The bridge subscribes at QoS 0
//! since, so a regression there shows here first.

use crate::support::{Recorder, quantile};
use rumqttc::{AsyncClient, QoS};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Round trips of a series of commands.
#[derive(Default)]
pub struct RoundTrips {
    /// ms from each command to its state, for the commands whose state came back.
    pub ms: Vec<f64>,
    /// The numbers (from 1) of the commands whose state did not come back within 2 s.
    pub missed: Vec<usize>,
}

impl RoundTrips {
    /// Adds another series' round trips.
    pub fn extend(&mut self, other: RoundTrips) {
        self.ms.extend(other.ms);
        self.missed.extend(other.missed);
    }

    /// `p50 … p99 … max … ms (N back, M missed)`.
    pub fn summary(&self) -> String {
        let mut sorted = self.ms.clone();
        sorted.sort_by(f64::total_cmp);
        format!(
            "p50 {:.1} p99 {:.1} max {:.1} ms ({} back, {} missed)",
            quantile(&sorted, 0.5),
            quantile(&sorted, 0.99),
            sorted.last().copied().unwrap_or(f64::NAN),
            sorted.len(),
            self.missed.len()
        )
    }
}

/// Sends `count` commands to the unit whose JSON is published on `state_topic`, `gap` apart, each
/// to a brightness the unit does not have yet, and times each: from just before the command is
/// handed to the client to the arrival of the unit's JSON with that brightness. A command whose
/// state has not arrived within 2 s is counted as missed and the next one goes out.
pub async fn round_trips(
    client: &AsyncClient,
    recorder: &Recorder,
    state_topic: &str,
    count: usize,
    gap: Duration,
) -> anyhow::Result<RoundTrips> {
    let set_topic = format!("{state_topic}/set");
    let mut out = RoundTrips::default();
    for i in 0..count {
        // 30..230 in steps of 7: consecutive commands never ask for the same level.
        let level = 30 + (i * 7) % 200;
        let mut scanned = recorder.len();
        let sent = recorder.base.elapsed();
        client
            .publish(&set_topic, QoS::AtLeastOnce, false, format!(r#"{{"state":"ON","brightness":{level}}}"#))
            .await?;
        let deadline = Instant::now() + Duration::from_secs(2);
        let arrived = loop {
            // Only what arrived since the last look: each message is read once.
            let mut hit = None;
            scanned = recorder.scan(scanned, |m| {
                if hit.is_none() && m.topic == state_topic && brightness(&m.payload) == Some(level as u64) {
                    hit = Some(m.at);
                }
            });
            if hit.is_some() {
                break hit;
            }
            if Instant::now() >= deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        match arrived {
            Some(at) => out.ms.push(at.saturating_sub(sent).as_secs_f64() * 1000.0),
            None => out.missed.push(i + 1),
        }
        tokio::time::sleep(gap).await;
    }
    Ok(out)
}

/// The `brightness` of a unit JSON payload.
fn brightness(payload: &[u8]) -> Option<u64> {
    serde_json::from_slice::<Value>(payload).ok()?.get("brightness")?.as_u64()
}

/// The unit JSON topic of unit `unit` of the network whose topics start with `prefix`
/// (`casambi/<net>/unit/`), from what the subscriber has seen.
pub fn state_topic(recorder: &Recorder, prefix: &str, unit: i64) -> Option<String> {
    let mut found = None;
    recorder.scan(0, |m| {
        if found.is_some() || m.topic.strip_prefix(prefix).is_none_or(|rest| rest.contains('/')) {
            return;
        }
        let id = serde_json::from_slice::<Value>(&m.payload).ok().and_then(|v| v.get("id")?.as_i64());
        if id == Some(unit) {
            found = Some(m.topic.clone());
        }
    });
    found
}
