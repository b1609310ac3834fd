//! The burst: one scene activation changing every unit of a network at once, timed until the
//! last unit's new JSON has arrived.

use super::phase::{dimmer, is_unit_json};
use super::{Rig, network_slug};
use std::time::{Duration, Instant};

pub struct Burst {
    /// ms from the activation to the first unit's new JSON.
    pub first_ms: f64,
    /// ms from the activation to the last unit's new JSON.
    pub all_ms: f64,
}

/// One scene activation changing every unit of the burst network; waits until each unit's JSON
/// with the scene's level has arrived.
pub async fn activate(rig: &Rig, network: &str, units: usize, level: f64) -> anyhow::Result<Burst> {
    let expected = 0.6 * level;
    let prefix = format!("casambi/{}/unit/", network_slug(&rig.sim, network));
    let from = rig.recorder.len();
    let t0 = rig.recorder.base.elapsed();
    rig.sim.shared().world().control_scene(network, 1, level)?;
    let mut seen = std::collections::HashSet::new();
    let (mut first, mut last) = (None, Duration::ZERO);
    let mut scanned = from;
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.len() < units && Instant::now() < deadline {
        scanned = rig.recorder.scan(scanned, |m| {
            if m.topic.starts_with(&prefix)
                && is_unit_json(&m.topic)
                && dimmer(&m.payload).is_some_and(|v| (v - expected).abs() < 1e-9)
                && seen.insert(m.topic.clone())
            {
                first.get_or_insert(m.at);
                last = m.at;
            }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    anyhow::ensure!(seen.len() == units, "only {} of {units} units arrived within 5 s", seen.len());
    // Let the bridge's /state refresh after the scene change pass before the next activation.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    rig.recorder.settle(Duration::from_millis(500), Duration::from_secs(10)).await;
    let ms = |d: Duration| d.saturating_sub(t0).as_secs_f64() * 1000.0;
    Ok(Burst { first_ms: first.map_or(f64::NAN, ms), all_ms: ms(last) })
}
