use super::*;
use crate::sim::site::Site;
use chrono::DateTime;
use std::collections::BTreeMap;
use std::time::Duration;

fn ms(iso: &str) -> i64 {
    DateTime::parse_from_rfc3339(iso).unwrap().timestamp_millis()
}

#[test]
fn compact_times() {
    assert_eq!(parse_time("20261120"), Some(ms("2026-11-20T00:00:00Z")));
    assert_eq!(parse_time("2026112010"), Some(ms("2026-11-20T10:00:00Z")));
    assert_eq!(parse_time("202611201015"), Some(ms("2026-11-20T10:15:00Z")));
    assert_eq!(parse_time("20261120101530"), Some(ms("2026-11-20T10:15:30Z")));
    assert_eq!(parse_time("20261120101530123"), Some(ms("2026-11-20T10:15:30.123Z")));
    for bad in ["2026112", "202611201", "20261320", "20260230", "2026112025", "202611201015301", ""] {
        assert_eq!(parse_time(bad), None, "{bad}");
    }
}

#[test]
fn iso_times_with_offsets() {
    assert_eq!(parse_time("2026-11-20"), Some(ms("2026-11-20T00:00:00Z")));
    assert_eq!(parse_time("2026-11-20T10:15"), Some(ms("2026-11-20T10:15:00Z")));
    assert_eq!(parse_time("2026-11-20T10:15:30"), Some(ms("2026-11-20T10:15:30Z")));
    assert_eq!(parse_time("2026-11-20T10:15:30.5"), Some(ms("2026-11-20T10:15:30.500Z")));
    assert_eq!(parse_time("2026-11-20T10:15:30.123Z"), Some(ms("2026-11-20T10:15:30.123Z")));
    assert_eq!(parse_time("2026-11-20T12:15+02:00"), Some(ms("2026-11-20T10:15:00Z")));
    assert_eq!(parse_time("2026-11-20T08:15:00-02:00"), Some(ms("2026-11-20T10:15:00Z")));
    assert_eq!(parse_time("2026-11-20Z"), Some(ms("2026-11-20T00:00:00Z")));
    for bad in [
        "2026-11-20T10",
        "2026-11-20 10:15",
        "2026-11-20T10:15:30.1234",
        "2026-11-20T10:15+0200",
        "2026-11-20T10:15+24:00",
        "2026-11-20T25:00",
        "2026-1-20",
        "2026-11-20T10:15Zjunk",
    ] {
        assert_eq!(parse_time(bad), None, "{bad}");
    }
}

#[test]
fn query_rules() {
    let q = Query::parse(Some("dataType=sensors,control&units=[1,%202]&from=20261120&to=2026-11-21T00:00%2B01:00"))
        .unwrap();
    assert_eq!(q.data_types, Some(vec![DataType::Sensors, DataType::Control]));
    assert_eq!(q.units, Some(vec![1, 2]));
    assert_eq!(q.to_ms - q.from_ms, 23 * 3600 * 1000);
    assert_eq!(q.limit, DEFAULT_LIMIT);
    let invalid = |q: &str| matches!(Query::parse(Some(q)), Err(QueryError::Invalid(_)));
    assert!(invalid("from=20261120&to=20261121"), "neither dataType nor keys");
    assert!(invalid("dataType=light&from=20261120&to=20261121"), "unknown dataType");
    assert!(invalid("dataType=0&from=20261120&to=20261121"), "old integer type");
    assert!(invalid("keys=dimmer&from=20261120"), "to missing");
    assert!(invalid("keys=dimmer&from=20261122&to=20261121"), "from after to");
    assert!(invalid("keys=dimmer&from=2026-11-20T10:00+02:00&to=20261121"), "raw plus");
    assert!(invalid("keys=dimmer&units=1,x&from=20261120&to=20261121"));
    assert!(invalid("keys=dimmer&units=[1,2&from=20261120&to=20261121"));
    assert!(invalid("keys=dimmer&limit=0&from=20261120&to=20261121"));
    assert!(invalid("keys=dimmer&limit=100001&from=20261120&to=20261121"));
    assert!(invalid("keys=dimmer&limit=ten&from=20261120&to=20261121"));
    assert!(invalid("keys=dimmer&keys=lux&from=20261120&to=20261121"));
    assert!(invalid("keys=dimmer,&from=20261120&to=20261121"));
    assert!(invalid("keys=dimmer&from=%ZZ&to=20261121"));
    let q = Query::parse(Some("keys=dimmer&limit=100000&from=20261120&to=20261121&other=1")).unwrap();
    assert_eq!(q.limit, MAX_LIMIT);
    assert!(q.check_interval(Duration::from_secs(24 * 3600)).is_ok());
    assert_eq!(q.check_interval(Duration::from_secs(3600)), Err(QueryError::IntervalTooLong));
}

