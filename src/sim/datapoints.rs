//! Logged datapoints (`GET /datapoints/networks/{id}/datapoints`): the query rules of the real
//! service and a simulated history to answer from.
//!
//! # Query rules
//! The query string is parsed from its raw form: a literal `+` anywhere makes the query invalid
//! (form decoding would turn it into a space, so an unencoded `+` in a time zone offset would
//! silently change the time; the service refuses it instead), and `%XX` escapes are decoded
//! (`%2B` is a `+`). Then:
//! - `dataType` (comma list of [`DataType`] names) or `keys` (comma list of key names) is
//!   required; when both are given a datapoint must match both. An unknown `dataType` is 400.
//! - `units`: comma list of unit ids, optionally in brackets (`1,2` or `[1,2]`).
//! - `from`, `to`: required; compact `yyyyMMdd[hh[mm[ss[fff]]]]` (UTC) or ISO 8601
//!   `yyyy-MM-dd[Thh:mm[:ss[.fff]]][Z|±hh:mm]` (UTC unless an offset is given). The range is
//!   half-open, `from <= time < to`; `from > to` is 400.
//! - `limit`: 1..=100000, default 10000.
//! - A parameter given twice is 400; parameters the service does not know are ignored.
//! - `to - from` longer than the configured maximum is 416 (checked after the 400 rules).
//!
//! # History
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

mod energy;

pub use energy::EnergyLedger;

use super::images::fnv1a;
use super::site;
use chrono::{DateTime, NaiveDate};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// Spacing of the simulated history.
pub const SLOT_MS: i64 = 15 * 60 * 1000;
/// How long datapoints are kept (the real service: 60 days).
pub const RETENTION_MS: i64 = 60 * 24 * 3600 * 1000;
/// Limit applied when the query gives none.
pub const DEFAULT_LIMIT: u32 = 10_000;
/// Largest allowed `limit`.
pub const MAX_LIMIT: u32 = 100_000;

/// Why a datapoint query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// An invalid filter value or a missing mandatory value: 400.
    #[error("{0}")]
    Invalid(String),
    /// The retrieval interval is longer than the service allows: 416.
    #[error("retrieval interval too long")]
    IntervalTooLong,
}

fn invalid(text: impl Into<String>) -> QueryError {
    QueryError::Invalid(text.into())
}

/// The string-based datapoint type filters of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// Sensor readings (presence, lux, battery).
    Sensors,
    /// Vendor-specific values.
    Vendor,
    /// Control values (dimmer, colour temperature, on/off).
    Control,
    /// Energy use.
    Energy,
    /// Device details.
    Details,
    /// Unit status.
    Status,
}

impl DataType {
    /// Parses a `dataType` list entry (lowercase, as the service spells them).
    pub fn parse(text: &str) -> Option<DataType> {
        Some(match text {
            "sensors" => DataType::Sensors,
            "vendor" => DataType::Vendor,
            "control" => DataType::Control,
            "energy" => DataType::Energy,
            "details" => DataType::Details,
            "status" => DataType::Status,
            _ => return None,
        })
    }
}

/// A key of the simulated history (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// `dimmer`
    Dimmer,
    /// `cct`
    Cct,
    /// `onoff`
    OnOff,
    /// `presence`
    Presence,
    /// `lux`
    Lux,
    /// `battery_level`
    BatteryLevel,
    /// `power`
    Power,
    /// `energy`
    Energy,
    /// `driver_temperature`
    DriverTemperature,
    /// `operating_hours`
    OperatingHours,
    /// `status`
    Status,
}

impl Key {
    /// The key's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Key::Dimmer => "dimmer",
            Key::Cct => "cct",
            Key::OnOff => "onoff",
            Key::Presence => "presence",
            Key::Lux => "lux",
            Key::BatteryLevel => "battery_level",
            Key::Power => "power",
            Key::Energy => "energy",
            Key::DriverTemperature => "driver_temperature",
            Key::OperatingHours => "operating_hours",
            Key::Status => "status",
        }
    }

    /// The `dataType` the key belongs to.
    pub fn data_type(self) -> DataType {
        match self {
            Key::Dimmer | Key::Cct | Key::OnOff => DataType::Control,
            Key::Presence | Key::Lux | Key::BatteryLevel => DataType::Sensors,
            Key::Power | Key::Energy => DataType::Energy,
            Key::DriverTemperature => DataType::Vendor,
            Key::OperatingHours => DataType::Details,
            Key::Status => DataType::Status,
        }
    }
}

