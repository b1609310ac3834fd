//! The query rules of the real service.
//!
//! The query string is parsed from its raw form: a literal `+` anywhere makes the query invalid
//! (form decoding would turn it into a space, so an unencoded `+` in a time zone offset would
//! silently change the time; the service refuses it instead), and `%XX` escapes are decoded
//! (`%2B` is a `+`). Then:
//! - `dataType` (comma list of [`DataType`] names) or `keys` (comma list of key names) is
//!   required; when both are given a datapoint must match both. An unknown `dataType` is 400.
//! - `units`: comma list of unit ids, optionally in brackets (`1,2` or `[1,2]`).
//! - `from`, `to`: required; compact `yyyyMMdd[hh[mm[ss[fff]]]]` (UTC) or ISO 8601
//!   `yyyy-MM-dd[Thh:mm[:ss[.fff]]][Z|±hh:mm]` (UTC unless an offset is given). The range is
//!   half-open, `from <= time < to`; `from > to` is 400.
//! - `limit`: 1..=100000, default 10000.
//! - A parameter given twice is 400; parameters the service does not know are ignored.
//! - `to - from` longer than the configured maximum is 416 (checked after the 400 rules).

use super::{DEFAULT_LIMIT, DataType, Key, MAX_LIMIT};
use chrono::NaiveDate;
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a datapoint query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// An invalid filter value or a missing mandatory value: 400.
    #[error("{0}")]
    Invalid(String),
    /// The retrieval interval is longer than the service allows: 416.
    #[error("retrieval interval too long")]
    IntervalTooLong,
}

fn invalid(text: impl Into<String>) -> QueryError {
    QueryError::Invalid(text.into())
}

/// A checked datapoint query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// `dataType` filter, if given.
    pub data_types: Option<Vec<DataType>>,
    /// `keys` filter, if given.
    pub keys: Option<Vec<String>>,
    /// `units` filter, if given.
    pub units: Option<Vec<i64>>,
    /// Start of the range (inclusive), ms since the Unix epoch, UTC.
    pub from_ms: i64,
    /// End of the range (exclusive), ms since the Unix epoch, UTC.
    pub to_ms: i64,
    /// Most datapoints to return.
    pub limit: u32,
}

impl Query {
    /// Parses a raw (still percent-encoded) query string by the rules in the module doc.
    pub fn parse(raw: Option<&str>) -> Result<Query, QueryError> {
        let raw = raw.unwrap_or("");
        if raw.contains('+') {
            return Err(invalid("unencoded '+' in the query; encode it as %2B"));
        }
        let mut params = BTreeMap::new();
        for pair in raw.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (k, v) = (percent_decode(k)?, percent_decode(v)?);
            if params.contains_key(&k) {
                return Err(invalid(format!("parameter {k} given more than once")));
            }
            params.insert(k, v);
        }
        let data_types = params
            .get("dataType")
            .map(|v| {
                list(v, "dataType")?
                    .into_iter()
                    .map(|t| DataType::parse(t).ok_or_else(|| invalid(format!("unknown dataType {t:?}"))))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let keys = params
            .get("keys")
            .map(|v| list(v, "keys").map(|l| l.into_iter().map(str::to_string).collect::<Vec<_>>()))
            .transpose()?;
        if data_types.is_none() && keys.is_none() {
            return Err(invalid("one of dataType or keys is required"));
        }
        let units = params.get("units").map(|v| parse_units(v)).transpose()?;
        let time = |name: &str| {
            let text = params.get(name).ok_or_else(|| invalid(format!("{name} is required")))?;
            parse_time(text).ok_or_else(|| invalid(format!("invalid {name} {text:?}")))
        };
        let (from_ms, to_ms) = (time("from")?, time("to")?);
        if from_ms > to_ms {
            return Err(invalid("from is after to"));
        }
        let limit = match params.get("limit") {
            None => DEFAULT_LIMIT,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or_else(|| invalid(format!("limit must be an integer from 1 to {MAX_LIMIT}")))?,
        };
        Ok(Query { data_types, keys, units, from_ms, to_ms, limit })
    }

    /// Refuses a range longer than `max` (416).
    pub fn check_interval(&self, max: Duration) -> Result<(), QueryError> {
        let max_ms = i64::try_from(max.as_millis()).unwrap_or(i64::MAX);
        if self.to_ms - self.from_ms > max_ms { Err(QueryError::IntervalTooLong) } else { Ok(()) }
    }

    pub(super) fn wants(&self, key: Key) -> bool {
        self.data_types.as_ref().is_none_or(|t| t.contains(&key.data_type()))
            && self.keys.as_ref().is_none_or(|k| k.iter().any(|k| k == key.name()))
    }
}

/// Splits a comma list; empty entries are invalid.
fn list<'a>(value: &'a str, name: &str) -> Result<Vec<&'a str>, QueryError> {
    let items: Vec<&str> = value.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(invalid(format!("{name} has an empty entry")));
    }
    Ok(items)
}

