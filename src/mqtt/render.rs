//! The retained topic set the bridge wants on the broker, rendered from its mirror of a network.
//!
//! Rendering is pure: the publisher compares what is rendered here with what it last published
//! and sends only the difference. Topics are grouped by [`Owner`] (the bridge, a network, a unit,
//! a group, a scene) so a change to one unit re-renders that unit alone, and a removed owner's
//! every topic can be cleared. Within an owner, discovery comes first, then state, then
//! availability: HA must know an entity before its state arrives.

use super::devices::{DeviceSettings, friendly, shown_as_switch};
use super::discovery::{
    self, Component, Device, Discovery, Name, binary_sensor, button, device_automation, event, light, number, sensor,
    switch,
};
use super::mirror::NetMirror;
use super::settings::SensorSemantics;
use super::state_text::{AVAILABILITY, Leaf, StateText};
use super::store::{Owner, Topics};
use super::topics::{self, Layout};
use super::unit_data::{self, UnitData};
use super::unit_json::{UnitJson, network_json, unit_json};
use crate::bridge::caps::Caps;
use crate::bridge::state::GroupInfo;
use crate::cloud::model::{Fixture, FixtureControlType, UnitState};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

mod photos;
mod unit_device;

pub use unit_device::DiscoveryInputs;
use unit_device::unit_component_count;

/// Merges the `homeassistant:` keys of `settings` into a main entity's config. An `event` takes
/// no `entity_category` (HA rejects the config), so it keeps none.
pub(super) fn override_entity(settings: Option<&DeviceSettings>, component: &mut Component) {
    if let Some(s) = settings {
        s.homeassistant.apply_entity(&mut component.config);
        if component.platform == "event" {
            component.config.remove("entity_category");
        }
    }
}

/// Renders topics for one bridge (base topic, discovery settings, output options).
#[derive(Debug, Clone)]
pub struct Renderer {
    /// The topic layout.
    pub layout: Layout,
    /// Discovery, when enabled.
    pub discovery: Option<Discovery>,
    /// Publish per-attribute plain topics.
    pub attribute_topics: bool,
    /// `datapoints.sensors`: the Home Assistant semantics of further datapoint keys.
    pub data_sensors: Arc<BTreeMap<String, SensorSemantics>>,
}

/// The object id of the bridge device (includes the base topic: two bridges on one broker with
/// different base topics are two devices).
pub fn bridge_object_id(base: &str) -> String {
    format!("{}_bridge_{}", discovery::ORIGIN_NAME, discovery::key(base))
}

/// The object id of the bridge device of `layout`: [`bridge_object_id`], or with the instance
/// id as `bridge-<instance>` (`_` stays the separator: gc::scope_of tells instances apart by it).
pub fn instance_object_id(layout: &Layout) -> String {
    match layout.instance() {
        None => bridge_object_id(layout.base()),
        Some(instance) => {
            format!("{}_bridge-{}_{}", discovery::ORIGIN_NAME, discovery::key(instance), discovery::key(layout.base()))
        }
    }
}

/// The object id of a network device.
pub fn network_object_id(network_id: &str) -> String {
    format!("{}_{}", discovery::ORIGIN_NAME, discovery::key(network_id))
}

/// The object id of a unit device: network id + unit address (stable across renames and
/// re-adds), or the unit id when the address is unknown.
pub fn unit_object_id(network_id: &str, unit: &UnitState) -> String {
    object_id_of(network_id, unit.address.as_deref(), unit.id)
}

/// [`unit_object_id`] of the unit with `address` and `id`.
fn object_id_of(network_id: &str, address: Option<&str>, id: u32) -> String {
    let unit_key = match address.filter(|a| !a.is_empty()) {
        Some(a) => discovery::key(a),
        None => format!("u{id}"),
    };
    format!("{}_{unit_key}", network_object_id(network_id))
}

/// A name for an entity of a network device that HA will not strip: a name starting with the
/// device's name draws a warning, so such names get a kind prefix ("Scene …", "Group …").
pub(super) fn entity_name(name: &str, device_name: &str, kind: &str, id: &dyn std::fmt::Display) -> Name {
    if name.trim().is_empty() {
        return Name::Text(format!("{kind} {id}"));
    }
    if !device_name.is_empty() && name.to_lowercase().starts_with(&device_name.to_lowercase()) {
        return Name::Text(format!("{kind} {name}"));
    }
    Name::Text(name.to_string())
}

