//! JSON objects with constant keys, written straight into a byte buffer.
//!
//! serde_json escapes every key it writes, byte by byte, and a changed luminaire's payloads have
//! about thirty keys (the unit JSON, its controls, its group's JSON). Those keys are constants that
//! need no escaping, and escaping them would be the largest single cost of an event. [`Object`] copies a constant key as it is and leaves every value to serde_json, so
//! strings that come from the cloud are still escaped by it.
//!
//! The writers built on it (`UnitJson`, `GroupJson`, `Control`) keep their derived or hand-written
//! `Serialize` as the reference: their tests check that both give the same bytes.

use serde::Serialize;

/// One JSON object being written into `out`: `{`, then `"key":value` pairs, then `}`.
pub struct Object<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> Object<'a> {
    /// Opens an object at the end of `out`.
    pub fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Object { out, empty: true }
    }

    /// Fields without the braces around them, at the end of `out`: text to be spliced into an
    /// object later by [`Object::raw_fields`]. Dropped when done, never closed.
    pub fn fields_only(out: &'a mut Vec<u8>) -> Self {
        Object { out, empty: true }
    }

    /// Writes `key` and the separators before its value. `key` is copied as it is, so it must be
    /// a constant that needs no escaping (checked in debug builds).
    ///
    /// This and the field writers are always inlined: the key's length is then a constant where
    /// it is written, and the copy a few moves instead of a call to `memcpy` (about thirty keys a
    /// changed luminaire).
    #[inline(always)]
    fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        debug_assert!(is_plain(key), "key {key:?} needs escaping");
        self.separate();
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    /// A field with a constant key; the value is written by serde_json.
    #[inline(always)]
    pub fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) {
        self.field_at(key, value);
    }

    /// [`Object::field`], returning where the value's text lies in the buffer (for a caller that
    /// needs the same text again).
    #[inline(always)]
    pub fn field_at<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> std::ops::Range<usize> {
        let out = self.key(key);
        let start = out.len();
        write_value(out, value);
        start..out.len()
    }

    /// A field with a constant key whose value is written by `write` (a nested writer).
    #[inline(always)]
    pub fn field_with(&mut self, key: &'static str, write: impl FnOnce(&mut Vec<u8>)) {
        write(self.key(key));
    }

    /// A field whose key is not a constant (e.g. a control's extra fields from the cloud): key and
    /// value are both written, and escaped, by serde_json.
    pub fn any_field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        self.separate();
        write_value(self.out, key);
        self.out.push(b':');
        write_value(self.out, value);
    }

    /// Fields already written as JSON text (`"a":1,"b":[2]`, one or more), copied as they are.
    pub fn raw_fields(&mut self, fields: &str) {
        self.separate();
        self.out.extend_from_slice(fields.as_bytes());
    }

    /// The comma before every field but the first.
    #[inline(always)]
    fn separate(&mut self) {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
    }

    /// Closes the object.
    pub fn close(self) {
        self.out.push(b'}');
    }
}

/// Appends `value` as serde_json writes it.
pub fn write_value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing into a Vec cannot fail, and the values written here (numbers, strings, JSON values,
    // types whose `Serialize` never errors) have no other way to fail.
    let written = serde_json::to_writer(&mut *out, value);
    debug_assert!(written.is_ok());
}

/// Appends a JSON array of `items`, each written by `write`.
pub fn write_array<T>(out: &mut Vec<u8>, items: &[T], mut write: impl FnMut(&T, &mut Vec<u8>)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(item, out);
    }
    out.push(b']');
}

/// A key serde_json would write as it is: no `"`, `\` or control characters.
fn is_plain(key: &str) -> bool {
    key.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_what_serde_json_writes() {
        let mut out = Vec::new();
        let mut o = Object::open(&mut out);
        o.field("a", &1);
        o.field("b", "quote \" and \\ and \n");
        o.any_field("odd \"key\"", &json!({"x": [1, 2.5]}));
        o.field_with("c", |out| write_array(out, &[1u8, 2, 3], |n, out| write_value(out, n)));
        o.field("d", &Option::<u32>::None);
        o.close();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, r#"{"a":1,"b":"quote \" and \\ and \n","odd \"key\"":{"x":[1,2.5]},"c":[1,2,3],"d":null}"#);
        let reference =
            json!({"a": 1, "b": "quote \" and \\ and \n", "odd \"key\"": {"x": [1, 2.5]}, "c": [1, 2, 3], "d": null});
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), reference);
    }

    #[test]
    fn an_empty_object_and_array() {
        let mut out = Vec::new();
        Object::open(&mut out).close();
        write_array::<u8>(&mut out, &[], |_, _| {});
        assert_eq!(out, b"{}[]");
    }

    #[test]
    fn keys_needing_escapes_are_not_plain() {
        assert!(is_plain("active_scene_id"));
        assert!(!is_plain("a\"b"));
        assert!(!is_plain("a\\b"));
        assert!(!is_plain("a\nb"));
    }
}
