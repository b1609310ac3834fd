//! Units whose attribute topics are owed: a network rendered whole (its first view, a reload, a
//! new connection, Home Assistant's birth) publishes every unit's discovery, JSON and
//! availability first and the plain per-attribute values after (docs/mqtt.md#publishing-order).
//!
//! Home Assistant reads none of the attribute topics, yet on a big site they are four in five of
//! the start-up's messages: published beside their units, they would hold every entity back
//! behind the broker's work on them. The store has their prints already (they count as handed
//! over), so a live change meanwhile publishes only what changed, and a unit taken here
//! publishes its current values.

use std::sync::Arc;
use tokio::time::Instant;

/// How many units' attribute topics are published in one turn: a live change waits for at most
/// that many units' worth of messages.
pub(super) const OWED_UNITS_PER_TURN: usize = 16;

/// The units owed, by network, in the order their networks were rendered.
#[derive(Debug, Default)]
pub(super) struct OwedAttributes {
    /// Each network's units, ascending and each once.
    nets: Vec<(Arc<str>, Vec<u32>)>,
    /// Since when the first unit waiting has waited (`None` when none waits).
    since: Option<Instant>,
}

impl OwedAttributes {
    /// Owes the attribute topics of `units` of `network`.
    pub(super) fn push(&mut self, network: &Arc<str>, units: &[u32]) {
        if units.is_empty() {
            return;
        }
        let at = self.nets.iter().position(|(n, _)| n == network).unwrap_or_else(|| {
            self.nets.push((network.clone(), Vec::new()));
            self.nets.len() - 1
        });
        if let Some((_, owed)) = self.nets.get_mut(at) {
            owed.extend_from_slice(units);
            owed.sort_unstable();
            owed.dedup();
        }
        self.since.get_or_insert_with(Instant::now);
    }

    /// Since when a unit waits, for the publisher's `due`.
    pub(super) fn since(&self) -> Option<Instant> {
        self.since
    }

    /// The next units: at most [`OWED_UNITS_PER_TURN`], of one network; `None` when none waits.
    pub(super) fn next_turn(&mut self) -> Option<(Arc<str>, Vec<u32>)> {
        let (network, owed) = self.nets.first_mut()?;
        let network = network.clone();
        let units: Vec<u32> = owed.drain(..owed.len().min(OWED_UNITS_PER_TURN)).collect();
        if owed.is_empty() {
            self.nets.remove(0);
        }
        self.since = if self.nets.is_empty() { None } else { Some(Instant::now()) };
        Some((network, units))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(network: &str, ids: &[u32]) -> Option<(Arc<str>, Vec<u32>)> {
        Some((Arc::from(network), ids.to_vec()))
    }

    #[tokio::test]
    async fn turns_take_a_network_s_units_in_order_each_once() {
        let mut owed = OwedAttributes::default();
        assert!(owed.since().is_none());
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let many: Vec<u32> = (1..=20).rev().collect();
        owed.push(&a, &many);
        owed.push(&b, &[7]);
        owed.push(&a, &[3, 21]);
        owed.push(&b, &[]);
        assert!(owed.since().is_some());
        assert_eq!(owed.next_turn(), turn("a", &(1..=16).collect::<Vec<_>>()));
        assert_eq!(owed.next_turn(), turn("a", &[17, 18, 19, 20, 21]));
        assert_eq!(owed.next_turn(), turn("b", &[7]));
        assert!(owed.next_turn().is_none());
        assert!(owed.since().is_none());
    }
}
