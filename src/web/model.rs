//! The page model (docs/web.md): what the page shows of the bridge, of each network and of each
//! unit, group and scene, as JSON.
//!
//! A unit's readings are its unit JSON of docs/mqtt.md ([`unit_json`], without the raw
//! `controls`), so the page shows exactly what MQTT publishes; the page adds what a screen needs
//! beside it: a colour swatch, the colour-temperature range, which controls to offer, the icon,
//! and battery and energy when logged datapoints supply them ([`UnitModel::fill_datapoints`]).

use super::mirror::{PageNetwork, ProblemNote};
use crate::bridge::caps::Caps;
use crate::bridge::state::{Connection, NetworkView};
use crate::cloud::datapoints::DatapointValue;
use crate::cloud::model::UnitState;
use crate::color::xy_to_rgb8;
use crate::mqtt::unit_json::{GroupJson, member_reading, unit_json};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// REST requests of the bridge's API key in the last minute, against its configured limit
/// (`cloud.max_requests_per_minute`). One key serves every network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RestWindow {
    /// Requests sent in the last minute.
    pub last_minute: u64,
    /// The configured limit per minute.
    pub limit: u32,
}

/// The bridge itself.
#[derive(Debug, Serialize)]
pub struct BridgeModel<'a> {
    /// The bridge's version.
    pub version: &'static str,
    /// Seconds since it started.
    pub uptime_s: u64,
    /// The MQTT broker's URL, without user name or password.
    pub broker: &'a str,
    /// The MQTT protocol setting (`auto`, `v5`, `v3`).
    pub protocol: &'a str,
    /// The protocol of the last MQTT connection (`5`, `3.1.1`); `None` before one.
    pub protocol_spoken: Option<&'static str>,
    /// Whether MQTT is connected.
    pub mqtt_connected: bool,
    /// The API key's REST requests.
    pub rest: RestWindow,
    /// Networks the bridge expects and has not read yet (their login or first snapshot is
    /// still to come).
    pub networks_to_come: usize,
    /// Credentials entries still logging in (their networks are not known yet).
    pub logins_to_come: usize,
    /// Recent problems that concern no single network.
    pub problems: &'a [ProblemNote],
}

/// A network's own fields (a live `status` frame carries only these).
#[derive(Debug, Serialize)]
pub struct NetworkHeader<'a> {
    /// Network id.
    pub id: &'a str,
    /// Network name.
    pub name: &'a str,
    /// `live`, `polling` or `down`.
    pub connection: Connection,
    /// Whether the gateway is online.
    pub gateway_online: bool,
    /// Network dim level, 0..1.
    pub dim_level: Option<f64>,
    /// Active scene ids.
    pub active_scenes: &'a BTreeSet<u32>,
    /// When the last unit change or event arrived.
    pub last_event: Option<DateTime<Utc>>,
    /// The API key's REST requests (shared by every network of the key).
    pub rest: RestWindow,
    /// Recent problems of the network (rejected commands, refusals of the service).
    pub problems: &'a VecDeque<ProblemNote>,
}

impl<'a> NetworkHeader<'a> {
    /// The header of `net`.
    pub fn of(net: &'a PageNetwork, rest: RestWindow) -> NetworkHeader<'a> {
        let s = &net.status;
        NetworkHeader {
            id: &s.id,
            name: &s.name,
            connection: s.connection,
            gateway_online: s.gateway_online,
            dim_level: s.dim_level,
            active_scenes: &s.active_scenes,
            last_event: net.last_event,
            rest,
            problems: &net.problems,
        }
    }
}

/// What the page may offer for a unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Offers {
    /// On/off (a light).
    pub toggle: bool,
    /// Brightness.
    pub brightness: bool,
    /// Colour temperature.
    pub color_temp: bool,
    /// Colour.
    pub color: bool,
}

