//! The retained topics the bridge wants on the broker and the ones it has published, and the
//! operations that take the broker from one to the other.
//!
//! Only differences are published, so identical state never produces a duplicate retained
//! message. A topic is cleared (empty retained payload) when no owner wants it any more — this is
//! how a removed or renamed unit, group or scene loses every topic it had, not only its discovery.
//!
//! The store keeps names, 64-bit topic fingerprints and 48-bit payload prints, never payloads:
//! on a site of 25,000 units the payloads are ~50 MB (most of it discovery configs) and the
//! bridge's mirror can render any of them again in microseconds. Topic names are kept once, in
//! the owners' lists (an attribute topic as the number of its level alone); the other maps are
//! keyed by the topic's fingerprint, and hold whole names only: an attribute topic is its owner's
//! alone, and its slot's print is all that is kept of it. What needs a payload again — a
//! republication after a reconnection or Home Assistant's birth, the text of a previous discovery
//! config — renders it from the mirror ([`super::plan`], [`super::publisher`]).

use super::owner_map::OwnerMap;
use super::render::{Owner, Topics};
use super::state_text::{Leaf, StateText, is_leaf_of, level_at, level_index};
// foldhash: the store hashes every topic it publishes; SipHash's DoS resistance buys nothing
// for topics this process made itself, and costs several times more per lookup.
use foldhash::{HashMap, HashSet};

/// One broker operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Publish `payload` retained on `topic`; `previous` is the text published there before, when
    /// the caller knows it (only device discovery configs need it: see
    /// [`super::discovery::removal_step`]).
    Publish {
        /// Topic.
        topic: String,
        /// Payload.
        payload: String,
        /// The payload last published on the topic, if known.
        previous: Option<String>,
    },
    /// Publish an empty retained payload on `topic` (deletes the retained message).
    Clear {
        /// Topic.
        topic: String,
    },
}

/// What [`Store::record`] needs of an operation: taken before the operation's strings are handed
/// to the MQTT client, so that they move there instead of being copied.
#[derive(Debug)]
pub enum Receipt {
    /// A publication: the topic's fingerprint and the payload's print.
    Published {
        /// The topic's fingerprint.
        key: u64,
        /// The payload's print.
        payload: u64,
    },
    /// A clear: the topic's fingerprint and name (kept until the next connection).
    Cleared {
        /// The topic's fingerprint.
        key: u64,
        /// The topic.
        topic: Box<str>,
    },
}

impl Receipt {
    /// The receipt of `op`.
    pub fn of(op: &Op) -> Receipt {
        match op {
            Op::Publish { topic, payload, .. } => {
                Receipt::Published { key: fingerprint(topic), payload: payload_print(payload) }
            }
            Op::Clear { topic } => Receipt::Cleared { key: fingerprint(topic), topic: topic.as_str().into() },
        }
    }
}

/// What one owner wants, in publishing order: one word per topic, and its whole topic names
/// apart in one string. A big site has 400,000 wanted topics, 13 of a unit's 16 being attribute
/// topics one level below its state topic (`…/unit/lamp/brightness`): those are kept as the
/// number of that level alone ([`level_index`]), so a topic costs 8 bytes here, plus its name
/// once when it is a whole one (24 bytes a topic, and a heap block a whole name, before).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wants {
    /// One word per topic: the payload's [`payload_print`] in the low [`PRINT_BITS`] bits, and
    /// above them the topic's level below the closest whole name before it, or [`WHOLE`] when
    /// the topic is the next of `names`.
    slots: Box<[u64]>,
    /// The whole names, in order, each ended by a NUL (which no MQTT topic may contain).
    names: Box<str>,
}

/// The level of a slot whose topic is the owner's next whole name.
const WHOLE: u64 = 0xFF;

/// A [`Wants`] slot: a payload's print and a level (or [`WHOLE`]).
fn slot(print: u64, level: u64) -> u64 {
    (level << PRINT_BITS) | (print & PRINT_MASK)
}

/// The payload print in the low [`PRINT_BITS`] bits of a word (a slot or a [`TopicState`]).
fn print_of(word: u64) -> u64 {
    word & PRINT_MASK
}

/// `word` with `print` in its low [`PRINT_BITS`] bits, the bits above kept.
fn with_print(word: u64, print: u64) -> u64 {
    (word & !PRINT_MASK) | (print & PRINT_MASK)
}

fn slot_level(slot: u64) -> u64 {
    (slot >> PRINT_BITS) & 0xFF
}

/// Walks an owner's whole names alongside its slots: after [`Walk::step`] to a slot, `base` is
/// the slot's whole name or the one its level is below.
struct Walk<'n> {
    names: std::str::SplitTerminator<'n, char>,
    base: &'n str,
}

