//! What one owner wants of the store, compactly: a word per topic (a payload print and the
//! topic's level below the closest whole name) and the whole names, in one block, with the walk
//! that gives the names back.

use super::levels::{level_at, level_index};
use super::prints::{PRINT_BITS, PRINT_MASK, payload_print};

/// What one owner wants, in publishing order: one word per topic, and its whole topic names
/// apart. Most of a unit's topics are attribute topics one level below its state topic
/// (`…/unit/lamp/brightness`): those are kept as the number of that level alone
/// ([`level_index`]), so a topic costs 8 bytes here, plus its name once when it is a whole one.
///
/// A slot holds the payload's [`payload_print`] in the low [`PRINT_BITS`] bits, and above them
/// the topic's level below the closest whole name before it, or [`WHOLE`] when the topic is the
/// next of the names (each ended by a NUL, which no MQTT topic may contain).
///
/// One heap block holds it all: the slot count (4 bytes, little-endian), the slots (8 bytes
/// each, little-endian), then the names. A big site has two records per unit (its own topics
/// and its datapoints'); a block for the slots and another for the names would make two
/// allocations of each record, each rounded up to its size class, and two pointers in the owner
/// map's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OwnerTopics {
    block: Box<[u8]>,
}

/// Bytes of the slot count at the start of a record's block.
const COUNT_BYTES: usize = 4;
/// Bytes of a slot.
const SLOT_BYTES: usize = 8;

/// A record's slots, to read and change in place ([`OwnerTopics::parts_mut`]).
pub(super) struct SlotsMut<'r>(&'r mut [u8]);

/// One slot of a [`SlotsMut`].
pub(super) struct SlotMut<'r>(&'r mut [u8]);

impl SlotsMut<'_> {
    /// How many slots there are.
    pub(super) fn len(&self) -> usize {
        self.0.len() / SLOT_BYTES
    }

    /// The slots from `from` on.
    pub(super) fn starting_at(&self, from: usize) -> impl Iterator<Item = u64> + Clone + '_ {
        self.0.get(from * SLOT_BYTES..).unwrap_or_default().chunks_exact(SLOT_BYTES).map(word)
    }

    /// The slots from `from` on, to change.
    pub(super) fn starting_at_mut(&mut self, from: usize) -> impl Iterator<Item = SlotMut<'_>> {
        self.0.get_mut(from * SLOT_BYTES..).unwrap_or_default().chunks_exact_mut(SLOT_BYTES).map(SlotMut)
    }
}

impl SlotMut<'_> {
    /// The slot.
    pub(super) fn get(&self) -> u64 {
        word(self.0)
    }

    /// Writes the slot.
    pub(super) fn set(&mut self, slot: u64) {
        self.0.copy_from_slice(&slot.to_le_bytes());
    }
}

/// The slot in `bytes` (a slot's width of them).
fn word(bytes: &[u8]) -> u64 {
    bytes.try_into().map_or(0, u64::from_le_bytes)
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
        let count = u32::try_from(slots.len()).unwrap_or(u32::MAX);
        let mut block = Vec::with_capacity(COUNT_BYTES + slots.len() * SLOT_BYTES + names.len());
        block.extend_from_slice(&count.to_le_bytes());
        for slot in &slots {
            block.extend_from_slice(&slot.to_le_bytes());
        }
        block.extend_from_slice(names.as_bytes());
        OwnerTopics { block: block.into_boxed_slice() }
    }

    /// How many topics the owner wants.
    pub(super) fn len(&self) -> usize {
        let count = self.block.get(..COUNT_BYTES).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes);
        usize::try_from(count).unwrap_or(0)
    }

    /// Whether the owner wants no topic.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The end of the slots in the block.
    fn slots_end(&self) -> usize {
        // Saturating: the names' text begins here, so this must never wrap around.
        COUNT_BYTES.saturating_add(self.len().saturating_mul(SLOT_BYTES)).min(self.block.len())
    }

    /// The slots, in order.
    pub(super) fn slots(&self) -> impl Iterator<Item = u64> + Clone + '_ {
        self.block.get(COUNT_BYTES..self.slots_end()).unwrap_or_default().chunks_exact(SLOT_BYTES).map(word)
    }

    /// The whole names, in order, each ended by a NUL (which no MQTT topic may contain).
    pub(super) fn names(&self) -> &str {
        names_text(self.block.get(self.slots_end()..).unwrap_or_default())
    }

    /// The slots to change in place, and the names beside them.
    pub(super) fn parts_mut(&mut self) -> (SlotsMut<'_>, &str) {
        let end = self.slots_end();
        let (head, names) = self.block.split_at_mut(end);
        (SlotsMut(head.get_mut(COUNT_BYTES..).unwrap_or_default()), names_text(names))
    }

    /// Writes the prints of `other`, a record of the same topics, over this one's: the record
    /// stays in its block.
    pub(super) fn take_prints(&mut self, other: &OwnerTopics) {
        let (mut slots, _) = self.parts_mut();
        for (mut mine, theirs) in slots.starting_at_mut(0).zip(other.slots()) {
            mine.set(theirs);
        }
    }

    /// Where the record's block is (for the tests that check it stays).
    #[cfg(test)]
    pub(super) fn block_address(&self) -> *const u8 {
        self.block.as_ptr()
    }

    /// The size of the record's block (for the tests of its layout).
    #[cfg(test)]
    pub(super) fn block_len(&self) -> usize {
        self.block.len()
    }

    /// The full names of the topics, in order.
    pub(super) fn full_names(&self) -> Vec<String> {
        let mut walk = Walk::new("", self.names());
        self.slots()
            .map(|s| {
                walk.step(slot_level(s));
                walk.topic(slot_level(s))
            })
            .collect()
    }
}

/// The names part of a record's block as text, unchecked: every state change reads it, and
/// checking it as UTF-8 each time would cost more than reading the record does.
fn names_text(names: &[u8]) -> &str {
    // SAFETY: `names` is always a block's bytes from `slots_end` on. `OwnerTopics::new` writes
    // them from a `String`, starting right after the slots the count it writes covers; nothing
    // changes the count or those bytes afterwards (`SlotsMut` reaches the slots alone), so they
    // are the string's bytes, whole: UTF-8.
    unsafe { std::str::from_utf8_unchecked(names) }
}
