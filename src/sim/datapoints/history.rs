//! The simulated history of every unit's logged datapoints.
//!
//! Every unit has one datapoint per applicable key every 15 minutes on a fixed UTC grid (times
//! that are multiples of 15 minutes since the Unix epoch), from 60 days ago up to now; nothing
//! older than the 60-day retention is ever returned. Values come from a hash of (seed, network,
//! unit, key, slot), so a seed always gives the same history. Results are ordered by time, then
//! unit id, then key in the order of the table below.
//!
//! | key | dataType | units that have it | value |
//! |---|---|---|---|
//! | `dimmer` | `control` | units with a Dimmer control | level 0..1, two decimals (0 a quarter of the time) |
//! | `cct` | `control` | units with a CCT control | kelvin within the control's min..max, steps of 100 |
//! | `onoff` | `control` | units with an OnOff control | `0` or `1` |
//! | `presence` | `sensors` | units with a Presence control | `present` or `absent` |
//! | `lux` | `sensors` | units with a Lux control | 0..2000, one decimal |
//! | `battery_level` | `sensors` | Lux sensors, units with a Switch control or of type `BatterySwitch` | 50..100 |
//! | `power` | `energy` | units with a Dimmer or OnOff control | watts: the dimmer (or on/off) value of the same slot × 40 |
//! | `energy` | `energy` | units with a `power` key | kWh, six decimals: a cumulative meter, `power × 0.25 h / 1000` of every slot before this one added to a per-unit start (0..5000 kWh) since a fixed origin ([`energy`]) |
//! | `driver_temperature` | `vendor` | units with a Dimmer control | °C, 30..60, one decimal |
//! | `operating_hours` | `details` | units of type `Luminaire` | a running hour counter |
//! | `status` | `status` | every unit | `ok` |

use super::energy::{self, EnergyLedger};
use super::query::Query;
use super::{Key, RETENTION_MS, SLOT_MS};
use crate::sim::images::{fnv1a, fnv1a_from};
use crate::sim::site;
use chrono::DateTime;
use serde_json::{Value, json};

/// The history-relevant facts of one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitSeries {
    /// Unit id.
    pub id: i64,
    /// Keys the unit logs, in table order.
    pub keys: Vec<Key>,
    /// The CCT control's (min, max) kelvin, for `cct` values.
    pub cct_range: (f64, f64),
}

impl UnitSeries {
    /// Derives a unit's keys from its type and controls (see the module table).
    pub fn of(unit: &site::Unit) -> UnitSeries {
        let control = |kind: &str| unit.controls.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(kind));
        let has = |kind: &str| control(kind).is_some();
        let mut keys = Vec::new();
        let mut add = |cond: bool, key: Key| {
            if cond {
                keys.push(key);
            }
        };
        add(has("Dimmer"), Key::Dimmer);
        add(has("CCT"), Key::Cct);
        add(has("OnOff"), Key::OnOff);
        add(has("Presence"), Key::Presence);
        add(has("Lux"), Key::Lux);
        add(has("Lux") || has("Switch") || unit.kind == "BatterySwitch", Key::BatteryLevel);
        add(has("Dimmer") || has("OnOff"), Key::Power);
        add(has("Dimmer") || has("OnOff"), Key::Energy);
        add(has("Dimmer"), Key::DriverTemperature);
        add(unit.kind == "Luminaire", Key::OperatingHours);
        add(true, Key::Status);
        let bound = |field: &str, default: f64| {
            control("CCT").and_then(|c| c.get(field)).and_then(Value::as_f64).unwrap_or(default)
        };
        UnitSeries { id: unit.id, keys, cct_range: (bound("min", 2700.0), bound("max", 6500.0)) }
    }
}

/// One datapoint of a result.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Unit id.
    pub unit: i64,
    /// Key.
    pub key: Key,
    /// Value as text.
    pub value: String,
    /// Time, ms since the epoch (UTC).
    pub time_ms: i64,
}

