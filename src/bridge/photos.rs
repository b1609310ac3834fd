//! A network's gallery: its photos fetched over REST, checked, and sent to the consumers as one
//! [`Update::Photos`] (docs/mqtt.md, "Photos").
//!
//! Photos change rarely and are large, so they never hold up live work: the supervisor starts a
//! fetch as a task of its own once a snapshot is applied (at start-up, and when the network's
//! revision changes), and a newer fetch replaces one still running. Every request goes through
//! the network's REST client, so photos share the API key's quota with everything else.

use super::session_source::SessionSource;
use super::update::Update;
use crate::cloud::CloudError;
use crate::cloud::model::{Photo, Secret};
use crate::cloud::rest::RestClient;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Largest photo published: Home Assistant and the broker hold every retained photo in memory,
/// and a bigger one is most likely not meant for a dashboard.
pub const MAX_PHOTO_BYTES: usize = 4 * 1024 * 1024;

/// When a photo fetch tries again after a failed request. Photos are not urgent: the delays
/// leave the API key's quota to live work, and a fetch for a newer revision replaces this one.
const RETRY_DELAYS: [Duration; 3] = [Duration::from_secs(10), Duration::from_secs(60), Duration::from_secs(300)];

/// The first eight bytes of every PNG file.
const PNG_SIGNATURE: &[u8; 8] = b"\x89PNG\r\n\x1a\n";

/// One photo of a network's gallery, ready to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPhoto {
    /// The photo's name in the gallery.
    pub name: String,
    /// The image id (`GET …/images/{imageId}`): the photo's identity.
    pub image: String,
    /// The PNG file (at most [`MAX_PHOTO_BYTES`]); shared, so republishing copies nothing.
    pub bytes: Bytes,
    /// A hash of `bytes`: what the MQTT side compares to know whether the photo changed.
    pub digest: u64,
}

impl NetPhoto {
    /// A photo of `bytes`.
    pub fn new(name: String, image: String, bytes: Bytes) -> NetPhoto {
        let digest =
            std::hash::BuildHasher::hash_one(&foldhash::quality::FixedState::with_seed(0x7068_6f74_6f73), &bytes[..]);
        NetPhoto { name, image, bytes, digest }
    }
}

/// Why a photo is left out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skipped {
    /// The file is larger than [`MAX_PHOTO_BYTES`].
    #[error("{0} bytes, more than the {MAX_PHOTO_BYTES} a photo may have")]
    TooLarge(usize),
    /// The file does not start with the PNG signature.
    #[error("not a PNG file")]
    NotPng,
}

/// Checks a downloaded photo: a PNG of at most [`MAX_PHOTO_BYTES`].
pub fn check(bytes: &[u8]) -> Result<(), Skipped> {
    if bytes.len() > MAX_PHOTO_BYTES {
        return Err(Skipped::TooLarge(bytes.len()));
    }
    if !bytes.starts_with(PNG_SIGNATURE) {
        return Err(Skipped::NotPng);
    }
    Ok(())
}

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
        super::network::with_session(&self.sessions, &self.id, op).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pngs_up_to_the_limit_pass() {
        let mut png = PNG_SIGNATURE.to_vec();
        png.extend([0; 16]);
        assert_eq!(check(&png), Ok(()));
        assert_eq!(check(b"GIF89a......"), Err(Skipped::NotPng));
        assert_eq!(check(&[]), Err(Skipped::NotPng));
        png.resize(MAX_PHOTO_BYTES, 0);
        assert_eq!(check(&png), Ok(()));
        png.push(0);
        assert_eq!(check(&png), Err(Skipped::TooLarge(MAX_PHOTO_BYTES + 1)));
    }

    #[test]
    fn the_digest_follows_the_bytes() {
        let a = NetPhoto::new("a".into(), "i".into(), Bytes::from_static(b"one"));
        let b = NetPhoto::new("b".into(), "j".into(), Bytes::from_static(b"one"));
        let c = NetPhoto::new("a".into(), "i".into(), Bytes::from_static(b"two"));
        assert_eq!(a.digest, b.digest);
        assert_ne!(a.digest, c.digest);
    }
}
