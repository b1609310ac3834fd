//! The retained topics the bridge wants on the broker and the ones it has published, and the
//! operations that take the broker from one to the other.
//!
//! Only differences are published, so identical state never produces a duplicate retained
//! message. A topic is cleared (empty retained payload) when no owner wants it any more — this is
//! how a removed or renamed unit, group or scene loses every topic it had, not only its discovery.

use super::render::{Owner, Topics};
use std::collections::BTreeMap;
// foldhash: the store hashes every topic it publishes; SipHash's DoS resistance buys nothing
// for topics this process made itself, and costs several times more per lookup.
use foldhash::{HashMap, HashSet};

/// One broker operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Publish `payload` retained on `topic`; `previous` is what was published there before
    /// (left out by [`Store::update_tail`]: only discovery configs need it).
    Publish {
        /// Topic.
        topic: String,
        /// Payload.
        payload: String,
        /// The payload last published on the topic, if any.
        previous: Option<String>,
    },
    /// Publish an empty retained payload on `topic` (deletes the retained message).
    Clear {
        /// Topic.
        topic: String,
    },
}

/// Desired and published retained topics.
#[derive(Debug, Default)]
pub struct Store {
    desired: BTreeMap<Owner, Topics>,
    /// Which owner wants a topic.
    index: HashMap<String, Owner>,
    /// The fingerprint of what this process last published per topic (since the last
    /// connection). Only a fingerprint: on a site of 25,000 units the payloads are ~50 MB, and a
    /// second copy of them was a sixth of the bridge's memory.
    published: HashMap<String, u64>,
    /// Topics cleared on the current connection. Handing a clear to the client does not mean
    /// the broker got it: when the connection drops, the client discards what it had not
    /// delivered (a clean session resumes nothing) while the broker keeps the old retained
    /// message. So the next connection clears these again, unless they are wanted by then.
    cleared: HashSet<String>,
}

/// The hasher of [`fingerprint`]: fixed, so equal payloads always agree.
const FINGERPRINT: foldhash::quality::FixedState = foldhash::quality::FixedState::with_seed(0x6361_7361_6d62_6932);

/// A payload's 64-bit fingerprint. Two different payloads of one topic agree with a probability
/// of 2⁻⁶⁴: the store would then skip one publication, until the next change of that topic.
fn fingerprint(payload: &str) -> u64 {
    std::hash::BuildHasher::hash_one(&FINGERPRINT, payload)
}

impl Store {
    /// Sets what `owner` wants and returns the operations that bring the broker there: changed
    /// or new topics are published (in `topics` order), topics nobody wants any more are cleared.
    pub fn set(&mut self, owner: Owner, topics: Topics) -> Vec<Op> {
        let old = self.desired.remove(&owner).unwrap_or_default();
        // The common case (a state change) keeps the owner's topics: the index then only needs
        // the topics another owner took over back, and nothing can become unwanted.
        let same_topics = old.len() == topics.len() && old.iter().zip(&topics).all(|(a, b)| a.0 == b.0);
        if !same_topics {
            for (t, _) in &old {
                if self.index.get(t) == Some(&owner) {
                    self.index.remove(t);
                }
            }
        }
        let mut ops = Vec::new();
        for (i, (t, p)) in topics.iter().enumerate() {
            if !same_topics || self.index.get(t) != Some(&owner) {
                self.index.insert(t.clone(), owner.clone());
            }
            let published = self.published.get(t).copied();
            if published != Some(fingerprint(p)) {
                // The text of what was published, when the owner's last payload is it (the
                // publisher needs it for discovery configs that lose a component).
                let last = if same_topics { old.get(i) } else { old.iter().find(|(o, _)| o == t) };
                let previous = last.map(|(_, o)| o).filter(|o| published == Some(fingerprint(o))).cloned();
                ops.push(Op::Publish { topic: t.clone(), payload: p.clone(), previous });
            }
        }
        if !same_topics {
            for (t, _) in &old {
                if !self.index.contains_key(t) && self.published.contains_key(t) {
                    ops.push(Op::Clear { topic: t.clone() });
                }
            }
        }
        if !topics.is_empty() {
            self.desired.insert(owner, topics);
        }
        ops
    }

