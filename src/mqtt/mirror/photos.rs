//! A network's photos as the mirror keeps them, and the stand-ins the store holds for them
//! (docs/mqtt.md, "Photos"; the topics and `image` entities are rendered by
//! `render::photos`).
//!
//! The store compares text payloads by their hashes and keeps no payloads; a photo is a PNG file
//! of up to 4 MiB. So the store is handed a short *stand-in* for each photo: a text naming the
//! network, the image and a hash of its bytes. A changed photo has a new stand-in, so the store
//! publishes it again, and a removed one is cleared like any topic its owner stops wanting. When
//! a publication is handed to the MQTT client, [`PhotoRef::parse`] recognises a stand-in and the
//! publisher sends the bytes the mirror keeps instead ([`PhotoSet::bytes`]).
//!
//! The mirror keeps the bytes (shared, at most 4 MiB each) because everything the store
//! publishes again (after a reconnection, Home Assistant's birth) is rendered from the mirror;
//! fetching them again from the cloud each time would spend the API key's quota and leave the
//! broker without the photos until it answered.

use crate::bridge::photos::NetPhoto;
use crate::mqtt::topics;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What every stand-in starts with. No text payload the bridge renders starts with NUL (JSON
/// escapes it; the plain attribute values are numbers, words and names), and a payload that
/// starts so but names no photo of the mirror is sent as it is.
const MARK: &str = "\0casambi2mqtt-photo\0";

/// A network's photos with their slugs.
#[derive(Debug, Clone, Default)]
pub struct PhotoSet {
    photos: Arc<[NetPhoto]>,
    /// Slug by image id ([`topics::assign`]: a shared slug gets `-<image id>`).
    slugs: BTreeMap<String, String>,
}

impl PhotoSet {
    /// The set of `photos`, slugged.
    pub fn new(photos: Arc<[NetPhoto]>) -> PhotoSet {
        let slugs = topics::assign(photos.iter().map(|p| (p.image.clone(), p.name.as_str())), &[]);
        PhotoSet { photos, slugs }
    }

    /// Every photo with its slug, in gallery order.
    pub fn iter(&self) -> impl Iterator<Item = (&NetPhoto, &str)> {
        self.photos.iter().filter_map(|p| Some((p, self.slugs.get(&p.image)?.as_str())))
    }

    /// The bytes of the photo a stand-in names, when it is still this one.
    pub fn bytes(&self, stand_in: &PhotoRef<'_>) -> Option<Bytes> {
        self.photos.iter().find(|p| p.image == stand_in.image && p.digest == stand_in.digest).map(|p| p.bytes.clone())
    }
}

/// What a stand-in names: a photo of a network, by its image id and the hash of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhotoRef<'a> {
    /// Network id.
    pub network: &'a str,
    /// Image id.
    pub image: &'a str,
    /// [`NetPhoto::digest`].
    pub digest: u64,
}

impl PhotoRef<'_> {
    /// The stand-in text of `photo` of `network`.
    pub fn text(network: &str, photo: &NetPhoto) -> String {
        format!("{MARK}{network}\0{}\0{:016x}", photo.image, photo.digest)
    }

    /// The photo `payload` stands in for, if it is a stand-in. One byte compared for any other
    /// payload: this runs for every publication.
    pub fn parse(payload: &str) -> Option<PhotoRef<'_>> {
        if !payload.starts_with('\0') {
            return None;
        }
        let rest = payload.strip_prefix(MARK)?;
        let (network, rest) = rest.split_once('\0')?;
        let (image, digest) = rest.rsplit_once('\0')?;
        Some(PhotoRef { network, image, digest: u64::from_str_radix(digest, 16).ok()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn photo(name: &str, image: &str) -> NetPhoto {
        NetPhoto::new(name.into(), image.into(), Bytes::from_static(b"\x89PNG\r\n\x1a\n"))
    }

    #[test]
    fn a_stand_in_names_its_photo_and_nothing_else_parses() {
        let p = photo("Ground floor", "img/1\0x");
        let text = PhotoRef::text("net-1", &p);
        let parsed = PhotoRef::parse(&text).unwrap();
        assert_eq!(parsed, PhotoRef { network: "net-1", image: "img/1\0x", digest: p.digest });
        let set = PhotoSet::new(vec![p.clone()].into());
        assert_eq!(set.bytes(&parsed), Some(p.bytes.clone()));
        let stale = PhotoRef { digest: p.digest ^ 1, ..parsed };
        assert_eq!(set.bytes(&stale), None, "a stand-in of older bytes names nothing");
        for text in [
            "ON",
            "{\"a\":1}",
            "",
            "\0casambi2mqtt-photo\0net",
            "\0other\0n\0i\0ff",
            "\0casambi2mqtt-photo\0n\0i\0not-hex",
        ] {
            assert_eq!(PhotoRef::parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_photo_sharing_a_lower_image_ids_slug_gets_its_image_id() {
        let set = PhotoSet::new(vec![photo("Plan", "b2"), photo("Plan", "a1"), photo("Garden", "c3")].into());
        let slugs: Vec<&str> = set.iter().map(|(_, s)| s).collect();
        assert_eq!(slugs, ["plan-b2", "plan", "garden"]);
    }
}
