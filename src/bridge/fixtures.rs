//! The fixture cache: one `GET /v1/fixtures/{id}` per distinct fixture id for the whole bridge,
//! shared by every network (many networks use the same luminaire models), and never one request
//! per unit.
//!
//! Concurrent lookups of the same id wait for the one request in flight. A fixture the service
//! will not give (404, or 401 as seen for some third-party lamps) is remembered as missing, so it
//! is not asked for again; transient failures are not remembered and are retried next time.

use crate::cloud::model::Fixture;
use crate::cloud::rest::RestClient;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

type Slot = Arc<OnceCell<Option<Arc<Fixture>>>>;

/// Fixtures by id, fetched at most once each.
#[derive(Debug, Default)]
pub struct FixtureCache {
    slots: Mutex<HashMap<u32, Slot>>,
}

impl FixtureCache {
    /// An empty cache.
    pub fn new() -> FixtureCache {
        FixtureCache::default()
    }

    fn slot(&self, id: u32) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(id).or_default().clone()
    }

    /// One fixture; `None` when the service has none for this id or it could not be fetched now.
    pub async fn get(&self, rest: &RestClient, id: u32) -> Option<Arc<Fixture>> {
        let slot = self.slot(id);
        let result = slot
            .get_or_try_init(|| async {
                match rest.fixture(id).await {
                    Ok(f) => Ok(Some(Arc::new(f))),
                    Err(e) if e.status().is_some_and(|s| s == 404 || s == 401) => {
                        tracing::info!(fixture = id, error = %e, "fixture not available; using the unit's controls alone");
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            })
            .await;
        match result {
            Ok(found) => found.clone(),
            Err(e) => {
                tracing::warn!(fixture = id, error = %e, "fixture request failed; will retry");
                None
            }
        }
    }

    /// Every fixture of a set of ids that could be had, and the ids settled: had, or known to be
    /// missing. The others failed for now and are worth asking again.
    pub async fn get_all(&self, rest: &RestClient, ids: BTreeSet<u32>) -> (BTreeMap<u32, Arc<Fixture>>, BTreeSet<u32>) {
        let mut out = BTreeMap::new();
        let mut settled = BTreeSet::new();
        for id in ids {
            if let Some(f) = self.get(rest, id).await {
                out.insert(id, f);
            }
            if self.slot(id).initialized() {
                settled.insert(id);
            }
        }
        (out, settled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::RestConfig;
    use crate::cloud::model::Secret;
    use crate::cloud::quota::{QuotaConfig, QuotaGuard};
    use crate::sim::{SimConfig, Simulator, site::DEMO_API_KEY, site::Site};

    #[tokio::test]
    async fn a_fixture_that_failed_for_now_is_not_settled_and_is_asked_again() {
        let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
        let quota = Arc::new(QuotaGuard::new(&QuotaConfig::default()));
        let rest = RestClient::new(RestConfig::new(sim.base_url().parse().unwrap(), Secret::new(DEMO_API_KEY)), quota)
            .unwrap();
        let cache = FixtureCache::new();
        let ids = BTreeSet::from([1001, 1002, 4242]);
        sim.fail_next_requests(1);
        let (found, settled) = cache.get_all(&rest, ids.clone()).await;
        assert_eq!(found.keys().copied().collect::<Vec<_>>(), [1002], "1001 failed (500), 4242 is unknown");
        assert_eq!(settled, BTreeSet::from([1002, 4242]), "a 500 is not settled, a 404 is");
        let (found, settled) = cache.get_all(&rest, ids.clone()).await;
        assert_eq!(found.keys().copied().collect::<Vec<_>>(), [1001, 1002]);
        assert_eq!(settled, ids);
    }
}