    /// The fast path of a state change: when `owner`'s topics end with exactly the topics of
    /// `tail` (same names, same order), only those payloads are compared and replaced; the rest
    /// of the owner's topics (its discovery configs, kilobytes each) are neither copied nor read.
    /// Gives `tail` back when the names differ, for [`Store::set`] with the whole list.
    pub fn update_tail(&mut self, owner: &Owner, tail: Topics) -> Result<Vec<Op>, Topics> {
        let Some(current) = self.desired.get_mut(owner) else { return Err(tail) };
        let Some(start) = current.len().checked_sub(tail.len()) else { return Err(tail) };
        let slots = &mut current[start..];
        if slots.iter().zip(&tail).any(|(a, b)| a.0 != b.0) {
            return Err(tail);
        }
        let mut ops = Vec::new();
        for (slot, (topic, payload)) in slots.iter_mut().zip(tail) {
            // Unchanged since the last render (most attribute topics of a change): what was
            // published is already this, or the next connection's resync sends it. This skips
            // two hash lookups per topic, which are most of the cost on a site of 10,000s of
            // topics.
            if slot.1 == payload {
                continue;
            }
            if self.index.get(&topic) != Some(owner) {
                self.index.insert(topic.clone(), owner.clone());
            }
            if self.published.get(&topic) != Some(&fingerprint(&payload)) {
                // State topics are never discovery configs, so no `previous` is needed.
                ops.push(Op::Publish { topic, payload: payload.clone(), previous: None });
            }
            slot.1 = payload;
        }
        Ok(ops)
    }

    /// Drops `owner` and returns the clears of its topics.
    pub fn remove(&mut self, owner: &Owner) -> Vec<Op> {
        self.set(owner.clone(), Vec::new())
    }

    /// The topics `owner` wants (empty when it wants none).
    pub fn desired_of(&self, owner: &Owner) -> &[(String, String)] {
        self.desired.get(owner).map_or(&[], Vec::as_slice)
    }

    /// The owners of one network's topics.
    pub fn owners_of(&self, network: &str) -> Vec<Owner> {
        self.desired.keys().filter(|o| o.network() == Some(network)).cloned().collect()
    }

    /// Records that `op` reached the client.
    pub fn sent(&mut self, op: &Op) {
        match op {
            Op::Publish { topic, payload, .. } => {
                self.cleared.remove(topic);
                let print = fingerprint(payload);
                match self.published.get_mut(topic) {
                    Some(last) => *last = print,
                    None => {
                        self.published.insert(topic.clone(), print);
                    }
                }
            }
            Op::Clear { topic } => {
                self.published.remove(topic);
                self.cleared.insert(topic.clone());
            }
        }
    }

    /// Everything again, for a new connection: clears of published topics nobody wants and of
    /// the topics cleared on the previous connection (that clear may have been lost with it),
    /// then every wanted topic (owner by owner; discovery before state within each).
    pub fn resync(&mut self) -> Vec<Op> {
        let mut stale: Vec<String> = self
            .published
            .keys()
            .chain(self.cleared.iter().filter(|t| !self.published.contains_key(*t)))
            .filter(|t| !self.index.contains_key(*t))
            .cloned()
            .collect();
        stale.sort();
        // The clears sent now are recorded again as they go out.
        self.cleared.clear();
        let mut ops: Vec<Op> = stale.into_iter().map(|topic| Op::Clear { topic }).collect();
        ops.extend(self.republish());
        ops
    }

    /// Every wanted topic again (after Home Assistant's birth message).
    pub fn republish(&self) -> Vec<Op> {
        self.desired
            .values()
            .flatten()
            // No `previous`: what is wanted is what was published (HA's birth), or the text the
            // broker holds is no longer known (a resync after changes while disconnected).
            .map(|(t, p)| Op::Publish { topic: t.clone(), payload: p.clone(), previous: None })
            .collect()
    }

    /// Whether some owner wants `topic`.
    pub fn is_desired(&self, topic: &str) -> bool {
        self.index.contains_key(topic)
    }

    /// Whether this process has published `topic` (and not cleared it).
    pub fn is_published(&self, topic: &str) -> bool {
        self.published.contains_key(topic)
    }