/// The points of a query and whether the limit cut off more.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The returned points, at most `limit`.
    pub points: Vec<Point>,
    /// True exactly when more matching points exist than were returned.
    pub has_more: bool,
}

/// Where the simulated history of one network comes from.
#[derive(Debug, Clone, Copy)]
pub struct History<'a> {
    /// The simulator's seed.
    pub seed: u64,
    /// Network id.
    pub network: &'a str,
    /// The present, ms since the epoch: no point is newer, none older than the retention.
    pub now_ms: i64,
    /// The run's energy meters.
    pub energy: &'a EnergyLedger,
}

impl History<'_> {
    /// Answers a query from the units of the network.
    pub fn answer(&self, query: &Query, units: &[UnitSeries]) -> Answer {
        let pairs: Vec<(&UnitSeries, Key)> = units
            .iter()
            .filter(|u| query.units.as_ref().is_none_or(|w| w.contains(&u.id)))
            .flat_map(|u| u.keys.iter().filter(|k| query.wants(**k)).map(move |k| (u, *k)))
            .collect();
        let lo = query.from_ms.max(self.now_ms - RETENTION_MS);
        let hi = query.to_ms.min(self.now_ms + 1);
        let first = (lo + SLOT_MS - 1).div_euclid(SLOT_MS);
        let end = (hi + SLOT_MS - 1).div_euclid(SLOT_MS);
        let slots = u64::try_from(end - first).unwrap_or(0);
        let total = u128::from(slots) * pairs.len() as u128;
        let take = total.min(u128::from(query.limit)) as usize;
        let mut points = Vec::with_capacity(take);
        // Energy meters are read once at the first slot, then advanced by each slot's power.
        let mut meters: Vec<Option<u64>> = pairs
            .iter()
            .map(|(unit, key)| (*key == Key::Energy && take > 0).then(|| self.energy.meter(self, unit, first)))
            .collect();
        'slots: for slot in first..end {
            for ((unit, key), meter) in pairs.iter().zip(&mut meters) {
                if points.len() >= take {
                    break 'slots;
                }
                let value = match meter {
                    Some(reading) => energy::kwh(*reading),
                    None => self.value(unit, *key, slot),
                };
                points.push(Point { unit: unit.id, key: *key, value, time_ms: slot * SLOT_MS });
                if let Some(reading) = meter {
                    *reading += self.power_tenths(unit, slot);
                }
            }
        }
        Answer { points, has_more: total > u128::from(query.limit) }
    }

    fn hash(&self, unit: i64, key: Key, slot: i64) -> u64 {
        self.series(unit, key).at(slot)
    }

    /// The hash of (seed, network, unit, key), which each slot's hash continues.
    fn series(&self, unit: i64, key: Key) -> SeriesHash {
        SeriesHash(fnv1a(&[
            &self.seed.to_le_bytes(),
            self.network.as_bytes(),
            &unit.to_le_bytes(),
            key.name().as_bytes(),
        ]))
    }

    /// The dimmer level of a unit in a slot in hundredths (also drives `power`).
    fn level_hundredths(&self, unit: i64, slot: i64) -> u64 {
        level_hundredths(self.hash(unit, Key::Dimmer, slot))
    }

    /// The dimmer level of a unit in a slot, 0..1.
    fn level(&self, unit: i64, slot: i64) -> f64 {
        self.level_hundredths(unit, slot) as f64 / 100.0
    }

    /// Whether an on/off unit is on in a slot.
    fn on(&self, unit: i64, slot: i64) -> u8 {
        on(self.hash(unit, Key::OnOff, slot))
    }

    /// A unit's `power` in a slot in tenths of a watt: exactly the value `power` shows, × 10.
    pub(super) fn power_tenths(&self, unit: &UnitSeries, slot: i64) -> u64 {
        self.power_tenths_sum(unit, slot, slot + 1)
    }

    /// The sum of a unit's [`Self::power_tenths`] over the slots `from..to`. An energy meter's
    /// first reading sums up to 60 days of slots, so the unit's part of the hash is made once.
    pub(super) fn power_tenths_sum(&self, unit: &UnitSeries, from: i64, to: i64) -> u64 {
        if unit.keys.contains(&Key::Dimmer) {
            let series = self.series(unit.id, Key::Dimmer);
            (from..to).map(|slot| level_hundredths(series.at(slot)) * 4).sum()
        } else {
            let series = self.series(unit.id, Key::OnOff);
            (from..to).map(|slot| u64::from(on(series.at(slot))) * 400).sum()
        }
    }

    /// A unit's energy meter reading at the origin, whole kWh.
    pub(super) fn energy_base(&self, unit: i64) -> u64 {
        self.hash(unit, Key::Energy, 0) % 5000
    }

    fn value(&self, unit: &UnitSeries, key: Key, slot: i64) -> String {
        let h = self.hash(unit.id, key, slot);
        match key {
            Key::Dimmer => self.level(unit.id, slot).to_string(),
            Key::Cct => {
                let (min, max) = unit.cct_range;
                let steps = ((max - min) / 100.0).floor().max(0.0) as u64;
                (min + (h % (steps + 1)) as f64 * 100.0).to_string()
            }
            Key::OnOff => self.on(unit.id, slot).to_string(),
            Key::Presence => (if h.is_multiple_of(3) { "present" } else { "absent" }).to_string(),
            Key::Lux => format!("{:.1}", (h % 20_001) as f64 / 10.0),
            Key::BatteryLevel => (50 + h % 51).to_string(),
            Key::Power => {
                let level = if unit.keys.contains(&Key::Dimmer) {
                    self.level(unit.id, slot)
                } else {
                    f64::from(self.on(unit.id, slot))
                };
                format!("{:.1}", level * 40.0)
            }
            // Read through the ledger in `answer`; a lone reading goes there too.
            Key::Energy => energy::kwh(self.energy.meter(self, unit, slot)),
            Key::DriverTemperature => format!("{:.1}", 30.0 + (h % 301) as f64 / 10.0),
            Key::OperatingHours => {
                // A running hour counter: a per-unit start plus the hours of the grid, so it
                // grows by one every four slots and does not depend on when it is asked.
                let base = self.hash(unit.id, key, 0) % 20_000;
                (base + slot.div_euclid(4).rem_euclid(100_000).unsigned_abs()).to_string()
            }
            Key::Status => "ok".to_string(),
        }
    }
}

