//! Units whose logged datapoints are taken in but not yet published (docs/datapoints.md).
//!
//! A network's first datapoint page brings new keys for most of its units, and a unit with a new
//! key that has a sensor gets its device config rendered again: for a big network that is tens
//! of milliseconds of work and megabytes for the broker. Done in one go it would hold back every
//! live change queued behind it, in the publisher and in the broker's queues, so the publisher
//! takes the units a few at a time, at most every [`DATA_TURN_INTERVAL`], whenever no update
//! waits (or one has waited [`DATA_DELAY`]).

use super::super::store::Owner;
use std::collections::{HashSet, VecDeque};
use tokio::time::{Duration, Instant};

/// How many units' datapoints are published in one turn: each may re-render a device config
/// (~200,000 instructions), so a live change waits at most a few of those.
pub(super) const DATA_OWNERS_PER_TURN: usize = 4;

/// How long the datapoints may wait while updates keep coming.
pub(super) const DATA_DELAY: Duration = Duration::from_millis(50);

/// The shortest time between two turns: 2,000 units a second, about 6,000 messages, a tenth of
/// what a broker takes in a second, so its queues stay short for the live changes.
pub(super) const DATA_TURN_INTERVAL: Duration = Duration::from_millis(2);

/// The units waiting, in arrival order, each once.
#[derive(Debug, Default)]
pub(super) struct DataQueue {
    waiting: VecDeque<Owner>,
    queued: HashSet<Owner>,
    /// Since when the first unit waiting has waited (`None` when none waits).
    since: Option<Instant>,
    /// When the next turn may be taken.
    next_at: Option<Instant>,
}

impl DataQueue {
    /// Queues `owner` unless it is waiting already.
    pub(super) fn push(&mut self, owner: Owner) {
        if self.queued.insert(owner.clone()) {
            self.waiting.push_back(owner);
            self.since.get_or_insert_with(Instant::now);
        }
    }

    /// Since when a unit waits, for [`super::due`].
    pub(super) fn since(&self) -> Option<Instant> {
        self.since
    }

    /// When the next turn may be taken ([`DATA_TURN_INTERVAL`] after the last).
    pub(super) fn next_at(&self) -> Instant {
        self.next_at.unwrap_or_else(Instant::now)
    }

    /// The next units to publish: at most [`DATA_OWNERS_PER_TURN`], of one network.
    pub(super) fn next_turn(&mut self) -> Vec<Owner> {
        self.next_at = Some(Instant::now() + DATA_TURN_INTERVAL);
        let mut turn: Vec<Owner> = Vec::with_capacity(DATA_OWNERS_PER_TURN);
        while turn.len() < DATA_OWNERS_PER_TURN {
            let same_network = match (turn.first(), self.waiting.front()) {
                (_, None) => break,
                (None, Some(_)) => true,
                (Some(first), Some(next)) => network(first) == network(next),
            };
            if !same_network {
                break;
            }
            if let Some(owner) = self.waiting.pop_front() {
                self.queued.remove(&owner);
                turn.push(owner);
            }
        }
        self.since = if self.waiting.is_empty() { None } else { Some(Instant::now()) };
        turn
    }

    /// Forgets the units of `network` (it is gone, or rendered whole).
    pub(super) fn forget_network(&mut self, id: &str) {
        self.waiting.retain(|o| network(o) != Some(id));
        self.queued.retain(|o| network(o) != Some(id));
        if self.waiting.is_empty() {
            self.since = None;
        }
    }
}

/// The network an owner of the queue belongs to.
fn network(owner: &Owner) -> Option<&str> {
    match owner {
        Owner::Unit(network, _) => Some(network),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn unit(network: &str, id: u32) -> Owner {
        Owner::Unit(Arc::from(network), id)
    }

    #[tokio::test]
    async fn turns_take_a_few_units_of_one_network_each_once_in_order() {
        let mut q = DataQueue::default();
        assert!(q.since().is_none());
        for id in 1..=6 {
            q.push(unit("a", id));
        }
        q.push(unit("a", 2));
        q.push(unit("b", 1));
        assert!(q.since().is_some());
        assert_eq!(q.next_turn(), [unit("a", 1), unit("a", 2), unit("a", 3), unit("a", 4)]);
        assert_eq!(q.next_turn(), [unit("a", 5), unit("a", 6)]);
        // Taken, so it may wait again.
        q.push(unit("a", 1));
        assert_eq!(q.next_turn(), [unit("b", 1)]);
        assert_eq!(q.next_turn(), [unit("a", 1)]);
        assert!(q.next_turn().is_empty());
        assert!(q.since().is_none());
    }

    #[tokio::test]
    async fn a_network_forgotten_leaves_the_others_waiting() {
        let mut q = DataQueue::default();
        q.push(unit("a", 1));
        q.push(unit("b", 1));
        q.forget_network("a");
        assert_eq!(q.next_turn(), [unit("b", 1)]);
        q.push(unit("a", 1));
        q.forget_network("a");
        assert!(q.since().is_none() && q.next_turn().is_empty());
    }
}