/// The members of group `g` as its light describes them: whether one dims, and the unique ids
/// of the member lights the bridge publishes (in the group's order).
fn group_members(mirror: &NetMirror, g: &GroupInfo) -> light::GroupMembers {
    let mut members = light::GroupMembers::default();
    for unit in g.units.iter().filter_map(|u| mirror.view.units.get(u)) {
        let caps = mirror.caps(unit);
        members.dimmable |= caps.dimmer;
        let ha = mirror.settings.unit(unit.id).map(|s| &s.homeassistant);
        if caps.is_light() && !shown_as_switch(&caps, ha) && mirror.unit_slugs.get(&unit.id).is_some() {
            members.lights.push(format!("{}_light", unit_object_id(&mirror.view.status.id, unit)));
        }
    }
    members
}

impl Renderer {
    /// The renderer of a bridge with these settings.
    pub fn of(config: &super::settings::Config) -> Renderer {
        let discovery = config.homeassistant.enabled.then(|| Discovery {
            prefix: config.homeassistant.discovery_prefix.clone(),
            mode: config.homeassistant.discovery,
            qos: config.mqtt.qos,
        });
        Renderer {
            layout: Layout::of(&config.mqtt),
            discovery,
            attribute_topics: config.output.attribute_topics,
            data_sensors: Arc::new(config.datapoint_sensors.clone()),
        }
    }

    fn bridge_availability(&self) -> Vec<String> {
        vec![self.layout.bridge_state()]
    }

    fn push_discovery(&self, out: &mut Topics, device: &Device) {
        if let Some(d) = &self.discovery {
            out.extend(d.render(device));
        }
    }

    /// The bridge's topics: its device, `bridge/state` = `online`, `bridge/info`.
    pub fn bridge(&self, info: &Value) -> Topics {
        let l = &self.layout;
        let mut out = Vec::new();
        self.push_discovery(&mut out, &self.bridge_device());
        out.push((l.bridge_state(), "online".into()));
        out.push((l.bridge_info(), info.to_string()));
        out
    }

    /// How many entities Home Assistant lists for the bridge's own device: the components
    /// discovery publishes for it.
    pub fn bridge_entity_count(&self) -> usize {
        self.bridge_device().components.len()
    }

    /// How many entities Home Assistant lists for a network: the components discovery publishes
    /// for its device and its units' devices.
    pub fn network_entity_count(&self, mirror: &NetMirror) -> usize {
        // Counted from the capabilities, not by rendering every unit's device again: a big
        // site's start-up would render all of its discovery twice.
        let units = mirror.view.units.iter().filter(|(id, _)| mirror.unit_slugs.get(id).is_some());
        let units: usize = units
            .map(|(id, unit)| {
                let data = mirror.data.unit(*id).map_or(0, |d| self.data_components("", d, &[], "").len());
                unit_component_count(&mirror.caps(unit)) + data
            })
            .sum();
        self.network_device(mirror).components.len() + units
    }

    /// How many Home Assistant entities the network of `view` gets, counted on the devices
    /// discovery publishes for it (its own and its units').
    pub fn view_entity_count(&self, view: &crate::bridge::state::NetworkView) -> usize {
        self.network_entity_count(&NetMirror::new(view.clone(), String::new()))
    }

    /// The bridge's own device: its connectivity, its version and its reload button.
    fn bridge_device(&self) -> Device {
        let l = &self.layout;
        let oid = instance_object_id(l);
        let base_slug = topics::slug_or_id(l.base(), &"casambi");
        let instance = l.instance().map(topics::slug).unwrap_or_default();
        let name = l.instance().map_or_else(|| "casambi2mqtt bridge".into(), |i| format!("casambi2mqtt bridge ({i})"));
        Device {
            object_id: oid.clone(),
            device: json!({
                "identifiers": [oid],
                "name": name,
                "manufacturer": "casambi2mqtt",
                "model": "casambi2mqtt",
                "sw_version": env!("CARGO_PKG_VERSION"),
            }),
            availability: Vec::new(),
            components: vec![
                binary_sensor::connectivity(
                    "connectivity",
                    format!("{oid}_connectivity"),
                    Name::FromClass,
                    &discovery::entity_id("binary_sensor", &[&base_slug, "bridge", &instance]),
                    l.bridge_state(),
                    None,
                ),
                sensor::version(
                    format!("{oid}_version"),
                    &discovery::entity_id("sensor", &[&base_slug, "bridge", &instance, "version"]),
                    l.bridge_info(),
                    self.bridge_availability(),
                ),
                button::reload(
                    format!("{oid}_reload"),
                    &discovery::entity_id("button", &[&base_slug, "bridge", &instance, "reload"]),
                    l.bridge_reload(),
                    self.bridge_availability(),
                ),
            ],
        }
    }

