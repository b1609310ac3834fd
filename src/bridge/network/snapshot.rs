//! The REST half of a network's supervision: fetching the configuration and the state, and
//! applying what was fetched to the view, with the updates that follow from it.

use super::{Polled, SupervisedNetwork, Supervisor};
use crate::bridge::state::{Connection, SnapshotDelta, Topology, UnitEvent};
use crate::bridge::update::Update;
use crate::cloud::CloudError;
use crate::cloud::channel::WireEvent;
use crate::cloud::model::Secret;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What one snapshot fetched, before it is applied.
struct Fetched {
    config: Option<crate::cloud::model::Network>,
    state: crate::cloud::model::NetworkState,
}

impl Supervisor {
    /// Polls `/state` (while the wire is down, for resyncs and scene refreshes).
    pub(super) async fn refresh(&self, net: &mut SupervisedNetwork) {
        let fetched = self.fetch(false).await;
        self.apply_or_report(net, fetched).await;
    }

    /// Publishes what a poll fetched, or reports why it could not.
    async fn apply_or_report(&self, net: &mut SupervisedNetwork, fetched: Result<Fetched, CloudError>) {
        match fetched {
            Ok(fetched) => self.apply(net, fetched).await,
            Err(e) => self.report_rest_failure(net, &e).await,
        }
    }

    /// Fetches the state (and with `with_config` the network configuration too) and publishes
    /// what changed. A REST success while the wire is down means `polling`.
    pub(super) async fn snapshot(&self, net: &mut SupervisedNetwork, with_config: bool) -> Result<(), CloudError> {
        let fetched = self.fetch(with_config).await?;
        self.apply(net, fetched).await;
        Ok(())
    }

    /// The REST half of a snapshot. It changes nothing, so it may be dropped half-way.
    ///
    /// Boxed, like [`Supervisor::apply`]: the supervisor's task is as large as the largest state
    /// it awaits, and keeps that room for its whole life, once per network. Boxing the two
    /// largest states keeps every network's task in a smaller allocation block, for one
    /// allocation per snapshot.
    fn fetch(&self, with_config: bool) -> Pin<Box<impl Future<Output = Result<Fetched, CloudError>> + '_>> {
        Box::pin(self.fetch_inline(with_config))
    }

    async fn fetch_inline(&self, with_config: bool) -> Result<Fetched, CloudError> {
        let config = if with_config { Some(self.with_session(|s| self.rest_network(s)).await?) } else { None };
        let state = self.with_session(|s| self.rest_state(s)).await?;
        Ok(Fetched { config, state })
    }

    /// A poll while the wire is down. With a tight quota the fetch may wait seconds for a slot;
    /// a wire event arriving meanwhile (typically `Opened`) abandons it, to be handled at once.
    pub(super) async fn poll(&self, net: &mut SupervisedNetwork, wire_rx: &mut mpsc::Receiver<WireEvent>) -> Polled {
        let fetched = tokio::select! {
            biased;
            event = wire_rx.recv() => return event.map_or(Polled::WireGone, |e| Polled::Interrupted(Box::new(e))),
            fetched = self.fetch(false) => fetched,
        };
        self.apply_or_report(net, fetched).await;
        Polled::Done
    }

    /// The publishing half of a snapshot: applies what was fetched and sends what changed.
    ///
    /// Boxed, as [`Supervisor::fetch`] is: its locals (the topology change, the delta, the
    /// fixtures' requests) would be the task's largest state.
    fn apply<'a>(
        &'a self,
        net: &'a mut SupervisedNetwork,
        fetched: Fetched,
    ) -> Pin<Box<impl Future<Output = ()> + 'a>> {
        Box::pin(self.apply_inline(net, fetched))
    }

    async fn apply_inline(&self, net: &mut SupervisedNetwork, Fetched { config, state }: Fetched) {
        let first = net.view.status.revision.is_none() && net.view.units.is_empty();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        crate::metrics::metrics().last_resync.set(now.as_secs_f64());
        let before_status = net.view.status.clone();
        let mut topology = Topology::default();
        // Dropped here, not held across the awaits below (fixtures, a full queue to the publisher).
        if let Some(config) = config {
            topology = net.view.apply_config(&config);
        }
        let revision_before = net.view.status.revision;
        let delta: SnapshotDelta = net.view.apply_snapshot(state);
        merge_topology(&mut topology, delta.topology);
        let revision_changed = revision_before.is_some() && net.view.status.revision != revision_before;
        let fixture_ids = net.view.fixture_ids();
        let fixtures_missing = !fixture_ids.is_subset(&net.fixtures_asked);
        if fixtures_missing {
            // Those that failed for now stay unasked: the next snapshot asks for them again.
            let (fixtures, settled) = self.fixtures.get_all(&self.rest, fixture_ids).await;
            net.view.set_fixtures(fixtures);
            net.fixtures_asked = settled;
        }
        if !net.wire_live {
            net.view.set_connection(Connection::Polling);
        }
        if first || !topology.is_empty() || revision_changed || fixtures_missing {
            let view = Arc::new(net.view.clone());
            self.send(Update::Network { view, topology: Box::new(topology) }).await;
        } else {
            if net.view.status != before_status {
                self.send_status(net).await;
            }
            for id in delta.changed_units {
                if let Some(unit) = net.view.units.get(&id) {
                    self.send(Update::Unit { network: self.id.clone(), unit: unit.clone() }).await;
                }
            }
        }
        // After the states they changed, as live events follow theirs.
        for (unit, now) in delta.occupancy {
            let event = UnitEvent::Occupancy(now);
            self.send(Update::Event { network: self.id.clone(), unit, event, at: chrono::Utc::now() }).await;
        }
        // After the view: the publisher has the network's mirror when its photos arrive. A new
        // revision may have changed no unit, scene or group (a photo added, for instance).
        self.fetch_photos_if_due(net);
    }

    async fn rest_network(&self, session: Secret) -> Result<crate::cloud::model::Network, CloudError> {
        self.rest.network(&session, &self.id).await
    }

    async fn rest_state(&self, session: Secret) -> Result<crate::cloud::model::NetworkState, CloudError> {
        self.rest.network_state(&session, &self.id).await
    }
}

fn merge_topology(into: &mut Topology, more: Topology) {
    into.units.added.extend(more.units.added);
    into.units.removed.extend(more.units.removed);
    into.units.renamed.extend(more.units.renamed);
    into.scenes.added.extend(more.scenes.added);
    into.scenes.removed.extend(more.scenes.removed);
    into.scenes.renamed.extend(more.scenes.renamed);
    into.groups.added.extend(more.groups.added);
    into.groups.removed.extend(more.groups.removed);
    into.groups.renamed.extend(more.groups.renamed);
    into.membership_changed |= more.membership_changed;
}
