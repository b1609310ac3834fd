//! Small serde helpers for the cloud's loose JSON (docs/cloud.md, "Tolerant parsing").
//!
//! The real service sends integers as floats (`"priority": 3.0`, `"condition": 0.0`), sometimes
//! sends `null` where a string is expected, and sends datapoint values as strings or numbers. These
//! helpers are used through `#[serde(deserialize_with = "...")]` so the typed model stays plain.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Unexpected, Visitor};

/// Deserialises an integer that may arrive as an integral float (`3.0` → `3`).
///
/// A float with a fractional part, or a value out of the target type's range, is an error: an id
/// of `12.5` is a broken payload, not something to round.
pub fn lenient_int<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64> + TryFrom<i64>,
{
    deserializer.deserialize_any(IntVisitor(PhantomData))
}

/// Like [`lenient_int`] for optional fields: `null` and (with `#[serde(default)]`) a missing field
/// give `None`.
pub fn lenient_int_opt<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64> + TryFrom<i64>,
{
    // One `deserialize_any` that takes `null` too, rather than `Option`'s look for `null` and then
    // a second call for the number: six of these are read in every `unitChanged` frame.
    deserializer.deserialize_any(OptIntVisitor(PhantomData))
}

/// Like [`lenient_int`] for a list of integers (`"activeScenes": [3.0, 4]`); `null` gives an
/// empty list.
pub fn lenient_int_vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64> + TryFrom<i64>,
{
    let list = Option::<Vec<Lenient<T>>>::deserialize(deserializer)?;
    Ok(list.unwrap_or_default().into_iter().map(|v| v.0).collect())
}

/// Deserialises `T`, turning `null` into `T::default()` (use with `#[serde(default)]` so a missing
/// field gives the default too).
pub fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Deserialises a string that may arrive as a number or a boolean (datapoint values); the number
/// is kept in its JSON spelling. `null` gives an empty string.
pub fn string_or_scalar<'de, D>(deserializer: D) -> Result<String, D::Error>
where
    D: Deserializer<'de>,
{
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string, number or boolean")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
        fn visit_none<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
    }
    deserializer.deserialize_any(V)
}

/// An integer read leniently; the building block of the helpers above.
struct Lenient<T>(T);

impl<'de, T> Deserialize<'de> for Lenient<T>
where
    T: TryFrom<u64> + TryFrom<i64>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient_int(deserializer).map(Lenient)
    }
}

/// Accepts JSON integers and integral floats.
struct IntVisitor<T>(PhantomData<T>);

impl<'de, T> Visitor<'de> for IntVisitor<T>
where
    T: TryFrom<u64> + TryFrom<i64>,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer (possibly written as a float like 3.0)")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // 2^64 and 2^63 are exact in f64; the comparisons keep the casts below lossless.
        const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
        const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
        if !v.is_finite() || v.fract() != 0.0 {
            return Err(E::invalid_value(Unexpected::Float(v), &self));
        }
        if (0.0..TWO_POW_64).contains(&v) {
            self.visit_u64(v as u64)
        } else if (-TWO_POW_63..0.0).contains(&v) {
            self.visit_i64(v as i64)
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<T, A::Error> {
        Err(de::Error::invalid_type(Unexpected::Seq, &self))
    }
}

/// [`IntVisitor`], with `null` as `None`.
struct OptIntVisitor<T>(PhantomData<T>);

impl<'de, T> Visitor<'de> for OptIntVisitor<T>
where
    T: TryFrom<u64> + TryFrom<i64>,
{
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("null or an integer (possibly written as a float like 3.0)")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<T>, D::Error> {
        lenient_int(deserializer).map(Some)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<T>, E> {
        IntVisitor(PhantomData).visit_u64(v).map(Some)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<T>, E> {
        IntVisitor(PhantomData).visit_i64(v).map(Some)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<T>, E> {
        IntVisitor(PhantomData).visit_f64(v).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct T {
        #[serde(deserialize_with = "super::lenient_int")]
        a: u32,
        #[serde(default, deserialize_with = "super::lenient_int_opt")]
        b: Option<i64>,
        #[serde(default, deserialize_with = "super::lenient_int_vec")]
        c: Vec<u32>,
        #[serde(default, deserialize_with = "super::or_default")]
        d: String,
        #[serde(default, deserialize_with = "super::string_or_scalar")]
        e: String,
    }

    fn parse(s: &str) -> Result<T, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn ints_as_floats() {
        let t = parse(r#"{"a":3.0,"b":-2.0,"c":[1,2.0],"d":null,"e":0.5}"#).unwrap();
        assert_eq!((t.a, t.b, t.c, t.d.as_str(), t.e.as_str()), (3, Some(-2), vec![1, 2], "", "0.5"));
    }

    #[test]
    fn missing_and_null_optionals() {
        let t = parse(r#"{"a":1,"b":null,"c":null}"#).unwrap();
        assert_eq!((t.b, t.c.len(), t.e.as_str()), (None, 0, ""));
        let t = parse(r#"{"a":1}"#).unwrap();
        assert_eq!(t.b, None);
    }

    #[test]
    fn rejects_fractions_and_out_of_range() {
        assert!(parse(r#"{"a":3.5}"#).is_err());
        assert!(parse(r#"{"a":-1}"#).is_err());
        assert!(parse(r#"{"a":5000000000}"#).is_err());
        assert!(parse(r#"{"a":1e300}"#).is_err());
        assert!(parse(r#"{"a":"3"}"#).is_err());
        // The optional form rejects the same, and takes `null` and every integer spelling.
        for bad in [r#"3.5"#, r#""3""#, r#"1e300"#, r#"true"#, r#"[1]"#, r#"{}"#] {
            assert!(parse(&format!(r#"{{"a":1,"b":{bad}}}"#)).is_err(), "{bad}");
        }
        for (good, want) in [("null", None), ("-7", Some(-7)), ("7", Some(7)), ("-7.0", Some(-7)), ("1e3", Some(1000))]
        {
            assert_eq!(parse(&format!(r#"{{"a":1,"b":{good}}}"#)).map(|t| t.b).ok(), Some(want), "{good}");
        }
    }
}
