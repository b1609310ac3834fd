//! Units whose logged datapoints are taken in but not yet published (docs/datapoints.md).
//!
//! A network's first datapoint page brings new keys for most of its units, and a unit with a new
//! key that has a sensor gets its device config rendered again: for a big network that is tens
//! of milliseconds of work and megabytes for the broker. Done in one go it would hold back every
//! live change queued behind it, in the publisher and in the broker's queues, so the publisher
//! takes the units a few at a time, whenever no update waits (or one has waited [`DATA_DELAY`]):
//! at most every [`DATA_TURN_INTERVAL`] on a quiet site, one unit every
//! [`DATA_TURN_INTERVAL_LIVE`] while live changes keep coming, so that the broker and the
//! bridge's CPU, which such a stream may already keep busy, take the datapoints' work in small,
//! spread-out pieces.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::time::{Duration, Instant};

/// How many units' datapoints are published in one turn on a quiet site: each may re-render a
/// device config (~200,000 instructions), so a live change waits at most a few of those.
pub(super) const DATA_UNITS_PER_TURN: usize = 4;

/// How long the datapoints may wait while updates keep coming.
pub(super) const DATA_DELAY: Duration = Duration::from_millis(50);

/// The shortest time between two turns: 2,000 units a second, about 6,000 messages, a tenth of
/// what a broker takes in a second, so its queues stay short for the live changes.
pub(super) const DATA_TURN_INTERVAL: Duration = Duration::from_millis(2);

/// The time between turns, of one unit each, after a live change came in since the last turn:
/// 200 units a second, about 400 messages, a few per cent of what the broker takes. A stream
/// of live changes already keeps the broker and the bridge busy, and turns at the quiet pace
/// held its changes back by tens of milliseconds (BENCHMARKS.md, figures behind constants).
pub(super) const DATA_TURN_INTERVAL_LIVE: Duration = Duration::from_millis(5);

/// A unit: its network's id and its id.
type Unit = (Arc<str>, u32);

/// The units waiting, in arrival order, each once.
#[derive(Debug, Default)]
pub(super) struct DataQueue {
    waiting: VecDeque<Unit>,
    queued: HashSet<Unit>,
    /// Since when the first unit waiting has waited (`None` when none waits).
    since: Option<Instant>,
    /// When the next turn may be taken.
    next_at: Option<Instant>,
    /// Whether a live change came in since the last turn.
    live: bool,
}

impl DataQueue {
    /// Queues unit `id` of `network` unless it is waiting already.
    pub(super) fn push(&mut self, network: Arc<str>, id: u32) {
        if self.queued.insert((network.clone(), id)) {
            self.waiting.push_back((network, id));
            self.since.get_or_insert_with(Instant::now);
        }
    }

    /// Notes that a live change came in: the next turn takes the live pace.
    pub(super) fn live_change(&mut self) {
        self.live = true;
    }

    /// Since when a unit waits, for [`super::due`].
    pub(super) fn since(&self) -> Option<Instant> {
        self.since
    }

    /// When the next turn may be taken ([`DATA_TURN_INTERVAL`] or [`DATA_TURN_INTERVAL_LIVE`]
    /// after the last).
    pub(super) fn next_at(&self) -> Instant {
        self.next_at.unwrap_or_else(Instant::now)
    }

    /// The next units to publish, of one network: at most [`DATA_UNITS_PER_TURN`], one when a
    /// live change came in since the last turn; `None` when none waits.
    pub(super) fn next_turn(&mut self) -> Option<(Arc<str>, Vec<u32>)> {
        let (interval, units) = if std::mem::take(&mut self.live) {
            (DATA_TURN_INTERVAL_LIVE, 1)
        } else {
            (DATA_TURN_INTERVAL, DATA_UNITS_PER_TURN)
        };
        self.next_at = Some(Instant::now() + interval);
        let network = self.waiting.front()?.0.clone();
        let mut ids = Vec::with_capacity(units);
        while ids.len() < units
            && self.waiting.front().is_some_and(|(n, _)| *n == network)
            && let Some(unit) = self.waiting.pop_front()
        {
            ids.push(unit.1);
            self.queued.remove(&unit);
        }
        self.since = if self.waiting.is_empty() { None } else { Some(Instant::now()) };
        Some((network, ids))
    }

    /// Forgets the units of `network` (it is gone, or rendered whole).
    pub(super) fn forget_network(&mut self, id: &str) {
        self.waiting.retain(|(network, _)| &**network != id);
        self.queued.retain(|(network, _)| &**network != id);
        if self.waiting.is_empty() {
            self.since = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(network: &str, ids: &[u32]) -> Option<(Arc<str>, Vec<u32>)> {
        Some((Arc::from(network), ids.to_vec()))
    }

    #[tokio::test]
    async fn turns_take_a_few_units_of_one_network_each_once_in_order() {
        let mut q = DataQueue::default();
        assert!(q.since().is_none());
        for id in 1..=6 {
            q.push("a".into(), id);
        }
        q.push("a".into(), 2);
        q.push("b".into(), 1);
        assert!(q.since().is_some());
        assert_eq!(q.next_turn(), turn("a", &[1, 2, 3, 4]));
        assert_eq!(q.next_turn(), turn("a", &[5, 6]));
        // Taken, so it may wait again.
        q.push("a".into(), 1);
        assert_eq!(q.next_turn(), turn("b", &[1]));
        assert_eq!(q.next_turn(), turn("a", &[1]));
        assert!(q.next_turn().is_none());
        assert!(q.since().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_live_change_slows_the_next_turn_to_one_unit() {
        let mut q = DataQueue::default();
        for id in 1..=6 {
            q.push("a".into(), id);
        }
        q.live_change();
        let at = Instant::now();
        assert_eq!(q.next_turn(), turn("a", &[1]));
        assert_eq!(q.next_at(), at + DATA_TURN_INTERVAL_LIVE);
        // No live change since: the quiet pace again.
        assert_eq!(q.next_turn(), turn("a", &[2, 3, 4, 5]));
        assert_eq!(q.next_at(), at + DATA_TURN_INTERVAL);
    }

    #[tokio::test]
    async fn a_network_forgotten_leaves_the_others_waiting() {
        let mut q = DataQueue::default();
        q.push("a".into(), 1);
        q.push("b".into(), 1);
        q.forget_network("a");
        assert_eq!(q.next_turn(), turn("b", &[1]));
        q.push("a".into(), 1);
        q.forget_network("a");
        assert!(q.since().is_none() && q.next_turn().is_none());
    }
}
