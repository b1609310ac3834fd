//! The publisher's copy of one network: the bridge core's view with everything derived from it
//! that topics depend on (slugs, the groups' cached readings, photos, latest datapoints, the
//! `devices:` settings matched to it). The renderer reads it; the plan and the publisher keep it
//! up to date.

mod devices;
pub mod photos;

use super::devices::{Devices, Resolved};
use super::group_cache::GroupCache;
use super::store::Owner;
use super::topics::Slugs;
use super::unit_data::NetData;
use super::unit_json::{GroupJson, MemberReading, member_reading};
use crate::bridge::caps::Caps;
use crate::bridge::state::{GroupInfo, NetworkView};
use crate::cloud::model::{Fixture, UnitState};
use photos::PhotoSet;
use std::sync::Arc;

/// The mirror of one network with everything derived from it that topics depend on.
#[derive(Debug, Clone)]
pub struct NetMirror {
    /// The network as last reported.
    pub view: NetworkView,
    /// The network id as owners carry it (shared, so naming an owner allocates nothing).
    pub key: Arc<str>,
    /// The network's slug (site-wide unique).
    pub slug: String,
    /// Unit slugs.
    pub unit_slugs: Slugs,
    /// Group slugs.
    pub group_slugs: Slugs,
    /// Scene slugs.
    pub scene_slugs: Slugs,
    /// Groups whose JSON may have changed since it was last rendered (a member's reading or
    /// capabilities changed), without repeats. A group's JSON summarises its members, so it is
    /// rendered once for all the member changes taken in together, not once per member
    /// ([`super::plan::stale_group_ops`]). Kept allocated between batches.
    pub stale_groups: Vec<u32>,
    /// Each group's members' readings and constant JSON, for its next render: made with the
    /// mirror and again after a unit's identity changed ([`NetMirror::recache_groups`]), kept up
    /// to date by [`super::plan::unit_ops`].
    pub group_cache: GroupCache,
    /// The network's photos, with their PNG files: kept here because everything published is
    /// rendered again from the mirror ([`photos`]).
    pub photos: PhotoSet,
    /// The latest logged datapoints of its units ([`super::unit_data`]).
    pub data: NetData,
    /// The `devices:` settings of the whole bridge (empty without the section).
    pub devices: Arc<Devices>,
    /// The slug of the network's name in the cloud, by which `devices:` keys name it ([`slug`]
    /// is the slug of its friendly name).
    ///
    /// [`slug`]: NetMirror::slug
    pub key_slug: String,
    /// The `devices:` settings matched to this network's units, groups and scenes.
    pub settings: Resolved,
}

impl NetMirror {
    /// A mirror of `view` known by `slug`.
    pub fn new(view: NetworkView, slug: String) -> NetMirror {
        NetMirror::with_devices(view, slug.clone(), slug, Arc::default())
    }

    /// A mirror of `view` known by `slug`, whose name in the cloud has `key_slug`, with the
    /// bridge's `devices:` settings.
    pub fn with_devices(view: NetworkView, slug: String, key_slug: String, devices: Arc<Devices>) -> NetMirror {
        let mut mirror = NetMirror {
            key: Arc::from(view.status.id.as_str()),
            view,
            slug,
            unit_slugs: Slugs::default(),
            group_slugs: Slugs::default(),
            scene_slugs: Slugs::default(),
            stale_groups: Vec::new(),
            group_cache: GroupCache::default(),
            photos: PhotoSet::default(),
            data: NetData::default(),
            devices,
            key_slug,
            settings: Resolved::default(),
        };
        mirror.reslug();
        mirror.recache_groups();
        mirror
    }

    /// Makes the group cache again from the view (a new unit, or one whose identity changed).
    pub fn recache_groups(&mut self) {
        self.group_cache = GroupCache::of(&self.view, |u| self.reading(u));
    }

    /// A group's JSON worked out from the units themselves, without the cache.
    pub(super) fn group_json<'g>(&self, g: &'g GroupInfo) -> GroupJson<'g> {
        GroupJson::of(g, |u| self.view.units.get(&u).map(|unit| self.reading(unit)))
    }

    /// What a group's JSON reads of `unit` as a member.
    fn reading(&self, unit: &UnitState) -> MemberReading {
        member_reading(unit, self.is_light(unit))
    }

    /// Recomputes the unit, group and scene slugs (after names changed), and with `devices:`
    /// the settings matched to them.
    pub fn reslug(&mut self) {
        let v = &self.view;
        self.unit_slugs = Slugs::of(v.units.iter().map(|(id, u)| (*id, u.name.as_deref().unwrap_or_default())));
        self.group_slugs = Slugs::of(v.groups.iter().map(|(id, g)| (*id, g.name.as_str())));
        self.scene_slugs = Slugs::of(v.scenes.iter().map(|(id, s)| (*id, s.name.as_str())));
        if !self.devices.is_empty() {
            self.apply_devices();
        }
    }

    /// The capabilities of a unit (its controls merged with its fixture's).
    pub fn caps(&self, unit: &UnitState) -> Caps {
        Caps::of(unit, self.fixture_of(unit))
    }

    /// Whether `unit` is a light ([`Caps::light_of`]).
    pub fn is_light(&self, unit: &UnitState) -> bool {
        // The fixture is looked up only when the unit's type does not answer: a group's JSON asks
        // this of every member on each change, and nearly every member is a luminaire.
        Caps::light_of(unit, || self.fixture_of(unit))
    }

    pub(crate) fn fixture_of(&self, unit: &UnitState) -> Option<&Fixture> {
        unit.fixture_id.get().and_then(|f| self.view.fixtures.get(&f)).map(|f| &**f)
    }

    /// Every owner of this network.
    pub fn owners(&self) -> Vec<Owner> {
        let id = &self.key;
        let mut o = vec![Owner::Network(id.clone())];
        o.extend(self.view.units.keys().map(|u| Owner::Unit(id.clone(), *u)));
        let with_data = self.view.units.keys().filter(|u| self.data.unit(**u).is_some());
        o.extend(with_data.map(|u| Owner::Data(id.clone(), *u)));
        o.extend(self.view.groups.keys().map(|g| Owner::Group(id.clone(), *g)));
        o.extend(self.view.scenes.keys().map(|s| Owner::Scene(id.clone(), *s)));
        o
    }
}
