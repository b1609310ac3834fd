//! The simulated cloud's site description: what networks, units, fixtures, scenes, groups, keys and
//! accounts exist. It is loaded from a YAML site file, built in (the demo site) or generated
//! (`NETWORKSxUNITS`). The site is static input; the live, changing truth built from it lives in
//! [`super::world`].

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;

/// API key, network (admin) credentials and site (user) credentials of the demo and generated
/// sites. They are part of the project's contract: README examples and outside checks use them.
pub const DEMO_API_KEY: &str = "demo-key";
/// E-mail of the network (admin) credentials of the demo and generated sites.
pub const DEMO_NETWORK_EMAIL: &str = "demo@example.com";
/// E-mail of the site (user) credentials of the demo and generated sites.
pub const DEMO_USER_EMAIL: &str = "owner@example.com";
/// Password of both demo credentials.
pub const DEMO_PASSWORD: &str = "demo";

/// Why a site could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// The site file could not be read.
    #[error("cannot read site file {path}: {source}")]
    Read {
        /// The file's path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The site file is not valid YAML of the expected shape.
    #[error("invalid site file {path}: {source}")]
    Parse {
        /// The file's path.
        path: String,
        /// The parser's message (it names the key and line).
        source: serde_yaml::Error,
    },
    /// The site is well-formed but inconsistent.
    #[error("invalid site: {0}")]
    Invalid(String),
    /// A `--generate` value is not of the form `NETWORKSxUNITS`.
    #[error("invalid site size {0:?}: expected NETWORKSxUNITS, e.g. 100x250")]
    BadSize(String),
}

/// A whole simulated site.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// API keys the service accepts.
    #[serde(default)]
    pub api_keys: Vec<ApiKey>,
    /// Site (user) accounts; they get user sessions.
    #[serde(default)]
    pub users: Vec<User>,
    /// Fixture catalogue shared by all networks.
    #[serde(default)]
    pub fixtures: Vec<Fixture>,
    /// The networks.
    pub networks: Vec<Network>,
}

/// An API key and its per-key quotas.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKey {
    /// The key text, sent in the key header and as the WebSocket subprotocol.
    pub key: String,
    /// `false` = the API is not enabled for this key (403 on every request).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Requests per rolling minute before 429.
    #[serde(default = "default_rpm")]
    pub requests_per_minute: u32,
    /// Requests served at once before 429.
    #[serde(default = "default_concurrent")]
    pub concurrent_requests: u32,
    /// WebSocket connections open at once before the upgrade is refused with 429.
    #[serde(default = "default_sockets")]
    pub max_sockets: u32,
}

/// A site (user) account.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Login e-mail.
    pub email: String,
    /// Login password.
    pub password: String,
    /// Site id (key of the `sites` map in the user session response).
    #[serde(default = "default_site_id")]
    pub site_id: String,
    /// Site name.
    #[serde(default = "default_site_name")]
    pub site_name: String,
    /// Networks of the site; empty = every network of the site file.
    #[serde(default)]
    pub networks: Vec<String>,
}

/// A fixture (luminaire or device model) of the catalogue.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Fixture id, referenced by units' `fixture`.
    pub id: i64,
    /// Fixture type, e.g. `Driver`.
    #[serde(rename = "type", default = "default_fixture_type")]
    pub kind: String,
    /// Maker.
    pub vendor: String,
    /// Model name.
    pub model: String,
    /// Whether the fixture has an icon (served as a PNG).
    #[serde(default)]
    pub icon: bool,
    /// Fixture control entries as the service returns them (`type`, `id`, `readonly`, ...).
    #[serde(default)]
    pub controls: Vec<Value>,
}

/// Credentials of a network (admin) account.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// Login e-mail.
    pub email: String,
    /// Login password.
    pub password: String,
}

