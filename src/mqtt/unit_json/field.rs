//! How a field of the unit JSON is written, by its type: into the JSON text, and as the plain
//! value of its attribute topic.

use super::{Colour, Reading};
use crate::cloud::model::Control;
use crate::json_object::{Object, write_array};
use serde::Serialize;
use std::ops::Range;

/// A scalar of the unit JSON, as an attribute topic carries it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Scalar<'a> {
    Str(&'a str),
    Int(i64),
    Num(Reading),
    Bool(bool),
}

impl Scalar<'_> {
    /// Appends the plain text: strings bare, numbers and booleans in their JSON spelling.
    pub(super) fn write(self, out: &mut Vec<u8>) {
        let written = match self {
            Scalar::Str(s) => {
                out.extend_from_slice(s.as_bytes());
                Ok(())
            }
            Scalar::Int(i) => serde_json::to_writer(&mut *out, &i),
            Scalar::Num(r) => serde_json::to_writer(&mut *out, &r),
            Scalar::Bool(b) => {
                out.extend_from_slice(if b { b"true" } else { b"false" });
                Ok(())
            }
        };
        // Writing numbers to a Vec cannot fail; a NaN is written as `null` by serde_json.
        debug_assert!(written.is_ok());
    }
}

/// How a field of the unit JSON is written, by its type: into the JSON text, and as the plain
/// value of its attribute topic.
pub(super) trait UnitField: Serialize {
    /// Writes `"key":value` into `o`; returns where the value lies for a number (its attribute
    /// topic copies that spelling), an empty range otherwise. Inlined, so that the constant
    /// key's length is known where it is copied ([`Object::field`]).
    #[inline(always)]
    fn write_json(&self, o: &mut Object<'_>, key: &'static str) -> Range<usize> {
        o.field(key, self);
        0..0
    }

    /// The plain value of the attribute topic (`None`: null, or not a scalar: no topic).
    fn scalar(&self) -> Option<Scalar<'_>>;
}

/// A field whose attribute topic is its JSON spelling: the span written is kept.
macro_rules! numeric_field {
    ($($ty:ty => $scalar:expr,)*) => {$(
        impl UnitField for $ty {
            #[inline(always)]
            fn write_json(&self, o: &mut Object<'_>, key: &'static str) -> Range<usize> {
                o.field_at(key, self)
            }

            #[inline(always)]
            fn scalar(&self) -> Option<Scalar<'_>> {
                #[allow(clippy::redundant_closure_call)]
                ($scalar)(self)
            }
        }
    )*};
}

numeric_field! {
    u32 => |v: &u32| Some(Scalar::Int(i64::from(*v))),
    Option<u8> => |v: &Option<u8>| v.map(|v| Scalar::Int(i64::from(v))),
    Option<u32> => |v: &Option<u32>| v.map(|v| Scalar::Int(i64::from(v))),
    Option<i64> => |v: &Option<i64>| v.map(Scalar::Int),
    Option<Reading> => |v: &Option<Reading>| v.filter(|r| r.0.is_finite()).map(Scalar::Num),
}

impl UnitField for Option<bool> {
    #[inline(always)]
    fn scalar(&self) -> Option<Scalar<'_>> {
        self.map(Scalar::Bool)
    }
}

impl UnitField for Option<&str> {
    #[inline(always)]
    fn scalar(&self) -> Option<Scalar<'_>> {
        self.map(Scalar::Str)
    }
}

impl UnitField for Option<Colour> {
    #[inline(always)]
    fn write_json(&self, o: &mut Object<'_>, key: &'static str) -> Range<usize> {
        match *self {
            Some(Colour { h, s, x, y }) => o.field_with(key, |out| {
                let mut colour = Object::open(out);
                colour.field("h", &h);
                colour.field("s", &s);
                colour.field("x", &x);
                colour.field("y", &y);
                colour.close();
            }),
            None => o.field(key, self),
        }
        0..0
    }

    fn scalar(&self) -> Option<Scalar<'_>> {
        None
    }
}

impl UnitField for Option<&[Control]> {
    #[inline(always)]
    fn write_json(&self, o: &mut Object<'_>, key: &'static str) -> Range<usize> {
        match *self {
            Some(controls) => o.field_with(key, |out| write_array(out, controls, Control::write_json)),
            None => o.field(key, self),
        }
        0..0
    }

    fn scalar(&self) -> Option<Scalar<'_>> {
        None
    }
}
