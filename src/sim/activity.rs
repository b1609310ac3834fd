//! Background activity of a live site: presence sensors toggling, lux readings drifting, people
//! dimming lights and switching scenes, across all networks, at `config.activity_rate` changes per
//! second. Every choice comes from one generator seeded with `config.seed`, so two simulators with
//! the same site and seed make the same sequence of changes.
//!
//! The schedule is burst-free: a fixed tick (the event period, at least 10 ms) with missed ticks
//! delayed rather than caught up, and fractional events per tick carried over.

use super::Shared;
use super::world::{World, control_value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::MissedTickBehavior;

/// Shortest tick; faster rates do several changes per tick.
const MIN_TICK: Duration = Duration::from_millis(10);
/// Most changes made under one lock of the world.
const MAX_PER_TICK: f64 = 10_000.0;

/// One change the activity made.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A presence sensor's status flipped.
    Presence {
        /// Network id.
        network: String,
        /// Unit id.
        unit: i64,
        /// New status is `present`.
        present: bool,
    },
    /// A lux sensor's reading drifted.
    Lux {
        /// Network id.
        network: String,
        /// Unit id.
        unit: i64,
        /// New reading (lx).
        value: f64,
    },
    /// A dimmable unit was set to a level.
    Dim {
        /// Network id.
        network: String,
        /// Unit id.
        unit: i64,
        /// New level (0..1).
        level: f64,
    },
    /// A scene was activated or deactivated.
    Scene {
        /// Network id.
        network: String,
        /// Scene id.
        scene: i64,
        /// Activated (`true`) or deactivated.
        on: bool,
    },
}

/// What kinds of change exist, in the order tried when a network lacks the chosen kind.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Presence,
    Lux,
    Dim,
    Scene,
}

const KINDS: [Kind; 4] = [Kind::Presence, Kind::Lux, Kind::Dim, Kind::Scene];

/// The activity generator: a seeded random source and the rules for picking changes.
#[derive(Debug)]
pub struct Activity {
    rng: SmallRng,
}

impl Activity {
    /// A generator whose choices are fixed by `seed`.
    pub fn new(seed: u64) -> Activity {
        Activity { rng: SmallRng::seed_from_u64(seed) }
    }

    /// Makes one change somewhere in the world and says what it was (`None` if the world has
    /// nothing that can change).
    pub fn step(&mut self, world: &mut World) -> Option<Change> {
        if world.networks.is_empty() {
            return None;
        }
        let index = self.rng.random_range(0..world.networks.len());
        let network = world.networks.keys().nth(index)?.clone();
        let roll: f64 = self.rng.random();
        let first = match roll {
            r if r < 0.35 => 0,
            r if r < 0.65 => 1,
            r if r < 0.90 => 2,
            _ => 3,
        };
        (0..KINDS.len()).find_map(|i| self.try_kind(world, &network, KINDS[(first + i) % KINDS.len()]))
    }

    fn try_kind(&mut self, world: &mut World, network: &str, kind: Kind) -> Option<Change> {
        let net = world.networks.get(network)?;
        let with = |control: &str| -> Vec<i64> {
            net.units
                .values()
                .filter(|u| {
                    u.def.online
                        && u.def.controls.iter().any(|c| c.get("type").and_then(Value::as_str) == Some(control))
                })
                .map(|u| u.def.id)
                .collect()
        };
        let change = match kind {
            Kind::Presence => {
                let unit = pick(&mut self.rng, &with("Presence"))?;
                let present = net.units.get(&unit).is_some_and(|u| {
                    !u.def.controls.iter().any(|c| {
                        c.get("type").and_then(Value::as_str) == Some("Presence")
                            && c.get("status").and_then(Value::as_str) == Some("present")
                    })
                });
                let status = if present { "present" } else { "absent" };
                let patch = [json!({"type": "Presence", "status": status})];
                world.set_unit_state(network, unit, None, None, &patch).ok()?;
                Change::Presence { network: network.to_string(), unit, present }
            }
            Kind::Lux => {
                let unit = pick(&mut self.rng, &with("Lux"))?;
                let current =
                    net.units.get(&unit).and_then(|u| control_value(&u.def.controls, "Lux", "value")).unwrap_or(100.0);
                let factor = 1.0 + self.rng.random_range(-0.08..0.08);
                let offset = self.rng.random_range(-2.0..2.0);
                let value = ((current * factor + offset).clamp(0.0, 100_000.0) * 10.0).round() / 10.0;
                let level = ((value / 1000.0).min(1.0) * 1000.0).round() / 1000.0;
                let patch = [json!({"type": "Lux", "value": value, "level": level})];
                world.set_unit_state(network, unit, None, None, &patch).ok()?;
                Change::Lux { network: network.to_string(), unit, value }
            }
            Kind::Dim => {
                let unit = pick(&mut self.rng, &with("Dimmer"))?;
                let level = f64::from(self.rng.random_range(0..=20u8)) / 20.0;
                world.control_unit(network, unit, &json!({"Dimmer": {"value": level}})).ok()?;
                Change::Dim { network: network.to_string(), unit, level }
            }
            Kind::Scene => {
                let scenes: Vec<i64> = net.scenes.iter().map(|s| s.id).collect();
                let scene = pick(&mut self.rng, &scenes)?;
                let on = !net.active_scenes.contains(&scene);
                world.control_scene(network, scene, if on { 1.0 } else { 0.0 }).ok()?;
                Change::Scene { network: network.to_string(), scene, on }
            }
        };
        Some(change)
    }
}

fn pick(rng: &mut SmallRng, ids: &[i64]) -> Option<i64> {
    if ids.is_empty() { None } else { ids.get(rng.random_range(0..ids.len())).copied() }
}

/// Starts the activity generator (nothing happens unless `config.activity_rate` is positive). It
/// stops when the simulator shuts down. The first change comes one period after the start.
pub fn spawn(shared: Arc<Shared>) {
    let rate = shared.config.activity_rate;
    if !(rate.is_finite() && rate > 0.0) {
        return;
    }
    let period = Duration::from_secs_f64(1.0 / rate).max(MIN_TICK);
    let per_tick = (rate * period.as_secs_f64()).min(MAX_PER_TICK);
    tokio::spawn(async move {
        let mut activity = Activity::new(shared.config.seed);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut owed = 0.0_f64;
        loop {
            tokio::select! {
                _ = shared.shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            if shared.activity_paused.load(std::sync::atomic::Ordering::Relaxed) {
                continue;
            }
            owed += per_tick;
            let due = (owed + 1e-9).floor();
            owed -= due;
            let mut world = shared.world();
            for _ in 0..due as u64 {
                if let Some(change) = activity.step(&mut world) {
                    tracing::trace!(?change, "activity");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::site::Site;

    fn run(seed: u64, steps: usize) -> Vec<Change> {
        let mut world = World::new(&Site::demo());
        let mut activity = Activity::new(seed);
        (0..steps).filter_map(|_| activity.step(&mut world)).collect()
    }

    #[test]
    fn same_seed_same_changes() {
        let a = run(7, 200);
        assert_eq!(a.len(), 200);
        assert_eq!(a, run(7, 200));
        assert_ne!(a, run(8, 200));
        for kind in ["Presence", "Lux", "Dim", "Scene"] {
            assert!(a.iter().any(|c| format!("{c:?}").starts_with(kind)), "no {kind} change");
        }
    }
}
