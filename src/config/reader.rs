//! [`Reader`]: the merged YAML tree (file + environment) and the problems found while turning it
//! into the schema types.
//!
//! Each section is deserialised on its own (with `serde_path_to_error` for the key path), so one
//! bad section does not hide the problems of the others. Serde's messages are rewritten into
//! `key: expected X, got Y`, with the value shown as the user wrote it, except secrets, which are
//! shown only as their kind.

use super::env::{self, KeyStep, SECRET_KEYS, dotted};
use super::error::{Detail, Problem};
use serde::de::DeserializeOwned;
use serde_yaml::{Mapping, Value};
use std::collections::HashSet;

/// The top-level keys.
pub const SECTIONS: [&str; 10] =
    ["cloud", "networks", "sites", "mqtt", "homeassistant", "output", "http", "log", "datapoints", "devices"];

/// Former names of sections, still read but no longer listed as valid keys (`health`, now `http`).
pub const FORMER_SECTIONS: [&str; 1] = ["health"];

/// The merged configuration tree and the problems found so far.
pub(crate) struct Reader {
    tree: Value,
    /// `(dotted key, variable)` for every key an environment variable set.
    origins: Vec<(String, String)>,
    /// Env-set keys already re-read as YAML (so a retry cannot loop).
    coerced: HashSet<String>,
    /// Everything wrong so far, in the order found.
    pub problems: Vec<Problem>,
}

impl Reader {
    /// Applies the environment overrides to the file's tree (a mapping or null).
    pub fn new(mut tree: Value, environment: impl IntoIterator<Item = (String, String)>) -> Self {
        if tree.is_null() {
            tree = Value::Mapping(Mapping::new());
        }
        let (overrides, mut problems) = env::overrides(environment);
        let origins = env::apply(&mut tree, &overrides, &mut problems);
        Reader { tree, origins, coerced: HashSet::new(), problems }
    }

    /// The environment variable behind `key`: the one that set it, a list or section containing
    /// it, or (for an unknown section) one that set a key inside it.
    pub fn origin(&self, key: &str) -> Option<String> {
        let inside = |outer: &str, inner: &str| {
            inner.len() > outer.len()
                && inner.starts_with(outer)
                && matches!(inner.as_bytes().get(outer.len()), Some(b'.' | b'['))
        };
        let exact = self.origins.iter().find(|(k, _)| k == key);
        let outer = || self.origins.iter().filter(|(k, _)| inside(k, key)).max_by_key(|(k, _)| k.len());
        let below = || self.origins.iter().find(|(k, _)| inside(key, k));
        exact.or_else(outer).or_else(below).map(|(_, var)| var.clone())
    }

    /// Records a problem, adding the environment variable behind its key.
    pub fn push(&mut self, mut problem: Problem) {
        if problem.env_var.is_none() {
            problem.env_var = self.origin(&problem.key);
        }
        self.problems.push(problem);
    }

