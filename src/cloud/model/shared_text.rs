//! Short strings that repeat from unit to unit, kept once per thread and shared.
//!
//! A big site's units carry the same few short strings: the unit type (`Luminaire`), the
//! firmware version, the status (`ok`), the controls' names (`dimmer0`, `temperature`). Each of
//! them was a heap block of its own in every unit, about 50 bytes a unit, 1.2 MB at 25,000 units
//! (BENCHMARKS.md, "Scale"). Read through [`opt`] they are [`Arc<str>`]s handed out from a small
//! per-thread table instead, so every unit points at the same copy. Taking a string from the table
//! costs about what allocating it did; the unit's later drop frees nothing but a count.
//!
//! The table is bounded: strings longer than [`MAX_LEN`] are not kept (a unit's name or address is
//! its own), and past [`MAX_ENTRIES`] distinct strings new ones are allocated as before, so a cloud
//! that sends ever new values cannot make it grow.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use foldhash::HashSet;
use serde::de::{self, Deserializer, Visitor};

/// The longest string kept in the table.
pub const MAX_LEN: usize = 32;

/// Distinct strings kept per thread.
pub const MAX_ENTRIES: usize = 1024;

thread_local! {
    static TABLE: RefCell<HashSet<Arc<str>>> = RefCell::new(HashSet::default());
}

/// `s` as a shared string: the table's copy when it has one.
pub fn share(s: &str) -> Arc<str> {
    if s.len() > MAX_LEN {
        return Arc::from(s);
    }
    TABLE.with_borrow_mut(|table| {
        if let Some(kept) = table.get(s) {
            return kept.clone();
        }
        let new: Arc<str> = Arc::from(s);
        if table.len() < MAX_ENTRIES {
            table.insert(new.clone());
        }
        new
    })
}

/// How many strings this thread's table holds.
#[cfg(test)]
fn kept() -> usize {
    TABLE.with_borrow(HashSet::len)
}

/// Reads an optional string (`null` or absent: `None`) through [`share`]. Anything else is an
/// error, as for a plain `Option<Box<str>>`.
pub fn opt<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Arc<str>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Arc<str>>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or null")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(share(v)))
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
            deserializer.deserialize_str(self)
        }
    }
    deserializer.deserialize_option(V)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_short_string_is_one_copy() {
        let a = share("Luminaire");
        let b = share("Luminaire");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "Luminaire");
    }

    #[test]
    fn a_long_string_is_not_kept() {
        let long = "x".repeat(MAX_LEN + 1);
        let before = kept();
        let (a, b) = (share(&long), share(&long));
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(kept(), before);
        assert_eq!(&*a, long);
    }

    #[test]
    fn the_table_stops_growing_at_its_bound() {
        // Each test runs on a thread of its own, so this table starts empty.
        for i in 0..MAX_ENTRIES + 100 {
            let s = format!("value {i}");
            assert_eq!(&*share(&s), s);
        }
        assert_eq!(kept(), MAX_ENTRIES);
        // Past the bound a string is still given back whole, just not kept.
        let (a, b) = (share("one more"), share("one more"));
        assert_eq!((&*a, &*b), ("one more", "one more"));
        assert!(!Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn reads_strings_and_nulls_and_refuses_other_values() {
        #[derive(serde::Deserialize)]
        struct T {
            #[serde(default, deserialize_with = "opt")]
            s: Option<Arc<str>>,
        }
        let read = |json: &str| serde_json::from_str::<T>(json).map(|t| t.s);
        assert_eq!(read(r#"{"s":"ok"}"#).unwrap().as_deref(), Some("ok"));
        assert_eq!(read(r#"{"s":"a\"b"}"#).unwrap().as_deref(), Some("a\"b"));
        assert_eq!(read(r#"{"s":null}"#).unwrap(), None);
        assert_eq!(read("{}").unwrap(), None);
        assert!(read(r#"{"s":1}"#).is_err());
        let sonic: T = sonic_rs::from_str(r#"{"s":"ok"}"#).unwrap();
        assert!(Arc::ptr_eq(&sonic.s.unwrap(), &share("ok")));
    }
}
