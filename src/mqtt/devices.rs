//! Per-device settings (`devices:`, docs/configuration.md): a friendly name, leaving a unit out,
//! and what Home Assistant is told about an entity, keyed by a unit's address or by slugs.
//!
//! The settings are checked when the configuration loads (`config/devices.rs`: a bad value is a
//! configuration error naming its key) and matched to units, groups, scenes and
//! networks whenever a network's names change ([`Resolved`]). Without `devices:` nothing here
//! runs: every topic and payload is what it is without the section.

use crate::bridge::caps::Caps;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What a `devices:` key names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeviceKey {
    /// A unit by its address (12 hex digits, lower case).
    Address(String),
    /// A unit by `<network slug>/<unit slug>`.
    Unit(String, String),
    /// A group by `<network slug>/group/<group slug>`.
    Group(String, String),
    /// A scene by `<network slug>/scene/<scene slug>`.
    Scene(String, String),
    /// A network by its slug.
    Network(String),
}

impl DeviceKey {
    /// Reads a key; `Err` says what a key looks like.
    pub fn parse(key: &str) -> Result<DeviceKey, String> {
        const SHAPE: &str = "a unit's address (12 hex digits), \"<network>/<unit>\", \"<network>/group/<group>\", \
                             \"<network>/scene/<scene>\" or \"<network>\", each part a slug as in the topics";
        if key.len() == 12 && key.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(DeviceKey::Address(key.to_ascii_lowercase()));
        }
        let parts: Vec<&str> = key.split('/').collect();
        let is_slug = |s: &str| !s.is_empty() && super::topics::slug(s) == s;
        if !parts.iter().all(|p| is_slug(p)) {
            return Err(SHAPE.into());
        }
        let owned = |s: &str| s.to_string();
        Ok(match parts.as_slice() {
            [net] => DeviceKey::Network(owned(net)),
            [net, unit] => DeviceKey::Unit(owned(net), owned(unit)),
            [net, "group", group] => DeviceKey::Group(owned(net), owned(group)),
            [net, "scene", scene] => DeviceKey::Scene(owned(net), owned(scene)),
            _ => return Err(SHAPE.into()),
        })
    }

    /// The network slug a key names, if it names one.
    pub fn network(&self) -> Option<&str> {
        match self {
            DeviceKey::Address(_) => None,
            DeviceKey::Unit(net, _) | DeviceKey::Group(net, _) | DeviceKey::Scene(net, _) | DeviceKey::Network(net) => {
                Some(net)
            }
        }
    }

    pub fn is_unit(&self) -> bool {
        matches!(self, DeviceKey::Address(_) | DeviceKey::Unit(..))
    }
}

/// The platform of an on/off unit's main entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// A `light` (the default).
    Light,
    /// A `switch`: a relay driving a fan, a pump, a socket.
    Switch,
}

/// What `homeassistant:` of a setting changes: the main entity's platform, keys merged into the
/// main entity's config and into the device block (a `null` value removes the key).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HaOverrides {
    /// The platform of an on/off unit's main entity.
    pub platform: Option<Platform>,
    /// Keys of the main entity's config.
    pub entity: Vec<(String, Value)>,
    /// Keys of the device block.
    pub device: Vec<(String, Value)>,
}

impl HaOverrides {
    /// Merges the entity keys into `config` (`null` removes).
    pub fn apply_entity(&self, config: &mut Map<String, Value>) {
        merge(config, &self.entity);
    }

    /// Merges the device keys into a device block.
    pub fn apply_device(&self, device: &mut Map<String, Value>) {
        merge(device, &self.device);
    }
}

fn merge(into: &mut Map<String, Value>, keys: &[(String, Value)]) {
    for (k, v) in keys {
        if v.is_null() {
            into.remove(k);
        } else {
            into.insert(k.clone(), v.clone());
        }
    }
}

/// One checked entry of `devices:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceSettings {
    /// The friendly name.
    pub name: Option<String>,
    /// Not bridged.
    pub exclude: bool,
    /// Discovery overrides.
    pub homeassistant: HaOverrides,
}

/// Every entry of `devices:`, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Devices {
    entries: BTreeMap<String, (DeviceKey, Arc<DeviceSettings>)>,
}

impl Devices {
    /// The settings, by their key as written.
    pub fn new(entries: impl IntoIterator<Item = (String, DeviceKey, DeviceSettings)>) -> Devices {
        Devices { entries: entries.into_iter().map(|(text, key, s)| (text, (key, Arc::new(s)))).collect() }
    }

    /// No settings: nothing is matched and nothing changes.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The keys as written, with what they name.
    pub fn keys(&self) -> impl Iterator<Item = (&str, &DeviceKey)> {
        self.entries.iter().map(|(text, (key, _))| (text.as_str(), key))
    }

    /// The settings of a key as it is matched.
    fn find(&self, key: &DeviceKey) -> Option<(&str, &Arc<DeviceSettings>)> {
        self.entries.iter().find(|(_, (k, _))| k == key).map(|(text, (_, s))| (text.as_str(), s))
    }

    /// The settings of a network known by `slug` (the slug of its name in the cloud).
    pub fn network(&self, slug: &str) -> Option<&Arc<DeviceSettings>> {
        self.find(&DeviceKey::Network(slug.to_string())).map(|(_, s)| s)
    }
}