    /// Reports and removes unknown top-level keys and unknown keys inside each section.
    /// `fields` gives each section's keys (for `networks`, those of one entry).
    pub fn check_keys(&mut self, fields: &[(&str, Option<&'static [&'static str]>)]) {
        let sections: Vec<String> = SECTIONS.iter().map(|s| s.to_string()).collect();
        let former: Vec<String> = FORMER_SECTIONS.iter().map(|s| s.to_string()).collect();
        self.drop_unknown_but(&[], &sections, &former);
        for (section, names) in fields {
            let Some(names) = names else { continue };
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            let path = vec![KeyStep::Key(section.to_string())];
            match env::get(&self.tree, &path) {
                Some(Value::Sequence(entries)) => {
                    for i in 0..entries.len() {
                        let mut entry = path.clone();
                        entry.push(KeyStep::Index(i));
                        self.drop_unknown(&entry, &names);
                    }
                }
                Some(Value::Mapping(_)) => self.drop_unknown(&path, &names),
                _ => {}
            }
        }
    }

    /// Removes the keys of the mapping at `path` that are not in `valid`, reporting each.
    fn drop_unknown(&mut self, path: &[KeyStep], valid: &[String]) {
        self.drop_unknown_but(path, valid, &[]);
    }

    /// [`Reader::drop_unknown`] that also keeps the keys of `unlisted` (accepted, but not named
    /// among the valid ones).
    fn drop_unknown_but(&mut self, path: &[KeyStep], valid: &[String], unlisted: &[String]) {
        let Some(Value::Mapping(map)) = env::get(&self.tree, path) else { return };
        let unknown: Vec<Value> =
            map.keys().filter(|k| !valid.iter().chain(unlisted).any(|v| k.as_str() == Some(v))).cloned().collect();
        for key in unknown {
            let mut full = path.to_vec();
            full.push(KeyStep::Key(key_name(&key)));
            self.push(Problem::new(dotted(&full), Detail::Unknown { valid: valid.to_vec() }));
            if let Some(map) = env::get_mut(&mut self.tree, path).and_then(Value::as_mapping_mut) {
                map.remove(&key);
            }
        }
    }

    /// Whether the file or the environment gives `section.key` (even as null or `""`).
    pub fn is_given(&self, section: &str, key: &str) -> bool {
        env::get(&self.tree, &[KeyStep::Key(section.to_string()), KeyStep::Key(key.to_string())]).is_some()
    }

    /// Deserialises one section; a missing or empty section gives the type's defaults. `None`
    /// after a problem was recorded.
    pub fn section<T: DeserializeOwned + Default>(&mut self, name: &str) -> Option<T> {
        let base = vec![KeyStep::Key(name.to_string())];
        loop {
            let value = match env::get(&self.tree, &base) {
                None | Some(Value::Null) => return Some(T::default()),
                Some(value) => value.clone(),
            };
            match serde_path_to_error::deserialize::<_, T>(value) {
                Ok(parsed) => return Some(parsed),
                Err(err) => {
                    let mut path = base.clone();
                    path.extend(err.path().iter().filter_map(|seg| match seg {
                        serde_path_to_error::Segment::Seq { index } => Some(KeyStep::Index(*index)),
                        serde_path_to_error::Segment::Map { key } => Some(KeyStep::Key(key.clone())),
                        _ => None,
                    }));
                    let message = err.inner().to_string();
                    if message.starts_with("invalid type:") && self.coerce(&path) {
                        continue;
                    }
                    let problem = self.describe(&path, &message);
                    self.push(problem);
                    return None;
                }
            }
        }
    }

    /// An environment value is a string at first; when its key wants something else, it is read
    /// again as YAML (`5` → number, `true` → boolean, `[a, b]` → list). True when it changed.
    fn coerce(&mut self, path: &[KeyStep]) -> bool {
        let key = dotted(path);
        if !self.origins.iter().any(|(k, _)| *k == key) || !self.coerced.insert(key) {
            return false;
        }
        let Some(slot) = env::get_mut(&mut self.tree, path) else { return false };
        let Value::String(raw) = slot else { return false };
        match serde_yaml::from_str::<Value>(raw) {
            Ok(parsed) if !matches!(parsed, Value::String(_) | Value::Null) => {
                *slot = parsed;
                true
            }
            _ => false,
        }
    }

    /// Rewrites a serde message about the value at `path` into our words.
    fn describe(&self, path: &[KeyStep], message: &str) -> Problem {
        let key = dotted(path);
        if let Some(rest) = message.strip_prefix("unknown field `") {
            let valid = rest.split('`').skip(2).step_by(2).map(str::to_string).collect();
            return Problem::new(key, Detail::Unknown { valid });
        }
        let standard = ["invalid type:", "invalid value:", "unknown variant", "invalid length"];
        let expected = match message.split_once(", expected ") {
            Some((_, expected)) if standard.iter().any(|p| message.starts_with(p)) => expected,
            _ => return Problem::invalid(key, message),
        };
        let expected = hint(&key).map(str::to_string).unwrap_or_else(|| friendly(expected));
        let value = env::get(&self.tree, path);
        let secret = matches!(path.last(), Some(KeyStep::Key(k)) if SECRET_KEYS.contains(&k.as_str()))
            || HOLDS_SECRETS.contains(&shape(&key).as_str());
        let quote = if expected == "a string" && matches!(value, Some(Value::Number(_) | Value::Bool(_))) {
            " (put the value in quotes)"
        } else {
            ""
        };
        Problem::invalid(key, format!("expected {expected}, got {}{quote}", render(value, secret)))
    }
}