fn demo_units() -> Vec<UnitSeries> {
    Site::demo().networks[0].units.iter().map(UnitSeries::of).collect()
}

#[test]
fn keys_follow_unit_kinds() {
    let units = demo_units();
    let names = |i: usize| units[i].keys.iter().map(|k| k.name()).collect::<Vec<_>>();
    assert_eq!(names(0), ["dimmer", "power", "energy", "driver_temperature", "operating_hours", "status"]);
    assert_eq!(names(1), ["dimmer", "cct", "power", "energy", "driver_temperature", "operating_hours", "status"]);
    assert_eq!(names(3), ["presence", "status"]);
    assert_eq!(names(4), ["lux", "battery_level", "status"]);
    assert_eq!(names(5), ["battery_level", "status"]);
}

#[test]
fn history_is_on_the_grid_ordered_limited_and_deterministic() {
    let now = ms("2026-11-20T12:07:00Z");
    let ledger = EnergyLedger::new(now);
    let h = History { seed: 7, network: "n", now_ms: now, energy: &ledger };
    let units = demo_units();
    let q = Query::parse(Some("keys=dimmer&from=2026-11-20T10:00&to=2026-11-20T11:00")).unwrap();
    let a = h.answer(&q, &units);
    // 4 slots (10:00, 10:15, 10:30, 10:45) × 4 units with a dimmer.
    assert_eq!(a.points.len(), 16);
    assert!(!a.has_more);
    assert_eq!(format_time(a.points[0].time_ms), "2026-11-20T10:00:00.000+00:00");
    assert_eq!(format_time(a.points[15].time_ms), "2026-11-20T10:45:00.000+00:00");
    assert!(a.points.windows(2).all(|w| (w[0].time_ms, w[0].unit) < (w[1].time_ms, w[1].unit)));
    assert_eq!(a, h.answer(&q, &units));
    let other_seed = History { seed: 8, ..h }.answer(&q, &units);
    assert_ne!(
        a.points.iter().map(|p| &p.value).collect::<Vec<_>>(),
        other_seed.points.iter().map(|p| &p.value).collect::<Vec<_>>()
    );
    let cut = Query { limit: 15, ..q.clone() };
    let b = h.answer(&cut, &units);
    assert_eq!(b.points.len(), 15);
    assert!(b.has_more);
    assert_eq!(b.points[..], a.points[..15]);
    let exact = Query { limit: 16, ..q };
    assert!(!h.answer(&exact, &units).has_more);
}

#[test]
fn history_respects_retention_and_now() {
    let now = ms("2026-11-20T12:07:00Z");
    let ledger = EnergyLedger::new(now);
    let h = History { seed: 1, network: "n", now_ms: now, energy: &ledger };
    let units = demo_units();
    let old = Query::parse(Some("keys=status&from=2026-09-01&to=2026-09-02")).unwrap();
    assert!(h.answer(&old, &units).points.is_empty());
    let future = Query::parse(Some("keys=status&units=1&from=2026-11-20T12:00&to=2026-11-21")).unwrap();
    let a = h.answer(&future, &units);
    assert_eq!(a.points.len(), 1, "only 12:00 is not in the future");
    let edge = Query::parse(Some("keys=status&units=1&from=2026-09-21T12:00&to=2026-09-21T13:00")).unwrap();
    let a = h.answer(&edge, &units);
    // Retention starts at 12:07 sixty days ago: 12:15, 12:30, 12:45.
    assert_eq!(a.points.len(), 3);
}

