//! A unit's Home Assistant device: its entities, its device triggers and its datapoint sensors,
//! rendered from what [`DiscoveryInputs`] reads of the unit and its fixture.

use super::*;

/// What a unit's discovery config reads of the unit and its fixture: [`Renderer::unit_discovery`]
/// reads them through this alone. The rest it reads (the layout, the slugs, the network's id,
/// the `devices:` settings matched with the slugs) changes only with a new rendering of the
/// whole network. So two equal inputs render the same
/// config, and [`super::plan::unit_ops`] compares them to know whether the config must be
/// rendered again: a field the config comes to read is added here, and compared with the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryInputs<'mirror> {
    id: u32,
    name: Option<&'mirror str>,
    address: Option<&'mirror str>,
    firmware: Option<&'mirror str>,
    vendor: Option<&'mirror str>,
    model: Option<&'mirror str>,
    caps: Caps,
    data: DataKeys<'mirror>,
    buttons: Buttons,
}

/// The keys of a unit's logged datapoints, compared by key alone: a new value of a known key
/// changes its data topic, not its sensors.
#[derive(Debug, Clone, Copy)]
struct DataKeys<'mirror>(Option<&'mirror UnitData>);

impl PartialEq for DataKeys<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self.0, other.0) {
            (Some(a), Some(b)) => std::ptr::eq(a, b) || a.keys().eq(b.keys()),
            (a, b) => a.is_none() && b.is_none(),
        }
    }
}

/// The ids of a switch's buttons (the `id`s of its fixture's `button` controls below 64), one
/// bit each: a unit's discovery inputs are compared on every change of it, so they stay `Copy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Buttons(u64);

impl Buttons {
    fn of(fixture: Option<&Fixture>) -> Buttons {
        let ids = fixture.iter().flat_map(|f| &f.controls);
        let ids = ids.filter(|c| c.control_type == FixtureControlType::Button).filter_map(|c| c.id);
        Buttons(ids.filter(|id| *id < 64).fold(0, |bits, id| bits | 1 << id))
    }

    /// The button ids, when the fixture tells two or more apart (one button is the switch).
    fn several(self) -> impl Iterator<Item = u32> {
        let bits = if self.0.count_ones() >= 2 { self.0 } else { 0 };
        (0..64).filter(move |id| bits & 1 << id != 0)
    }
}

impl<'mirror> DiscoveryInputs<'mirror> {
    /// The inputs of `unit`, a unit of `mirror`'s network (in its view or about to be).
    pub fn of(mirror: &'mirror NetMirror, unit: &'mirror UnitState) -> DiscoveryInputs<'mirror> {
        let fixture = mirror.fixture_of(unit);
        DiscoveryInputs {
            id: unit.id,
            name: unit.name.as_deref(),
            address: unit.address.as_deref(),
            firmware: unit.firmware_version.as_deref(),
            vendor: fixture.and_then(|f| f.vendor.as_deref()),
            model: fixture.and_then(|f| f.model.as_deref()),
            caps: Caps::of(unit, fixture),
            data: DataKeys(mirror.data.unit(unit.id)),
            buttons: Buttons::of(fixture),
        }
    }

    /// The unit's capabilities ([`NetMirror::caps`]).
    pub fn caps(&self) -> Caps {
        self.caps
    }
}

/// How many components a unit's device has in discovery: one per capability that makes an
/// entity (light, occupancy, illuminance, switch event). [`Renderer::unit_device`] builds exactly
/// these (and a switch's device triggers, which are no entities), and names a lone one after its
/// device.
pub(super) fn unit_component_count(caps: &Caps) -> usize {
    usize::from(caps.is_light()) + usize::from(caps.presence) + usize::from(caps.lux) + usize::from(caps.switch)
}

impl Renderer {
    /// The sensors of a unit's logged datapoints ([`unit_data::components`]).
    pub(super) fn data_components(
        &self,
        oid: &str,
        data: &UnitData,
        words: &[&str],
        data_topic: &str,
    ) -> Vec<Component> {
        unit_data::components(oid, data.keys(), &self.data_sensors, words, data_topic)
    }