/// One network.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Network id (a 32-character alphanumeric string on the real service).
    pub id: String,
    /// Network name.
    pub name: String,
    /// Network address (12 hex digits).
    #[serde(default)]
    pub address: String,
    /// Time zone in region/city form.
    #[serde(default = "default_timezone")]
    pub timezone: String,
    /// Gateway (phone) name.
    #[serde(default = "default_gateway")]
    pub gateway: String,
    /// Network type (`OPEN`, `PROTECTED`, `CLOSED`).
    #[serde(rename = "type", default = "default_network_type")]
    pub kind: String,
    /// Network grade (`EVOLUTION`, `CLASSIC`).
    #[serde(default = "default_grade")]
    pub grade: String,
    /// Configuration revision at start.
    #[serde(default = "one")]
    pub revision: i64,
    /// Network-level dim level at start (0..1).
    #[serde(default = "one_f")]
    pub dim_level: f64,
    /// Whether the gateway is online at start.
    #[serde(default = "yes")]
    pub gateway_online: bool,
    /// Network (admin) credentials that open this network.
    pub credentials: Credentials,
    /// Units (luminaires, sensors, switches).
    #[serde(default)]
    pub units: Vec<Unit>,
    /// Scenes.
    #[serde(default)]
    pub scenes: Vec<Scene>,
    /// Groups.
    #[serde(default)]
    pub groups: Vec<Group>,
    /// Gallery photos.
    #[serde(default)]
    pub photos: Vec<Photo>,
}

/// One unit.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unit {
    /// Unit id within its network.
    pub id: i64,
    /// Unit name.
    pub name: String,
    /// Unit address (12 hex digits, stable across re-adds).
    #[serde(default)]
    pub address: String,
    /// Unit type (`Luminaire`, `Sensor`, `BatterySwitch`, ...).
    #[serde(rename = "type", default = "default_unit_type")]
    pub kind: String,
    /// Fixture id.
    pub fixture: i64,
    /// Firmware version.
    #[serde(default = "default_firmware")]
    pub firmware: String,
    /// Group id (0 = none).
    #[serde(default)]
    pub group: i64,
    /// View position.
    #[serde(default)]
    pub position: i64,
    /// Image id, when the unit has an image.
    #[serde(default)]
    pub image: Option<String>,
    /// Whether the unit is reachable at start.
    #[serde(default = "yes")]
    pub online: bool,
    /// Whether the unit is on at start.
    #[serde(default)]
    pub on: bool,
    /// Control objects at start, in the service's shape (`{"type":"Dimmer","value":0.5}`, ...).
    #[serde(default)]
    pub controls: Vec<Value>,
}

/// One scene.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scene {
    /// Scene id.
    pub id: i64,
    /// Key of the scene in the `scenes` map; the service's map key need not equal the id.
    #[serde(default)]
    pub key: Option<String>,
    /// Scene name.
    pub name: String,
    /// View position.
    #[serde(default)]
    pub position: i64,
    /// Icon number.
    #[serde(default)]
    pub icon: i64,
    /// Colour `#RRGGBB`.
    #[serde(default = "default_scene_color")]
    pub color: String,
    /// Whether the scene is active at start.
    #[serde(default)]
    pub active: bool,
    /// Units of the scene and the Dimmer level (0..1) each takes when the scene is activated.
    #[serde(default)]
    pub units: Vec<SceneUnit>,
}

/// A unit's part in a scene.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneUnit {
    /// Unit id.
    pub id: i64,
    /// Dimmer level when the scene is fully on.
    #[serde(default = "one_f")]
    pub level: f64,
}

/// One group.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// Group id.
    pub id: i64,
    /// Group name.
    pub name: String,
    /// View position of the group.
    #[serde(default)]
    pub position: i64,
    /// Member unit ids, in view order.
    #[serde(default)]
    pub units: Vec<i64>,
}

/// One gallery photo.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Photo {
    /// Photo name.
    pub name: String,
    /// Image id (served as a PNG under `/images/{id}`).
    pub image: String,
    /// View position.
    #[serde(default)]
    pub position: i64,
}

