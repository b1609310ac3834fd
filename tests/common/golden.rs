//! Golden files: the retained set as text, compared with `tests/golden/`.

use std::collections::BTreeMap;
use std::path::Path;

/// The retained set as `topic<TAB>payload` lines, sorted, with what changes between runs masked
/// (`started_at` of bridge/info, and the crate version).
pub fn render_golden(retained: &BTreeMap<String, String>) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut out = String::new();
    for (topic, payload) in retained {
        let mut p = payload.replace(&format!("\"sw_version\":\"{version}\""), "\"sw_version\":\"<version>\"");
        p = p.replace(&format!("\"version\":\"{version}\""), "\"version\":\"<version>\"");
        if topic.ends_with("/bridge/info")
            && let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&p)
        {
            v["started_at"] = serde_json::json!("<started_at>");
            p = v.to_string();
        }
        out.push_str(topic);
        out.push('\t');
        out.push_str(&p);
        out.push('\n');
    }
    out
}

/// Compares `actual` with the golden file `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites it.
pub fn check_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing golden file {}; run with UPDATE_GOLDEN=1 and review it", path.display()));
    if expected != actual {
        let exp: Vec<&str> = expected.lines().collect();
        let act: Vec<&str> = actual.lines().collect();
        let mut diff = String::new();
        for l in &exp {
            if !act.contains(l) {
                diff.push_str(&format!("- {l}\n"));
            }
        }
        for l in &act {
            if !exp.contains(l) {
                diff.push_str(&format!("+ {l}\n"));
            }
        }
        panic!("{} differs from the output (UPDATE_GOLDEN=1 rewrites it):\n{diff}", path.display());
    }
}
