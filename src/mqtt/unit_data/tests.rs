use super::*;
use crate::cloud::datapoints::{Datapoint, DatapointValue};
use chrono::{TimeZone, Utc};
use serde_json::Value;

fn point(unit: Option<u32>, key: &str, value: &str, minute: u32) -> Datapoint {
    Datapoint {
        time: Utc.with_ymd_and_hms(2026, 11, 27, 8, minute, 0).single().unwrap_or_default(),
        unit,
        key: key.into(),
        value: DatapointValue::parse(value),
    }
}

#[test]
fn the_newest_value_of_each_key_wins_and_only_changes_are_reported() {
    let mut data = NetData::default();
    let changed = data.take(&[point(Some(1), "energy", "1.5", 0), point(Some(1), "energy", "1.75", 15)]);
    assert_eq!(changed.into_iter().collect::<Vec<_>>(), [1]);
    // An older point arriving late does not replace a newer one.
    assert!(data.take(&[point(Some(1), "energy", "1.0", 5)]).is_empty());
    // The same point again changes nothing.
    assert!(data.take(&[point(Some(1), "energy", "1.75", 15)]).is_empty());
    let json: Value = serde_json::from_str(&data.unit(1).map(UnitData::json).unwrap_or_default()).unwrap_or_default();
    assert_eq!(json, json!({"energy": {"value": 1.75, "time": "2026-11-27T08:15:00.000Z"}}));
}

#[test]
fn text_values_stay_text_and_points_without_a_unit_are_left_out() {
    let mut data = NetData::default();
    let changed = data.take(&[point(Some(7), "status", "ok", 0), point(None, "energy", "3", 0)]);
    assert_eq!(changed.into_iter().collect::<Vec<_>>(), [7]);
    let json: Value = serde_json::from_str(&data.unit(7).map(UnitData::json).unwrap_or_default()).unwrap_or_default();
    assert_eq!(json["status"]["value"], json!("ok"));
    assert!(data.unit(0).is_none());
}

#[test]
fn built_in_keys_get_their_sensors_and_live_or_unknown_keys_none() {
    let mut data = NetData::default();
    let keys = ["energy", "power", "battery_level", "driver_temperature", "operating_hours", "dimmer", "voltage"];
    data.take(&keys.map(|k| point(Some(1), k, "1", 0)));
    let unit = data.unit(1).map(|d| d.keys().map(str::to_string).collect::<Vec<_>>()).unwrap_or_default();
    let extra = BTreeMap::new();
    let comps = components("oid", unit.iter().map(String::as_str), &extra, &["net", "lamp"], "t/data");
    let by_key: BTreeMap<&str, &Component> = comps.iter().map(|c| (c.key.as_str(), c)).collect();
    assert_eq!(
        by_key.keys().copied().collect::<Vec<_>>(),
        ["data_battery_level", "data_driver_temperature", "data_energy", "data_operating_hours", "data_power"]
    );
    let energy = &by_key["data_energy"].config;
    assert_eq!(energy["device_class"], "energy");
    assert_eq!(energy["unit_of_measurement"], "kWh");
    assert_eq!(energy["state_class"], "total_increasing");
    assert!(energy.get("entity_category").is_none(), "the Energy dashboard lists no diagnostic entity");
    assert_eq!(energy["value_template"], "{{ value_json['energy'].value }}");
    assert_eq!(by_key["data_battery_level"].config["entity_category"], "diagnostic");
    assert_eq!(by_key["data_operating_hours"].config["state_class"], "total_increasing");
    assert_eq!(by_key["data_driver_temperature"].config["unit_of_measurement"], "°C");
    assert_eq!(unknown_keys(unit.iter().map(String::as_str), &extra).into_iter().collect::<Vec<_>>(), ["voltage"]);

    let extra = BTreeMap::from([(
        "voltage".to_string(),
        SensorSemantics {
            device_class: Some("voltage".into()),
            unit: Some("V".into()),
            state_class: Some("measurement".into()),
            diagnostic: true,
        },
    )]);
    let comps = components("oid", unit.iter().map(String::as_str), &extra, &["net", "lamp"], "t/data");
    let voltage = comps.iter().find(|c| c.key == "data_voltage").map(|c| &c.config);
    assert_eq!(voltage.map(|c| c["unit_of_measurement"].clone()), Some(json!("V")));
    assert!(unknown_keys(unit.iter().map(String::as_str), &extra).is_empty());
}

#[test]
fn keys_that_cannot_name_a_topic_stay_in_the_json_alone() {
    let mut data = NetData::default();
    data.take(&[point(Some(1), "a/b", "1", 0), point(Some(1), "power", "2", 0), point(Some(1), "x+#", "3", 0)]);
    let unit = data.unit(1).cloned().unwrap_or_default();
    let topics: Vec<(String, String)> = attribute_topics("t/data", &unit).collect();
    assert_eq!(topics, [("t/data/power".to_string(), "2".to_string())]);
    let json: Value = serde_json::from_str(&unit.json()).unwrap_or_default();
    assert_eq!(json["a/b"]["value"], json!(1));
}
