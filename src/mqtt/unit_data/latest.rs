//! How the latest datapoints are held: compactly, since a big site holds them for every unit
//! (25,000 at 100 × 250) and each unit logs a handful of keys.
//!
//! A unit's keys are a [`KeySet`] shared by every unit of the network that logs the same keys;
//! its values are [`Slot`]s of 16 bytes in the same order: a number or a short text packed in 8
//! bytes, and the point's time in milliseconds (the service's resolution, and the data topic's)
//! with the value's kind. Longer texts, which are rare, sit in a list of the unit's own.

use crate::cloud::datapoints::{Datapoint, DatapointValue};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Number, Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The latest point of one key.
#[derive(Debug, Clone, PartialEq)]
pub struct Latest {
    /// Its value.
    pub value: DatapointValue,
    /// When it was logged.
    pub time: DateTime<Utc>,
}

/// A unit's keys in order, shared by the units of a network that log the same keys.
#[derive(Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct KeySet(Box<[Arc<str>]>);

/// What a [`Slot`]'s bits hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    PosInt,
    NegInt,
    Float,
    /// Up to [`INLINE_TEXT`] bytes of UTF-8 in the bits, this many of them.
    ShortText(u8),
    /// An index into the unit's long texts.
    LongText,
}

/// The longest text kept in a slot's bits.
const INLINE_TEXT: usize = 8;

/// A key's latest value and time: the value's bits, and the time in milliseconds since the
/// epoch (48 bits, signed: ±4,000 years) below the value's kind (the top 16 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    bits: u64,
    meta: u64,
}

/// The lowest 48 bits of a slot's `meta`: its time.
const TIME_BITS: u32 = 48;
/// The range of a time in a slot.
const TIME_MAX: i64 = (1 << (TIME_BITS - 1)) - 1;

impl Slot {
    fn new(bits: u64, kind: Kind, time: DateTime<Utc>) -> Slot {
        let millis = time.timestamp_millis().clamp(-TIME_MAX, TIME_MAX);
        let code: u64 = match kind {
            Kind::PosInt => 0,
            Kind::NegInt => 1,
            Kind::Float => 2,
            Kind::LongText => 3,
            Kind::ShortText(len) => 16 + u64::from(len),
        };
        Slot { bits, meta: (code << TIME_BITS) | (millis as u64 & ((1 << TIME_BITS) - 1)) }
    }

    fn millis(&self) -> i64 {
        // Shifted up and back down as a signed number: the sign of the 48-bit time comes back.
        ((self.meta << (64 - TIME_BITS)) as i64) >> (64 - TIME_BITS)
    }

    fn time(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.millis()).unwrap_or_default()
    }

    fn kind(&self) -> Kind {
        match self.meta >> TIME_BITS {
            0 => Kind::PosInt,
            1 => Kind::NegInt,
            2 => Kind::Float,
            code @ 16..=24 => Kind::ShortText((code - 16) as u8),
            _ => Kind::LongText,
        }
    }

    fn with_time(self, time: DateTime<Utc>) -> Slot {
        Slot::new(self.bits, self.kind(), time)
    }
}

/// The latest datapoints of one unit, ordered by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitData {
    keys: Arc<KeySet>,
    slots: Box<[Slot]>,
    long_texts: Box<[Box<str>]>,
}

impl UnitData {
    /// The latest point of each key, ordered by key.
    pub fn latest(&self) -> impl Iterator<Item = (&str, Latest)> {
        self.keys().zip(self.slots.iter()).map(|(k, s)| (k, Latest { value: self.value(s), time: s.time() }))
    }

    /// The keys reported, in order: what a unit's discovery config reads of its data.
    pub fn keys(&self) -> impl Iterator<Item = &str> + Clone {
        self.keys.0.iter().map(|k| &**k)
    }

    /// `<unit>/data`: key → `{"value", "time"}`.
    pub fn json(&self) -> String {
        let map: Map<String, Value> = self
            .latest()
            .map(|(key, l)| {
                let time = l.time.to_rfc3339_opts(SecondsFormat::Millis, true);
                (key.to_string(), json!({"value": l.value, "time": time}))
            })
            .collect();
        Value::Object(map).to_string()
    }