#[test]
fn values_are_in_range() {
    let now = ms("2026-11-20T12:07:00Z");
    let ledger = EnergyLedger::new(now);
    let h = History { seed: 3, network: "n", now_ms: now, energy: &ledger };
    let q =
        Query::parse(Some("dataType=sensors,control,energy,vendor,details,status&from=20261119&to=20261120")).unwrap();
    let a = h.answer(&q, &demo_units());
    assert!(!a.points.is_empty());
    for p in &a.points {
        match p.key {
            Key::Dimmer => assert!((0.0..=1.0).contains(&p.value.parse::<f64>().unwrap())),
            Key::Cct => assert!((2700.0..=6500.0).contains(&p.value.parse::<f64>().unwrap())),
            Key::Presence => assert!(p.value == "present" || p.value == "absent"),
            Key::Lux => assert!((0.0..=2000.0).contains(&p.value.parse::<f64>().unwrap())),
            Key::BatteryLevel => assert!((50..=100).contains(&p.value.parse::<u32>().unwrap())),
            Key::Power => assert!((0.0..=40.0).contains(&p.value.parse::<f64>().unwrap())),
            Key::Energy => assert!((0.0..=6000.0).contains(&p.value.parse::<f64>().unwrap())),
            _ => assert!(!p.value.is_empty()),
        }
    }
    let json = render(&a, 10_000, 3);
    assert_eq!(json["resultCount"], a.points.len());
    assert_eq!(json["queryLimit"], 10_000);
    assert_eq!(json["errors"], "");
    assert_eq!(json["hasMoreResults"], false);
}

/// `(unit, slot) -> value` of one key in an answer.
fn series(a: &Answer, key: Key) -> BTreeMap<(i64, i64), f64> {
    a.points
        .iter()
        .filter(|p| p.key == key)
        .map(|p| ((p.unit, p.time_ms / SLOT_MS), p.value.parse().unwrap()))
        .collect()
}

#[test]
fn energy_is_a_meter_of_the_power_samples() {
    let now = ms("2026-11-20T12:07:00Z");
    let ledger = EnergyLedger::new(now - 3 * 24 * 3600 * 1000);
    let h = History { seed: 5, network: "n", now_ms: now, energy: &ledger };
    let units = demo_units();
    // Two days, across the ledger's day boundaries.
    let q = Query::parse(Some("keys=power,energy&from=2026-11-18T06:00&to=2026-11-20T06:00")).unwrap();
    let a = h.answer(&q, &units);
    let (power, energy) = (series(&a, Key::Power), series(&a, Key::Energy));
    assert_eq!(power.len(), energy.len());
    assert_eq!(energy.keys().map(|k| k.0).collect::<std::collections::BTreeSet<_>>().len(), 5, "dimmers and the relay");
    let mut steps = 0;
    for (&(unit, slot), &reading) in &energy {
        if let Some(&next) = energy.get(&(unit, slot + 1)) {
            let want = power[&(unit, slot)] * 0.25 / 1000.0;
            assert!((next - reading - want).abs() < 1e-9, "unit {unit} slot {slot}: {reading} -> {next}, power {want}");
            assert!(next >= reading, "total_increasing");
            steps += 1;
        }
    }
    assert_eq!(steps, 5 * (2 * 96 - 1));
    assert!(power.values().any(|p| *p > 0.0));

    // A reading does not depend on where the query starts, nor on what the ledger computed before.
    let late = Query::parse(Some("keys=energy&from=2026-11-19T23:45&to=2026-11-20T00:15")).unwrap();
    let fresh = EnergyLedger::new(now - 3 * 24 * 3600 * 1000);
    let again = History { energy: &fresh, ..h }.answer(&late, &units);
    for (k, v) in series(&again, Key::Energy) {
        assert_eq!(energy[&k], v, "{k:?}");
    }
    assert_eq!(series(&again, Key::Energy).len(), 10);
}