    /// All wanted topics with payloads (for tests and `check`).
    pub fn desired(&self) -> impl Iterator<Item = (&str, &str)> {
        self.desired.values().flatten().map(|(t, p)| (t.as_str(), p.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pairs: &[(&str, &str)]) -> Topics {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    fn apply(s: &mut Store, ops: &[Op]) {
        for op in ops {
            s.sent(op);
        }
    }

    #[test]
    fn only_changes_are_published() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("a", "1"), ("b", "2")]));
        assert_eq!(ops.len(), 2);
        apply(&mut s, &ops);
        assert!(s.set(o.clone(), t(&[("a", "1"), ("b", "2")])).is_empty());
        let ops = s.set(o.clone(), t(&[("a", "1"), ("b", "3")]));
        assert_eq!(ops, vec![Op::Publish { topic: "b".into(), payload: "3".into(), previous: Some("2".into()) }]);
    }

    #[test]
    fn a_tail_update_touches_only_the_tail_and_agrees_with_a_full_set() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("cfg", "x"), ("state", "1"), ("state/a", "on")]));
        apply(&mut s, &ops);
        let ops = s.update_tail(&o, t(&[("state", "2"), ("state/a", "on")])).unwrap();
        assert_eq!(ops, vec![Op::Publish { topic: "state".into(), payload: "2".into(), previous: None }]);
        apply(&mut s, &ops);
        assert_eq!(s.desired_of(&o), t(&[("cfg", "x"), ("state", "2"), ("state/a", "on")]).as_slice());
        // Nothing changed: nothing to publish, even though the store was told again.
        assert!(s.update_tail(&o, t(&[("state", "2"), ("state/a", "on")])).unwrap().is_empty());
        // Other names (an attribute appeared), a longer tail, an unknown owner: the caller sets all.
        assert!(s.update_tail(&o, t(&[("state", "2"), ("state/b", "1")])).is_err());
        assert!(s.update_tail(&o, t(&[("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")])).is_err());
        assert!(s.update_tail(&Owner::Unit("n".into(), 2), t(&[("state", "2")])).is_err());
        assert_eq!(s.desired_of(&o), t(&[("cfg", "x"), ("state", "2"), ("state/a", "on")]).as_slice());
    }

    #[test]
    fn previous_is_the_published_text_when_the_store_still_has_it() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("cfg", "x")]));
        apply(&mut s, &ops);
        // Published "x", then wanted "y" without it going out (disconnected), then "z": only a
        // fingerprint of "x" is kept, so its text is no longer known.
        let _unsent = s.set(o.clone(), t(&[("cfg", "y")]));
        let ops = s.set(o.clone(), t(&[("cfg", "z")]));
        assert_eq!(ops, vec![Op::Publish { topic: "cfg".into(), payload: "z".into(), previous: None }]);
        apply(&mut s, &ops);
        let ops = s.set(o.clone(), t(&[("cfg", "w")]));
        assert_eq!(ops, vec![Op::Publish { topic: "cfg".into(), payload: "w".into(), previous: Some("z".into()) }]);
        // Wanting the published text again publishes nothing.
        apply(&mut s, &ops);
        assert!(s.set(o, t(&[("cfg", "w")])).is_empty());
    }

    #[test]
    fn renamed_topics_are_published_then_old_ones_cleared() {
        let mut s = Store::default();
        let o = Owner::Unit("n".into(), 1);
        let ops = s.set(o.clone(), t(&[("cfg", "x"), ("old", "1")]));
        apply(&mut s, &ops);
        let ops = s.set(o.clone(), t(&[("cfg", "y"), ("new", "1")]));
        assert_eq!(
            ops,
            vec![
                Op::Publish { topic: "cfg".into(), payload: "y".into(), previous: Some("x".into()) },
                Op::Publish { topic: "new".into(), payload: "1".into(), previous: None },
                Op::Clear { topic: "old".into() },
            ]
        );
        apply(&mut s, &ops);
        let ops = s.remove(&o);
        assert_eq!(ops, vec![Op::Clear { topic: "cfg".into() }, Op::Clear { topic: "new".into() }]);
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
        let ops = s.resync();
        assert_eq!(
            ops,
            vec![
                Op::Clear { topic: "old".into() },
                // A republication carries no `previous` (only a fingerprint is kept).
                Op::Publish { topic: "new".into(), payload: "1".into(), previous: None }
            ]
        );
        apply(&mut s, &ops);
        // A topic wanted again is published, not cleared.
        let ops = s.set(a.clone(), t(&[("old", "2")]));
        apply(&mut s, &ops);
        assert_eq!(
            s.resync(),
            vec![
                Op::Clear { topic: "new".into() },
                Op::Publish { topic: "old".into(), payload: "2".into(), previous: None }
            ]
        );
    }

    #[test]
    fn resync_clears_unwanted_and_republishes_everything() {
        let mut s = Store::default();
        let a = Owner::Unit("n".into(), 1);
        let ops = s.set(a.clone(), t(&[("x", "1")]));
        apply(&mut s, &ops);
        // Disconnected: the removal is not sent.
        let _ = s.remove(&a);
        let ops = s.set(Owner::Bridge, t(&[("b", "1")]));
        let _ = ops;
        let ops = s.resync();
        assert_eq!(
            ops,
            vec![
                Op::Clear { topic: "x".into() },
                Op::Publish { topic: "b".into(), payload: "1".into(), previous: None }
            ]
        );
    }
}
