//! [`OptInt`]: an optional integer in one word, for the undocumented numbers a unit carries.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An optional `i64` in 8 bytes instead of an `Option<i64>`'s 16: `i64::MIN` stands for "absent".
///
/// A unit's state is kept per unit for the bridge's life (25,000 of them on a big site, each in
/// an `Arc`); three of these instead of `Option<i64>` bring it from the allocator's 256-byte size
/// class to the 224-byte one. The one value given up, −2⁶³, is read like any other integer out
/// of range ([`super::de::lenient_int`]): an error, never a silently different number.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptInt(i64);

impl OptInt {
    /// No value.
    pub const NONE: OptInt = OptInt(i64::MIN);

    /// The value, if any.
    pub fn get(self) -> Option<i64> {
        (self != Self::NONE).then_some(self.0)
    }

    /// The value by reference, if any (as [`Option::as_ref`]).
    pub fn as_ref(&self) -> Option<&i64> {
        self.is_some().then_some(&self.0)
    }

    /// Whether there is a value.
    pub fn is_some(&self) -> bool {
        *self != Self::NONE
    }

    /// Whether there is none.
    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }

    /// This value, or `other()`'s when there is none (as [`Option::or_else`]).
    pub fn or_else(self, other: impl FnOnce() -> OptInt) -> OptInt {
        if self.is_some() { self } else { other() }
    }

    /// `value` as an `OptInt`; `None` when it is `i64::MIN`, the one number it cannot hold.
    pub fn new(value: i64) -> Option<OptInt> {
        (value != i64::MIN).then_some(OptInt(value))
    }
}

impl Default for OptInt {
    fn default() -> Self {
        Self::NONE
    }
}

/// Only for literals and tests: `i64::MIN` becomes "absent" here (deserialising it is an error).
impl From<Option<i64>> for OptInt {
    fn from(value: Option<i64>) -> Self {
        value.and_then(OptInt::new).unwrap_or(Self::NONE)
    }
}

impl fmt::Debug for OptInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

impl Serialize for OptInt {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(serializer)
    }
}

/// As [`super::de::lenient_int_opt`]: integral floats are integers, `null` is absent.
impl<'de> Deserialize<'de> for OptInt {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match super::de::lenient_int_opt::<D, i64>(deserializer)? {
            None => Ok(OptInt::NONE),
            Some(v) => OptInt::new(v).ok_or_else(|| {
                serde::de::Error::invalid_value(serde::de::Unexpected::Signed(v), &"an integer above -2^63")
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OptInt;

    #[derive(serde::Deserialize, serde::Serialize)]
    struct T {
        #[serde(default, skip_serializing_if = "OptInt::is_none")]
        n: OptInt,
    }

    fn parse(s: &str) -> Result<OptInt, serde_json::Error> {
        serde_json::from_str::<T>(s).map(|t| t.n)
    }

    #[test]
    fn reads_integers_integral_floats_null_and_absence() {
        assert_eq!(parse(r#"{"n":3}"#).unwrap().get(), Some(3));
        assert_eq!(parse(r#"{"n":-2.0}"#).unwrap().get(), Some(-2));
        assert_eq!(parse(r#"{"n":9223372036854775807}"#).unwrap().get(), Some(i64::MAX));
        assert_eq!(parse(r#"{"n":-9223372036854775807}"#).unwrap().get(), Some(i64::MIN + 1));
        assert_eq!(parse(r#"{"n":null}"#).unwrap().get(), None);
        assert_eq!(parse(r#"{}"#).unwrap().get(), None);
    }

    #[test]
    fn the_one_number_it_cannot_hold_is_an_error_not_absence() {
        assert!(parse(r#"{"n":-9223372036854775808}"#).is_err());
        assert!(parse(r#"{"n":1.5}"#).is_err());
    }

    #[test]
    fn writes_what_it_read_and_nothing_when_absent() {
        for text in [r#"{"n":134}"#, r#"{"n":-1}"#, r#"{}"#] {
            let t: T = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&t).unwrap(), text);
        }
    }

    #[test]
    fn takes_the_other_value_only_when_absent() {
        let (one, two) = (OptInt::from(Some(1)), OptInt::from(Some(2)));
        assert_eq!(one.or_else(|| two), one);
        assert_eq!(OptInt::NONE.or_else(|| two), two);
        assert!(OptInt::default().is_none() && one.is_some());
        assert_eq!(format!("{:?} {:?}", one, OptInt::NONE), "Some(1) None");
    }
}