/// The settings of one network's units, groups and scenes, matched by the slugs of their names in
/// the cloud (what `devices:` keys name) and the units' addresses.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    /// By unit id.
    pub units: BTreeMap<u32, Arc<DeviceSettings>>,
    /// By group id.
    pub groups: BTreeMap<u32, Arc<DeviceSettings>>,
    /// By scene id.
    pub scenes: BTreeMap<u32, Arc<DeviceSettings>>,
    /// The network's own.
    pub network: Option<Arc<DeviceSettings>>,
    /// The keys (as written) that matched something here.
    pub matched: BTreeSet<String>,
}

/// What [`Resolved::of`] matches: a network's slug and, per unit, its address and slug; per
/// group and scene, its slug.
pub struct Names<'a> {
    /// The network's slug (of its name in the cloud).
    pub network: &'a str,
    /// `(unit id, address, slug)`.
    pub units: Vec<(u32, Option<&'a str>, &'a str)>,
    /// `(group id, slug)`.
    pub groups: Vec<(u32, &'a str)>,
    /// `(scene id, slug)`.
    pub scenes: Vec<(u32, &'a str)>,
}

impl Resolved {
    /// Matches `devices` to what `names` lists. A unit named both by address and by slug takes
    /// the address's entry.
    pub fn of(devices: &Devices, names: &Names<'_>) -> Resolved {
        let mut r = Resolved::default();
        let net = names.network.to_string();
        let take = |key: DeviceKey, matched: &mut BTreeSet<String>| {
            devices.find(&key).map(|(text, s)| {
                matched.insert(text.to_string());
                s.clone()
            })
        };
        for &(id, address, slug) in &names.units {
            let by_address = address.filter(|a| !a.is_empty()).map(|a| DeviceKey::Address(a.to_ascii_lowercase()));
            let by_address = by_address.and_then(|k| take(k, &mut r.matched));
            let by_slug = take(DeviceKey::Unit(net.clone(), slug.to_string()), &mut r.matched);
            if let Some(s) = by_address.or(by_slug) {
                r.units.insert(id, s);
            }
        }
        for &(id, slug) in &names.groups {
            if let Some(s) = take(DeviceKey::Group(net.clone(), slug.to_string()), &mut r.matched) {
                r.groups.insert(id, s);
            }
        }
        for &(id, slug) in &names.scenes {
            if let Some(s) = take(DeviceKey::Scene(net.clone(), slug.to_string()), &mut r.matched) {
                r.scenes.insert(id, s);
            }
        }
        r.network = take(DeviceKey::Network(net.clone()), &mut r.matched);
        r
    }

    /// A unit's settings.
    pub fn unit(&self, id: u32) -> Option<&DeviceSettings> {
        self.units.get(&id).map(|s| &**s)
    }

    /// A group's settings.
    pub fn group(&self, id: u32) -> Option<&DeviceSettings> {
        self.groups.get(&id).map(|s| &**s)
    }

    /// A scene's settings.
    pub fn scene(&self, id: u32) -> Option<&DeviceSettings> {
        self.scenes.get(&id).map(|s| &**s)
    }
}

/// The slugs of the networks (id, name in the cloud): `(slug of the friendly name, slug of the
/// cloud's name)` by id. Without `devices:` both are the slug [`super::topics::assign`] gives
/// the cloud's name, as they always were.
pub fn network_slugs(devices: &Devices, names: Vec<(String, String)>) -> BTreeMap<String, (String, String)> {
    let by_cloud = super::topics::assign(names.iter().cloned(), &["bridge"]);
    if devices.is_empty() {
        return by_cloud.into_iter().map(|(id, slug)| (id, (slug.clone(), slug))).collect();
    }
    let friendly = names.into_iter().map(|(id, name)| {
        let renamed = by_cloud.get(&id).and_then(|slug| devices.network(slug)).and_then(|s| s.name.clone());
        (id, renamed.unwrap_or(name))
    });
    let friendly = super::topics::assign(friendly, &["bridge"]);
    friendly
        .into_iter()
        .map(|(id, slug)| (id.clone(), (slug, by_cloud.get(&id).cloned().unwrap_or_default())))
        .collect()
}

/// The keys of `devices` that match nothing in the networks loaded so far (`(cloud slug,
/// matched)` of each): a key naming a network by slug is judged once that network is loaded; a
/// unit's address is judged against every network loaded.
pub fn unmatched<'d>(devices: &'d Devices, loaded: &[(&str, &Resolved)]) -> Vec<&'d str> {
    devices
        .keys()
        .filter(|(text, key)| {
            let judged = key.network().is_none_or(|net| loaded.iter().any(|(slug, _)| *slug == net));
            judged && !loaded.iter().any(|(_, r)| r.matched.contains(*text))
        })
        .map(|(text, _)| text)
        .collect()
}

/// The friendly name of `settings`, else `cloud`.
pub fn friendly<'a>(settings: Option<&'a DeviceSettings>, cloud: &'a str) -> &'a str {
    settings.and_then(|s| s.name.as_deref()).unwrap_or(cloud)
}

/// Whether a unit with `caps` and `settings` is shown as a `switch`: asked for, and on/off only
/// (a unit that dims or has colour stays a light; the bridge warns of it).
pub fn shown_as_switch(caps: &Caps, ha: Option<&HaOverrides>) -> bool {
    ha.and_then(|h| h.platform) == Some(Platform::Switch) && caps.is_light() && caps.color_modes() == ["onoff"]
}

#[cfg(test)]
#[path = "devices_tests.rs"]
mod tests;
