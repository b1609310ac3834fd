//! Unit icons for the page: each fixture's icon (`GET /v1/fixtures/{id}/icon`, docs/cloud.md),
//! served at `/icon/fixture/<id>`, and the icon of a unit that has an image of its own (`GET
//! /v1/networks/{id}/units/{unit}/icon`, with the network's session), served at
//! `/icon/unit/<network>/<unit>`. Each is fetched once through the bridge's REST client (and so
//! through the API key's quota guard) and kept in memory.
//!
//! Only icons of units the bridge knows are fetched, so a page cannot make the bridge spend
//! its quota on made-up ids. Concurrent asks for one icon wait for one fetch. A failed fetch is
//! not repeated for [`RETRY_AFTER`].

use crate::bridge::runner::Bridge;
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

/// Which icon.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Fixture(u32),
    Unit(String, u32),
}

/// The icon cache.
#[derive(Debug)]
pub struct Icons {
    rest: RestClient,
    runtime: Handle,
    bridge: Option<Bridge>,
    slots: Mutex<HashMap<Key, Slot>>,
}

/// The content type of a picture from the service as it may be served: an image, never SVG
/// (which may carry script); the case of the name does not matter.
pub fn image_type(content_type: &str) -> Option<&str> {
    let lower = content_type.to_ascii_lowercase();
    (lower.trim_start().starts_with("image/") && !lower.contains("svg")).then_some(content_type)
}

impl Icons {
    /// A cache fetching with `rest` on `runtime` (the bridge's, where its REST client runs).
    pub fn new(rest: RestClient, runtime: Handle) -> Icons {
        Icons { rest, runtime, bridge: None, slots: Mutex::new(HashMap::new()) }
    }

    /// Unit icons are fetched with the sessions of `bridge`'s networks.
    pub fn with_sessions(mut self, bridge: Bridge) -> Icons {
        self.bridge = Some(bridge);
        self
    }

    /// The icon of `fixture`, fetched on first ask; `None` when the service has none (or failed
    /// within [`RETRY_AFTER`]). The caller checks that the fixture belongs to a known unit.
    pub async fn fixture(&self, fixture: u32) -> Option<Icon> {
        let rest = self.rest.clone();
        self.cached(Key::Fixture(fixture), async move { rest.fixture_icon(fixture).await }).await
    }

    /// The icon of `unit` of `network` from the service's unit-icon route (its image, or its
    /// fixture's icon), fetched on first ask; `None` without one. The caller checks that the
    /// unit is known.
    pub async fn unit(&self, network: &str, unit: u32) -> Option<Icon> {
        let handle = self.bridge.as_ref()?.network(network)?;
        let rest = self.rest.clone();
        let fetch = async move {
            handle
                .sessions
                .with_session(&handle.id, |session| {
                    let (rest, id) = (rest.clone(), handle.id.clone());
                    async move { rest.unit_icon(&session, &id, unit).await }
                })
                .await
        };
        self.cached(Key::Unit(network.to_string(), unit), fetch).await
    }

    async fn cached<F>(&self, key: Key, fetch: F) -> Option<Icon>
    where
        F: std::future::Future<Output = Result<crate::cloud::rest::Image, crate::cloud::CloudError>> + Send + 'static,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(key.clone()).or_default().clone()
        };
        let mut held = slot.lock().await;
        match &*held {
            Some(Ok(icon)) => return Some(icon.clone()),
            Some(Err(failed)) if failed.elapsed() < RETRY_AFTER => return None,
            _ => {}
        }
        let fetched = self.runtime.spawn(fetch).await;
        let result = match fetched {
            Ok(Ok(image)) => Ok(Icon {
                content_type: image.content_type.unwrap_or_else(|| "image/png".into()),
                bytes: Bytes::from(image.bytes),
            }),
            Ok(Err(e)) => {
                tracing::debug!(icon = ?key, error = %e, "no icon");
                Err(Instant::now())
            }
            Err(_) => Err(Instant::now()),
        };
        *held = Some(result.clone());
        result.ok()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_pictures_are_served_as_such_whatever_the_case() {
        assert_eq!(super::image_type("image/png"), Some("image/png"));
        assert_eq!(super::image_type("Image/PNG"), Some("Image/PNG"));
        assert_eq!(super::image_type("IMAGE/SVG+XML"), None);
        assert_eq!(super::image_type("text/html"), None);
    }
}
