//! [`StaleCheck`]: the index a scan for stale retained topics asks about every topic it finds.

use super::levels::LEVEL_COUNT;
use super::owner_map::OwnerMap;
use super::owner_topics::{OwnerTopics, WHOLE, Walk, is_whole, slot_level};
use super::prints::fingerprint;

/// What a scan for stale retained topics holds while it asks [`super::Store::is_stale`] about
/// each topic it finds: an index of the attribute topics, which the store keeps only as levels
/// of their owners' names. The store builds it at the first question; the caller drops it when
/// the scan ends, and the memory with it.
///
/// While the owners have only gained names since it was built, a topic the index has is still
/// wanted, and only a topic it lacks builds it again: rebuilt on every change, a scan during the
/// start-up's datapoints (each turn adds owners) would walk every owner's names once per turn.
/// After an owner lost a name, the next question builds it again.
#[derive(Debug, Default)]
pub struct StaleCheck {
    /// Each whole name that has attribute topics below it, by fingerprint and sorted, with a bit
    /// for each of their levels.
    index: Box<[(u64, u64)]>,
    /// The store's [`super::Store::names_version`] and [`super::Store::removals_version`] the
    /// index was built at; `None` before it was.
    built_at: Option<(u64, u64)>,
}

impl StaleCheck {
    /// Whether some owner of `wanted` wants the attribute topic `level` below the whole name
    /// `base`, the store being at `version` (names, removals): in the index when that is exact,
    /// else in one built anew.
    pub(super) fn has_level(
        &mut self,
        wanted: &OwnerMap<OwnerTopics>,
        version: (u64, u64),
        base: &str,
        level: u8,
    ) -> bool {
        let key = fingerprint(base);
        if let Some(built) = self.built_at {
            // Nothing removed since: a topic the index has is wanted still.
            if built.1 == version.1 && self.indexed(key, level) {
                return true;
            }
            if built == version {
                return false;
            }
        }
        self.index = attribute_index(wanted);
        self.built_at = Some(version);
        self.indexed(key, level)
    }

    /// Whether the index has `level` below the whole name with fingerprint `key`.
    fn indexed(&self, key: u64, level: u8) -> bool {
        let index = &self.index;
        index.binary_search_by_key(&key, |(k, _)| *k).is_ok_and(|i| index[i].1 & (1 << level) != 0)
    }
}

/// The index of a [`StaleCheck`]. Two owners holding the same whole name (while a rename moves
/// it) give one entry with both owners' levels.
fn attribute_index(wanted: &OwnerMap<OwnerTopics>) -> Box<[(u64, u64)]> {
    const _: () = assert!(LEVEL_COUNT <= 64, "a level is a bit of a u64");
    // Counted first and sized exactly: grown by doubling, an index briefly takes twice its size.
    let has_attributes =
        |w: &OwnerTopics| w.slots().zip(w.slots().skip(1)).filter(|(a, b)| is_whole(*a) && !is_whole(*b)).count();
    let mut index = Vec::with_capacity(wanted.values().map(has_attributes).sum());
    for topics in wanted.values() {
        let mut walk = Walk::new("", topics.names());
        let mut entry: Option<(u64, u64)> = None;
        for slot in topics.slots() {
            let level = slot_level(slot);
            walk.step(level);
            if level == WHOLE {
                index.extend(entry.take());
            } else {
                entry.get_or_insert_with(|| (fingerprint(walk.base), 0)).1 |= 1 << level;
            }
        }
        index.extend(entry);
    }
    index.sort_unstable_by_key(|(key, _)| *key);
    index.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 |= later.1;
        }
        same
    });
    index.into_boxed_slice()
}
