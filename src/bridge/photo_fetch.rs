//! A network's gallery: its photos fetched over REST, checked, and sent to the consumers as one
//! [`Update::Photos`] (docs/mqtt.md, "Photos").
//!
//! Photos change rarely and are large, so they never hold up live work: the supervisor starts a
//! fetch as a task of its own once a snapshot is applied (at start-up, and when the network's
//! revision changes), and a newer fetch replaces one still running. Every request goes through
//! the network's REST client, so photos share the API key's quota with everything else.

use super::photos::{NetPhoto, check};
use super::session_source::SessionSource;
use super::update::Update;
use crate::cloud::CloudError;
use crate::cloud::model::{Photo, Secret};
use crate::cloud::rest::RestClient;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// When a photo fetch tries again after a failed request. Photos are not urgent: the delays
/// leave the API key's quota to live work, and a fetch for a newer revision replaces this one.
const RETRY_DELAYS: [Duration; 3] = [Duration::from_secs(10), Duration::from_secs(60), Duration::from_secs(300)];

/// What a photo fetch needs: cheap clones of the supervisor's handles.
pub struct PhotoFetch {
    /// Network id.
    pub id: Arc<str>,
    /// REST client of the network's API key.
    pub rest: RestClient,
    /// Sessions of the credentials that open the network.
    pub sessions: SessionSource,
    /// Where the photos go.
    pub updates: mpsc::Sender<Update>,
}

impl PhotoFetch {
    /// Fetches the gallery and its images and sends them as one update. After a failed request
    /// it tries again later, a few times ([`RETRY_DELAYS`]); meanwhile, and if every try fails,
    /// the photos published stay, and the next revision change fetches again.
    pub async fn run(self) {
        let mut delays = RETRY_DELAYS.iter();
        loop {
            match self.fetch().await {
                Ok(photos) => {
                    // A closed receiver means the bridge is shutting down.
                    let _ = self.updates.send(Update::Photos { network: self.id.clone(), photos: photos.into() }).await;
                    return;
                }
                Err(e) => {
                    let retry = delays.next().filter(|_| !e.is_final());
                    tracing::warn!(network = %self.id, error = %e, ?retry, "photos not fetched; keeping the ones published");
                    let Some(delay) = retry else { return };
                    tokio::time::sleep(*delay).await;
                }
            }
        }
    }

    async fn fetch(&self) -> Result<Vec<NetPhoto>, CloudError> {
        let gallery: Vec<Photo> = self.with_session(|s| async move { self.rest.gallery(&s, &self.id).await }).await?;
        let mut photos = Vec::with_capacity(gallery.len());
        for photo in gallery {
            let Some(image) = photo.image.filter(|i| !i.is_empty()) else {
                tracing::debug!(network = %self.id, photo = %photo.name, "gallery entry without an image");
                continue;
            };
            if photos.iter().any(|p: &NetPhoto| p.image == image) {
                continue;
            }
            let file = self.with_session(|s| self.image(s, &image)).await?;
            match check(&file.bytes) {
                Ok(()) => photos.push(NetPhoto::new(photo.name, image, file.bytes.into())),
                Err(why) => {
                    tracing::warn!(network = %self.id, photo = %photo.name, image = %image, reason = %why, "photo skipped");
                }
            }
        }
        Ok(photos)
    }

    async fn image(&self, session: Secret, image: &str) -> Result<crate::cloud::rest::Image, CloudError> {
        self.rest.image(&session, &self.id, image).await
    }

    async fn with_session<T, F, Fut>(&self, op: F) -> Result<T, CloudError>
    where
        F: Fn(Secret) -> Fut,
        Fut: std::future::Future<Output = Result<T, CloudError>>,
    {
        self.sessions.with_session(&self.id, op).await
    }
}
