//! [`OptF64`]: an optional number in one word, for the optional fields of a control.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An optional `f64` in 8 bytes instead of an `Option<f64>`'s 16: NaN stands for "absent".
///
/// JSON has no NaN, so every number the cloud sends is kept. With these, a `CCT` or `Slider`
/// control is 64 bytes and a [`super::Control`] 72 instead of 88, so a unit's list of one, two
/// or three controls fits an 80-, 160- or 224-byte block instead of 96, 192 or 320.
#[derive(Clone, Copy)]
pub struct OptF64(f64);

impl OptF64 {
    /// No value.
    pub const NONE: OptF64 = OptF64(f64::NAN);

    /// The value, if any.
    pub fn get(self) -> Option<f64> {
        (!self.0.is_nan()).then_some(self.0)
    }

    /// The value by reference, if any (as [`Option::as_ref`]).
    pub fn as_ref(&self) -> Option<&f64> {
        self.is_some().then_some(&self.0)
    }

    /// Whether there is a value.
    pub fn is_some(&self) -> bool {
        !self.0.is_nan()
    }

    /// Whether there is none.
    pub fn is_none(&self) -> bool {
        self.0.is_nan()
    }

    /// This value, or `other()`'s when there is none (as [`Option::or_else`]).
    pub fn or_else(self, other: impl FnOnce() -> OptF64) -> OptF64 {
        if self.is_some() { self } else { other() }
    }
}

impl Default for OptF64 {
    fn default() -> Self {
        Self::NONE
    }
}

/// `Some(NaN)` (which no JSON number gives) is "absent".
impl From<Option<f64>> for OptF64 {
    fn from(value: Option<f64>) -> Self {
        value.map_or(Self::NONE, OptF64)
    }
}

/// As the `Option<f64>` it stands for: two absent values are equal.
impl PartialEq for OptF64 {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Serialize for OptF64 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(serializer)
    }
}

/// `null` is absent, as a missing field is with `#[serde(default)]`.
impl<'de> Deserialize<'de> for OptF64 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<f64>::deserialize(deserializer).map(OptF64::from)
    }
}

impl fmt::Debug for OptF64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
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
