//! The `datapoints:` section: defaults, every rule with the key it names, and environment
//! overrides down to one sensor's field.

use casambi2mqtt::cloud::rest::DataType;
use casambi2mqtt::config::{self, Config};
use casambi2mqtt::mqtt::settings::SensorSemantics;
use std::time::Duration;

const BASE: &str = "cloud:\n  api_key: k\nnetworks:\n  - email: a@example.com\n    password: p\n";

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn parse(extra: &str, vars: &[(&str, &str)]) -> Config {
    config::parse(&format!("{BASE}{extra}"), env(vars)).unwrap()
}

fn problems(extra: &str, vars: &[(&str, &str)]) -> Vec<String> {
    match config::parse(&format!("{BASE}{extra}"), env(vars)) {
        Ok(c) => panic!("expected an error for:\n{extra}\ngot {:?}", c.datapoints),
        Err(e) => e.problems().iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn defaults_when_the_section_is_absent() {
    let config = parse("", &[]);
    let d = config.datapoints;
    assert!(d.enabled);
    assert_eq!(d.interval, Duration::from_secs(900));
    assert_eq!(d.lookback, Duration::from_secs(3600));
    assert_eq!(d.data_types, [DataType::Energy, DataType::Sensors, DataType::Details, DataType::Vendor]);
    assert!(config.datapoint_sensors.is_empty());
    assert_eq!(parse("datapoints:\n", &[]).datapoints, d);
    let null_sensors = parse("datapoints:\n  sensors:\n", &[]);
    assert_eq!(null_sensors.datapoints, d);
    assert!(null_sensors.datapoint_sensors.is_empty());
}

#[test]
fn a_full_section_parses() {
    let config = parse(
        "datapoints:\n  enabled: false\n  interval: 1m\n  lookback: 60 days\n  data_types: [status, control]\n  \
         sensors:\n    mains_voltage: {device_class: voltage, unit: V, state_class: measurement, diagnostic: true}\n    \
         door: {}\n",
        &[],
    );
    let (d, sensors) = (config.datapoints, config.datapoint_sensors);
    assert!(!d.enabled);
    assert_eq!(d.interval, Duration::from_secs(60));
    assert_eq!(d.lookback, Duration::from_secs(60 * 86_400));
    assert_eq!(d.data_types, [DataType::Status, DataType::Control]);
    assert_eq!(
        sensors["mains_voltage"],
        SensorSemantics {
            device_class: Some("voltage".into()),
            unit: Some("V".into()),
            state_class: Some("measurement".into()),
            diagnostic: true
        }
    );
    assert_eq!(sensors["door"], SensorSemantics::default());
}

#[test]
fn every_rule_names_its_key() {
    let all = problems(
        "datapoints:\n  interval: 30s\n  lookback: 61 days\n  data_types: [energy, weather, energy]\n  sensors:\n    \
         a: {device_class: Voltage, unit: \" \", state_class: average}\n",
        &[],
    );
    assert_eq!(
        all,
        [
            "datapoints.interval: must be at least 1m, got 30s",
            "datapoints.lookback: must be at most 60 days (the service keeps datapoints no longer), got 61 days",
            "datapoints.data_types[1]: expected one of sensors, vendor, control, energy, details, status, got \"weather\"",
            "datapoints.data_types[2]: \"energy\" is listed twice",
            "datapoints.sensors.a.device_class: expected a Home Assistant device class in snake_case (like voltage), \
             got \"Voltage\"",
            "datapoints.sensors.a.unit: must not be blank (leave it out for no unit)",
            "datapoints.sensors.a.state_class: expected one of measurement, total, total_increasing, got \"average\"",
        ]
    );
    assert_eq!(
        problems("datapoints:\n  data_types: []\n", &[]),
        ["datapoints.data_types: needs at least one of sensors, vendor, control, energy, details, status"]
    );
    assert_eq!(
        problems("datapoints:\n  sensors:\n    \"my key\": {}\n    a.b: {}\n    lux: {}\n    energy: {}\n", &[]),
        [
            "datapoints.sensors.a.b: a datapoint key with a sensor has letters, digits, _ and - only",
            "datapoints.sensors.energy: has a built-in sensor (docs/datapoints.md); leave it out",
            "datapoints.sensors.lux: is in the unit's live state already, so it gets no second sensor",
            "datapoints.sensors.my key: a datapoint key with a sensor has letters, digits, _ and - only",
        ]
    );
    let e = problems("datapoints:\n  sensors:\n    a: {diagnostic: maybe}\n", &[]);
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("datapoints.sensors.a.diagnostic: expected "), "{e:?}");
    let e = problems("datapoints:\n  sensors:\n    a: {units: V}\n", &[]);
    assert_eq!(e, ["unknown key datapoints.sensors.a.units; valid keys: device_class, unit, state_class, diagnostic"]);
    let e = problems("datapoints:\n  intervall: 5m\n", &[]);
    assert!(e[0].starts_with("unknown key datapoints.intervall; valid keys: enabled, interval, lookback"), "{e:?}");
    assert_eq!(
        problems("datapoints:\n  lookback: 1500h\n", &[]),
        ["datapoints.lookback: must be at most 60 days (the service keeps datapoints no longer), got 62.5 days"]
    );
    let e = problems("datapoints:\n  interval: soon\n", &[]);
    assert!(e[0].starts_with("datapoints.interval: invalid duration \"soon\""), "{e:?}");
}

#[test]
fn environment_variables_reach_every_key() {
    let config = parse(
        "datapoints:\n  interval: 5m\n",
        &[
            ("CASAMBI2MQTT_DATAPOINTS__ENABLED", "false"),
            ("CASAMBI2MQTT_DATAPOINTS__INTERVAL", "20m"),
            ("CASAMBI2MQTT_DATAPOINTS__LOOKBACK", "2h"),
            ("CASAMBI2MQTT_DATAPOINTS__DATA_TYPES", "[energy]"),
            ("CASAMBI2MQTT_DATAPOINTS__SENSORS__MAINS_VOLTAGE__UNIT", "V"),
            ("CASAMBI2MQTT_DATAPOINTS__SENSORS__MAINS_VOLTAGE__DIAGNOSTIC", "true"),
        ],
    );
    let (d, sensors) = (config.datapoints, config.datapoint_sensors);
    assert!(!d.enabled);
    assert_eq!((d.interval, d.lookback), (Duration::from_secs(1200), Duration::from_secs(7200)));
    assert_eq!(d.data_types, [DataType::Energy]);
    let s = &sensors["mains_voltage"];
    assert_eq!((s.unit.as_deref(), s.diagnostic), (Some("V"), true));

    let e = problems("", &[("CASAMBI2MQTT_DATAPOINTS__INTERVAL", "10s")]);
    assert_eq!(e, ["datapoints.interval (from CASAMBI2MQTT_DATAPOINTS__INTERVAL): must be at least 1m, got 10s"]);
}