/// One unit.
#[derive(Debug, Clone, Serialize)]
pub struct UnitModel {
    /// Unit id (also in `reading`).
    #[serde(skip)]
    pub id: u32,
    /// The unit JSON of docs/mqtt.md, without `controls`.
    #[serde(flatten)]
    pub reading: Map<String, Value>,
    /// The colour as `#rrggbb` at full brightness, when the unit reports one.
    pub rgb: Option<String>,
    /// The unit's colour-temperature range in kelvin.
    pub kelvin: Option<(u32, u32)>,
    /// Which controls the page offers.
    pub offers: Offers,
    /// Battery level in %, from logged datapoints.
    pub battery: Option<f64>,
    /// Energy in kWh, from logged datapoints.
    pub energy: Option<f64>,
    /// Where the page loads the unit's icon.
    pub icon: Option<String>,
}

/// The datapoint keys the page shows (docs/datapoints.md): battery level in %, energy in kWh.
pub const BATTERY_KEY: &str = "battery_level";
/// See [`BATTERY_KEY`].
pub const ENERGY_KEY: &str = "energy";

/// Battery and energy from a unit's latest logged datapoints (`key → value`); `None` for a key
/// that is missing or not a number.
pub fn battery_and_energy(latest: &BTreeMap<String, DatapointValue>) -> (Option<f64>, Option<f64>) {
    let number = |key: &str| match latest.get(key) {
        Some(DatapointValue::Number(n)) => n.as_f64(),
        _ => None,
    };
    (number(BATTERY_KEY), number(ENERGY_KEY))
}

impl UnitModel {
    /// The model of `unit` in `view` (for its fixture).
    pub fn of(unit: &UnitState, view: &NetworkView) -> UnitModel {
        let fixture = unit.fixture_id.get().and_then(|f| view.fixtures.get(&f)).map(|f| &**f);
        let caps = Caps::of(unit, fixture);
        let mut reading = unit_json(unit, &caps);
        reading.remove("controls");
        let rgb =
            reading.get("color").and_then(|c| Some((c.get("x")?.as_f64()?, c.get("y")?.as_f64()?))).map(|(x, y)| {
                let (r, g, b) = xy_to_rgb8(x, y);
                format!("#{r:02x}{g:02x}{b:02x}")
            });
        let light = caps.is_light();
        UnitModel {
            id: unit.id,
            reading,
            rgb,
            kelvin: caps.kelvin,
            offers: Offers { toggle: light, brightness: light && caps.dimmer, color_temp: caps.cct, color: caps.color },
            battery: None,
            energy: None,
            icon: match (&unit.image, unit.fixture_id.get()) {
                (Some(_), _) => Some(format!("icon/unit/{}/{}", view.status.id, unit.id)),
                (None, Some(f)) => Some(format!("icon/fixture/{f}")),
                (None, None) => None,
            },
        }
    }

    /// Fills battery and energy from the unit's latest logged datapoints (`key → value`).
    pub fn fill_datapoints(&mut self, latest: &BTreeMap<String, DatapointValue>) {
        (self.battery, self.energy) = battery_and_energy(latest);
    }
}

/// A scene.
#[derive(Debug, Serialize)]
pub struct SceneModel<'a> {
    /// Scene id.
    pub id: u32,
    /// Scene name.
    pub name: &'a str,
    /// Whether the scene is active.
    pub active: bool,
    /// Member unit ids.
    pub units: &'a [u32],
}

/// The groups of `view` whose members include one of `changed` (all of them for `None`), as their
/// group JSON of docs/mqtt.md, with the members' states from `units`.
pub fn groups<'a>(
    view: &'a NetworkView,
    units: &BTreeMap<u32, Arc<UnitState>>,
    changed: Option<&BTreeSet<u32>>,
) -> Vec<GroupJson<'a>> {
    let reading = |id: u32| {
        let unit = units.get(&id)?;
        let fixture = || unit.fixture_id.get().and_then(|f| view.fixtures.get(&f)).map(|f| &**f);
        Some(member_reading(unit, Caps::light_of(unit, fixture)))
    };
    view.groups
        .values()
        .filter(|g| changed.is_none_or(|c| g.units.iter().any(|u| c.contains(u))))
        .map(|g| GroupJson::of(g, reading))
        .collect()
}

