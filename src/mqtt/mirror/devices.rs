//! The `devices:` settings as a network's mirror applies them (docs/configuration.md#devices):
//! the friendly names and exclusions in the slugs, the `homeassistant:` keys in the discovery
//! configs the renderer builds.

use super::NetMirror;
use crate::mqtt::devices::{DeviceSettings, Names, Platform, Resolved, shown_as_switch};
use crate::mqtt::topics::Slugs;

impl NetMirror {
    /// Matches the `devices:` settings by the slugs of the cloud's names (just computed), then
    /// makes the slugs again from the friendly names, leaving out what is excluded: an excluded
    /// unit, group or scene has no slug, so no topic, no discovery and no command topic.
    pub(in crate::mqtt) fn apply_devices(&mut self) {
        let v = &self.view;
        let settings = {
            let names = Names {
                network: &self.key_slug,
                units: v
                    .units
                    .iter()
                    .filter_map(|(id, u)| Some((*id, u.address.as_deref(), self.unit_slugs.get(id)?)))
                    .collect(),
                groups: self.group_slugs.iter().collect(),
                scenes: self.scene_slugs.iter().collect(),
            };
            Resolved::of(&self.devices, &names)
        };
        let named = |cloud: &'_ str, s: Option<&DeviceSettings>| -> Option<String> {
            match s {
                Some(s) if s.exclude => None,
                Some(DeviceSettings { name: Some(name), .. }) => Some(name.clone()),
                _ => Some(cloud.to_string()),
            }
        };
        let units: Vec<(u32, String)> = v
            .units
            .iter()
            .filter_map(|(id, u)| Some((*id, named(u.name.as_deref().unwrap_or_default(), settings.unit(*id))?)))
            .collect();
        let groups: Vec<(u32, String)> =
            v.groups.iter().filter_map(|(id, g)| Some((*id, named(&g.name, settings.group(*id))?))).collect();
        let scenes: Vec<(u32, String)> =
            v.scenes.iter().filter_map(|(id, s)| Some((*id, named(&s.name, settings.scene(*id))?))).collect();
        let of = |names: &[(u32, String)]| Slugs::of(names.iter().map(|(id, n)| (*id, n.as_str())));
        self.unit_slugs = of(&units);
        self.group_slugs = of(&groups);
        self.scene_slugs = of(&scenes);
        self.settings = settings;
    }

    /// The units whose settings ask for `platform: switch` but which dim or have colour (they
    /// stay lights), as `<network slug>/<unit slug>`.
    pub fn switches_refused(&self) -> Vec<String> {
        let asked = self.settings.units.iter().filter(|(_, s)| s.homeassistant.platform == Some(Platform::Switch));
        asked
            .filter_map(|(id, s)| {
                let unit = self.view.units.get(id)?;
                let slug = self.unit_slugs.get(id)?;
                (!shown_as_switch(&self.caps(unit), Some(&s.homeassistant))).then(|| format!("{}/{slug}", self.slug))
            })
            .collect()
    }
}