/// The hash state of one unit's key, before the slot.
#[derive(Clone, Copy)]
struct SeriesHash(u64);

impl SeriesHash {
    /// The hash of a slot of the series.
    fn at(self, slot: i64) -> u64 {
        fnv1a_from(self.0, &[&slot.to_le_bytes()])
    }
}

/// A dimmer level in hundredths from its slot's hash.
fn level_hundredths(hash: u64) -> u64 {
    if hash.is_multiple_of(4) { 0 } else { (hash >> 8) % 101 }
}

/// Whether an on/off unit is on, from its slot's hash.
fn on(hash: u64) -> u8 {
    u8::from(!hash.is_multiple_of(3))
}

/// Formats a time as the service does: ISO 8601, UTC, milliseconds and an explicit offset
/// (`2026-11-20T10:15:00.000+00:00`).
pub fn format_time(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms).map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3f+00:00").to_string()).unwrap_or_default()
}

/// The datapoint result object.
pub fn render(answer: &Answer, limit: u32, processing_ms: u64) -> Value {
    let points: Vec<Value> = answer
        .points
        .iter()
        .map(|p| json!({"unit": p.unit, "key": p.key.name(), "value": p.value, "time": format_time(p.time_ms)}))
        .collect();
    json!({
        "resultCount": points.len(),
        "queryLimit": limit,
        "processingTimeMs": processing_ms,
        "hasMoreResults": answer.has_more,
        "errors": "",
        "dataPoints": points,
    })
}