    /// The discovery part of [`Renderer::unit`]: what depends on the unit's identity (name,
    /// address, fixture, firmware), its capabilities and the slugs, never on its state.
    pub fn unit_discovery(&self, mirror: &NetMirror, id: u32) -> Topics {
        let (Some(unit), Some(slug)) = (mirror.view.units.get(&id), mirror.unit_slugs.get(&id)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.discovery.is_some() {
            let device = self.unit_device(mirror, &DiscoveryInputs::of(mirror, unit), slug);
            self.push_discovery(&mut out, &device);
        }
        out
    }

    fn unit_device(&self, mirror: &NetMirror, unit: &DiscoveryInputs<'_>, slug: &str) -> Device {
        let caps = &unit.caps;
        let l = &self.layout;
        let net = mirror.slug.as_str();
        let oid = object_id_of(&mirror.view.status.id, unit.address, unit.id);
        let state_topic = l.unit(net, slug);
        let single = unit_component_count(caps) == 1;
        let eid = |platform: &str, suffix: &str| {
            if single {
                discovery::entity_id(platform, &[net, slug])
            } else {
                discovery::entity_id(platform, &[net, slug, suffix])
            }
        };
        let settings = mirror.settings.unit(unit.id);
        let mut components: Vec<Component> = Vec::new();
        if shown_as_switch(caps, settings.map(|s| &s.homeassistant)) {
            components.push(switch::unit(
                format!("{oid}_switch"),
                &discovery::entity_id("switch", &[net, slug]),
                state_topic.clone(),
                l.unit_leaf(net, slug, "set"),
            ));
        } else if caps.is_light() {
            components.push(light::unit(
                format!("{oid}_light"),
                &discovery::entity_id("light", &[net, slug]),
                state_topic.clone(),
                l.unit_leaf(net, slug, "set"),
                caps,
            ));
        }
        let named = |fallback: Name| if single { Name::Main } else { fallback };
        if caps.presence {
            components.push(binary_sensor::occupancy(
                format!("{oid}_occupancy"),
                named(Name::FromClass),
                &eid("binary_sensor", "occupancy"),
                state_topic.clone(),
            ));
        }
        if caps.lux {
            components.push(sensor::illuminance(
                format!("{oid}_illuminance"),
                named(Name::FromClass),
                &eid("sensor", "illuminance"),
                state_topic.clone(),
            ));
        }
        if caps.switch {
            let types: &[&str] = if caps.presence { &["occupancy", "switch"] } else { &["switch"] };
            components.push(event::unit(
                format!("{oid}_event"),
                named(Name::Text("Switch".into())),
                &eid("event", "switch"),
                l.unit_leaf(net, slug, "event"),
                types,
            ));
        }
        debug_assert_eq!(components.len(), unit_component_count(caps), "unit_component_count is out of step");
        if let Some(main) = components.first_mut() {
            override_entity(settings, main);
        }
        if caps.switch {
            let topic = l.unit_leaf(net, slug, "event");
            let mut buttons = unit.buttons.several().peekable();
            if buttons.peek().is_none() {
                components.push(device_automation::switch(format!("{oid}_trigger"), topic));
            } else {
                for id in buttons {
                    components.push(device_automation::button(format!("{oid}_trigger_{id}"), topic.clone(), id));
                }
            }
        }
        let mut dev = Map::new();
        dev.insert("identifiers".into(), json!([oid]));
        let name = settings.and_then(|s| s.name.as_deref()).or(unit.name);
        dev.insert(
            "name".into(),
            json!(name.filter(|n| !n.trim().is_empty()).map_or_else(|| format!("Unit {}", unit.id), str::to_string)),
        );
        if let Some(vendor) = unit.vendor {
            dev.insert("manufacturer".into(), json!(vendor));
        }
        if let Some(model) = unit.model {
            dev.insert("model".into(), json!(model));
        }
        if let Some(fw) = unit.firmware {
            dev.insert("sw_version".into(), json!(fw));
        }
        dev.insert("via_device".into(), json!(network_object_id(&mirror.view.status.id)));
        if let Some(s) = settings {
            s.homeassistant.apply_device(&mut dev);
        }
        if let DataKeys(Some(data)) = unit.data {
            components.extend(self.data_components(&oid, data, &[net, slug], &l.unit_leaf(net, slug, "data")));
        }
        Device {
            object_id: oid,
            device: Value::Object(dev),
            availability: vec![l.bridge_state(), l.unit_leaf(net, slug, "availability")],
            components,
        }
    }
}