/// A checked datapoint query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// `dataType` filter, if given.
    pub data_types: Option<Vec<DataType>>,
    /// `keys` filter, if given.
    pub keys: Option<Vec<String>>,
    /// `units` filter, if given.
    pub units: Option<Vec<i64>>,
    /// Start of the range (inclusive), ms since the Unix epoch, UTC.
    pub from_ms: i64,
    /// End of the range (exclusive), ms since the Unix epoch, UTC.
    pub to_ms: i64,
    /// Most datapoints to return.
    pub limit: u32,
}

impl Query {
    /// Parses a raw (still percent-encoded) query string by the rules in the module doc.
    pub fn parse(raw: Option<&str>) -> Result<Query, QueryError> {
        let raw = raw.unwrap_or("");
        if raw.contains('+') {
            return Err(invalid("unencoded '+' in the query; encode it as %2B"));
        }
        let mut params = BTreeMap::new();
        for pair in raw.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (k, v) = (percent_decode(k)?, percent_decode(v)?);
            if params.contains_key(&k) {
                return Err(invalid(format!("parameter {k} given more than once")));
            }
            params.insert(k, v);
        }
        let data_types = params
            .get("dataType")
            .map(|v| {
                list(v, "dataType")?
                    .into_iter()
                    .map(|t| DataType::parse(t).ok_or_else(|| invalid(format!("unknown dataType {t:?}"))))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let keys = params
            .get("keys")
            .map(|v| list(v, "keys").map(|l| l.into_iter().map(str::to_string).collect::<Vec<_>>()))
            .transpose()?;
        if data_types.is_none() && keys.is_none() {
            return Err(invalid("one of dataType or keys is required"));
        }
        let units = params.get("units").map(|v| parse_units(v)).transpose()?;
        let time = |name: &str| {
            let text = params.get(name).ok_or_else(|| invalid(format!("{name} is required")))?;
            parse_time(text).ok_or_else(|| invalid(format!("invalid {name} {text:?}")))
        };
        let (from_ms, to_ms) = (time("from")?, time("to")?);
        if from_ms > to_ms {
            return Err(invalid("from is after to"));
        }
        let limit = match params.get("limit") {
            None => DEFAULT_LIMIT,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or_else(|| invalid(format!("limit must be an integer from 1 to {MAX_LIMIT}")))?,
        };
        Ok(Query { data_types, keys, units, from_ms, to_ms, limit })
    }

    /// Refuses a range longer than `max` (416).
    pub fn check_interval(&self, max: Duration) -> Result<(), QueryError> {
        let max_ms = i64::try_from(max.as_millis()).unwrap_or(i64::MAX);
        if self.to_ms - self.from_ms > max_ms { Err(QueryError::IntervalTooLong) } else { Ok(()) }
    }

    fn wants(&self, key: Key) -> bool {
        self.data_types.as_ref().is_none_or(|t| t.contains(&key.data_type()))
            && self.keys.as_ref().is_none_or(|k| k.iter().any(|k| k == key.name()))
    }
}

/// Splits a comma list; empty entries are invalid.
fn list<'a>(value: &'a str, name: &str) -> Result<Vec<&'a str>, QueryError> {
    let items: Vec<&str> = value.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(invalid(format!("{name} has an empty entry")));
    }
    Ok(items)
}

fn parse_units(value: &str) -> Result<Vec<i64>, QueryError> {
    let v = value.trim();
    let inner = match (v.strip_prefix('['), v.ends_with(']')) {
        (Some(rest), true) => rest.strip_suffix(']').unwrap_or(rest),
        (None, false) => v,
        _ => return Err(invalid(format!("unbalanced brackets in units {value:?}"))),
    };
    list(inner, "units")?
        .into_iter()
        .map(|u| u.parse::<i64>().map_err(|_| invalid(format!("unit id {u:?} is not a number"))))
        .collect()
}

