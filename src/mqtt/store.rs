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

mod prints;
mod wants;

use super::owner_map::OwnerMap;
use super::render::{Owner, Topics};
use super::state_text::{Leaf, StateText, is_leaf_of, is_level, level_index};
use prints::{PRINT_BITS, fingerprint, payload_print, print_of, with_print};
use wants::{WHOLE, Walk, Wants, attribute_index, compact, last_names, slot_level};
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
        /// The topic's fingerprint and the payload's print, taken where the operation was made
        /// (the store had them at hand): recording the operation then hashes nothing again.
        /// [`Op::publish`] takes them from the strings.
        receipt: (u64, u64),
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
        let receipt = (fingerprint(&topic), payload_print(&payload));
        Op::Publish { topic, payload, previous, receipt }
    }
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
            Op::Publish { receipt: (key, payload), .. } => Receipt::Published { key: *key, payload: *payload },
            Op::Clear { topic } => Receipt::Cleared { key: fingerprint(topic), topic: topic.as_str().into() },
        }
    }
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
    let key = fingerprint(&topic);
    // An attribute topic's slot is its only record: a changed print is a publication.
    if slot_level(*slot) != WHOLE || topics.get(&key).map(|t| t.published()) != Some(new) {
        // State topics are never discovery configs, so no `previous` is needed.
        ops.push(Op::Publish { topic, payload: payload.to_string(), previous: None, receipt: (key, new) });
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
            // A whole name's fingerprint is its record's key; an attribute topic's is needed only
            // for its receipt, when it is published.
            let whole = (slot_level(*slot) == WHOLE).then(|| fingerprint(&topic));
            let last = match whole {
                Some(key) => self.published(key),
                None if same_topics => old_slots.get(i).map(|s| print_of(*s)),
                None => old_prints.get(topic.as_str()).copied(),
            };
            if last != Some(print) {
                let key = whole.unwrap_or_else(|| fingerprint(&topic));
                ops.push(Op::Publish { topic, payload, previous: None, receipt: (key, print) });
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
                    (level, Leaf::Below(key)) => below_state && u8::try_from(level).is_ok_and(|l| is_level(l, key)),
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
mod tests;
