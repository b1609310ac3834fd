//! [`OptNum`]: an optional number in the number's own size, for the optional numbers a unit and
//! its controls carry ([`OptInt`], [`OptU32`], [`OptI32`], [`super::OptF64`]).

use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A number type that gives up one value to stand for "absent" in an [`OptNum`].
pub trait Absent: Copy + PartialEq {
    /// The value that stands for "absent".
    const ABSENT: Self;

    /// Whether this is the value that stands for "absent".
    fn is_absent(&self) -> bool;

    /// Reads an optional value; the one that stands for "absent", received, is an error.
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error>;
}

/// [`Absent`] for an integer type whose `$absent` stands for "absent": read as
/// [`super::de::lenient_int_opt`] (integral floats are integers, `null` is absent).
macro_rules! absent_integer {
    ($($int:ty => $absent:expr, $range:literal;)*) => {$(
        impl Absent for $int {
            const ABSENT: $int = $absent;

            fn is_absent(&self) -> bool {
                *self == $absent
            }

            fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
                match super::de::lenient_int_opt::<D, $int>(deserializer)? {
                    Some(v) if v.is_absent() => {
                        let absent = serde::de::Unexpected::Other("the integer that stands for absence");
                        Err(serde::de::Error::invalid_value(absent, &$range))
                    }
                    value => Ok(value),
                }
            }
        }
    )*};
}

absent_integer! {
    i64 => i64::MIN, "an integer above -2^63";
    i32 => i32::MIN, "an integer above -2^31";
    u32 => u32::MAX, "an integer below 2^32 - 1";
}

/// An optional number in the number's own size instead of an `Option`'s twice that: one value
/// ([`Absent::ABSENT`]: an integer type's most negative, an unsigned one's largest, NaN for
/// `f64`) stands for "absent".
///
/// A unit's state is kept per unit for the bridge's life (25,000 of them on a big site, each in
/// an `Arc`); its eight optional numbers as these instead of `Option`s keep it in the
/// allocator's 192-byte size class instead of the 256-byte one. The one integer given up is read
/// like any other integer out of range ([`super::de::lenient_int`]): an error, never a silently
/// different number; JSON has no NaN.
#[derive(Clone, Copy)]
pub struct OptNum<T>(T);

/// An optional `i64` in 8 bytes: `i64::MIN` stands for "absent".
pub type OptInt = OptNum<i64>;
/// An optional `u32` in 4 bytes: `u32::MAX` stands for "absent".
pub type OptU32 = OptNum<u32>;
/// An optional `i32` in 4 bytes: `i32::MIN` stands for "absent".
pub type OptI32 = OptNum<i32>;

impl<T: Absent> OptNum<T> {
    /// No value.
    pub const NONE: OptNum<T> = OptNum(T::ABSENT);

    /// The value, if any.
    pub fn get(self) -> Option<T> {
        self.is_some().then_some(self.0)
    }

    /// The value by reference, if any (as [`Option::as_ref`]).
    pub fn as_ref(&self) -> Option<&T> {
        self.is_some().then_some(&self.0)
    }

    /// Whether there is a value.
    pub fn is_some(&self) -> bool {
        !self.0.is_absent()
    }

    /// Whether there is none.
    pub fn is_none(&self) -> bool {
        self.0.is_absent()
    }

    /// This value, or `other()`'s when there is none (as [`Option::or_else`]).
    pub fn or_else(self, other: impl FnOnce() -> OptNum<T>) -> OptNum<T> {
        if self.is_some() { self } else { other() }
    }

    /// `value` as an `OptNum`; `None` when it is the one value that stands for "absent".
    pub fn new(value: T) -> Option<OptNum<T>> {
        (!value.is_absent()).then_some(OptNum(value))
    }
}

impl<T: Absent> Default for OptNum<T> {
    fn default() -> Self {
        Self::NONE
    }
}

/// Only for literals and tests: the value that stands for "absent" becomes absent here
/// (deserialising it is an error).
impl<T: Absent> From<Option<T>> for OptNum<T> {
    fn from(value: Option<T>) -> Self {
        value.and_then(OptNum::new).unwrap_or(Self::NONE)
    }
}

/// As the `Option` it stands for: two absent values are equal (two NaNs too).
impl<T: Absent> PartialEq for OptNum<T> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<T: Absent + Eq> Eq for OptNum<T> {}

impl<T: Absent + Hash> Hash for OptNum<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.get().hash(state);
    }
}

impl<T: Absent + fmt::Debug> fmt::Debug for OptNum<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

impl<T: Absent + Serialize> Serialize for OptNum<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(serializer)
    }
}

/// As [`Absent::read`] says; a missing field (with `#[serde(default)]`) is absent too.
impl<'de, T: Absent> Deserialize<'de> for OptNum<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(T::read(deserializer)?.map_or(Self::NONE, OptNum))
    }
}

#[cfg(test)]
mod tests {
    use super::{OptI32, OptInt, OptU32};

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

    #[test]
    fn the_narrow_kinds_give_up_their_own_extreme_alone() {
        #[derive(serde::Deserialize, serde::Serialize)]
        struct N {
            #[serde(default, skip_serializing_if = "OptU32::is_none")]
            u: OptU32,
            #[serde(default, skip_serializing_if = "OptI32::is_none")]
            i: OptI32,
        }
        let n: N = serde_json::from_str(r#"{"u":4294967294,"i":-2147483647.0}"#).unwrap();
        assert_eq!((n.u.get(), n.i.get()), (Some(u32::MAX - 1), Some(i32::MIN + 1)));
        assert_eq!(serde_json::to_string(&n).unwrap(), r#"{"u":4294967294,"i":-2147483647}"#);
        let none: N = serde_json::from_str(r#"{"u":null}"#).unwrap();
        assert_eq!(serde_json::to_string(&none).unwrap(), "{}");
        assert!(serde_json::from_str::<N>(r#"{"u":4294967295}"#).is_err());
        assert!(serde_json::from_str::<N>(r#"{"i":-2147483648}"#).is_err());
        assert!(serde_json::from_str::<N>(r#"{"u":4294967296}"#).is_err());
        assert_eq!(std::mem::size_of::<OptU32>() + std::mem::size_of::<OptI32>(), 8);
    }
}