    /// A network's topics: its device, its JSON and its availability.
    pub fn network(&self, mirror: &NetMirror) -> Topics {
        let l = &self.layout;
        let (v, net) = (&mirror.view, mirror.slug.as_str());
        let mut out = Vec::new();
        self.push_discovery(&mut out, &self.network_device(mirror));
        out.push((l.network(net), network_json(&v.status, &v.scenes).to_string()));
        self.photo_topics(mirror, &mut out);
        out.push((l.network_availability(net), if v.status.available() { "online" } else { "offline" }.into()));
        out
    }

    /// A network's device: dim level, cloud connection, a switch per scene, a light per group.
    fn network_device(&self, mirror: &NetMirror) -> Device {
        let l = &self.layout;
        let v = &mirror.view;
        let net = mirror.slug.as_str();
        let oid = network_object_id(&v.status.id);
        let avail = vec![l.bridge_state(), l.network_availability(net)];
        let mut components = vec![
            number::dim_level(
                format!("{oid}_dim_level"),
                &discovery::entity_id("number", &[net, "dim_level"]),
                l.network(net),
                l.network_set(net),
            ),
            binary_sensor::connectivity(
                "connectivity",
                format!("{oid}_connectivity"),
                Name::Text("Cloud connection".into()),
                &discovery::entity_id("binary_sensor", &[net, "cloud_connection"]),
                l.network_availability(net),
                Some(self.bridge_availability()),
            ),
        ];
        let settings = &mirror.settings;
        let network_settings = settings.network.as_deref();
        let device_name = friendly(network_settings, &v.status.name);
        for (id, s) in &v.scenes {
            let Some(slug) = mirror.scene_slugs.get(id) else { continue };
            let mut scene = switch::scene(
                format!("scene_{id}"),
                format!("{oid}_scene_{id}"),
                entity_name(friendly(settings.scene(*id), &s.name), device_name, "Scene", id),
                &discovery::entity_id("switch", &[net, "scene", slug]),
                (l.scene(net, slug), format!("{}/set", l.scene(net, slug))),
                s.hidden,
            );
            override_entity(settings.scene(*id), &mut scene);
            components.push(scene);
        }
        for (id, g) in &v.groups {
            let Some(slug) = mirror.group_slugs.get(id) else { continue };
            let mut group = light::group(
                format!("group_{id}"),
                format!("{oid}_group_{id}"),
                entity_name(friendly(settings.group(*id), &g.name), device_name, "Group", id),
                &discovery::entity_id("light", &[net, "group", slug]),
                (l.group(net, slug), format!("{}/set", l.group(net, slug))),
                group_members(mirror, g),
            );
            override_entity(settings.group(*id), &mut group);
            components.push(group);
        }
        self.photo_components(mirror, &oid, &mut components);
        let mut device = json!({
            "identifiers": [oid],
            "name": device_name,
            "model": "Lighting network",
            "via_device": instance_object_id(l),
        });
        if let (Some(s), Value::Object(block)) = (network_settings, &mut device) {
            s.homeassistant.apply_device(block);
        }
        Device { object_id: oid.clone(), device, availability: avail, components }
    }

    /// The unit JSON of a unit of `mirror` (all keys present).
    pub fn unit_state(&self, mirror: &NetMirror, unit: &UnitState) -> Map<String, Value> {
        unit_json(unit, &mirror.caps(unit))
    }

    /// A unit's topics: its device and entities, its JSON, its attribute topics, its
    /// availability. The state topics come last: a state change updates the owner's last topics
    /// in place ([`super::store::Store::update_state`]). Its logged datapoints have an owner of
    /// their own ([`Owner::Data`], [`Renderer::unit_data_topics`]).
    pub fn unit(&self, mirror: &NetMirror, id: u32) -> Topics {
        let mut out = self.unit_discovery(mirror, id);
        out.extend(self.unit_state_topics(mirror, id));
        out
    }

