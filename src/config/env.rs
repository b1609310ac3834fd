//! Environment overrides: `CASAMBI2MQTT_<SECTION>__<KEY>=value` sets `section.key`.
//!
//! The overrides are applied to the parsed YAML tree before anything is deserialised, so an
//! environment variable always wins over the file, for keys present in the file or not (the
//! layering gotcha of figment's global profile cannot happen here). Rules:
//!
//! - Only names containing `__` after the prefix are overrides (plus `CASAMBI2MQTT_NETWORKS` and
//!   `CASAMBI2MQTT_SITES`, the top-level keys that are lists, not sections); others such as
//!   `CASAMBI2MQTT_CONFIG` (the command line's `-c`) are left to the command line.
//! - Key parts are lower-cased; a part made of digits is a list index, so
//!   `CASAMBI2MQTT_NETWORKS__0__PASSWORD_FILE` reaches `networks[0].password_file` (an index one
//!   past the end appends an entry).
//! - The value is a string; `reader` turns it into a number, boolean or YAML list (`[a, b]`) only
//!   when the key needs one, so a password `123456` stays a string.
//! - Setting a secret (`api_key`, `password`) or its `*_file` drops the other one when it came from
//!   the file: the environment replaces the file's secret, whichever form either uses.

pub use super::error::PREFIX;
use super::error::{Detail, Problem};
use serde_yaml::{Mapping, Value};

/// The top-level keys that are lists of entries; a variable of that name sets the whole list.
const LIST_SECTIONS: [&str; 2] = ["NETWORKS", "SITES"];

/// Keys that hold a secret and have a `*_file` twin.
pub(crate) const SECRET_KEYS: [&str; 3] = ["api_key", "password", "token"];

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum KeyStep {
    /// A list index.
    Index(usize),
    /// A mapping key.
    Key(String),
}

/// Renders a path the way messages show keys: `networks[0].password`.
pub(crate) fn dotted(path: &[KeyStep]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            KeyStep::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            KeyStep::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The environment variable that sets a dotted key (`mqtt.url` → `CASAMBI2MQTT_MQTT__URL`,
/// `networks[0].email` → `CASAMBI2MQTT_NETWORKS__0__EMAIL`).
pub fn var_for(key: &str) -> String {
    let parts: Vec<String> = key
        .replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|p| !p.is_empty())
        .map(str::to_ascii_uppercase)
        .collect();
    format!("{PREFIX}{}", parts.join("__"))
}

/// One override: the variable, the key path it names and its raw value (left out of `Debug`: it
/// may be a password, an API key or a whole list of logins).
#[derive(Clone)]
pub(crate) struct Override {
    pub var: String,
    pub path: Vec<KeyStep>,
    pub value: String,
}

impl std::fmt::Debug for Override {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Override").field("var", &self.var).field("path", &self.path).finish_non_exhaustive()
    }
}

/// Picks the configuration variables out of an environment, sorted by key path (so list
/// entries are appended in index order). Bad names are problems.
pub(crate) fn overrides(env: impl IntoIterator<Item = (String, String)>) -> (Vec<Override>, Vec<Problem>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (var, value) in env {
        let Some(rest) = var.strip_prefix(PREFIX) else { continue };
        if !rest.contains("__") && !LIST_SECTIONS.contains(&rest) {
            continue;
        }
        let mut path = Vec::new();
        let mut bad = false;
        for part in rest.split("__") {
            if part.is_empty() {
                bad = true;
            } else if part.bytes().all(|b| b.is_ascii_digit()) {
                match part.parse() {
                    Ok(i) if !path.is_empty() => path.push(KeyStep::Index(i)),
                    _ => bad = true,
                }
            } else {
                path.push(KeyStep::Key(part.to_ascii_lowercase()));
            }
        }
        if bad {
            problems.push(Problem { key: String::new(), env_var: Some(var), detail: Detail::BadEnvName });
        } else {
            found.push(Override { var, path, value });
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path).then_with(|| a.var.cmp(&b.var)));
    (found, problems)
}

/// Applies the overrides to `tree`; returns the origin of every key set (dotted key, variable).
pub(crate) fn apply(tree: &mut Value, overrides: &[Override], problems: &mut Vec<Problem>) -> Vec<(String, String)> {
    let mut origins: Vec<(String, String)> = Vec::new();
    for ov in overrides {
        match set(tree, &ov.path, Value::String(ov.value.clone())) {
            Ok(()) => {
                drop_file_twin(tree, &ov.path, &origins);
                origins.push((dotted(&ov.path), ov.var.clone()));
            }
            Err(reason) => problems.push(Problem {
                key: dotted(&ov.path),
                env_var: Some(ov.var.clone()),
                detail: Detail::Invalid(reason),
            }),
        }
    }
    origins
}

