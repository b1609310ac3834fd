//! What one owner wants of the store, compactly: a word per topic (a payload print and the
//! topic's level below the closest whole name) and the whole names in one string, with the walks
//! that give the names back and the index of the attribute topics a scan asks about.

use super::prints::{PRINT_BITS, PRINT_MASK, fingerprint, payload_print};
use crate::mqtt::owner_map::OwnerMap;
use crate::mqtt::state_text::{level_at, level_index};

/// What one owner wants, in publishing order: one word per topic, and its whole topic names
/// apart in one string. A big site has 400,000 wanted topics, 13 of a unit's 16 being attribute
/// topics one level below its state topic (`…/unit/lamp/brightness`): those are kept as the
/// number of that level alone ([`level_index`]), so a topic costs 8 bytes here, plus its name
/// once when it is a whole one (24 bytes a topic, and a heap block a whole name, before).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wants {
    /// One word per topic: the payload's [`payload_print`] in the low [`PRINT_BITS`] bits, and
    /// above them the topic's level below the closest whole name before it, or [`WHOLE`] when
    /// the topic is the next of `names`.
    pub(super) slots: Box<[u64]>,
    /// The whole names, in order, each ended by a NUL (which no MQTT topic may contain).
    pub(super) names: Box<str>,
}

/// The level of a slot whose topic is the owner's next whole name.
pub(super) const WHOLE: u64 = 0xFF;

/// A [`Wants`] slot: a payload's print and a level (or [`WHOLE`]).
pub(super) fn slot(print: u64, level: u64) -> u64 {
    (level << PRINT_BITS) | (print & PRINT_MASK)
}

pub(super) fn slot_level(slot: u64) -> u64 {
    (slot >> PRINT_BITS) & 0xFF
}

/// Walks an owner's whole names alongside its slots: after [`Walk::step`] to a slot, `base` is
/// the slot's whole name or the one its level is below.
pub(super) struct Walk<'n> {
    names: std::str::SplitTerminator<'n, char>,
    pub(super) base: &'n str,
}

impl<'n> Walk<'n> {
    /// A walk over `names` (each ended by a NUL), starting below `base`.
    pub(super) fn new(base: &'n str, names: &'n str) -> Self {
        Walk { names: names.split_terminator('\0'), base }
    }

    /// Moves to a slot of `level`: a whole name becomes the base.
    pub(super) fn step(&mut self, level: u64) {
        if level == WHOLE {
            self.base = self.names.next().unwrap_or_default();
        }
    }

    /// The topic of the slot just stepped to, of `level`.
    pub(super) fn topic(&self, level: u64) -> String {
        if level == WHOLE { String::from(self.base) } else { below(self.base, level) }
    }
}

/// The last `count` names of `names` (each ended by a NUL), as one string.
pub(super) fn last_names(names: &str, count: usize) -> &str {
    let bytes = names.as_bytes();
    let mut start = bytes.len();
    for _ in 0..count {
        // Past this name's own NUL, back to the end of the name before it.
        start = bytes[..start.saturating_sub(1)].iter().rposition(|b| *b == 0).map_or(0, |i| i + 1);
    }
    // Just after a NUL (or 0): always a character boundary.
    names.get(start..).unwrap_or_default()
}

/// The name of a level number of a slot ([`level_at`]).
pub(super) fn level_name(level: u64) -> &'static str {
    u8::try_from(level).map_or("", level_at)
}

/// The topic `level` below `base`.
pub(super) fn below(base: &str, level: u64) -> String {
    [base, level_name(level)].join("/")
}

/// The index of [`Store::is_desired`]: each whole name that has attribute topics below it, by
/// fingerprint and sorted, with a bit for each of their levels. Two owners holding the same
/// whole name (while a rename moves it) give one entry with both owners' levels.
pub(super) fn attribute_index(desired: &OwnerMap<Wants>) -> Box<[(u64, u64)]> {
    const _: () = assert!(crate::mqtt::state_text::LEVEL_COUNT <= 64, "a level is a bit of a u64");
    // Counted first and sized exactly: grown by doubling, an index briefly takes twice its size.
    let has_attributes =
        |w: &Wants| w.slots.windows(2).filter(|p| slot_level(p[0]) == WHOLE && slot_level(p[1]) != WHOLE).count();
    let mut index = Vec::with_capacity(desired.values().map(has_attributes).sum());
    for wants in desired.values() {
        let mut walk = Walk::new("", &wants.names);
        let mut entry: Option<(u64, u64)> = None;
        for slot in wants.slots.iter() {
            let level = slot_level(*slot);
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

impl Wants {
    /// The whole names of the topics, in order.
    pub(super) fn full_names(&self) -> Vec<String> {
        let mut walk = Walk::new("", &self.names);
        self.slots
            .iter()
            .map(|s| {
                walk.step(slot_level(*s));
                walk.topic(slot_level(*s))
            })
            .collect()
    }
}

/// `topics` as an owner's [`Wants`], levels below the previous whole name kept short.
pub(super) fn compact(topics: &[(String, String)]) -> Wants {
    let mut slots = Vec::with_capacity(topics.len());
    let mut names = String::new();
    let mut base: Option<&str> = None;
    for (topic, payload) in topics {
        let below = base
            .and_then(|b| topic.strip_prefix(b)?.strip_prefix('/'))
            .and_then(level_index)
            .map(u64::from)
            .filter(|level| *level != WHOLE);
        let level = match below {
            Some(level) => level,
            None => {
                base = Some(topic);
                names.push_str(topic);
                names.push('\0');
                WHOLE
            }
        };
        slots.push(slot(payload_print(payload), level));
    }
    Wants { slots: slots.into_boxed_slice(), names: names.into_boxed_str() }
}
