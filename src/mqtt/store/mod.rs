//! The retained topics the bridge wants on the broker and the ones it has published, and the
//! operations that take the broker from one to the other.
//!
//! Only differences are published, so identical state never produces a duplicate retained
//! message. A topic is cleared (empty retained payload) when no owner wants it any more: this is
//! how a removed or renamed unit, group or scene loses every topic it had, not only its discovery.
//!
//! The rest of the crate speaks topics, payloads and [`Owner`]s to the store; how it keeps them
//! is its own. It keeps names and hashes, never payloads: the payloads of a big site are tens of
//! megabytes (most of it discovery configs), and the bridge's mirror renders any of them again
//! in microseconds. What needs a payload again (a republication after a reconnection or Home
//! Assistant's birth, the text of a previous discovery config) renders it from the mirror
//! ([`super::plan`], [`super::publisher`]). The packing:
//! - each owner's topics in publishing order (`owner_topics.rs`): a payload print per topic, and
//!   its name once, or as a level number when it is an attribute topic just below a whole name
//!   (`levels.rs`); owners by network and id (`owner_map.rs`);
//! - per whole name, by its fingerprint (`prints.rs`): how many owners want it and the print of
//!   what was published there. An attribute topic has no entry: it belongs to the owner of the
//!   whole name it is below, and its slot's print is what was last handed over (every connection
//!   publishes everything again, so that is what the broker has).

mod levels;
mod owner_map;
mod owner_topics;
mod prints;
mod stale;

use super::state_text::{Leaf, StateText};
use levels::{is_leaf_of, is_level, level_index};
use owner_map::OwnerMap;
use owner_topics::{OwnerTopics, SlotMut, WHOLE, Walk, is_whole, last_names, slot_level};
use prints::{PRINT_BITS, fingerprint, payload_print, print_of, with_print};
pub use stale::StaleCheck;
use std::sync::Arc;
// foldhash: the store hashes every topic it publishes; SipHash's DoS resistance buys nothing
// for topics this process made itself, and costs several times more per lookup.
use foldhash::{HashMap, HashSet};

/// Retained topics with their payloads, in publishing order.
pub type Topics = Vec<(String, String)>;

/// Who a retained topic belongs to. The order is the republishing order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// `<base>/bridge/…` and the bridge device.
    Bridge,
    /// A network's JSON, availability and device (by network id).
    Network(Arc<str>),
    /// A unit (network id, unit id).
    Unit(Arc<str>, u32),
    /// A unit's datapoints, `<unit>/data` and the topics below it (network id, unit id). Apart
    /// from the unit: its first datapoints then add records of their own instead of moving
    /// every unit's record to bigger blocks, which would leave the old blocks' pages pinned by
    /// whatever the allocator places between them meanwhile.
    Data(Arc<str>, u32),
    /// A group (network id, group id).
    Group(Arc<str>, u32),
    /// A scene (network id, scene id).
    Scene(Arc<str>, u32),
}

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
        /// What the store records once the publication reached the client, made where the
        /// operation was (the store has the hashes at hand there).
        receipt: Receipt,
    },
    /// Publish an empty retained payload on `topic` (deletes the retained message).
    Clear {
        /// Topic.
        topic: String,
    },
}

impl Op {
    /// A publication of `payload` on `topic`.
    pub fn publish(topic: String, payload: String, previous: Option<String>) -> Op {
        let receipt = Receipt(Sent::Published { topic: fingerprint(&topic), payload: payload_print(&payload) });
        Op::Publish { topic, payload, previous, receipt }
    }

    /// What [`Store::record`] needs of this operation: taken before the operation's strings are
    /// handed to the MQTT client, so that they move there instead of being copied.
    pub fn receipt(&self) -> Receipt {
        match self {
            Op::Publish { receipt, .. } => receipt.clone(),
            Op::Clear { topic } => Receipt(Sent::Cleared { topic: fingerprint(topic), name: topic.as_str().into() }),
        }
    }
}

/// What the store records of an operation that reached the client ([`Op::receipt`],
/// [`Store::record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt(Sent);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Sent {
    /// A publication: the topic's fingerprint and the payload's print.
    Published { topic: u64, payload: u64 },
    /// A clear: the topic's fingerprint and name (kept until the next connection).
    Cleared { topic: u64, name: Box<str> },
}

