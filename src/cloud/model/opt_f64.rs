//! [`OptF64`]: an optional number in one word, for the optional fields of a control and a unit's
//! dim level.

use serde::{Deserialize, Deserializer};

use super::opt_int::{Absent, OptNum};

/// An optional `f64` in 8 bytes instead of an `Option<f64>`'s 16: NaN stands for "absent".
///
/// JSON has no NaN, so every number the cloud sends is kept. With these, a `CCT` or `Slider`
/// control is 64 bytes and a [`super::Control`] 72 instead of 88, so a unit's list of one, two
/// or three controls fits an 80-, 160- or 224-byte block instead of 96, 192 or 320.
pub type OptF64 = OptNum<f64>;

impl Absent for f64 {
    const ABSENT: f64 = f64::NAN;

    fn is_absent(&self) -> bool {
        self.is_nan()
    }

    /// `null` is absent; no JSON number is NaN.
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        Option::<f64>::deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::OptF64;

    #[test]
    fn holds_every_number_and_absence() {
        for v in [0.0, -0.0, 1.5, f64::MAX, f64::MIN_POSITIVE, f64::INFINITY] {
            assert_eq!(OptF64::from(Some(v)).get(), Some(v));
        }
        assert_eq!(OptF64::from(None).get(), None);
        assert_eq!(OptF64::from(Some(f64::NAN)).get(), None);
        assert_eq!((OptF64::default().get(), OptF64::from(Some(0.0)).get()), (None, Some(0.0)));
    }

    #[test]
    fn compares_like_the_option_it_stands_for() {
        assert_eq!(OptF64::NONE, OptF64::NONE);
        assert_eq!(OptF64::from(Some(0.5)), OptF64::from(Some(0.5)));
        assert_ne!(OptF64::from(Some(0.5)), OptF64::NONE);
        assert_ne!(OptF64::from(Some(0.5)), OptF64::from(Some(0.25)));
        assert_eq!(format!("{:?} {:?}", OptF64::from(Some(2.0)), OptF64::NONE), "Some(2.0) None");
    }
}