/// Decodes `%XX` escapes (and nothing else: a `+` stays a `+`, but callers refuse it first).
pub(crate) fn percent_decode(text: &str) -> Result<String, QueryError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(hex.ok_or_else(|| invalid("malformed percent escape in the query"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid("query is not UTF-8"))
}

/// Takes exactly `n` ASCII digits from the front of `s`.
fn digits(s: &str, n: usize) -> Option<(u32, &str)> {
    let head = s.get(..n)?;
    if !head.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((head.parse().ok()?, &s[n..]))
}

/// Milliseconds since the epoch of a UTC wall time minus an offset; `None` for impossible dates.
fn build(ymd: (u32, u32, u32), hms: (u32, u32, u32), ms: u32, offset_min: i64) -> Option<i64> {
    let date = NaiveDate::from_ymd_opt(i32::try_from(ymd.0).ok()?, ymd.1, ymd.2)?;
    let t = date.and_hms_milli_opt(hms.0, hms.1, hms.2, ms)?;
    Some(t.and_utc().timestamp_millis() - offset_min * 60_000)
}

/// Parses a `from`/`to` value in either form (see the module doc) to ms since the epoch, UTC.
pub fn parse_time(text: &str) -> Option<i64> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) { parse_compact(text) } else { parse_iso(text) }
}

fn parse_compact(t: &str) -> Option<i64> {
    if !matches!(t.len(), 8 | 10 | 12 | 14 | 17) {
        return None;
    }
    let field = |at: usize, n: usize| if t.len() > at { digits(&t[at..], n).map(|d| d.0) } else { Some(0) };
    let ymd = (field(0, 4)?, field(4, 2)?, field(6, 2)?);
    let hms = (field(8, 2)?, field(10, 2)?, field(12, 2)?);
    build(ymd, hms, field(14, 3)?, 0)
}

fn parse_iso(t: &str) -> Option<i64> {
    let (year, rest) = digits(t, 4)?;
    let (month, rest) = digits(rest.strip_prefix('-')?, 2)?;
    let (day, mut rest) = digits(rest.strip_prefix('-')?, 2)?;
    let (mut hms, mut ms) = ((0, 0, 0), 0);
    if let Some(time) = rest.strip_prefix('T') {
        let (h, r) = digits(time, 2)?;
        let (m, r) = digits(r.strip_prefix(':')?, 2)?;
        hms = (h, m, 0);
        rest = r;
        if let Some(r) = rest.strip_prefix(':') {
            let (s, r) = digits(r, 2)?;
            hms.2 = s;
            rest = r;
            if let Some(r) = rest.strip_prefix('.') {
                let n = r.bytes().take_while(u8::is_ascii_digit).count();
                if !(1..=3).contains(&n) {
                    return None;
                }
                let (f, r) = digits(r, n)?;
                ms = f * 10u32.pow(3 - n as u32);
                rest = r;
            }
        }
    }
    let offset_min = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, r) = digits(&rest[1..], 2)?;
            let (m, r) = digits(r.strip_prefix(':')?, 2)?;
            if !r.is_empty() || h > 23 || m > 59 {
                return None;
            }
            sign * i64::from(h * 60 + m)
        }
    };
    build((year, month, day), hms, ms, offset_min)
}

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
        fnv1a(&[
            &self.seed.to_le_bytes(),
            self.network.as_bytes(),
            &unit.to_le_bytes(),
            key.name().as_bytes(),
            &slot.to_le_bytes(),
        ])
    }

    /// The dimmer level of a unit in a slot in hundredths (also drives `power`).
    fn level_hundredths(&self, unit: i64, slot: i64) -> u64 {
        let h = self.hash(unit, Key::Dimmer, slot);
        if h.is_multiple_of(4) { 0 } else { (h >> 8) % 101 }
    }

    /// The dimmer level of a unit in a slot, 0..1.
    fn level(&self, unit: i64, slot: i64) -> f64 {
        self.level_hundredths(unit, slot) as f64 / 100.0
    }

    /// Whether an on/off unit is on in a slot.
    fn on(&self, unit: i64, slot: i64) -> u8 {
        u8::from(!self.hash(unit, Key::OnOff, slot).is_multiple_of(3))
    }

    /// A unit's `power` in a slot in tenths of a watt: exactly the value `power` shows, × 10.
    fn power_tenths(&self, unit: &UnitSeries, slot: i64) -> u64 {
        if unit.keys.contains(&Key::Dimmer) {
            self.level_hundredths(unit.id, slot) * 4
        } else {
            u64::from(self.on(unit.id, slot)) * 400
        }
    }

    /// A unit's energy meter reading at the origin, whole kWh.
    fn energy_base(&self, unit: i64) -> u64 {
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

#[cfg(test)]
mod tests;