/// Wanted and published retained topics.
#[derive(Debug, Default)]
pub struct Store {
    /// What each owner wants, in publishing order.
    wanted: OwnerMap<OwnerTopics>,
    /// What is known of each whole name that is wanted or published, by the name's fingerprint.
    topics: HashMap<u64, TopicState>,
    /// Counts the changes of the owners' names: a [`StaleCheck`] built before the last one is
    /// built again when it lacks a topic asked.
    names_version: u64,
    /// Counts the changes that took a name from an owner: a [`StaleCheck`] built before the last
    /// one is built again whatever is asked. Owners that come or grow (a unit's first
    /// datapoints) only add names: what an index has is still wanted.
    removals_version: u64,
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

impl TopicState {
    fn published_print(self) -> u64 {
        print_of(self.0)
    }

    fn set_published_print(&mut self, print: u64) {
        self.0 = with_print(self.0, print);
    }

    fn owner_count(self) -> u64 {
        self.0 >> PRINT_BITS
    }

    fn set_owner_count(&mut self, count: u64) {
        self.0 = (count.min(u64::MAX >> PRINT_BITS) << PRINT_BITS) | self.published_print();
    }
}

/// Records `payload` as wanted in the `slot` of `topic` and, when it changed (and, for a whole
/// name, differs from what was published there), its publication. Unchanged since the last
/// render (most attribute topics of a change): what was published is already this, or the next
/// connection's resync sends it; this skips building the topic, most of the cost on a big site.
fn note_state(
    topics: &HashMap<u64, TopicState>,
    mut slot: SlotMut<'_>,
    topic: impl FnOnce() -> String,
    payload: &str,
    ops: &mut Vec<Op>,
) {
    let new = payload_print(payload);
    let old = slot.get();
    if print_of(old) == new {
        return;
    }
    slot.set(with_print(old, new));
    let topic = topic();
    let key = fingerprint(&topic);
    // An attribute topic's slot is its only record: a changed print is a publication.
    if !is_whole(old) || topics.get(&key).map(|t| t.published_print()) != Some(new) {
        // State topics are never discovery configs, so no `previous` is needed.
        let receipt = Receipt(Sent::Published { topic: key, payload: new });
        ops.push(Op::Publish { topic, payload: payload.to_string(), previous: None, receipt });
    }
}

impl Store {
    /// Sets what `owner` wants and returns the operations that bring the broker there: changed
    /// or new topics are published (in `topics` order), topics nobody wants any more are cleared.
    pub fn set(&mut self, owner: Owner, topics: Topics) -> Vec<Op> {
        let old = self.wanted.remove(&owner);
        let old_slots: Vec<u64> = old.as_ref().map(|w| w.slots().collect()).unwrap_or_default();
        let old_names = old.as_ref().map(OwnerTopics::full_names).unwrap_or_default();
        // The common case (a state change) keeps the owner's topics: the counts then stay as
        // they are and nothing can become unwanted.
        let same_topics = old_names.len() == topics.len() && old_names.iter().zip(&topics).all(|(a, b)| *a == b.0);
        let new = OwnerTopics::of(&topics);
        let mut clears = Vec::new();
        // What the old attribute topics last had, by name (their slots are their only record).
        let mut old_prints: HashMap<&str, u64> = HashMap::default();
        if !same_topics {
            self.names_version += 1;
            if old_names.iter().any(|name| !topics.iter().any(|(t, _)| t == name)) {
                self.removals_version += 1;
            }
            for (name, slot) in old_names.iter().zip(&old_slots) {
                if is_whole(*slot) {
                    self.drop_owner(fingerprint(name));
                } else {
                    old_prints.insert(name, print_of(*slot));
                }
            }
            for ((topic, _), slot) in topics.iter().zip(new.slots()) {
                let key = fingerprint(topic);
                if is_whole(slot) {
                    self.add_owner(key);
                    // A whole name without a record of its own may still be on the broker: an
                    // attribute topic that becomes a whole name (its owner's topics moved around
                    // it) keeps its slot's print, which is what the broker has whenever
                    // connected; a topic whose clear is still owed (an orphan) has some other
                    // text there. Either is cleared when it goes.
                    let there = old_prints
                        .get(topic.as_str())
                        .copied()
                        .or_else(|| self.orphans.contains_key(&key).then(|| (print_of(slot) ^ 1).max(2)));
                    if let Some(print) = there
                        && self.published_print(key).is_none()
                        && let Some(t) = self.topics.get_mut(&key)
                    {
                        t.set_published_print(print);
                    }
                }
                self.orphans.remove(&key);
            }
            clears = self.unwanted(&old_names, &old_slots, &topics);
        }
        let mut ops = Vec::new();
        for (i, ((topic, payload), slot)) in topics.into_iter().zip(new.slots()).enumerate() {
            let print = print_of(slot);
            // A whole name's fingerprint is its record's key; an attribute topic's is needed only
            // for its receipt, when it is published.
            let whole = is_whole(slot).then(|| fingerprint(&topic));
            let last = match whole {
                Some(key) => self.published_print(key),
                None if same_topics => old_slots.get(i).map(|s| print_of(*s)),
                None => old_prints.get(topic.as_str()).copied(),
            };
            if last != Some(print) {
                let key = whole.unwrap_or_else(|| fingerprint(&topic));
                let receipt = Receipt(Sent::Published { topic: key, payload: print });
                ops.push(Op::Publish { topic, payload, previous: None, receipt });
            }
        }
        for topic in clears {
            self.orphans.insert(fingerprint(&topic), topic.as_str().into());
            ops.push(Op::Clear { topic });
        }
        // Same topics: the owner's record stays in the blocks it has, with the new prints. A
        // record that moved to new blocks on every render would leave its old blocks' pages to
        // whatever the allocator puts between them (a big site's start-up re-renders every unit).
        let kept = match old {
            Some(mut old) if same_topics => {
                old.take_prints(&new);
                old
            }
            _ => new,
        };
        if !kept.is_empty() {
            self.wanted.insert(&owner, kept);
        }
        ops
    }