    fn value(&self, slot: &Slot) -> DatapointValue {
        let number = |n: Option<Number>| n.map_or_else(|| DatapointValue::Text(String::new()), DatapointValue::Number);
        match slot.kind() {
            Kind::PosInt => DatapointValue::Number(Number::from(slot.bits)),
            Kind::NegInt => DatapointValue::Number(Number::from(slot.bits as i64)),
            Kind::Float => number(Number::from_f64(f64::from_bits(slot.bits))),
            Kind::ShortText(len) => {
                let bytes = slot.bits.to_le_bytes();
                let text = bytes.get(..usize::from(len)).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or_default();
                DatapointValue::Text(text.to_string())
            }
            Kind::LongText => {
                let text = usize::try_from(slot.bits).ok().and_then(|i| self.long_texts.get(i));
                DatapointValue::Text(text.map_or_else(String::new, |t| t.to_string()))
            }
        }
    }

    /// Packs `value` logged at `time`; a long text goes to `long_texts` (left as they were
    /// otherwise).
    fn pack(value: &DatapointValue, time: DateTime<Utc>, long_texts: &mut Vec<Box<str>>) -> Slot {
        let (bits, kind) = match value {
            DatapointValue::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => (u, Kind::PosInt),
                (None, Some(i), _) => (i as u64, Kind::NegInt),
                (None, None, f) => (f.unwrap_or_default().to_bits(), Kind::Float),
            },
            DatapointValue::Text(t) if t.len() <= INLINE_TEXT => {
                let mut bytes = [0u8; INLINE_TEXT];
                bytes[..t.len()].copy_from_slice(t.as_bytes());
                (u64::from_le_bytes(bytes), Kind::ShortText(t.len() as u8))
            }
            DatapointValue::Text(t) => {
                long_texts.push(t.as_str().into());
                ((long_texts.len() - 1) as u64, Kind::LongText)
            }
        };
        Slot::new(bits, kind, time)
    }

    /// Records `latest` for `key` when it is not older than what the unit has; whether the
    /// unit's data changed. A new key takes its key set from `sets`.
    fn note(&mut self, sets: &mut KeySets, key: &Arc<str>, value: &DatapointValue, time: DateTime<Utc>) -> bool {
        let at = self.keys.0.binary_search_by(|k| (**k).cmp(&**key));
        if let Ok(i) = at {
            let old = self.slots[i];
            let (old_ms, new_ms) = (old.millis(), time.timestamp_millis());
            if old_ms > new_ms || self.value(&old) == *value {
                if old_ms >= new_ms {
                    return false;
                }
                // The same value, logged later: only its time moves.
                self.slots[i] = old.with_time(time);
                return true;
            }
        }
        // Long texts are rebuilt without the replaced one, so none is kept that no slot names.
        let mut long_texts = Vec::new();
        let mut slots: Vec<Slot> = Vec::with_capacity(self.slots.len() + usize::from(at.is_err()));
        for (j, slot) in self.slots.iter().enumerate() {
            if at == Ok(j) {
                slots.push(Self::pack(value, time, &mut long_texts));
            } else if slot.kind() == Kind::LongText {
                slots.push(Self::pack(&self.value(slot), slot.time(), &mut long_texts));
            } else {
                slots.push(*slot);
            }
        }
        if let Err(i) = at {
            slots.insert(i, Self::pack(value, time, &mut long_texts));
            let mut keys = self.keys.0.to_vec();
            keys.insert(i, Arc::clone(key));
            self.keys = sets.intern(KeySet(keys.into_boxed_slice()));
        }
        self.slots = slots.into_boxed_slice();
        self.long_texts = long_texts.into_boxed_slice();
        true
    }
}

/// The key sets of a network's units, each held once.
#[derive(Debug, Clone, Default)]
struct KeySets(BTreeSet<Arc<KeySet>>);