    /// The topics of a unit's [`Owner::Data`]: `<unit>/data` and, with attribute topics,
    /// `<unit>/data/<key>`; nothing before the unit reported a datapoint.
    pub fn unit_data_topics(&self, mirror: &NetMirror, id: u32) -> Topics {
        let (Some(data), Some(slug)) = (mirror.data.unit(id), mirror.unit_slugs.get(&id)) else {
            return Vec::new();
        };
        let topic = self.layout.unit_leaf(&mirror.slug, slug, "data");
        let mut out = vec![(topic.clone(), data.json())];
        if self.attribute_topics {
            out.extend(unit_data::attribute_topics(&topic, data));
        }
        out
    }

    /// The state part of [`Renderer::unit`]: the unit JSON, the attribute topics and the
    /// availability, all at or below the unit's state topic ([`Layout::unit`]).
    pub fn unit_state_topics(&self, mirror: &NetMirror, id: u32) -> Topics {
        let mut text = StateText::default();
        let Some(caps) = mirror.view.units.get(&id).map(|u| mirror.caps(u)) else { return Vec::new() };
        match self.unit_state_text(mirror, id, &caps, &mut text) {
            Some(slug) => text.topics(&self.layout.unit(&mirror.slug, slug)),
            None => Vec::new(),
        }
    }

    /// Writes the payloads of [`Renderer::unit_state_topics`] into `text` (cleared first) and
    /// returns the unit's slug; `None` (and nothing written) for a unit the mirror lacks. `caps`
    /// are the unit's capabilities ([`NetMirror::caps`]): a changed unit's caller has them already.
    pub fn unit_state_text<'mirror>(
        &self,
        mirror: &'mirror NetMirror,
        id: u32,
        caps: &Caps,
        text: &mut StateText,
    ) -> Option<&'mirror str> {
        text.clear();
        let (unit, slug) = (mirror.view.units.get(&id)?, mirror.unit_slugs.get(&id)?);
        let json = UnitJson::of(unit, caps);
        // The JSON first, then the plain values: JSON consumers (HA) see a change earliest.
        json.write_parts(text, self.attribute_topics);
        let online = unit.online == Some(true) && mirror.view.status.available();
        text.push(Leaf::Below(AVAILABILITY), if online { "online" } else { "offline" });
        Some(slug)
    }

    /// A group's JSON topic.
    pub fn group(&self, mirror: &NetMirror, id: u32) -> Topics {
        let mut text = StateText::default();
        match self.group_text(mirror, id, &mut text) {
            Some(slug) => text.topics(&self.layout.group(&mirror.slug, slug)),
            None => Vec::new(),
        }
    }

    /// Writes the group JSON into `text` (cleared first) and returns the group's slug; `None`
    /// for a group the mirror lacks.
    pub fn group_text<'mirror>(
        &self,
        mirror: &'mirror NetMirror,
        id: u32,
        text: &mut StateText,
    ) -> Option<&'mirror str> {
        text.clear();
        let (g, slug) = (mirror.view.groups.get(&id)?, mirror.group_slugs.get(&id)?);
        if !mirror.group_cache.write_json(g, text.buf()) {
            mirror.group_json(g).write_json(text.buf());
        }
        #[cfg(debug_assertions)]
        {
            let mut fresh = Vec::new();
            mirror.group_json(g).write_json(&mut fresh);
            debug_assert_eq!(String::from_utf8_lossy(text.buf()), String::from_utf8_lossy(&fresh), "group {id}");
        }
        text.end_part(Leaf::State);
        Some(slug)
    }

    /// A scene's `ON`/`OFF` topic.
    pub fn scene(&self, mirror: &NetMirror, id: u32) -> Topics {
        let Some(slug) = mirror.scene_slugs.get(&id) else { return Vec::new() };
        let on = mirror.view.status.active_scenes.contains(&id);
        vec![(self.layout.scene(&mirror.slug, slug), if on { "ON" } else { "OFF" }.into())]
    }

    /// The topics of any owner of `mirror`.
    pub fn owner(&self, mirror: &NetMirror, owner: &Owner) -> Topics {
        match owner {
            Owner::Bridge => Vec::new(),
            Owner::Network(_) => self.network(mirror),
            Owner::Unit(_, id) => self.unit(mirror, *id),
            Owner::Data(_, id) => self.unit_data_topics(mirror, *id),
            Owner::Group(_, id) => self.group(mirror, *id),
            Owner::Scene(_, id) => self.scene(mirror, *id),
        }
    }
}