    /// The old topics of an owner (`names`, `slots`) that must be cleared now that it wants
    /// `topics` (the counts already moved): a whole name nobody wants that was published and is
    /// not among `topics` (where it may be an attribute topic now, which no count holds); an
    /// attribute topic that is not among `topics` and whose whole name no other owner wants (one
    /// that does is taken to have it too: owners share a name only while a rename moves it).
    fn unwanted(&self, names: &[String], slots: &[u64], topics: &Topics) -> Vec<String> {
        let new_names: HashSet<&str> = topics.iter().map(|(t, _)| t.as_str()).collect();
        // Whether another owner holds the whole name the next attribute topics are below.
        let mut base_held = false;
        let mut clears = Vec::new();
        for (name, slot) in names.iter().zip(slots) {
            let stale = if is_whole(*slot) {
                let key = fingerprint(name);
                base_held = self.owner_count(key) > u64::from(new_names.contains(name.as_str()));
                self.owner_count(key) == 0 && self.published_print(key).is_some() && !new_names.contains(name.as_str())
            } else {
                !new_names.contains(name.as_str()) && !base_held
            };
            if stale {
                clears.push(name.clone());
            }
        }
        clears
    }

    /// One owner more wants the whole name with fingerprint `key`.
    fn add_owner(&mut self, key: u64) {
        let t = self.topics.entry(key).or_default();
        t.set_owner_count(t.owner_count() + 1);
    }

    /// One owner less wants the whole name with fingerprint `key`.
    fn drop_owner(&mut self, key: u64) {
        if let Some(t) = self.topics.get_mut(&key) {
            t.set_owner_count(t.owner_count().saturating_sub(1));
        }
        self.prune(key);
    }

    /// Forgets the whole name with fingerprint `key` once nobody wants it and nothing is
    /// published there.
    fn prune(&mut self, key: u64) {
        if self.topics.get(&key).is_some_and(|t| t.0 == 0) {
            self.topics.remove(&key);
        }
    }

    /// How many owners want the whole name with fingerprint `key`.
    fn owner_count(&self, key: u64) -> u64 {
        self.topics.get(&key).map_or(0, |t| t.owner_count())
    }