fn parse_units(value: &str) -> Result<Vec<i64>, QueryError> {
    let v = value.trim();
    let inner = match (v.strip_prefix('['), v.ends_with(']')) {
        (Some(rest), true) => rest.strip_suffix(']').unwrap_or(rest),
        (None, false) => v,
        _ => return Err(invalid(format!("unbalanced brackets in units {value:?}"))),
    };
    list(inner, "units")?
        .into_iter()
        .map(|u| u.parse::<i64>().map_err(|_| invalid(format!("unit id {u:?} is not a number"))))
        .collect()
}

/// Decodes `%XX` escapes (and nothing else: a `+` stays a `+`, but callers refuse it first).
pub(crate) fn percent_decode(text: &str) -> Result<String, QueryError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(hex.ok_or_else(|| invalid("malformed percent escape in the query"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid("query is not UTF-8"))
}

/// Takes exactly `n` ASCII digits from the front of `s`.
fn digits(s: &str, n: usize) -> Option<(u32, &str)> {
    let head = s.get(..n)?;
    if !head.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((head.parse().ok()?, &s[n..]))
}

/// Milliseconds since the epoch of a UTC wall time minus an offset; `None` for impossible dates.
fn build(ymd: (u32, u32, u32), hms: (u32, u32, u32), ms: u32, offset_min: i64) -> Option<i64> {
    let date = NaiveDate::from_ymd_opt(i32::try_from(ymd.0).ok()?, ymd.1, ymd.2)?;
    let t = date.and_hms_milli_opt(hms.0, hms.1, hms.2, ms)?;
    Some(t.and_utc().timestamp_millis() - offset_min * 60_000)
}

/// Parses a `from`/`to` value in either form (see the module doc) to ms since the epoch, UTC.
pub fn parse_time(text: &str) -> Option<i64> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) { parse_compact(text) } else { parse_iso(text) }
}

fn parse_compact(t: &str) -> Option<i64> {
    if !matches!(t.len(), 8 | 10 | 12 | 14 | 17) {
        return None;
    }
    let field = |at: usize, n: usize| if t.len() > at { digits(&t[at..], n).map(|d| d.0) } else { Some(0) };
    let ymd = (field(0, 4)?, field(4, 2)?, field(6, 2)?);
    let hms = (field(8, 2)?, field(10, 2)?, field(12, 2)?);
    build(ymd, hms, field(14, 3)?, 0)
}

fn parse_iso(t: &str) -> Option<i64> {
    let (year, rest) = digits(t, 4)?;
    let (month, rest) = digits(rest.strip_prefix('-')?, 2)?;
    let (day, mut rest) = digits(rest.strip_prefix('-')?, 2)?;
    let (mut hms, mut ms) = ((0, 0, 0), 0);
    if let Some(time) = rest.strip_prefix('T') {
        let (h, r) = digits(time, 2)?;
        let (m, r) = digits(r.strip_prefix(':')?, 2)?;
        hms = (h, m, 0);
        rest = r;
        if let Some(r) = rest.strip_prefix(':') {
            let (s, r) = digits(r, 2)?;
            hms.2 = s;
            rest = r;
            if let Some(r) = rest.strip_prefix('.') {
                let n = r.bytes().take_while(u8::is_ascii_digit).count();
                if !(1..=3).contains(&n) {
                    return None;
                }
                let (f, r) = digits(r, n)?;
                ms = f * 10u32.pow(3 - n as u32);
                rest = r;
            }
        }
    }
    let offset_min = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, r) = digits(&rest[1..], 2)?;
            let (m, r) = digits(r.strip_prefix(':')?, 2)?;
            if !r.is_empty() || h > 23 || m > 59 {
                return None;
            }
            sign * i64::from(h * 60 + m)
        }
    };
    build((year, month, day), hms, ms, offset_min)
}
