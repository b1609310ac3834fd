//! The typed stream from the bridge core to its consumers (the MQTT publisher, `check`, tests).
//!
//! Data flows one way: each network's supervisor owns its [`NetworkView`] and sends what changed,
//! as owned values, on a bounded queue. A consumer keeps its own mirror built from these updates;
//! nothing is shared under a lock between the layers.

use super::state::{NetworkStatus, NetworkView, Topology, UnitEvent};
use crate::cloud::model::UnitState;
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// One change from the bridge core.
#[derive(Debug, Clone)]
pub enum Update {
    /// The whole view of a network: after its first snapshot and after every configuration change
    /// (`topology` says what was added, removed or renamed since the previous full view). The
    /// consumer replaces its mirror of the network with it.
    Network {
        /// The network's full view.
        view: Arc<NetworkView>,
        /// What changed against the previous full view (empty for the first one). Boxed, like
        /// `Status::status`: the queues between core and publisher hold 8,192 updates, and an
        /// update is as large as its largest variant (232 bytes with these inline, at most 64
        /// boxed).
        topology: Box<Topology>,
    },
    /// Network-level fields changed (dim level, active scenes, gateway, connection, name).
    Status {
        /// Network id.
        network: Arc<str>,
        /// The new fields.
        status: Box<NetworkStatus>,
    },
    /// A unit's state changed.
    Unit {
        /// Network id.
        network: Arc<str>,
        /// The unit's merged state.
        unit: Arc<UnitState>,
    },
    /// A network's gallery, fetched again (at start-up and after a revision change): the
    /// photos that passed the checks of [`super::photos::check`], in gallery order. The consumer
    /// replaces the network's photos with them.
    Photos {
        /// Network id.
        network: Arc<str>,
        /// The photos.
        photos: Arc<[super::photos::NetPhoto]>,
    },
    /// New logged datapoints of a network, oldest first (a page of its periodic fetch,
    /// [`crate::bridge::datapoints`]); the consumer keeps the latest of each unit and key.
    Datapoints {
        /// Network id.
        network: Arc<str>,
        /// The points.
        points: Arc<[crate::cloud::datapoints::Datapoint]>,
    },
    /// A non-retained happening of a unit (occupancy change, switch report).
    Event {
        /// Network id.
        network: Arc<str>,
        /// Unit id.
        unit: u32,
        /// What happened.
        event: UnitEvent,
        /// When the bridge received it.
        at: DateTime<Utc>,
    },
    /// Something a user should see (credentials rejected, API not enabled, a command refused by
    /// the service). Published on `<base>/bridge/error` and kept for `/healthz`.
    Problem {
        /// Network id, when the problem concerns one network.
        network: Option<Arc<str>>,
        /// What is wrong, in words (never containing a secret).
        message: String,
    },
    /// A command from MQTT was refused (invalid, unsupported, or its network unreachable).
    /// Published on `<base>/bridge/error` with the command's topic.
    Rejected {
        /// Network id, when the topic named a known network.
        network: Option<Arc<str>>,
        /// The command topic.
        topic: String,
        /// Why it was refused.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::Update;

    #[test]
    fn an_update_stays_small() {
        // Each of the two queues between core and publisher holds up to 4,096 of them.
        assert!(std::mem::size_of::<Update>() <= 64, "Update is {} bytes", std::mem::size_of::<Update>());
    }
}