    /// The print of what was last published on the whole name with fingerprint `key`.
    fn published_print(&self, key: u64) -> Option<u64> {
        self.topics.get(&key).map(|t| t.published_print()).filter(|p| *p != 0)
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
        let (mut slots, names) = self.wanted.get_mut(owner)?.parts_mut();
        let start = slots.len().checked_sub(text.len())?;
        // The state topic is a whole name, and the whole names of these slots are the owner's
        // last ones: found from the end, without walking its discovery topics' names.
        if !is_whole(slots.starting_at(start).next()?) {
            return None;
        }
        let wholes = 1 + slots.starting_at(start + 1).filter(|s| is_whole(*s)).count();
        let (state_topic, more_names) = last_names(names, wholes).split_once('\0')?;
        let mut parts = text.parts();
        let (state_leaf, state_payload) = parts.next()?;
        // The state topic in full, then the same levels below it (a short level is below the
        // whole name before it, which must then be the state topic).
        let mut walk = Walk::new(state_topic, more_names);
        let mut below_state = true;
        let same_names = is_state_topic(state_topic)
            && matches!(state_leaf, Leaf::State)
            && slots.starting_at(start + 1).zip(parts.clone()).all(|(s, (leaf, _))| {
                walk.step(slot_level(s));
                match (slot_level(s), leaf) {
                    (WHOLE, leaf) => {
                        below_state = matches!(leaf, Leaf::State);
                        is_leaf_of(walk.base, state_topic, leaf)
                    }
                    (level, Leaf::Below(key)) => below_state && u8::try_from(level).is_ok_and(|l| is_level(l, key)),
                    (_, Leaf::State) => false,
                }
            });
        if !same_names {
            return None;
        }
        let mut ops = Vec::new();
        let mut own = slots.starting_at_mut(start);
        note_state(&self.topics, own.next()?, || String::from(state_topic), state_payload, &mut ops);
        let mut walk = Walk::new(state_topic, more_names);
        for (slot, (_, payload)) in own.zip(parts) {
            let level = slot_level(slot.get());
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
    pub fn wants_exactly(&self, owner: &Owner, topics: &[(String, String)]) -> bool {
        let Some(current) = self.wanted.get(owner) else { return topics.is_empty() };
        current.len() == topics.len()
            && current
                .full_names()
                .iter()
                .zip(current.slots())
                .zip(topics)
                .all(|((n, s), (t, p))| n == t && print_of(s) == payload_print(p))
    }

    /// The names of the topics `owner` wants, in publishing order.
    pub fn topics_of(&self, owner: &Owner) -> Vec<String> {
        self.wanted.get(owner).map_or_else(Vec::new, OwnerTopics::full_names)
    }

    /// The owners of one network's topics.
    pub fn owners_of(&self, network: &str) -> Vec<Owner> {
        self.wanted.owners_of(network)
    }

    /// Records that an operation reached the client, by its [`Op::receipt`].
    pub fn record(&mut self, receipt: Receipt) {
        match receipt.0 {
            Sent::Published { topic, payload } => {
                self.cleared.remove(&topic);
                // Only whole names have an entry (every one wanted has); an attribute topic's
                // slot already holds its print.
                if let Some(t) = self.topics.get_mut(&topic) {
                    t.set_published_print(payload);
                }
            }
            Sent::Cleared { topic, name } => {
                if let Some(t) = self.topics.get_mut(&topic) {
                    t.set_published_print(0);
                }
                self.prune(topic);
                self.orphans.remove(&topic);
                self.cleared.insert(topic, name);
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
            .chain(self.cleared.iter().filter(|(k, _)| self.owner_count(**k) == 0).map(|(_, t)| t))
            .map(|t| t.to_string())
            .collect();
        stale.sort();
        stale.dedup();
        // The clears sent now are recorded again as they go out.
        self.cleared.clear();
        stale.into_iter().map(|topic| Op::Clear { topic }).collect()
    }

    /// Whether a retained `topic` found on the broker is stale: no owner wants it and this
    /// process has not published it (a topic left by an earlier run). `check` is the index the
    /// scan asking holds ([`StaleCheck`]): a scan asks about every topic.
    pub fn is_stale(&self, check: &mut StaleCheck, topic: &str) -> bool {
        !self.is_wanted(check, topic) && self.published_print(fingerprint(topic)).is_none()
    }

    /// Whether some owner wants `topic`; an attribute topic is looked up in `check`'s index.
    fn is_wanted(&self, check: &mut StaleCheck, topic: &str) -> bool {
        if self.owner_count(fingerprint(topic)) > 0 {
            return true;
        }
        // An attribute topic is its whole name, a slash and a level ([`OwnerTopics::of`]).
        let Some((base, level)) = topic.rsplit_once('/').and_then(|(base, leaf)| Some((base, level_index(leaf)?)))
        else {
            return false;
        };
        check.has_level(&self.wanted, (self.names_version, self.removals_version), base, level)
    }

    /// Whether what this process last published on `topic` is `payload`.
    pub fn has_published(&self, topic: &str, payload: &str) -> bool {
        self.published_print(fingerprint(topic)) == Some(payload_print(payload))
    }

    /// How many topics are wanted (for tests: it walks everything).
    pub fn len(&self) -> usize {
        let attributes = self.wanted.values().flat_map(OwnerTopics::slots).filter(|s| !is_whole(*s));
        self.topics.values().filter(|t| t.owner_count() > 0).count() + attributes.count()
    }

    /// Whether no topic is wanted.
    pub fn is_empty(&self) -> bool {
        self.wanted.is_empty() && self.topics.values().all(|t| t.owner_count() == 0)
    }
}

#[cfg(test)]
mod tests;
