//! The levels below a state topic that the store keeps as a number instead of a name: an
//! attribute topic (`…/unit/lamp/brightness`) is its state topic's name and a level, so the
//! store holds a byte for it, not its name. So is a datapoint's plain topic
//! (`…/unit/lamp/data/energy`) below its unit's data topic: a big site has one per unit and
//! key, and kept by name they would outgrow the store's table (docs/datapoints.md).

use crate::mqtt::state_text::{AVAILABILITY, Leaf};
use crate::mqtt::unit_data::DATA_LEVELS;
use crate::mqtt::unit_json::UNIT_KEYS;

/// How many levels [`level_index`] numbers.
pub(super) const LEVEL_COUNT: usize = UNIT_KEYS.len() + 1 + DATA_LEVELS.len();

/// The levels below a state topic that the bridge publishes, in order: the unit JSON's keys,
/// then `availability`, then the datapoint keys that have a meaning. Read from the statics the
/// renderer names its leaves with (never copied: a copy of a string may be at another address),
/// so a leaf and its level are the same string at the same address, which [`is_level`] compares
/// first.
fn levels() -> impl Iterator<Item = &'static str> {
    UNIT_KEYS.iter().copied().chain([AVAILABILITY]).chain(DATA_LEVELS.iter().copied())
}

/// The number of a level below a state topic that the bridge publishes.
pub(super) fn level_index(level: &str) -> Option<u8> {
    levels().position(|k| k == level).and_then(|i| u8::try_from(i).ok())
}

/// The level numbered `index` by [`level_index`] (`""` for no level).
pub(super) fn level_at(index: u8) -> &'static str {
    let index = usize::from(index);
    match UNIT_KEYS.get(index) {
        Some(key) => key,
        None if index == UNIT_KEYS.len() => AVAILABILITY,
        None => DATA_LEVELS.get(index - UNIT_KEYS.len() - 1).copied().unwrap_or(""),
    }
}

/// Whether `name` is the name of the level numbered `index`. The renderer's leaves are the
/// level table's own strings, so the same address answers without comparing bytes (a changed
/// unit compares fifteen of them); any other name is compared byte by byte.
pub(super) fn is_level(index: u8, name: &str) -> bool {
    let level = level_at(index);
    std::ptr::eq(level, name) || level == name
}

/// Whether `topic` is the topic of `leaf` below `state_topic`.
pub(super) fn is_leaf_of(topic: &str, state_topic: &str, leaf: Leaf) -> bool {
    match leaf {
        Leaf::State => topic == state_topic,
        Leaf::Below(key) => {
            topic.strip_prefix(state_topic).and_then(|rest| rest.strip_prefix('/')).is_some_and(|rest| rest == key)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::caps::Caps;
    use crate::mqtt::state_text::StateText;
    use crate::mqtt::unit_json::UnitJson;

    /// A unit's attribute parts are named by the level table's own strings, so the store finds
    /// their levels by address.
    #[test]
    fn attribute_leaves_are_the_level_names_themselves() {
        let u: crate::cloud::model::UnitState = serde_json::from_str(
            r#"{"id":3,"name":"Desk","type":"Luminaire","on":true,"online":true,"status":"ok","priority":3,
              "condition":0,"activeSceneId":2,"firmwareVersion":"1.2","dimLevel":0.25,
              "controls":[{"type":"Dimmer","value":0.5},{"type":"CCT","min":2700,"max":6500,"value":3000}]}"#,
        )
        .unwrap();
        let mut text = StateText::default();
        UnitJson::of(&u, &Caps::of(&u, None)).write_parts(&mut text, true);
        text.push(Leaf::Below(AVAILABILITY), "online");
        assert_eq!(text.len(), 16, "the JSON, every scalar key of this unit and its availability");
        let availability = level_index("availability").unwrap();
        for (leaf, _) in text.parts().skip(1) {
            let Leaf::Below(name) = leaf else { panic!("{leaf:?}") };
            let level = level_index(name).unwrap();
            assert!(std::ptr::eq(name, level_at(level)), "{name}");
            // The same name elsewhere in memory is the level too, compared byte by byte.
            let copy: String = name.chars().collect();
            assert!(is_level(level, name) && is_level(level, &copy));
            assert_eq!(is_level(availability, name), name == "availability");
        }
    }

    #[test]
    fn datapoint_keys_with_a_meaning_are_levels_too() {
        for key in DATA_LEVELS {
            let level = level_index(key).unwrap();
            assert_eq!(level_at(level), key);
        }
        assert_eq!(level_index("a_vendor_key"), None);
    }

    #[test]
    fn leaves_match_only_their_own_topic() {
        assert!(is_leaf_of("b/n/unit/u", "b/n/unit/u", Leaf::State));
        assert!(is_leaf_of("b/n/unit/u/state", "b/n/unit/u", Leaf::Below("state")));
        assert!(!is_leaf_of("b/n/unit/u/state", "b/n/unit/u", Leaf::Below("brightness")));
        assert!(!is_leaf_of("b/n/unit/ux/state", "b/n/unit/u", Leaf::Below("state")));
        assert!(!is_leaf_of("b/n/unit/u/a/state", "b/n/unit/u", Leaf::Below("state")));
    }
}