/// One network with everything in it.
#[derive(Debug, Serialize)]
pub struct NetworkModel<'a> {
    /// The network's own fields.
    #[serde(flatten)]
    pub header: NetworkHeader<'a>,
    /// Its units, by id; `None` in the model of a big site ([`LEAN_ABOVE`]), whose page asks for
    /// a network's units when it opens it.
    pub units: Option<Vec<UnitModel>>,
    /// How many units it has.
    pub unit_count: usize,
    /// Its groups.
    pub groups: Vec<GroupJson<'a>>,
    /// Its scenes.
    pub scenes: Vec<SceneModel<'a>>,
}

/// Sites of more units than this get networks without their units in the page model and the
/// `network` frames: a site of 100 networks of 250 units would be an 11 MB snapshot, longer to
/// render and to read than the page may take. Their page asks for a network's units when it
/// opens it (`GET /api/networks/<id>`) and searches on the bridge (`GET /api/units?q=`).
pub const LEAN_ABOVE: usize = 2000;

/// The model of one unit of `net`, completed by `fill` (battery and energy).
pub fn unit_model(net: &PageNetwork, unit: &UnitState, fill: &dyn Fn(&str, &mut UnitModel)) -> UnitModel {
    let mut model = UnitModel::of(unit, &net.view);
    fill(&net.status.id, &mut model);
    model
}

impl<'a> NetworkModel<'a> {
    /// The model of `net`, its units included when `with_units`; `fill` completes each unit
    /// (battery and energy).
    pub fn of(
        net: &'a PageNetwork,
        rest: RestWindow,
        fill: &dyn Fn(&str, &mut UnitModel),
        with_units: bool,
    ) -> NetworkModel<'a> {
        let units = with_units.then(|| net.units.values().map(|u| unit_model(net, u, fill)).collect());
        let scenes = net
            .view
            .scenes
            .values()
            .map(|s| SceneModel {
                id: s.id,
                name: &s.name,
                active: net.status.active_scenes.contains(&s.id),
                units: &s.units,
            })
            .collect();
        NetworkModel {
            header: NetworkHeader::of(net, rest),
            units,
            unit_count: net.units.len(),
            groups: groups(&net.view, &net.units, None),
            scenes,
        }
    }
}

/// The whole page.
#[derive(Debug, Serialize)]
pub struct PageModel<'a> {
    /// The bridge.
    pub bridge: BridgeModel<'a>,
    /// Every network, by id.
    pub networks: Vec<NetworkModel<'a>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn battery_and_energy_come_from_numeric_datapoints() {
        let mut latest = BTreeMap::new();
        latest.insert(BATTERY_KEY.to_string(), DatapointValue::parse("87"));
        latest.insert(ENERGY_KEY.to_string(), DatapointValue::parse("12.5"));
        assert_eq!(battery_and_energy(&latest), (Some(87.0), Some(12.5)));
        latest.insert(BATTERY_KEY.to_string(), DatapointValue::parse("low"));
        latest.remove(ENERGY_KEY);
        assert_eq!(battery_and_energy(&latest), (None, None));
    }

    #[test]
    fn a_colour_unit_gets_a_swatch_and_its_offers() {
        let mut view = NetworkView::new("n1");
        let unit: UnitState = serde_json::from_str(
            r#"{"id":3,"name":"Strip","type":"Luminaire","on":true,"online":true,
                "controls":[{"type":"Dimmer","value":1.0},{"type":"Color","x":0.64,"y":0.33}]}"#,
        )
        .unwrap();
        view.apply_unit(unit.clone(), false);
        let model = UnitModel::of(&unit, &view);
        assert_eq!(model.rgb.as_deref(), Some("#ff0000"));
        assert_eq!(model.offers, Offers { toggle: true, brightness: true, color_temp: false, color: true });
        assert_eq!(model.reading.get("state"), Some(&Value::from("ON")));
        assert!(!model.reading.contains_key("controls"));
        let json = serde_json::to_value(&model).unwrap();
        assert_eq!(json["name"], "Strip");
        assert_eq!(json["battery"], Value::Null);
    }
}
