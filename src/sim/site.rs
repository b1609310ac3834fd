//! The simulated cloud's site description: what networks, units, fixtures, scenes, groups, keys and
//! accounts exist. It is loaded from a YAML site file, built in (the demo site) or generated
//! (`NETWORKSxUNITS`). The site is static input; the live, changing truth built from it lives in
//! [`super::world`].

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

mod built_in;

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
    /// Serve the image as exactly this many bytes (the PNG padded with zeros, which decoders
    /// ignore after its end): for testing size limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// Serve the image without its PNG signature: for testing a file that is not a PNG.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub corrupt: bool,
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
