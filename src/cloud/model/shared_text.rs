//! Short strings that repeat from unit to unit, kept once per thread and shared.
//!
//! A big site's units carry the same few short strings: the unit type (`Luminaire`), the
//! firmware version, the status (`ok`), the controls' names (`dimmer0`, `temperature`). Held as
//! a heap block of its own in every unit they would add a few allocations to every unit. Read
//! through [`opt`] they are [`Arc<str>`]s handed out from a small table instead, so every unit
//! points at the same copy. Taking a string from the table costs about what
//! allocating it does; the unit's later drop frees nothing but a count.
//!
//! The table is bounded: strings longer than [`MAX_LEN`] are not kept (a unit's name or address is
//! its own), and past [`MAX_ENTRIES`] distinct strings new ones are allocated, so a cloud that
//! sends ever new values cannot make it grow.
//!
//! # One table per thread
//!
//! The strings are shared from inside serde's `deserialize_with` functions, which cannot be handed
//! a table, so [`share`] uses the calling thread's own table. Every copy it hands out is correct
//! on any thread; what is shared depends on the thread: the bridge parses frames and REST bodies
//! on its runtime's one thread ([`crate::app::runtime`]), so the whole bridge shares one table.
//! Elsewhere (a runtime with several workers, each test's thread) each thread keeps its own copies,
//! which only shares less. No table is ever read from another thread.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use foldhash::HashSet;
use serde::de::{self, Deserializer, Visitor};

/// The longest string kept in the table.
pub const MAX_LEN: usize = 32;

/// Distinct strings kept per thread.
pub const MAX_ENTRIES: usize = 1024;

/// The strings kept for sharing, at most [`MAX_ENTRIES`] of at most [`MAX_LEN`] bytes.
#[derive(Default)]
struct TextTable {
    kept: HashSet<Arc<str>>,
}

impl TextTable {
    /// `s` as a shared string: the table's copy when it has one.
    fn share(&mut self, s: &str) -> Arc<str> {
        if s.len() > MAX_LEN {
            return Arc::from(s);
        }
        if let Some(kept) = self.kept.get(s) {
            return kept.clone();
        }
        let new: Arc<str> = Arc::from(s);
        if self.kept.len() < MAX_ENTRIES {
            self.kept.insert(new.clone());
        }
        new
    }
}

thread_local! {
    /// This thread's table (see the module docs for why per thread).
    static TABLE: RefCell<TextTable> = RefCell::new(TextTable::default());
}

/// `s` as a shared string: the calling thread's table's copy when it has one.
pub fn share(s: &str) -> Arc<str> {
    TABLE.with_borrow_mut(|table| table.share(s))
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
    use crate::cloud::model::{Control, ServerMessage, UnitState, parse_frame};

    #[test]
    fn the_same_short_string_is_one_copy() {
        let a = share("Luminaire");
        let b = share("Luminaire");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "Luminaire");
    }

    #[test]
    fn a_long_string_is_not_kept() {
        let mut table = TextTable::default();
        let long = "x".repeat(MAX_LEN + 1);
        let (a, b) = (table.share(&long), table.share(&long));
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(table.kept.is_empty());
        assert_eq!(&*a, long);
        let (a, b) = (share(&long), share(&long));
        assert!(!Arc::ptr_eq(&a, &b), "the thread's table keeps it neither");
    }

    #[test]
    fn the_table_stops_growing_at_its_bound() {
        let mut table = TextTable::default();
        for i in 0..MAX_ENTRIES + 100 {
            let s = format!("value {i}");
            assert_eq!(&*table.share(&s), s);
        }
        assert_eq!(table.kept.len(), MAX_ENTRIES);
        // Past the bound a string is still given back whole, just not kept.
        let (a, b) = (table.share("one more"), table.share("one more"));
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

    #[test]
    fn units_share_their_repeated_short_strings() {
        // Two units of a site, from a frame each and from REST: the type, firmware version, status
        // and control names are one copy (`shared_text`); names and addresses stay each unit's own.
        let body = |id: u32| {
            format!(
                r#""id":{id},"name":"Unit {id}","address":"00000000000{id}","type":"Luminaire","firmwareVersion":"32.10","status":"ok","controls":[[{{"type":"Dimmer","name":"dimmer0","value":0.5}},{{"type":"Presence","name":"motion","status":"absent"}}]]"#
            )
        };
        let from_frame =
            |id: u32| match parse_frame(format!(r#"{{"wire":1,"method":"unitChanged",{}}}"#, body(id)).as_bytes()) {
                Ok(ServerMessage::UnitChanged { unit, .. }) => *unit,
                other => panic!("not a unitChanged: {other:?}"),
            };
        let from_rest = |id: u32| serde_json::from_str::<UnitState>(&format!("{{{}}}", body(id))).unwrap();
        let shared = |a: &Option<Arc<str>>, b: &Option<Arc<str>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let names = |u: &UnitState| -> Vec<Option<Arc<str>>> {
            u.controls
                .iter()
                .flatten()
                .map(|c| match c {
                    Control::Dimmer(v) => v.name.clone(),
                    Control::Presence(s) => s.name.clone(),
                    other => panic!("unexpected control {other:?}"),
                })
                .collect()
        };
        let status = |u: &UnitState| match u.controls.as_deref() {
            Some([_, Control::Presence(s)]) => s.status.clone(),
            other => panic!("no presence control: {other:?}"),
        };
        let (a, b, c) = (from_frame(3), from_frame(4), from_rest(5));
        for other in [&b, &c] {
            assert!(shared(&a.unit_type, &other.unit_type));
            assert!(shared(&a.firmware_version, &other.firmware_version));
            assert!(shared(&a.status, &other.status));
            for (x, y) in names(&a).iter().zip(names(other).iter()) {
                assert!(shared(x, y));
            }
            assert!(Arc::ptr_eq(&status(&a), &status(other)));
            assert_ne!(a.name, other.name);
        }
        assert_eq!(a.unit_type.as_deref(), Some("Luminaire"));
        assert_eq!(names(&c).iter().map(|n| n.as_deref()).collect::<Vec<_>>(), [Some("dimmer0"), Some("motion")]);
        assert_eq!(&*status(&c), "absent");
    }
}