impl<'n> Walk<'n> {
    /// A walk over `names` (each ended by a NUL), starting below `base`.
    fn new(base: &'n str, names: &'n str) -> Self {
        Walk { names: names.split_terminator('\0'), base }
    }

    /// Moves to a slot of `level`: a whole name becomes the base.
    fn step(&mut self, level: u64) {
        if level == WHOLE {
            self.base = self.names.next().unwrap_or_default();
        }
    }

    /// The topic of the slot just stepped to, of `level`.
    fn topic(&self, level: u64) -> String {
        if level == WHOLE { String::from(self.base) } else { below(self.base, level) }
    }
}

/// The last `count` names of `names` (each ended by a NUL), as one string.
fn last_names(names: &str, count: usize) -> &str {
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
fn level_name(level: u64) -> &'static str {
    u8::try_from(level).map_or("", level_at)
}

/// The topic `level` below `base`.
fn below(base: &str, level: u64) -> String {
    [base, level_name(level)].join("/")
}

/// The index of [`Store::is_desired`]: each whole name that has attribute topics below it, by
/// fingerprint and sorted, with a bit for each of their levels. Two owners holding the same
/// whole name (while a rename moves it) give one entry with both owners' levels.
fn attribute_index(desired: &OwnerMap<Wants>) -> Box<[(u64, u64)]> {
    const _: () = assert!(super::state_text::LEVEL_COUNT <= 64, "a level is a bit of a u64");
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
    fn full_names(&self) -> Vec<String> {
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
fn compact(topics: &[(String, String)]) -> Wants {
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

/// Desired and published retained topics.
#[derive(Debug, Default)]
pub struct Store {
    /// What each owner wants, in publishing order, by network and id ([`OwnerMap`]: one hash map
    /// of all owners was a half-empty 4 MiB table on a big site). Boxed slices and strings: a
    /// list never grows in place, and each is a word shorter than a `Vec` or a `String`.
    desired: OwnerMap<Wants>,
    /// What is known of each whole topic name that is wanted or published, by the name's
    /// fingerprint: how many owners want it, what was published there. An attribute topic has no
    /// entry (on a big site 320,000 of the 400,000 topics, 6.7 MB of map): it belongs to the
    /// owner of the whole name it is below, and its slot's print is what was last handed over
    /// (every connection publishes everything again, so that is what the broker has).
    topics: HashMap<u64, TopicState>,
    /// Every whole name with wanted attribute topics below it, by fingerprint (sorted), with
    /// the set of their levels as bits, while a scan for stale topics asks
    /// ([`Store::is_desired`]); dropped when the owners' names change, and by
    /// [`Store::forget_index`].
    attributes: Option<Box<[(u64, u64)]>>,
    /// Names of published topics that nobody wants any more, until their clear reaches the
    /// client (while disconnected, the next connection's resync clears them).
    orphans: HashMap<u64, Box<str>>,
    /// Topics cleared on the current connection. Handing a clear to the client does not mean
    /// the broker got it: when the connection drops, the client discards what it had not
    /// delivered (a clean session resumes nothing) while the broker keeps the old retained
    /// message. So the next connection clears these again, unless they are wanted by then.
    cleared: HashMap<u64, Box<str>>,
}

/// One whole name's bookkeeping in [`Store::topics`], in one word so that a map entry is 16
/// bytes instead of 24:
/// - the low [`PRINT_BITS`] bits: the [`payload_print`] of what this process last published
///   there since the last connection, 0 when nothing was (no print is 0);
/// - the high bits: how many owners want the topic. Usually one; a count lets a topic taken over
///   by another owner survive the removal of its first owner. Owners of one topic share its
///   name, so the count never comes near the 65,535 it can hold (it saturates there).
#[derive(Debug, Default, Clone, Copy)]
struct TopicState(u64);

/// Bits of a payload's [`payload_print`].
const PRINT_BITS: u32 = 48;
const PRINT_MASK: u64 = (1 << PRINT_BITS) - 1;

impl TopicState {
    fn published(self) -> u64 {
        print_of(self.0)
    }

    fn set_published(&mut self, print: u64) {
        self.0 = with_print(self.0, print);
    }

    fn wanted(self) -> u64 {
        self.0 >> PRINT_BITS
    }

    fn set_wanted(&mut self, count: u64) {
        self.0 = (count.min(u64::MAX >> PRINT_BITS) << PRINT_BITS) | self.published();
    }
}

/// The hasher of [`fingerprint`]: fixed, so equal texts always agree.
const FINGERPRINT: foldhash::quality::FixedState = foldhash::quality::FixedState::with_seed(0x6361_7361_6d62_6932);

/// A topic's 64-bit fingerprint, the key of its bookkeeping: two of a site's 400,000 topics
/// share one with a probability of about 4·10⁻⁹ (they would then share their bookkeeping).
/// Never 0 (taken as 1).
fn fingerprint(text: &str) -> u64 {
    std::hash::BuildHasher::hash_one(&FINGERPRINT, text).max(1)
}

/// A payload's 48-bit print. Two different payloads of one topic agree with a probability of
/// 2⁻⁴⁸ (one in 280 million million changes): the store would then skip one publication, until
/// the next change of that topic. Never 0, which [`TopicState::published`] uses for "nothing".
fn payload_print(payload: &str) -> u64 {
    (fingerprint(payload) & PRINT_MASK).max(1)
}

/// Records `payload` as wanted in the `slot` of `topic` and, when it changed (and, for a whole
/// name, differs from what was published there), its publication. Unchanged since the last
/// render (most attribute topics of a change): what was published is already this, or the next
/// connection's resync sends it; this skips building the topic, most of the cost on a big site.
fn note_state(
    topics: &HashMap<u64, TopicState>,
    slot: &mut u64,
    topic: impl FnOnce() -> String,
    payload: &str,
    ops: &mut Vec<Op>,
) {
    let new = payload_print(payload);
    if print_of(*slot) == new {
        return;
    }
    *slot = with_print(*slot, new);
    let topic = topic();
    // An attribute topic's slot is its only record: a changed print is a publication.
    if slot_level(*slot) != WHOLE || topics.get(&fingerprint(&topic)).map(|t| t.published()) != Some(new) {
        // State topics are never discovery configs, so no `previous` is needed.
        ops.push(Op::Publish { topic, payload: payload.to_string(), previous: None });
    }
}

impl Store {
    /// Sets what `owner` wants and returns the operations that bring the broker there: changed
    /// or new topics are published (in `topics` order), topics nobody wants any more are cleared.
    pub fn set(&mut self, owner: Owner, topics: Topics) -> Vec<Op> {
        let old = self.desired.remove(&owner);
        let old_slots: &[u64] = old.as_ref().map_or(&[], |w| &w.slots);
        let old_names = old.as_ref().map(Wants::full_names).unwrap_or_default();
        // The common case (a state change) keeps the owner's topics: the counts then stay as
        // they are and nothing can become unwanted.
        let same_topics = old_names.len() == topics.len() && old_names.iter().zip(&topics).all(|(a, b)| *a == b.0);
        let new = compact(&topics);
        let mut clears = Vec::new();
        // What the old attribute topics last had, by name (their slots are their only record).
        let mut old_prints: HashMap<&str, u64> = HashMap::default();
        if !same_topics {
            self.attributes = None;
            for (name, slot) in old_names.iter().zip(old_slots) {
                if slot_level(*slot) == WHOLE {
                    self.unwant(fingerprint(name));
                } else {
                    old_prints.insert(name, print_of(*slot));
                }
            }
            for ((topic, _), slot) in topics.iter().zip(&new.slots) {
                let key = fingerprint(topic);
                if slot_level(*slot) == WHOLE {
                    self.want(key);
                }
                self.orphans.remove(&key);
            }
            clears = self.unwanted(&old_names, old_slots, &topics);
        }
        let mut ops = Vec::new();
        for (i, ((topic, payload), slot)) in topics.into_iter().zip(&new.slots).enumerate() {
            let print = print_of(*slot);
            let last = if slot_level(*slot) == WHOLE {
                self.published(fingerprint(&topic))
            } else if same_topics {
                old_slots.get(i).map(|s| print_of(*s))
            } else {
                old_prints.get(topic.as_str()).copied()
            };
            if last != Some(print) {
                ops.push(Op::Publish { topic, payload, previous: None });
            }
        }
        for topic in clears {
            self.orphans.insert(fingerprint(&topic), topic.as_str().into());
            ops.push(Op::Clear { topic });
        }
        if !new.slots.is_empty() {
            self.desired.insert(&owner, new);
        }
        ops
    }

    /// The old topics of an owner (`names`, `slots`) that must be cleared now that it wants
    /// `topics` (the counts already moved): a whole name nobody wants that was published; an
    /// attribute topic that is not among `topics` and whose whole name no other owner wants (one
    /// that does is taken to have it too: owners share a name only while a rename moves it).
    fn unwanted(&self, names: &[String], slots: &[u64], topics: &Topics) -> Vec<String> {
        let new_names: HashSet<&str> = topics.iter().map(|(t, _)| t.as_str()).collect();
        // Whether another owner holds the whole name the next attribute topics are below.
        let mut base_held = false;
        let mut clears = Vec::new();
        for (name, slot) in names.iter().zip(slots) {
            let stale = if slot_level(*slot) == WHOLE {
                let key = fingerprint(name);
                base_held = self.wanted_by(key) > u64::from(new_names.contains(name.as_str()));
                !self.is_wanted(key) && self.published(key).is_some()
            } else {
                !new_names.contains(name.as_str()) && !base_held
            };
            if stale {
                clears.push(name.clone());
            }
        }
        clears
    }

    /// One owner more wants the topic with fingerprint `key`.
    fn want(&mut self, key: u64) {
        let t = self.topics.entry(key).or_default();
        t.set_wanted(t.wanted() + 1);
    }

    /// One owner less wants the topic with fingerprint `key`.
    fn unwant(&mut self, key: u64) {
        if let Some(t) = self.topics.get_mut(&key) {
            t.set_wanted(t.wanted().saturating_sub(1));
        }
        self.prune(key);
    }

    /// Forgets the topic with fingerprint `key` once nobody wants it and nothing is published
    /// there.
    fn prune(&mut self, key: u64) {
        if self.topics.get(&key).is_some_and(|t| t.0 == 0) {
            self.topics.remove(&key);
        }
    }

    /// How many owners want the whole name with fingerprint `key`.
    fn wanted_by(&self, key: u64) -> u64 {
        self.topics.get(&key).map_or(0, |t| t.wanted())
    }

    /// Whether some owner wants the whole name with fingerprint `key`.
    fn is_wanted(&self, key: u64) -> bool {
        self.wanted_by(key) > 0
    }

    /// The print of what was last published on the topic with fingerprint `key`.
    fn published(&self, key: u64) -> Option<u64> {
        self.topics.get(&key).map(|t| t.published()).filter(|p| *p != 0)
    }

    /// The fast path of a state change: when `owner`'s topics end with exactly the parts of
    /// `text` (its state topic, for which `is_state_topic` holds, then the same leaves below it
    /// in the same order), only those payloads are compared and the changed ones recorded; the
    /// rest of the owner's topics (its discovery configs) are not touched, and no topic string is
    /// built unless its payload changed.
    /// `None` when the names differ: the caller then renders and [`Store::set`]s everything.
    pub fn update_state(
        &mut self,
        owner: &Owner,
        text: &StateText,
        is_state_topic: impl Fn(&str) -> bool,
    ) -> Option<Vec<Op>> {
        let Wants { slots, names } = self.desired.get_mut(owner)?;
        let start = slots.len().checked_sub(text.len())?;
        let (state_slot, rest) = slots[start..].split_first_mut()?;
        // The state topic is a whole name, and the whole names of these slots are the owner's
        // last ones: found from the end, without walking its discovery topics' names.
        if slot_level(*state_slot) != WHOLE {
            return None;
        }
        let wholes = 1 + rest.iter().filter(|s| slot_level(**s) == WHOLE).count();
        let (state_topic, more_names) = last_names(names, wholes).split_once('\0')?;
        let mut parts = text.parts();
        let (state_leaf, state_payload) = parts.next()?;
        // The state topic in full, then the same levels below it (a short level is below the
        // whole name before it, which must then be the state topic).
        let mut walk = Walk::new(state_topic, more_names);
        let mut below_state = true;
        let same_names = is_state_topic(state_topic)
            && matches!(state_leaf, Leaf::State)
            && rest.iter().zip(parts.clone()).all(|(s, (leaf, _))| {
                walk.step(slot_level(*s));
                match (slot_level(*s), leaf) {
                    (WHOLE, leaf) => {
                        below_state = matches!(leaf, Leaf::State);
                        is_leaf_of(walk.base, state_topic, leaf)
                    }
                    (level, Leaf::Below(key)) => below_state && level_name(level) == key,
                    (_, Leaf::State) => false,
                }
            });
        if !same_names {
            return None;
        }
        let mut ops = Vec::new();
        note_state(&self.topics, state_slot, || String::from(state_topic), state_payload, &mut ops);
        let mut walk = Walk::new(state_topic, more_names);
        for (slot, (_, payload)) in rest.iter_mut().zip(parts) {
            let level = slot_level(*slot);
            walk.step(level);
            note_state(&self.topics, slot, || walk.topic(level), payload, &mut ops);
        }
        Some(ops)
    }

    /// Drops `owner` and returns the clears of its topics.
    pub fn remove(&mut self, owner: &Owner) -> Vec<Op> {
        self.set(owner.clone(), Vec::new())
    }

    /// Whether `owner` wants exactly `topics` (names, order and payloads).
    pub fn wants(&self, owner: &Owner, topics: &[(String, String)]) -> bool {
        let Some(current) = self.desired.get(owner) else { return topics.is_empty() };
        current.slots.len() == topics.len()
            && current
                .full_names()
                .iter()
                .zip(&current.slots)
                .zip(topics)
                .all(|((n, s), (t, p))| n == t && print_of(*s) == payload_print(p))
    }

    /// The names of the topics `owner` wants, in publishing order.
    pub fn topics_of(&self, owner: &Owner) -> Vec<String> {
        self.desired.get(owner).map_or_else(Vec::new, Wants::full_names)
    }

    /// The owners of one network's topics.
    pub fn owners_of(&self, network: &str) -> Vec<Owner> {
        self.desired.owners_of(network)
    }

    /// Records that `op` reached the client.
    pub fn sent(&mut self, op: &Op) {
        self.record(Receipt::of(op));
    }

    /// Records an operation that reached the client by its [`Receipt`].
    pub fn record(&mut self, receipt: Receipt) {
        match receipt {
            Receipt::Published { key, payload } => {
                self.cleared.remove(&key);
                // Only whole names have an entry (every one wanted has); an attribute topic's
                // slot already holds its print.
                if let Some(t) = self.topics.get_mut(&key) {
                    t.set_published(payload);
                }
            }
            Receipt::Cleared { key, topic } => {
                if let Some(t) = self.topics.get_mut(&key) {
                    t.set_published(0);
                }
                self.prune(key);
                self.orphans.remove(&key);
                self.cleared.insert(key, topic);
            }
        }
    }

    /// The start of a new connection: what the broker holds is unknown again, so every wanted
    /// topic must be republished (rendered by the caller, owner by owner) and the returned clears
    /// sent first: published topics nobody wants, and the topics cleared on the previous
    /// connection (that clear may have been lost with it) unless wanted again. Sorted by name.
    pub fn resync(&mut self) -> Vec<Op> {
        let mut stale: Vec<String> = self
            .orphans
            .values()
            .chain(self.cleared.iter().filter(|(k, _)| !self.is_wanted(**k)).map(|(_, t)| t))
            .map(|t| t.to_string())
            .collect();
        stale.sort();
        stale.dedup();
        // The clears sent now are recorded again as they go out.
        self.cleared.clear();
        stale.into_iter().map(|topic| Op::Clear { topic }).collect()
    }

    /// Whether some owner wants `topic`. An attribute topic is looked up in an index of the
    /// whole names that have attributes, each with the set of its levels (0.4 MB on a big site
    /// instead of 2.6 MB for a fingerprint of every attribute topic, and that index set the
    /// bridge's peak during the scan). It is made at the first such question and kept until the
    /// owners' names change or [`Store::forget_index`]: a scan for stale topics asks about every
    /// topic.
    pub fn is_desired(&mut self, topic: &str) -> bool {
        if self.is_wanted(fingerprint(topic)) {
            return true;
        }
        // An attribute topic is its whole name, a slash and a level ([`compact`]).
        let Some((base, level)) = topic.rsplit_once('/').and_then(|(base, leaf)| Some((base, level_index(leaf)?)))
        else {
            return false;
        };
        let desired = &self.desired;
        let index = self.attributes.get_or_insert_with(|| attribute_index(desired));
        let base = fingerprint(base);
        index.binary_search_by_key(&base, |(key, _)| *key).is_ok_and(|i| index[i].1 & (1 << level) != 0)
    }

    /// Drops the index [`Store::is_desired`] made (the scan that asked is over).
    pub fn forget_index(&mut self) {
        self.attributes = None;
    }

    /// Whether this process has published `topic` (and not cleared it).
    pub fn is_published(&self, topic: &str) -> bool {
        self.published(fingerprint(topic)).is_some()
    }

    /// Whether what this process last published on `topic` is `text`.
    pub fn published_is(&self, topic: &str, text: &str) -> bool {
        self.published(fingerprint(topic)) == Some(payload_print(text))
    }

    /// How many topics are wanted (for tests: it walks everything).
    pub fn len(&self) -> usize {
        let attributes = self.desired.values().flat_map(|w| w.slots.iter()).filter(|s| slot_level(**s) != WHOLE);
        self.topics.values().filter(|t| t.wanted() > 0).count() + attributes.count()
    }

    /// Whether no topic is wanted.
    pub fn is_empty(&self) -> bool {
        self.desired.is_empty() && self.topics.values().all(|t| t.wanted() == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mqtt::state_text::Leaf;

    fn t(pairs: &[(&str, &str)]) -> Topics {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    fn apply(s: &mut Store, ops: &[Op]) {
        for op in ops {
            s.sent(op);
        }
    }

    fn publish(topic: &str, payload: &str) -> Op {
        Op::Publish { topic: topic.into(), payload: payload.into(), previous: None }
    }

    fn clear(topic: &str) -> Op {
        Op::Clear { topic: topic.into() }
    }

    #[test]
    fn only_changes_are_published() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("a", "1"), ("b", "2")]));
        assert_eq!(ops, vec![publish("a", "1"), publish("b", "2")]);
        apply(&mut s, &ops);
        assert!(s.set(o.clone(), t(&[("a", "1"), ("b", "2")])).is_empty());
        assert_eq!(s.set(o.clone(), t(&[("a", "1"), ("b", "3")])), vec![publish("b", "3")]);
        assert!(s.wants(&o, &t(&[("a", "1"), ("b", "3")])));
        assert!(!s.wants(&o, &t(&[("a", "1"), ("b", "2")])));
        assert_eq!(s.topics_of(&o), vec!["a", "b"]);
        assert_eq!(s.len(), 2);
    }

    /// The state parts `(leaf, payload)`, leaf `""` for the state topic itself.
    fn text(parts: &[(&'static str, &str)]) -> StateText {
        let mut text = StateText::default();
        for (leaf, payload) in parts {
            let leaf = if leaf.is_empty() { Leaf::State } else { Leaf::Below(leaf) };
            text.push(leaf, payload);
        }
        text
    }

    #[test]
    fn a_state_update_touches_only_the_state_and_agrees_with_a_full_set() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let is_state = |t: &str| t == "state";
        let ops = s.set(o.clone(), t(&[("cfg", "x"), ("state", "1"), ("state/a", "on")]));
        apply(&mut s, &ops);
        let ops = s.update_state(&o, &text(&[("", "2"), ("a", "on")]), is_state).unwrap();
        assert_eq!(ops, vec![publish("state", "2")]);
        apply(&mut s, &ops);
        assert!(s.wants(&o, &t(&[("cfg", "x"), ("state", "2"), ("state/a", "on")])));
        // Nothing changed: nothing to publish, even though the store was told again.
        assert!(s.update_state(&o, &text(&[("", "2"), ("a", "on")]), is_state).unwrap().is_empty());
        // Changed back before it went out (disconnected): wanted again, but nothing to publish,
        // since it is what was published.
        let _unsent = s.update_state(&o, &text(&[("", "3"), ("a", "on")]), is_state).unwrap();
        assert!(s.update_state(&o, &text(&[("", "2"), ("a", "on")]), is_state).unwrap().is_empty());
        // Other names (an attribute appeared), another state topic, a longer list, an unknown
        // owner: the caller sets all.
        assert!(s.update_state(&o, &text(&[("", "2"), ("b", "1")]), is_state).is_none());
        assert!(s.update_state(&o, &text(&[("", "2"), ("a", "on")]), |t| t == "other").is_none());
        assert!(s.update_state(&o, &text(&[("", "1"), ("a", "2"), ("b", "3"), ("c", "4")]), is_state).is_none());
        assert!(s.update_state(&Owner::Unit("n".into(), 2), &text(&[("", "2")]), is_state).is_none());
        assert!(s.wants(&o, &t(&[("cfg", "x"), ("state", "2"), ("state/a", "on")])));
    }

    #[test]
    fn the_published_text_can_be_checked() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("cfg", "x")]));
        assert!(!s.published_is("cfg", "x"), "not sent yet");
        apply(&mut s, &ops);
        assert!(s.published_is("cfg", "x"));
        assert!(!s.published_is("cfg", "y"));
        assert!(!s.published_is("other", "x"));
    }

    #[test]
    fn renamed_topics_are_published_then_old_ones_cleared() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("cfg", "x"), ("old", "1")]));
        apply(&mut s, &ops);
        let ops = s.set(o.clone(), t(&[("cfg", "y"), ("new", "1")]));
        assert_eq!(ops, vec![publish("cfg", "y"), publish("new", "1"), clear("old")]);
        apply(&mut s, &ops);
        assert!(!s.is_desired("old") && !s.is_published("old"));
        let ops = s.remove(&o);
        assert_eq!(ops, vec![clear("cfg"), clear("new")]);
        apply(&mut s, &ops);
        assert!(s.is_empty());
    }

    #[test]
    fn a_topic_not_yet_published_is_not_cleared() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let _unsent = s.set(o.clone(), t(&[("x", "1")]));
        assert!(s.remove(&o).is_empty());
        assert!(s.resync().is_empty());
    }

    #[test]
    fn a_topic_taken_over_by_another_owner_is_not_cleared() {
        let mut s = Store::default();
        let a = Owner::Unit("n".into(), 1);
        let b = Owner::Unit("n".into(), 2);
        let ops = s.set(a.clone(), t(&[("x", "a")]));
        apply(&mut s, &ops);
        let ops = s.set(b.clone(), t(&[("x", "b")]));
        apply(&mut s, &ops);
        assert!(s.remove(&a).is_empty(), "x now belongs to b");
        assert!(s.is_desired("x"));
        assert_eq!(s.remove(&b), vec![clear("x")]);
    }

    #[test]
    fn a_clear_lost_with_the_connection_is_sent_again_on_the_next_one() {
        let mut s = Store::default();
        let a = Owner::Unit("n".into(), 1);
        let ops = s.set(a.clone(), t(&[("old", "1")]));
        apply(&mut s, &ops);
        // Renamed: the clear of the old topic reaches the client, then the connection drops
        // before the broker got it.
        let ops = s.set(a.clone(), t(&[("new", "1")]));
        apply(&mut s, &ops);
        assert_eq!(s.resync(), vec![clear("old")]);
        apply(&mut s, &[clear("old")]);
        // A topic wanted again is published, not cleared.
        let ops = s.set(a.clone(), t(&[("old", "2")]));
        assert_eq!(ops, vec![publish("old", "2"), clear("new")]);
        apply(&mut s, &ops);
        assert_eq!(s.resync(), vec![clear("new")]);
    }

    #[test]
    fn a_topic_state_keeps_its_count_and_its_print_apart() {
        let mut t = TopicState::default();
        t.set_published(payload_print("payload"));
        t.set_wanted(3);
        assert_eq!((t.wanted(), t.published()), (3, payload_print("payload")));
        t.set_published(0);
        assert_eq!((t.wanted(), t.published()), (3, 0));
        t.set_wanted(u64::MAX);
        assert_eq!(t.wanted(), 65_535, "the count saturates");
        t.set_published(u64::MAX);
        assert_eq!((t.wanted(), t.published()), (65_535, PRINT_MASK), "a print never spills into the count");
        t.set_wanted(0);
        t.set_published(0);
        assert_eq!(t.0, 0, "nothing left: pruned");
        assert!((1..=PRINT_MASK).contains(&payload_print("")), "a print is never 0 and fits its bits");
    }

    #[test]
    fn resync_clears_what_was_published_and_is_no_longer_wanted() {
        let mut s = Store::default();
        let a = Owner::Unit("n".into(), 1);
        let ops = s.set(a.clone(), t(&[("x", "1"), ("y", "1")]));
        apply(&mut s, &ops);
        // Disconnected: the removal is not sent.
        let _unsent = s.remove(&a);
        let _unsent = s.set(Owner::Bridge, t(&[("b", "1"), ("y", "2")]));
        assert_eq!(s.resync(), vec![clear("x")]);
        assert!(s.is_desired("b") && s.is_desired("y") && !s.is_desired("x"));
    }

    #[test]
    fn a_short_level_below_another_whole_name_is_not_taken_for_a_state_leaf() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        // `lamp/odd/state` is kept as the level `state` below `lamp/odd`, not below `lamp`.
        let topics = t(&[("lamp", "{}"), ("lamp/odd", "1"), ("lamp/odd/state", "ON")]);
        let ops = s.set(o.clone(), topics.clone());
        apply(&mut s, &ops);
        assert_eq!(s.topics_of(&o), vec!["lamp", "lamp/odd", "lamp/odd/state"]);
        let mut text = StateText::default();
        text.push(Leaf::State, "{}");
        text.push(Leaf::Below("odd"), "1");
        text.push(Leaf::Below("state"), "OFF");
        assert!(s.update_state(&o, &text, |t| t == "lamp").is_none(), "`lamp/state` is not what is kept");
        assert!(s.wants(&o, &topics));
    }

    #[test]
    fn attribute_topics_have_no_map_entry_and_are_published_when_their_print_changes() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "10")]));
        assert_eq!(ops.len(), 3);
        apply(&mut s, &ops);
        assert_eq!(s.topics.len(), 1, "only the whole name has an entry");
        assert_eq!(s.len(), 3);
        let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "20")]));
        assert_eq!(ops, vec![publish("lamp/brightness", "20")]);
        apply(&mut s, &ops);
        assert!(s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "20")])).is_empty());
        // A new name before them: the attribute topics keep their prints by name.
        let ops = s.set(o.clone(), t(&[("cfg", "x"), ("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "20")]));
        assert_eq!(ops, vec![publish("cfg", "x")]);
    }

    #[test]
    fn an_attribute_topic_an_owner_no_longer_has_is_cleared_under_its_live_state_topic() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/temperature", "3000")]));
        apply(&mut s, &ops);
        assert!(s.is_desired("lamp/temperature"));
        let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON")]));
        assert_eq!(ops, vec![clear("lamp/temperature")]);
        apply(&mut s, &ops);
        assert!(s.is_desired("lamp") && s.is_desired("lamp/state"));
        assert!(!s.is_desired("lamp/temperature"), "the index follows the change");
        assert!(!s.is_desired("lamp/brightness"), "a level nobody has under a wanted name is stale");
    }

    #[test]
    fn the_scan_index_keeps_the_levels_of_every_owner_of_a_shared_whole_name() {
        let mut s = Store::default();
        let (a, b) = (Owner::Unit("n".into(), 1), Owner::Unit("n".into(), 2));
        let ops = s.set(a, t(&[("lamp", "{}"), ("lamp/state", "ON")]));
        apply(&mut s, &ops);
        let ops = s.set(b, t(&[("desk", "{}"), ("lamp", "{}"), ("lamp/brightness", "20")]));
        apply(&mut s, &ops);
        assert!(s.is_desired("lamp/state") && s.is_desired("lamp/brightness"), "both owners' levels");
        assert!(!s.is_desired("lamp/dim_level") && !s.is_desired("desk/state"));
        assert!(!s.is_desired("lamp/state/extra") && !s.is_desired("nothing"));
    }

    #[test]
    fn two_owners_swapping_names_keep_every_attribute_topic() {
        let mut s = Store::default();
        let (a, b) = (Owner::Unit("n".into(), 1), Owner::Unit("n".into(), 2));
        let named = |name: &str, v: &str| t(&[(name, "{}"), (&format!("{name}/state"), v)]);
        let ops = s.set(a.clone(), named("lamp", "ON"));
        apply(&mut s, &ops);
        let ops = s.set(b.clone(), named("desk", "OFF"));
        apply(&mut s, &ops);
        // A rename swaps their names, one owner at a time.
        let ops = s.set(a.clone(), named("desk", "ON"));
        // `desk` already holds this text (b published it); its state differs.
        assert_eq!(ops, vec![publish("desk/state", "ON"), clear("lamp"), clear("lamp/state")]);
        apply(&mut s, &ops);
        let ops = s.set(b.clone(), named("lamp", "OFF"));
        assert_eq!(ops, vec![publish("lamp", "{}"), publish("lamp/state", "OFF")], "desk/state is a's now");
        apply(&mut s, &ops);
        assert!(["lamp", "lamp/state", "desk", "desk/state"].iter().all(|t| s.is_desired(t)));
    }

    #[test]
    fn attribute_levels_are_kept_short_and_read_back_whole() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let topics = t(&[
            ("ha/device/x/config", "{}"),
            ("b/n/unit/lamp", "{\"state\":\"ON\"}"),
            ("b/n/unit/lamp/state", "ON"),
            ("b/n/unit/lamp/availability", "online"),
            ("b/n/unit/lamp/unknown-level", "1"),
        ]);
        let ops = s.set(o.clone(), topics.clone());
        apply(&mut s, &ops);
        let wants = s.desired.get(&o).unwrap();
        let levels: Vec<u64> = wants.slots.iter().map(|s| slot_level(*s)).collect();
        let level = |name| u64::from(level_index(name).unwrap());
        assert_eq!(levels, vec![WHOLE, WHOLE, level("state"), level("availability"), WHOLE]);
        assert_eq!(&*wants.names, "ha/device/x/config\0b/n/unit/lamp\0b/n/unit/lamp/unknown-level\0");
        assert_eq!(print_of(wants.slots[2]), payload_print("ON"));
        assert_eq!(std::mem::size_of_val(&wants.slots[0]), 8, "a wanted topic stays one word");
        assert_eq!(std::mem::size_of::<(u64, TopicState)>(), 16, "a topic's map entry stays two words");
        assert_eq!(s.topics_of(&o), topics.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>());
        assert!(s.wants(&o, &topics));
        // The fast path publishes the whole name.
        let mut text = StateText::default();
        text.push(Leaf::State, "{\"state\":\"OFF\"}");
        text.push(Leaf::Below("state"), "OFF");
        text.push(Leaf::Below("availability"), "online");
        // The list's tail is `lamp`, `state`, `availability`, `unknown-level`: not these parts.
        assert!(s.update_state(&o, &text, |t| t == "b/n/unit/lamp").is_none());
        text.push(Leaf::Below("unknown-level"), "1");
        let ops = s.update_state(&o, &text, |t| t == "b/n/unit/lamp").unwrap();
        assert_eq!(ops, vec![publish("b/n/unit/lamp", "{\"state\":\"OFF\"}"), publish("b/n/unit/lamp/state", "OFF")]);
        // A removal clears every whole name.
        apply(&mut s, &ops);
        let ops = s.remove(&o);
        assert_eq!(ops.len(), 5);
        assert!(ops.contains(&clear("b/n/unit/lamp/availability")));
    }
}