/// Keys whose values hold secrets further down. A scalar given in their place may be the whole
/// section written wrong (`mqtt: mqtt://user:pass@host`, a list of logins in a variable that is
/// not YAML), so a problem names its kind, never the text.
const HOLDS_SECRETS: [&str; 9] = ["", "networks", "sites", "networks[]", "sites[]", "mqtt", "cloud", "http", "health"];

/// A dotted key with its list indices left out (`networks[2].ids` → `networks[].ids`).
fn shape(key: &str) -> String {
    let mut normal = String::new();
    let mut in_index = false;
    for c in key.chars() {
        match c {
            '[' => {
                in_index = true;
                normal.push_str("[]");
            }
            ']' => in_index = false,
            _ if in_index => {}
            _ => normal.push(c),
        }
    }
    normal
}

/// Our description of what a key expects, where serde's would be vague (`u8`).
fn hint(key: &str) -> Option<&'static str> {
    Some(match shape(key).as_str() {
        "mqtt.qos" | "mqtt.snapshot_qos" => "an integer 0..2",
        "cloud.max_requests_per_minute" | "cloud.max_concurrent_requests" => "a positive integer",
        "homeassistant.discovery" => "device or component",
        "mqtt.protocol" => "auto, v5 or v3",
        "mqtt.max_inflight" => "an integer 1..65535",
        "mqtt.tcp_nodelay" => "true or false",
        "log.format" => "text or json",
        "networks" => "a list of credentials entries (email, password, ids)",
        "sites" => "a list of site credentials entries (email, password, ids)",
        "networks[].ids" | "sites[].ids" => "a list of network ids",
        "health.listen" | "http.listen" => "an address like 127.0.0.1:8099, or \"\" for off",
        _ => return None,
    })
}

/// Serde's expectation in plain words.
fn friendly(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a non-negative integer".into(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list".into(),
        "path string" => "a file path".into(),
        e if e.starts_with("struct ") || e == "a map" => "a mapping of keys".into(),
        e if e.contains("Value::Tagged") => "one of the documented names".into(),
        e => e.replace('`', ""),
    }
}

/// A value as the user wrote it; a secret only as its kind.
fn render(value: Option<&Value>, secret: bool) -> String {
    match value {
        None => "nothing".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(_)) if secret => "a boolean".into(),
        Some(Value::Number(_)) if secret => "a number".into(),
        Some(Value::String(_)) if secret => "a string".into(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => format!("{s:?}"),
        Some(Value::Sequence(_)) => "a list".into(),
        Some(Value::Mapping(_)) => "a mapping".into(),
        Some(Value::Tagged(t)) => format!("a value tagged {}", t.tag),
    }
}

/// A mapping key as text (YAML allows non-string keys).
fn key_name(key: &Value) -> String {
    match key {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        other => render(Some(other), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_read_well() {
        assert_eq!(friendly("u32"), "a non-negative integer");
        assert_eq!(friendly("`text` or `json`"), "text or json");
        assert_eq!(hint("networks[3].ids"), Some("a list of network ids"));
        assert_eq!(render(Some(&Value::String("hunter2".into())), true), "a string");
    }
}
