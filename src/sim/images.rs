//! The simulated service's pictures: unit images, gallery photos and fixture icons.
//!
//! The real service returns PNG files for these. The simulator has no real pictures, so it draws
//! small ones (32×32 RGBA) whose colour comes from a hash of the image or fixture id: the same id
//! always gives the same bytes, different ids give visibly different images, and every file is a
//! valid PNG that any decoder accepts.

use crate::color::hsv_to_rgb8 as hsv_to_rgb;

/// Width and height of every generated image, in pixels.
pub const SIZE: u32 = 32;

/// Why an image could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The PNG encoder refused the pixels (cannot happen for the fixed size used here, but the
    /// encoder's API is fallible, so the error is carried rather than unwrapped).
    #[error("PNG encoding failed: {0}")]
    Encode(#[from] png::EncodingError),
}

/// 64-bit FNV-1a: a tiny, stable hash. Used wherever the simulator derives values from ids, so
/// the results never change between runs, platforms or Rust versions (unlike `DefaultHasher`).
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    fnv1a_from(0xcbf2_9ce4_8422_2325, parts)
}

/// Continues an FNV-1a hash: `fnv1a_from(fnv1a(a), b)` equals `fnv1a(a ++ b)`, so a prefix
/// shared by many hashes is hashed once.
pub(crate) fn fnv1a_from(mut h: u64, parts: &[&[u8]]) -> u64 {
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The colour an id is drawn in: a saturated hue chosen by the id's hash.
pub fn colour_of(id: &str) -> (u8, u8, u8) {
    let h = fnv1a(&[id.as_bytes()]);
    let hue = (h % 360) as f64 / 360.0;
    let sat = 0.55 + ((h >> 16) % 40) as f64 / 100.0;
    hsv_to_rgb(hue, sat)
}

/// A unit image or gallery photo (`/images/{imageId}`, and a unit's icon when the unit has an
/// image): an opaque picture, a vertical gradient from the id's colour to a darker shade.
pub fn picture(image_id: &str) -> Result<Vec<u8>, ImageError> {
    let (r, g, b) = colour_of(image_id);
    let mut pixels = Vec::with_capacity((SIZE * SIZE * 4) as usize);
    for y in 0..SIZE {
        // From full colour at the top to 40 % at the bottom.
        let shade = |c: u8| (f64::from(c) * (1.0 - 0.6 * f64::from(y) / f64::from(SIZE - 1))).round() as u8;
        for _ in 0..SIZE {
            pixels.extend_from_slice(&[shade(r), shade(g), shade(b), 255]);
        }
    }
    encode(&pixels)
}

/// A gallery photo as the site file asks it served: padded with zeros to `size` bytes (never
/// cut), and with `corrupt` without its PNG signature.
pub fn served_as(mut png: Vec<u8>, size: Option<usize>, corrupt: bool) -> Vec<u8> {
    if let Some(size) = size {
        png.resize(size.max(png.len()), 0);
    }
    if corrupt && let Some(first) = png.first_mut() {
        // `\x89PNG` becomes `GPNG`: the rest of the file is still there.
        *first = b'G';
    }
    png
}

/// A fixture icon (`/fixtures/{id}/icon`, and a unit's icon when the unit has no image): a disc
/// in the fixture's colour on a transparent background.
pub fn fixture_icon(fixture_id: i64) -> Result<Vec<u8>, ImageError> {
    let (r, g, b) = colour_of(&format!("fixture-{fixture_id}"));
    let centre = f64::from(SIZE - 1) / 2.0;
    let radius = f64::from(SIZE) * 0.42;
    let mut pixels = Vec::with_capacity((SIZE * SIZE * 4) as usize);
    for y in 0..SIZE {
        for x in 0..SIZE {
            let d = (f64::from(x) - centre).hypot(f64::from(y) - centre);
            let alpha = if d <= radius { 255 } else { 0 };
            pixels.extend_from_slice(&[r, g, b, alpha]);
        }
    }
    encode(&pixels)
}

/// Encodes `SIZE`×`SIZE` RGBA pixels as a PNG file.
fn encode(pixels: &[u8]) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::with_capacity(pixels.len() / 4 + 128);
    {
        let mut encoder = png::Encoder::new(&mut out, SIZE, SIZE);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(pixels)?;
        writer.finish()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continued_hash_equals_the_whole_one() {
        let whole = fnv1a(&[b"seed", b"network", b"unit", b"slot"]);
        assert_eq!(fnv1a_from(fnv1a(&[b"seed", b"network"]), &[b"unit", b"slot"]), whole);
        assert_ne!(fnv1a_from(fnv1a(&[b"seed", b"network"]), &[b"unitslot"]), whole);
    }

    fn decode(bytes: &[u8]) -> (png::OutputInfo, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info, buf)
    }

    #[test]
    fn pictures_are_valid_deterministic_pngs() {
        let a = picture("photo-home-1").unwrap();
        assert_eq!(&a[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(a, picture("photo-home-1").unwrap());
        assert_ne!(a, picture("unit-image-1").unwrap());
        let (info, pixels) = decode(&a);
        assert_eq!((info.width, info.height), (SIZE, SIZE));
        assert_eq!(info.color_type, png::ColorType::Rgba);
        let (r, g, b) = colour_of("photo-home-1");
        assert_eq!(&pixels[..4], &[r, g, b, 255]);
    }

    #[test]
    fn icons_are_discs_on_transparent_background() {
        let (info, pixels) = decode(&fixture_icon(1001).unwrap());
        assert_eq!((info.width, info.height), (SIZE, SIZE));
        assert_eq!(pixels[3], 0, "corner is transparent");
        let centre = ((SIZE / 2 * SIZE + SIZE / 2) * 4) as usize;
        assert_eq!(pixels[centre + 3], 255, "centre is opaque");
        assert_ne!(fixture_icon(1001).unwrap(), fixture_icon(1002).unwrap());
    }

    #[test]
    fn photos_are_served_padded_or_corrupt_on_request() {
        let png = picture("p").unwrap();
        assert_eq!(served_as(png.clone(), None, false), png);
        let padded = served_as(png.clone(), Some(5000), false);
        assert_eq!((padded.len(), &padded[..png.len()]), (5000, &png[..]));
        assert_eq!(served_as(png.clone(), Some(1), false), png, "never cut");
        assert_eq!(&served_as(png, None, true)[..4], b"GPNG");
    }

    #[test]
    fn hash_separates_parts() {
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
    }
}