fn yes() -> bool {
    true
}
fn one() -> i64 {
    1
}
fn one_f() -> f64 {
    1.0
}
fn default_rpm() -> u32 {
    600
}
fn default_concurrent() -> u32 {
    16
}
fn default_sockets() -> u32 {
    4
}
fn default_site_id() -> String {
    "site-1".into()
}
fn default_site_name() -> String {
    "Home".into()
}
fn default_fixture_type() -> String {
    "Driver".into()
}
fn default_timezone() -> String {
    "Europe/Helsinki".into()
}
fn default_gateway() -> String {
    "Gateway phone".into()
}
fn default_network_type() -> String {
    "OPEN".into()
}
fn default_grade() -> String {
    "EVOLUTION".into()
}
fn default_unit_type() -> String {
    "Luminaire".into()
}
fn default_firmware() -> String {
    "32.10".into()
}
fn default_scene_color() -> String {
    "#FFFFFF".into()
}

impl Site {
    /// Loads and checks a site file.
    pub fn load(path: &Path) -> Result<Site, SiteError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SiteError::Read { path: shown.clone(), source })?;
        let site: Site = serde_yaml::from_str(&text).map_err(|source| SiteError::Parse { path: shown, source })?;
        site.validate()?;
        Ok(site)
    }

    /// Checks references between the parts of the site (fixtures, group and scene members,
    /// unique ids), so the simulator never has to cope with a dangling reference.
    pub fn validate(&self) -> Result<(), SiteError> {
        use std::collections::HashSet;
        let fixtures: HashSet<i64> = self.fixtures.iter().map(|f| f.id).collect();
        let mut net_ids = HashSet::new();
        for net in &self.networks {
            if !net_ids.insert(net.id.as_str()) {
                return Err(SiteError::Invalid(format!("duplicate network id {}", net.id)));
            }
            let mut unit_ids = HashSet::new();
            for unit in &net.units {
                if !unit_ids.insert(unit.id) {
                    return Err(SiteError::Invalid(format!("network {}: duplicate unit id {}", net.id, unit.id)));
                }
                if !fixtures.contains(&unit.fixture) {
                    return Err(SiteError::Invalid(format!(
                        "network {}: unit {} refers to unknown fixture {}",
                        net.id, unit.id, unit.fixture
                    )));
                }
                for control in &unit.controls {
                    if control.get("type").and_then(Value::as_str).is_none() {
                        return Err(SiteError::Invalid(format!(
                            "network {}: unit {} has a control without a type",
                            net.id, unit.id
                        )));
                    }
                }
            }
            for scene in &net.scenes {
                if let Some(u) = scene.units.iter().find(|u| !unit_ids.contains(&u.id)) {
                    return Err(SiteError::Invalid(format!(
                        "network {}: scene {} refers to unknown unit {}",
                        net.id, scene.id, u.id
                    )));
                }
            }
            for group in &net.groups {
                if let Some(u) = group.units.iter().find(|u| !unit_ids.contains(u)) {
                    return Err(SiteError::Invalid(format!(
                        "network {}: group {} refers to unknown unit {}",
                        net.id, group.id, u
                    )));
                }
            }
        }
        for user in &self.users {
            if let Some(n) = user.networks.iter().find(|n| !net_ids.contains(n.as_str())) {
                return Err(SiteError::Invalid(format!("user {} refers to unknown network {}", user.email, n)));
            }
        }
        Ok(())
    }

    /// The built-in demo site: two networks ("Home" and "Office") with dimmable, tunable-white and
    /// colour luminaires, presence and lux sensors, a switch, an offline unit, scenes and groups.
    pub fn demo() -> Site {
        let home = Network {
            id: "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b".into(),
            name: "Home".into(),
            address: "a1b2c3d4e5f6".into(),
            timezone: "Europe/Helsinki".into(),
            gateway: "Kitchen tablet".into(),
            kind: "OPEN".into(),
            grade: "EVOLUTION".into(),
            revision: 42,
            dim_level: 1.0,
            gateway_online: true,
            credentials: demo_network_credentials(),
            units: vec![
                unit(1, "Kitchen ceiling", "Luminaire", 1001, 1, true, vec![dimmer(0.8)]),
                unit(2, "Küche Spots", "Luminaire", 1002, 1, true, vec![dimmer(0.5), cct(2700.0, 2700.0, 6500.0)]),
                unit(
                    3,
                    "Living room lamp",
                    "Luminaire",
                    1003,
                    2,
                    false,
                    vec![dimmer(0.0), colorsource("XY"), color_xy(0.3227, 0.329)],
                ),
                unit(4, "Hallway presence", "Sensor", 2001, 0, false, vec![presence("absent")]),
                unit(5, "Garden lux", "Sensor", 2002, 0, false, vec![lux(412.0)]),
                unit(6, "Entrance switch", "BatterySwitch", 2003, 0, false, vec![json!({"type": "Switch"})]),
                Unit { online: false, ..unit(7, "Garage light", "Luminaire", 1001, 0, false, vec![dimmer(0.0)]) },
                unit(8, "Living room floor", "Luminaire", 1004, 2, true, vec![json!({"type": "OnOff", "value": 1.0})]),
            ],
            scenes: vec![
                scene(1, None, "Evening", &[(1, 0.4), (2, 0.3), (3, 0.6)]),
                scene(2, None, "Cooking", &[(1, 1.0), (2, 1.0)]),
                // The service's scene map key need not equal the scene id.
                scene(5, Some("3"), "Night light", &[(7, 0.1)]),
            ],
            groups: vec![
                Group { id: 1, name: "Kitchen".into(), position: 1, units: vec![1, 2] },
                Group { id: 2, name: "Living room".into(), position: 2, units: vec![3, 8] },
            ],
            photos: vec![Photo { name: "Ground floor".into(), image: "photo-home-1".into(), position: 0 }],
        };
        let office = Network {
            id: "c0ffee00aa11bb22cc33dd44ee55ff66".into(),
            name: "Office".into(),
            address: "0a1b2c3d4e5f".into(),
            timezone: "Europe/Berlin".into(),
            gateway: "Reception gateway".into(),
            kind: "OPEN".into(),
            grade: "EVOLUTION".into(),
            revision: 7,
            dim_level: 0.9,
            gateway_online: true,
            credentials: demo_network_credentials(),
            units: vec![
                unit(1, "Desk 1", "Luminaire", 1002, 0, true, vec![dimmer(0.7), cct(4000.0, 2700.0, 6500.0)]),
                unit(2, "Desk 2", "Luminaire", 1002, 0, true, vec![dimmer(0.7), cct(4000.0, 2700.0, 6500.0)]),
                unit(3, "Meeting room", "Luminaire", 1001, 3, false, vec![dimmer(0.0)]),
                unit(4, "Meeting room presence", "Sensor", 2001, 0, false, vec![presence("present")]),
                unit(5, "Window lux", "Sensor", 2002, 0, false, vec![lux(820.0)]),
            ],
            scenes: vec![
                scene(1, None, "Work", &[(1, 1.0), (2, 1.0), (3, 0.8)]),
                scene(2, None, "Presentation", &[(3, 0.3)]),
            ],
            groups: vec![Group { id: 3, name: "Meeting".into(), position: 1, units: vec![3] }],
            photos: vec![],
        };
        let mut site = Site {
            api_keys: vec![demo_key()],
            users: vec![demo_user()],
            fixtures: demo_fixtures(),
            networks: vec![home, office],
        };
        site.networks[0].units[0].image = Some("unit-image-1".into());
        site.networks[0].scenes[0].active = false;
        site
    }

    /// A generated site of `networks` × `units_per_network` units, with a mix of unit kinds, a
    /// group and scene per ten units, using the demo key and credentials. Deterministic.
    pub fn generate(networks: usize, units_per_network: usize) -> Site {
        let mut nets = Vec::with_capacity(networks);
        for n in 0..networks {
            let mut units = Vec::with_capacity(units_per_network);
            for u in 1..=units_per_network as i64 {
                let group = (u - 1) / 10 + 1;
                let (kind, fixture, controls) = match u % 10 {
                    0 => ("Sensor", 2001, vec![presence("absent")]),
                    5 => ("Sensor", 2002, vec![lux(100.0 + u as f64)]),
                    3 | 7 => ("Luminaire", 1002, vec![dimmer(0.5), cct(3000.0, 2700.0, 6500.0)]),
                    9 => ("Luminaire", 1003, vec![dimmer(0.5), colorsource("XY"), color_xy(0.4, 0.4)]),
                    _ => ("Luminaire", 1001, vec![dimmer(0.5)]),
                };
                let mut unit = unit(u, &format!("Unit {u}"), kind, fixture, 0, kind == "Luminaire", controls);
                unit.address = format!("{:06x}{:06x}", n, u);
                if kind == "Luminaire" {
                    unit.group = group;
                }
                units.push(unit);
            }
            let group_count = units_per_network.div_ceil(10) as i64;
            let groups = (1..=group_count)
                .map(|g| Group {
                    id: g,
                    name: format!("Group {g}"),
                    position: g,
                    units: units.iter().filter(|u| u.group == g).map(|u| u.id).collect(),
                })
                .collect();
            let scenes = (1..=group_count.min(20))
                .map(|s| Scene {
                    units: units
                        .iter()
                        .filter(|u| u.kind == "Luminaire" && (u.group == s || s == 1))
                        .map(|u| SceneUnit { id: u.id, level: 0.6 })
                        .collect(),
                    ..scene(s, None, &format!("Scene {s}"), &[])
                })
                .collect();
            nets.push(Network {
                id: format!("{:032x}", 0x5eed_0000_u64 + n as u64),
                name: format!("Site {}", n + 1),
                address: format!("{:012x}", n),
                timezone: default_timezone(),
                gateway: default_gateway(),
                kind: default_network_type(),
                grade: default_grade(),
                revision: 1,
                dim_level: 1.0,
                gateway_online: true,
                credentials: demo_network_credentials(),
                units,
                scenes,
                groups,
                photos: vec![],
            });
        }
        Site {
            api_keys: vec![ApiKey { requests_per_minute: 100_000, concurrent_requests: 64, ..demo_key() }],
            users: vec![demo_user()],
            fixtures: demo_fixtures(),
            networks: nets,
        }
    }

    /// Parses a `--generate` size such as `100x250`.
    pub fn parse_size(text: &str) -> Result<(usize, usize), SiteError> {
        let bad = || SiteError::BadSize(text.to_string());
        let (n, u) = text.split_once(['x', 'X']).ok_or_else(bad)?;
        let n: usize = n.trim().parse().map_err(|_| bad())?;
        let u: usize = u.trim().parse().map_err(|_| bad())?;
        if n == 0 || u == 0 || n > 10_000 || u > 10_000 {
            return Err(bad());
        }
        Ok((n, u))
    }
}

