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

    /// Every fixture of a set of ids that could be had.
    pub async fn get_all(&self, rest: &RestClient, ids: BTreeSet<u32>) -> BTreeMap<u32, Arc<Fixture>> {
        let mut out = BTreeMap::new();
        for id in ids {
            if let Some(f) = self.get(rest, id).await {
                out.insert(id, f);
            }
        }
        out
    }
}