impl KeySets {
    fn intern(&mut self, set: KeySet) -> Arc<KeySet> {
        if let Some(shared) = self.0.get(&set) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(set);
        self.0.insert(Arc::clone(&shared));
        shared
    }

    /// Forgets the sets no unit uses any more.
    fn prune(&mut self) {
        self.0.retain(|set| Arc::strong_count(set) > 1);
    }
}

/// The latest datapoints of one network's units.
#[derive(Debug, Clone, Default)]
pub struct NetData {
    /// By unit id, sorted: 48 bytes a unit in one block per network, where a map of shared
    /// values took a block of its own per unit besides the map's node.
    units: Vec<(u32, UnitData)>,
    /// Every key seen, shared by the key sets that hold it.
    keys: BTreeSet<Arc<str>>,
    sets: KeySets,
}

impl NetData {
    /// The data of `unit`, when it reported any.
    pub fn unit(&self, unit: u32) -> Option<&UnitData> {
        self.units.get(self.place(unit)?).map(|(_, d)| d)
    }

    /// Where `unit`'s data is in the list, when it has a place.
    fn place(&self, unit: u32) -> Option<usize> {
        self.units.binary_search_by_key(&unit, |(id, _)| *id).ok()
    }

    /// Takes a page in and returns the units whose latest values changed, in order. Points
    /// without a unit (the service may log network-wide values) have nowhere to go and are
    /// counted in the debug log.
    pub fn take(&mut self, points: &[Datapoint]) -> BTreeSet<u32> {
        self.add_units(points);
        let mut changed = BTreeSet::new();
        let mut unitless = 0usize;
        for point in points {
            let Some(unit) = point.unit else {
                unitless += 1;
                continue;
            };
            let key = match self.keys.get(point.key.as_str()) {
                Some(k) => Arc::clone(k),
                None => {
                    let k: Arc<str> = Arc::from(point.key.as_str());
                    self.keys.insert(Arc::clone(&k));
                    k
                }
            };
            // Every unit of the page has a place ([`NetData::add_units`]).
            let Some((_, data)) = self.place(unit).and_then(|at| self.units.get_mut(at)) else { continue };
            if data.note(&mut self.sets, &key, &point.value, point.time) {
                changed.insert(unit);
            }
        }
        self.sets.prune();
        if unitless > 0 {
            tracing::debug!(points = unitless, "datapoints without a unit left out");
        }
        changed
    }