fn demo_key() -> ApiKey {
    ApiKey {
        key: DEMO_API_KEY.into(),
        enabled: true,
        requests_per_minute: default_rpm(),
        concurrent_requests: default_concurrent(),
        max_sockets: default_sockets(),
    }
}

fn demo_user() -> User {
    User {
        email: DEMO_USER_EMAIL.into(),
        password: DEMO_PASSWORD.into(),
        site_id: default_site_id(),
        site_name: default_site_name(),
        networks: vec![],
    }
}

fn demo_network_credentials() -> Credentials {
    Credentials { email: DEMO_NETWORK_EMAIL.into(), password: DEMO_PASSWORD.into() }
}

fn demo_fixtures() -> Vec<Fixture> {
    let control = |kind: &str, id: i64| json!({"type": kind, "id": id, "readonly": false});
    vec![
        Fixture {
            id: 1001,
            kind: "Driver".into(),
            vendor: "Lumen Works".into(),
            model: "Dim 40".into(),
            icon: true,
            controls: vec![control("dimmer", 0)],
        },
        Fixture {
            id: 1002,
            kind: "Driver".into(),
            vendor: "Lumen Works".into(),
            model: "TW Spot 2700-6500".into(),
            icon: true,
            controls: vec![
                control("dimmer", 0),
                json!({"type": "temperature", "id": 1, "readonly": false, "min": 2700, "max": 6500, "unit": "K"}),
            ],
        },
        Fixture {
            id: 1003,
            kind: "Driver".into(),
            vendor: "Chroma".into(),
            model: "RGB Bulb".into(),
            icon: false,
            controls: vec![control("dimmer", 0), control("rgb", 1), control("colorsource", 2)],
        },
        Fixture {
            id: 1004,
            kind: "Driver".into(),
            vendor: "Plug Co".into(),
            model: "Relay".into(),
            icon: false,
            controls: vec![control("onoff", 0)],
        },
        Fixture {
            id: 2001,
            kind: "Sensor".into(),
            vendor: "Sense".into(),
            model: "PIR 360".into(),
            icon: true,
            controls: vec![json!({"type": "presence", "id": 0, "readonly": true})],
        },
        Fixture {
            id: 2002,
            kind: "Sensor".into(),
            vendor: "Sense".into(),
            model: "Lux 1".into(),
            icon: false,
            controls: vec![json!({"type": "lux", "id": 0, "readonly": true, "unit": "lx", "valueType": "FLOAT"})],
        },
        Fixture {
            id: 2003,
            kind: "BatterySwitch".into(),
            vendor: "Sense".into(),
            model: "4-button switch".into(),
            icon: false,
            controls: vec![json!({"type": "button", "id": 0, "readonly": true, "buttonLabel": "1"})],
        },
    ]
}

