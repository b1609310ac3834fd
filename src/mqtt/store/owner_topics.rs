//! What one owner wants of the store, compactly: a word per topic (a payload print and the
//! topic's level below the closest whole name) and the whole names in one string, with the walk
//! that gives the names back.

use super::levels::{level_at, level_index};
use super::prints::{PRINT_BITS, PRINT_MASK, payload_print};

/// What one owner wants, in publishing order: one word per topic, and its whole topic names
/// apart in one string. Most of a unit's topics are attribute topics one level below its state
/// topic (`…/unit/lamp/brightness`): those are kept as the number of that level alone
/// ([`level_index`]), so a topic costs 8 bytes here, plus its name once when it is a whole one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OwnerTopics {
    /// One word per topic: the payload's [`payload_print`] in the low [`PRINT_BITS`] bits, and
    /// above them the topic's level below the closest whole name before it, or [`WHOLE`] when
    /// the topic is the next of `names`.
    pub(super) slots: Box<[u64]>,
    /// The whole names, in order, each ended by a NUL (which no MQTT topic may contain).
    pub(super) names: Box<str>,
}

/// The level of a slot whose topic is the owner's next whole name.
pub(super) const WHOLE: u64 = 0xFF;

/// A slot of [`OwnerTopics`]: a payload's print and a level (or [`WHOLE`]).
pub(super) fn slot(print: u64, level: u64) -> u64 {
    (level << PRINT_BITS) | (print & PRINT_MASK)
}

/// The level of a slot ([`WHOLE`] for a whole name).
pub(super) fn slot_level(slot: u64) -> u64 {
    (slot >> PRINT_BITS) & 0xFF
}

/// Whether a slot's topic is a whole name (not a level below one).
pub(super) fn is_whole(slot: u64) -> bool {
    slot_level(slot) == WHOLE
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

/// The topic `level` below `base`.
fn below(base: &str, level: u64) -> String {
    [base, u8::try_from(level).map_or("", level_at)].join("/")
}

impl OwnerTopics {
    /// `topics` compacted: a level below the previous whole name is kept as its number.
    pub(super) fn of(topics: &[(String, String)]) -> OwnerTopics {
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
        OwnerTopics { slots: slots.into_boxed_slice(), names: names.into_boxed_str() }
    }

    /// The full names of the topics, in order.
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
