//! Colour conversions for the published state: the cloud reports colour as CIE xy, as hue and
//! saturation, or as an `rgb(r, g, b)` string; Home Assistant's `xy` colour mode wants CIE xy.
//!
//! Conversions use the sRGB primaries, the D65 white point and the sRGB transfer curve (DESIGN §4),
//! the same as the simulator and Home Assistant's own `color_RGB_to_xy`.

/// CIE xy of an sRGB colour given as 0..255 channels; D65 white for black.
pub fn rgb_to_xy(r: u8, g: u8, b: u8) -> (f64, f64) {
    let lin = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
    };
    let (r, g, b) = (lin(r), lin(g), lin(b));
    // IEC 61966-2-1 sRGB → XYZ (D65).
    let x = 0.412_456_4 * r + 0.357_576_1 * g + 0.180_437_5 * b;
    let y = 0.212_672_9 * r + 0.715_152_2 * g + 0.072_175_0 * b;
    let z = 0.019_333_9 * r + 0.119_192_0 * g + 0.950_304_1 * b;
    let sum = x + y + z;
    if sum <= 0.0 {
        return (0.3127, 0.329);
    }
    (round4(x / sum), round4(y / sum))
}

/// CIE xy of a fully bright colour of `hue` and `sat` (both 0..1).
pub fn hue_sat_to_xy(hue: f64, sat: f64) -> (f64, f64) {
    let (r, g, b) = hsv_to_rgb(hue, sat);
    rgb_to_xy(r, g, b)
}

/// sRGB channels of a fully bright colour of `hue` and `sat` (both 0..1).
fn hsv_to_rgb(hue: f64, sat: f64) -> (u8, u8, u8) {
    let h = (hue.rem_euclid(1.0)) * 6.0;
    let s = sat.clamp(0.0, 1.0);
    let sector = h.floor();
    let f = h - sector;
    let (p, q, t) = (1.0 - s, 1.0 - s * f, 1.0 - s * (1.0 - f));
    let (r, g, b) = match sector as u8 {
        0 => (1.0, t, p),
        1 => (q, 1.0, p),
        2 => (p, 1.0, t),
        3 => (p, q, 1.0),
        4 => (t, p, 1.0),
        _ => (1.0, p, q),
    };
    let to8 = |v: f64| (v * 255.0).round().clamp(0.0, 255.0) as u8;
    (to8(r), to8(g), to8(b))
}

/// Parses `rgb(r, g, b)` (spaces optional).
pub fn parse_rgb(text: &str) -> Option<(u8, u8, u8)> {
    let inner = text.trim().strip_prefix("rgb(")?.strip_suffix(')')?;
    let mut parts = inner.split(',').map(|p| p.trim().parse::<u8>());
    let rgb = (parts.next()?.ok()?, parts.next()?.ok()?, parts.next()?.ok()?);
    parts.next().is_none().then_some(rgb)
}

/// Rounds to 4 decimals (enough for xy; keeps payloads stable and short).
pub fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primaries_and_white() {
        assert_eq!(rgb_to_xy(255, 255, 255), (0.3127, 0.329));
        assert_eq!(rgb_to_xy(255, 0, 0), (0.64, 0.33));
        assert_eq!(rgb_to_xy(0, 255, 0), (0.3, 0.6));
        assert_eq!(rgb_to_xy(0, 0, 255), (0.15, 0.06));
        assert_eq!(hue_sat_to_xy(0.0, 1.0), (0.64, 0.33));
        assert_eq!(hue_sat_to_xy(0.5, 0.0), (0.3127, 0.329));
    }

    #[test]
    fn rgb_strings() {
        assert_eq!(parse_rgb("rgb(1, 2,3)"), Some((1, 2, 3)));
        assert_eq!(parse_rgb("rgb(1,2)"), None);
        assert_eq!(parse_rgb("#fff"), None);
    }
}
