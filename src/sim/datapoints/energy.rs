//! The `energy` key: a cumulative meter per unit with a `power` key, consistent with its `power`
//! samples. The meter at slot n is a per-unit starting reading plus `power × 0.25 h` of every
//! slot from a fixed origin up to n. The origin is the start of the UTC day 60 days before the
//! simulator started, so every slot the retention lets a query reach lies after it and a slot's
//! reading never changes during a run.
//!
//! Meters count in units of 0.1 W over one 15-minute slot (1/40 000 kWh), so the sums are exact
//! integers and consecutive readings differ by exactly the earlier slot's `power`.

use super::{History, Key, RETENTION_MS, SLOT_MS, UnitSeries};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Slots of one UTC day.
const SLOTS_PER_DAY: i64 = 24 * 4;
/// Meter units per kWh (0.1 W × 0.25 h = 1/40 000 kWh).
const UNITS_PER_KWH: u64 = 40_000;

/// Which meter: (seed, network, unit, whether its power follows a dimmer).
type MeterId = (u64, String, i64, bool);

/// The meters of one simulator run.
#[derive(Debug)]
pub struct EnergyLedger {
    origin_slot: i64,
    /// The reading at the start of each day since the origin, per (seed, network, unit,
    /// dimmable): one sum per day, so a reading costs at most a day of slots.
    days: Mutex<HashMap<MeterId, Vec<u64>>>,
}

impl EnergyLedger {
    /// A ledger for a run that starts at `started_ms` (ms since the epoch).
    pub fn new(started_ms: i64) -> EnergyLedger {
        let day = SLOTS_PER_DAY * SLOT_MS;
        let origin_ms = (started_ms - RETENTION_MS).div_euclid(day) * day;
        EnergyLedger { origin_slot: origin_ms / SLOT_MS, days: Mutex::new(HashMap::new()) }
    }

    /// The reading of `unit` at the start of `slot`, in meter units (slots before the origin
    /// read as the origin).
    pub(super) fn meter(&self, history: &History<'_>, unit: &UnitSeries, slot: i64) -> u64 {
        let offset = (slot - self.origin_slot).max(0);
        let day = offset / SLOTS_PER_DAY;
        let day_start = self.origin_slot + day * SLOTS_PER_DAY;
        let sum = |from: i64, to: i64| history.power_tenths_sum(unit, from, to);
        let key: MeterId = (history.seed, history.network.to_string(), unit.id, unit.keys.contains(&Key::Dimmer));
        let at_day_start = {
            let mut days = self.days.lock().unwrap_or_else(PoisonError::into_inner);
            let sums = days.entry(key).or_insert_with(|| vec![history.energy_base(unit.id) * UNITS_PER_KWH]);
            while sums.len() as i64 <= day {
                let first = self.origin_slot + (sums.len() as i64 - 1) * SLOTS_PER_DAY;
                let next = sums[sums.len() - 1] + sum(first, first + SLOTS_PER_DAY);
                sums.push(next);
            }
            sums[day as usize]
        };
        at_day_start + sum(day_start, self.origin_slot + offset)
    }
}

/// A meter reading in kWh with six decimals (exact: a meter unit is 0.000025 kWh).
pub(super) fn kwh(meter: u64) -> String {
    format!("{}.{:06}", meter / UNITS_PER_KWH, (meter % UNITS_PER_KWH) * 25)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_exact_decimals() {
        assert_eq!(kwh(0), "0.000000");
        assert_eq!(kwh(1), "0.000025");
        assert_eq!(kwh(40_000), "1.000000");
        assert_eq!(kwh(40_000 * 1234 + 396), "1234.009900");
    }

    #[test]
    fn the_origin_is_a_utc_midnight_60_days_before_the_start() {
        let started = chrono::DateTime::parse_from_rfc3339("2026-11-20T12:07:00Z").unwrap().timestamp_millis();
        let ledger = EnergyLedger::new(started);
        let origin = chrono::DateTime::parse_from_rfc3339("2026-09-21T00:00:00Z").unwrap().timestamp_millis();
        assert_eq!(ledger.origin_slot * SLOT_MS, origin);
    }
}