fn unit(id: i64, name: &str, kind: &str, fixture: i64, group: i64, on: bool, controls: Vec<Value>) -> Unit {
    Unit {
        id,
        name: name.into(),
        address: format!("d0c0ffee{id:04x}"),
        kind: kind.into(),
        fixture,
        firmware: default_firmware(),
        group,
        position: if group > 0 { 0 } else { id },
        image: None,
        online: true,
        on,
        controls,
    }
}

fn scene(id: i64, key: Option<&str>, name: &str, units: &[(i64, f64)]) -> Scene {
    Scene {
        id,
        key: key.map(str::to_string),
        name: name.into(),
        position: id,
        icon: 0,
        color: default_scene_color(),
        active: false,
        units: units.iter().map(|&(id, level)| SceneUnit { id, level }).collect(),
    }
}

fn dimmer(value: f64) -> Value {
    json!({"type": "Dimmer", "name": "dimmer0", "value": value})
}
fn cct(value: f64, min: f64, max: f64) -> Value {
    json!({"type": "CCT", "name": "temperature", "min": min, "max": max, "value": value,
           "level": (value - min) / (max - min), "tw": value})
}
fn colorsource(source: &str) -> Value {
    json!({"type": "Colorsource", "source": source})
}
fn color_xy(x: f64, y: f64) -> Value {
    json!({"type": "Color", "name": "rgb", "x": x, "y": y, "hue": 0.0, "sat": 0.0, "rgb": "rgb(255, 255, 255)"})
}
fn presence(status: &str) -> Value {
    json!({"type": "Presence", "status": status})
}
fn lux(value: f64) -> Value {
    json!({"type": "Lux", "value": value, "level": (value / 1000.0).min(1.0)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_site_is_valid_and_round_trips_through_yaml() {
        let site = Site::demo();
        site.validate().unwrap();
        let text = serde_yaml::to_string(&site).unwrap();
        let back: Site = serde_yaml::from_str(&text).unwrap();
        back.validate().unwrap();
        assert_eq!(back.networks.len(), 2);
        assert_eq!(back.networks[0].units.len(), 8);
    }

    #[test]
    fn generated_site_has_requested_size() {
        let site = Site::generate(3, 25);
        site.validate().unwrap();
        assert_eq!(site.networks.len(), 3);
        assert!(site.networks.iter().all(|n| n.units.len() == 25));
        let ids: std::collections::HashSet<_> = site.networks.iter().map(|n| &n.id).collect();
        assert_eq!(ids.len(), 3);
    }

    #[test]
    fn size_parsing() {
        assert_eq!(Site::parse_size("100x250").unwrap(), (100, 250));
        assert!(Site::parse_size("100").is_err());
        assert!(Site::parse_size("0x5").is_err());
        assert!(Site::parse_size("ax5").is_err());
    }

    #[test]
    fn dangling_references_are_rejected() {
        let mut site = Site::demo();
        site.networks[0].groups[0].units.push(99);
        let err = site.validate().unwrap_err().to_string();
        assert!(err.contains("group 1 refers to unknown unit 99"), "{err}");
    }
}
