//! Unit icons for the page: each fixture's icon (`GET /v1/fixtures/{id}/icon`, docs/cloud.md),
//! fetched once through the bridge's REST client (and so through the API key's quota guard),
//! kept in memory, served at `/icon/fixture/<id>`.
//!
//! Only fixtures of units the bridge knows are fetched, so a page cannot make the bridge spend
//! its quota on made-up ids. Concurrent asks for one icon wait for one fetch. A failed fetch is
//! not repeated for [`RETRY_AFTER`].

use crate::cloud::RestClient;
use axum::body::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::time::Instant;

/// How long a failed icon is not asked for again.
pub const RETRY_AFTER: Duration = Duration::from_secs(600);

/// An icon as served.
#[derive(Debug, Clone)]
pub struct Icon {
    /// Its content type (`image/png` when the service named none).
    pub content_type: String,
    /// The picture.
    pub bytes: Bytes,
}

type Slot = Arc<tokio::sync::Mutex<Option<Result<Icon, Instant>>>>;

/// The icon cache.
#[derive(Debug)]
pub struct Icons {
    rest: RestClient,
    runtime: Handle,
    slots: Mutex<HashMap<u32, Slot>>,
}

impl Icons {
    /// A cache fetching with `rest` on `runtime` (the bridge's, where its REST client runs).
    pub fn new(rest: RestClient, runtime: Handle) -> Icons {
        Icons { rest, runtime, slots: Mutex::new(HashMap::new()) }
    }

    /// The icon of `fixture`, fetched on first ask; `None` when the service has none (or failed
    /// within [`RETRY_AFTER`]). The caller checks that the fixture belongs to a known unit.
    pub async fn fixture(&self, fixture: u32) -> Option<Icon> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(fixture).or_default().clone()
        };
        let mut held = slot.lock().await;
        match &*held {
            Some(Ok(icon)) => return Some(icon.clone()),
            Some(Err(failed)) if failed.elapsed() < RETRY_AFTER => return None,
            _ => {}
        }
        let rest = self.rest.clone();
        let fetched = self.runtime.spawn(async move { rest.fixture_icon(fixture).await }).await;
        let result = match fetched {
            Ok(Ok(image)) => Ok(Icon {
                content_type: image.content_type.unwrap_or_else(|| "image/png".into()),
                bytes: Bytes::from(image.bytes),
            }),
            Ok(Err(e)) => {
                tracing::debug!(fixture, error = %e, "no icon for the fixture");
                Err(Instant::now())
            }
            Err(_) => Err(Instant::now()),
        };
        *held = Some(result.clone());
        result.ok()
    }
}