/// Sets the value at `path`, creating mappings (and appending list entries) on the way.
fn set(tree: &mut Value, path: &[KeyStep], value: Value) -> Result<(), String> {
    let mut cur = tree;
    for (depth, seg) in path.iter().enumerate() {
        let here = dotted(&path[..depth]);
        let here = if here.is_empty() { "the top level".to_string() } else { here };
        if cur.is_null() {
            *cur = match seg {
                KeyStep::Key(_) => Value::Mapping(Mapping::new()),
                KeyStep::Index(_) => Value::Sequence(Vec::new()),
            };
        }
        cur = match (seg, cur) {
            (KeyStep::Key(k), Value::Mapping(map)) => map.entry(Value::String(k.clone())).or_insert(Value::Null),
            (KeyStep::Index(i), Value::Sequence(seq)) => {
                if *i == seq.len() {
                    seq.push(Value::Null);
                }
                let len = seq.len();
                seq.get_mut(*i).ok_or_else(|| format!("index {i} is past the end of {here} ({len} entries)"))?
            }
            (KeyStep::Key(_), _) => return Err(format!("cannot set it: {here} is not a mapping")),
            (KeyStep::Index(_), _) => return Err(format!("cannot set it: {here} is not a list")),
        };
    }
    *cur = value;
    Ok(())
}

/// After an override of a secret or its `*_file`, removes the twin key when the file set it.
fn drop_file_twin(tree: &mut Value, path: &[KeyStep], origins: &[(String, String)]) {
    let Some((KeyStep::Key(name), parent)) = path.split_last() else { return };
    let twin = match name.strip_suffix("_file") {
        Some(base) if SECRET_KEYS.contains(&base) => base.to_string(),
        None if SECRET_KEYS.contains(&name.as_str()) => format!("{name}_file"),
        _ => return,
    };
    let mut twin_path = parent.to_vec();
    twin_path.push(KeyStep::Key(twin.clone()));
    let twin_key = dotted(&twin_path);
    if origins.iter().any(|(key, _)| *key == twin_key) {
        return;
    }
    if let Some(map) = get_mut(tree, parent).and_then(Value::as_mapping_mut) {
        map.remove(twin.as_str());
    }
}

/// The value at `path`, if there is one.
pub(crate) fn get<'a>(tree: &'a Value, path: &[KeyStep]) -> Option<&'a Value> {
    path.iter().try_fold(tree, |cur, seg| match seg {
        KeyStep::Key(k) => cur.get(k.as_str()),
        KeyStep::Index(i) => cur.get(*i),
    })
}

/// The value at `path`, mutable, if there is one.
pub(crate) fn get_mut<'a>(tree: &'a mut Value, path: &[KeyStep]) -> Option<&'a mut Value> {
    path.iter().try_fold(tree, |cur, seg| match seg {
        KeyStep::Key(k) => cur.get_mut(k.as_str()),
        KeyStep::Index(i) => cur.get_mut(*i),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn names_become_paths() {
        let (ovs, problems) = overrides(env(&[
            ("CASAMBI2MQTT_MQTT__URL", "mqtt://b"),
            ("CASAMBI2MQTT_NETWORKS__0__EMAIL", "a@b"),
            ("CASAMBI2MQTT_CONFIG", "/etc/x.yaml"),
            ("PATH", "/bin"),
            ("CASAMBI2MQTT_MQTT____X", "1"),
        ]));
        let paths: Vec<String> = ovs.iter().map(|o| dotted(&o.path)).collect();
        assert_eq!(paths, ["mqtt.url", "networks[0].email"]);
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].to_string(),
            "CASAMBI2MQTT_MQTT____X: not a configuration variable (expected CASAMBI2MQTT_<SECTION>__<KEY>)"
        );
    }

    #[test]
    fn var_names_round_trip() {
        assert_eq!(var_for("mqtt.url"), "CASAMBI2MQTT_MQTT__URL");
        assert_eq!(var_for("networks[0].password_file"), "CASAMBI2MQTT_NETWORKS__0__PASSWORD_FILE");
    }

    #[test]
    fn index_past_the_end_is_a_problem() {
        let mut tree = Value::Null;
        let (ovs, _) = overrides(env(&[("CASAMBI2MQTT_NETWORKS__1__EMAIL", "a@b")]));
        let mut problems = Vec::new();
        apply(&mut tree, &ovs, &mut problems);
        assert_eq!(
            problems[0].to_string(),
            "networks[1].email (from CASAMBI2MQTT_NETWORKS__1__EMAIL): index 1 is past the end of networks (0 entries)"
        );
    }
}
