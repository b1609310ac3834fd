//! A photo of a network's gallery as the consumers receive it, and the checks a downloaded image
//! passes before it is published (docs/mqtt.md, "Photos"). The fetch is
//! [`super::photo_fetch`].

use bytes::Bytes;

/// Largest photo published: Home Assistant and the broker hold every retained photo in memory,
/// and a bigger one is most likely not meant for a dashboard.
pub const MAX_PHOTO_BYTES: usize = 4 * 1024 * 1024;

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