    /// Gives the units of `points` that have no data yet a place, all in one sort: a first page
    /// brings every unit of the network at once, in no order of units.
    fn add_units(&mut self, points: &[Datapoint]) {
        let mut new: Vec<u32> = points.iter().filter_map(|p| p.unit).filter(|u| self.place(*u).is_none()).collect();
        if new.is_empty() {
            return;
        }
        new.sort_unstable();
        new.dedup();
        self.units.extend(new.into_iter().map(|unit| (unit, UnitData::default())));
        self.units.sort_unstable_by_key(|(id, _)| *id);
        self.units.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::collections::BTreeMap;

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 27, 8, minute, 0).single().unwrap_or_default()
    }

    #[test]
    fn every_kind_of_value_comes_back_as_it_went_in() {
        let texts = ["", "ok", "présent", "12345678", "a longer reading", "ünïcödé längér"];
        let numbers = ["0", "1", "18446744073709551615", "-1", "-9223372036854775808", "12.5", "2000.0", "-0.0", "1e3"];
        let mut data = NetData::default();
        let values: Vec<DatapointValue> = texts.iter().chain(&numbers).map(|t| DatapointValue::parse(t)).collect();
        let points: Vec<Datapoint> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Datapoint { time: at(0), unit: Some(1), key: format!("k{i:02}"), value: v.clone() })
            .collect();
        data.take(&points);
        let unit = data.unit(1).cloned().unwrap_or_default();
        let back: Vec<DatapointValue> = unit.latest().map(|(_, l)| l.value).collect();
        assert_eq!(back, values);
        // A long text replaced by another keeps the other long texts in place.
        data.take(&[Datapoint { time: at(1), unit: Some(1), key: "k04".into(), value: DatapointValue::parse("x") }]);
        let unit = data.unit(1).cloned().unwrap_or_default();
        let back: BTreeMap<&str, DatapointValue> = unit.latest().map(|(k, l)| (k, l.value)).collect();
        assert_eq!(back["k04"], DatapointValue::parse("x"));
        assert_eq!(back["k05"], DatapointValue::parse("ünïcödé längér"));
        assert_eq!(unit.long_texts.len(), 1);
    }

    #[test]
    fn times_come_back_to_the_millisecond_before_and_after_the_epoch() {
        assert_eq!(std::mem::size_of::<Slot>(), 16);
        for millis in [0, 1, -1, 1_764_230_400_123, -86_400_000_001, TIME_MAX, -TIME_MAX] {
            let time = DateTime::from_timestamp_millis(millis).unwrap_or_default();
            for kind in
                [Kind::PosInt, Kind::NegInt, Kind::Float, Kind::LongText, Kind::ShortText(0), Kind::ShortText(8)]
            {
                let slot = Slot::new(u64::MAX, kind, time);
                assert_eq!((slot.time(), slot.kind(), slot.bits), (time, kind, u64::MAX), "{millis} {kind:?}");
            }
        }
    }

    /// A point of `unit` logged at minute 0.
    fn point(unit: u32, key: &str, value: &str) -> Datapoint {
        Datapoint { time: at(0), unit: Some(unit), key: key.into(), value: DatapointValue::parse(value) }
    }

    #[test]
    fn units_with_the_same_keys_share_them_and_unused_sets_go() {
        let mut data = NetData::default();
        let point = |unit, key: &str| point(unit, key, "1");
        data.take(&[point(1, "power"), point(2, "power"), point(1, "energy"), point(2, "energy")]);
        let (a, b) = (data.unit(1).cloned().unwrap_or_default(), data.unit(2).cloned().unwrap_or_default());
        assert!(Arc::ptr_eq(&a.keys, &b.keys));
        assert_eq!(a.keys().collect::<Vec<_>>(), ["energy", "power"]);
        drop((a, b));
        assert_eq!(data.sets.0.len(), 1, "the set of `power` alone is no one's any more");
    }

    #[test]
    fn units_come_in_any_order_and_each_keeps_its_own_values() {
        let mut data = NetData::default();
        let point = |unit, value: &str| point(unit, "power", value);
        let changed = data.take(&[point(9, "9"), point(3, "3"), point(7, "7"), point(3, "3"), point(1, "1")]);
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), [1, 3, 7, 9]);
        let changed = data.take(&[point(5, "5"), point(3, "30"), point(2, "2")]);
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), [2, 3, 5]);
        for (unit, value) in [(1, "1"), (2, "2"), (3, "30"), (5, "5"), (7, "7"), (9, "9")] {
            let values: Vec<DatapointValue> =
                data.unit(unit).map(|d| d.latest().map(|(_, l)| l.value).collect()).unwrap_or_default();
            assert_eq!(values, [DatapointValue::parse(value)], "unit {unit}");
        }
        assert!(data.unit(4).is_none());
        assert!(data.units.windows(2).all(|w| w[0].0 < w[1].0), "sorted by unit, each once");
    }

    #[test]
    fn a_later_point_of_the_same_value_moves_the_time_only() {
        let mut data = NetData::default();
        let point = |minute, value: &str| Datapoint {
            time: at(minute),
            unit: Some(1),
            key: "power".into(),
            value: DatapointValue::parse(value),
        };
        assert_eq!(data.take(&[point(0, "5")]).len(), 1);
        assert_eq!(data.take(&[point(3, "5")]).len(), 1);
        assert!(data.take(&[point(2, "6")]).is_empty(), "older than what the unit has");
        let latest: Vec<Latest> = data.unit(1).map(|d| d.latest().map(|(_, l)| l).collect()).unwrap_or_default();
        assert_eq!(latest, [Latest { value: DatapointValue::parse("5"), time: at(3) }]);
    }
}
