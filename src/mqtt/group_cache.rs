//! Each group's JSON half-made between renders: its members' readings and its constant text.
//!
//! A group's JSON summarises its members (`state`, `brightness`) and names the group (`id`,
//! `members`, `name`). Rendered from scratch on every change of a member's reading, it would look
//! up each member's unit, work out its reading again and write the member ids and the name
//! again, a sizeable share of a changed frame's work for a luminaire in a group. The cache keeps
//! each member's reading in two bytes and the group's constant text, so a render reads a few
//! small numbers and copies one string.
//!
//! [`GroupCache::of`] builds it from a mirror's view; after that, only a unit's reading can change
//! it ([`GroupCache::set_reading`]): the groups, their names and the fixtures change only with a
//! new mirror. The publisher's renders check it against the from-scratch JSON in debug builds
//! (every test that renders a group).

use super::unit_json::{GroupJson, MemberReading, write_group_fixed};
use crate::bridge::state::{GroupInfo, NetworkView};
use crate::cloud::model::UnitState;
use foldhash::HashMap;

/// A member's reading packed into two bytes: the brightness in the low byte, then a bit for
/// "has a brightness" and two for the state. [`UNKNOWN`] is a member the mirror has no unit for.
type Packed = u16;

/// A member with no unit in the mirror (the group names an id the network does not have).
const UNKNOWN: Packed = u16::MAX;
const HAS_BRIGHTNESS: Packed = 1 << 8;
const STATE_ON: Packed = 1 << 9;
const STATE_OFF: Packed = 2 << 9;
const STATE_MASK: Packed = 3 << 9;

fn pack(r: MemberReading) -> Packed {
    let state = match r.state {
        Some("ON") => STATE_ON,
        Some(_) => STATE_OFF,
        None => 0,
    };
    let brightness = r.brightness.map_or(0, |b| HAS_BRIGHTNESS | Packed::from(b));
    state | brightness
}

fn unpack(p: Packed) -> Option<MemberReading> {
    if p == UNKNOWN {
        return None;
    }
    let state = match p & STATE_MASK {
        STATE_ON => Some("ON"),
        STATE_OFF => Some("OFF"),
        _ => None,
    };
    let brightness = (p & HAS_BRIGHTNESS != 0).then_some((p & 0xff) as u8);
    Some(MemberReading { state, brightness })
}

/// One group's cached parts.
#[derive(Debug, Clone)]
struct Cached {
    /// The fields between the brightness and the state: `"id":…,"members":[…],"name":…`.
    fixed: Box<str>,
    /// Each member's reading, in the order of the group's `units`.
    readings: Box<[Packed]>,
}

/// The cached parts of every group of one network, by group id.
#[derive(Debug, Clone, Default)]
pub struct GroupCache {
    groups: HashMap<u32, Cached>,
}

impl GroupCache {
    /// The cache of `view`'s groups, each member read by `reading` (the unit's reading as the
    /// group JSON sees it: [`super::unit_json::member_reading`] with whether it is a light).
    pub fn of(view: &NetworkView, reading: impl Fn(&UnitState) -> MemberReading) -> GroupCache {
        let groups = view
            .groups
            .values()
            .filter_map(|g| {
                let readings = g.units.iter().map(|u| view.units.get(u).map_or(UNKNOWN, |u| pack(reading(u))));
                let mut fixed = Vec::new();
                write_group_fixed(g, &mut fixed);
                // serde_json writes text; were it not, the group would be left out of the cache,
                // and rendered from its units.
                let fixed = String::from_utf8(fixed).ok()?.into_boxed_str();
                Some((g.id, Cached { fixed, readings: readings.collect() }))
            })
            .collect();
        GroupCache { groups }
    }

    /// Records `reading` as unit `unit`'s wherever it is a member of `group`.
    pub fn set_reading(&mut self, group: &GroupInfo, unit: u32, reading: MemberReading) {
        let Some(cached) = self.groups.get_mut(&group.id) else { return };
        for (member, slot) in group.units.iter().zip(cached.readings.iter_mut()) {
            if *member == unit {
                *slot = pack(reading);
            }
        }
    }

    /// Appends `group`'s JSON to `out` from the cache; `false` (nothing written) when the cache
    /// does not have the group.
    pub fn write_json(&self, group: &GroupInfo, out: &mut Vec<u8>) -> bool {
        let Some(cached) = self.groups.get(&group.id) else { return false };
        let json = GroupJson::from_readings(group, cached.readings.iter().map(|p| unpack(*p)));
        json.write_with_fixed(&cached.fixed, out);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reading_packs_and_unpacks_to_itself() {
        for state in [None, Some("ON"), Some("OFF")] {
            for brightness in [None, Some(0), Some(1), Some(128), Some(255)] {
                let r = MemberReading { state, brightness };
                assert_eq!(unpack(pack(r)), Some(r));
                assert_ne!(pack(r), UNKNOWN);
            }
        }
        assert_eq!(unpack(UNKNOWN), None);
    }
}
