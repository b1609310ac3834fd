//! The direction rule of ARCHITECTURE.md ("Layers"): a module of the library imports only from
//! layers below its own, never from its own layer's other modules nor from above; and no two
//! files import each other, directly or in a ring, outside `sim`. Read from the source's paths
//! (`crate::`, `super::`, `self::`), outside comments and test modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` with its layer, lowest first. The binary (`main.rs`, `cli/`)
/// sits above them all and is not listed.
const LAYERS: &[(&str, u8)] = &[
    ("color", 0),
    ("json_object", 0),
    ("log_filter", 0),
    ("metrics", 0),
    ("wake_batch", 0),
    ("cloud", 1),
    ("sim", 1),
    ("bridge", 2),
    ("commands", 3),
    ("health", 4),
    ("mqtt", 4),
    ("web", 5),
    ("config", 6),
    ("app", 7),
    ("broker", 7),
    ("check", 7),
];

/// The binary's files: they may import anything of the library.
const BINARY: &[&str] = &["main", "cli", "lib"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/mqtt/store/mod.rs` → `mqtt`).
fn module_of(src: &Path, file: &Path) -> String {
    let first = file.strip_prefix(src).unwrap().components().next().unwrap();
    first.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string()
}

/// Whether a file holds only tests (`tests.rs`, `*_tests.rs`, a `tests/` folder).
fn is_test_file(file: &Path) -> bool {
    let name = file.file_stem().unwrap().to_string_lossy();
    name == "tests" || name.ends_with("_tests") || file.components().any(|c| c.as_os_str() == "tests")
}

/// The lines of code of a file, numbered from 1: comments and what follows a `#[cfg(test)]`
/// are left out.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(n, line)| (n + 1, line.trim_start()))
        .take_while(|(_, code)| !code.starts_with("#[cfg(test)]"))
        .filter(|(_, code)| !code.starts_with("//"))
        .map(|(n, code)| (n, code.split("//").next().unwrap_or_default()))
}

/// Every `crate::<module>` a line of code names, with its line number.
fn imports(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, code) in code_lines(text) {
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push((n, name));
            }
        }
    }
    out
}

#[test]
fn every_import_runs_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut unlisted = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if BINARY.contains(&module.as_str()) || is_test_file(file) {
            continue;
        }
        let Some(&own) = layer.get(module.as_str()) else {
            unlisted.push(module);
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (line, target) in imports(&text) {
            if target == module {
                continue;
            }
            match layer.get(target.as_str()) {
                Some(&theirs) if theirs < own => {}
                Some(&theirs) => wrong.push(format!(
                    "{}:{line}: {module} (layer {own}) imports {target} (layer {theirs})",
                    file.strip_prefix(&src).unwrap().display()
                )),
                None => unlisted.push(target),
            }
        }
    }
    unlisted.sort();
    unlisted.dedup();
    assert!(unlisted.is_empty(), "modules missing from LAYERS (and from ARCHITECTURE.md): {unlisted:?}");
    assert!(wrong.is_empty(), "imports that run up or across the layers:\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_sees_imports_and_skips_comments_and_tests() {
    let text = "use crate::cloud::model::X;\n// crate::web is named in a comment\nlet a = crate::bridge::f(); \
                // crate::app\n#[cfg(test)]\nuse crate::sim;\n";
    let found: Vec<(usize, String)> = imports(text);
    assert_eq!(found, [(1, "cloud".to_string()), (3, "bridge".to_string())]);
}

/// A file's module path (`src/mqtt/store/mod.rs` → `["mqtt", "store"]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let mut path: Vec<String> =
        file.strip_prefix(src).unwrap().with_extension("").iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    path
}

/// Every path a file's code names from `crate::`, `super::` or `self::`, as absolute module
/// paths; `use` trees are expanded (`use super::{a::X, b}` → `super::a::X`, `super::b`).
fn named_paths(text: &str, own: &[String]) -> Vec<Vec<String>> {
    let code: String = code_lines(text).map(|(_, code)| code).collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    for path in expand_paths(&code) {
        let mut segments = path.split("::").filter(|s| !s.is_empty());
        let mut absolute: Vec<String> = match segments.next() {
            Some("crate") => Vec::new(),
            Some("self") => own.to_vec(),
            Some("super") => own[..own.len().saturating_sub(1)].to_vec(),
            _ => continue,
        };
        for segment in segments {
            if segment == "super" {
                absolute.pop();
            } else {
                absolute.push(segment.to_string());
            }
        }
        out.push(absolute);
    }
    out
}

/// The paths in a text, with each `prefix::{a, b::c}` group expanded to `prefix::a`,
/// `prefix::b::c`.
fn expand_paths(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_' || chars[i - 1] == ':');
        if starts_word && (chars[i].is_alphabetic() || chars[i] == '_') {
            let (paths, end) = path_at(&chars, i);
            out.extend(paths);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The paths of the path (or `use` tree) that starts at `start`, and where it ends.
fn path_at(chars: &[char], start: usize) -> (Vec<String>, usize) {
    let mut prefix = String::new();
    let mut i = start;
    loop {
        while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
            prefix.push(chars[i]);
            i += 1;
        }
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            prefix.push_str("::");
            i += 2;
            while chars.get(i) == Some(&' ') {
                i += 1;
            }
            if chars.get(i) == Some(&'{') {
                let mut paths = Vec::new();
                i += 1;
                loop {
                    while chars.get(i).is_some_and(|c| *c == ' ' || *c == ',') {
                        i += 1;
                    }
                    match chars.get(i) {
                        None => return (paths, i),
                        Some('}') => return (paths, i + 1),
                        Some(c) if c.is_alphabetic() || *c == '_' => {
                            let (inner, end) = path_at(chars, i);
                            paths.extend(inner.into_iter().map(|p| format!("{prefix}{p}")));
                            i = end;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            continue;
        }
        return (vec![prefix], i);
    }
}

/// The strongly connected groups of two files or more in a graph of files (Tarjan's algorithm).
fn rings(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        rings: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.edges.get(node).into_iter().flatten() {
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next.as_str()]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next.as_str()) {
                    let low = self.low[node].min(self.index[next.as_str()]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut ring = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    ring.push(top.to_string());
                    if top == node {
                        break;
                    }
                }
                if ring.len() > 1 {
                    ring.sort();
                    self.rings.push(ring);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        rings: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.rings
}

/// Which file of `modules` a path names: the one of the longest module path it starts with.
fn file_named<'a>(modules: &'a BTreeMap<Vec<String>, String>, path: &[String]) -> Option<(&'a [String], &'a str)> {
    (1..=path.len()).rev().find_map(|n| modules.get_key_value(&path[..n]).map(|(k, v)| (k.as_slice(), v.as_str())))
}

#[test]
fn no_files_import_each_other_outside_sim() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.retain(|f| !is_test_file(f) && !BINARY.contains(&module_of(&src, f).as_str()));
    let modules: BTreeMap<Vec<String>, String> =
        files.iter().map(|f| (module_path(&src, f), f.strip_prefix(&src).unwrap().display().to_string())).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let own = module_path(&src, file);
        let from = &modules[&own];
        for path in named_paths(&std::fs::read_to_string(file).unwrap(), &own) {
            // A module and the modules inside it are one unit: it declares them, they read what
            // it re-exports.
            match file_named(&modules, &path) {
                Some((module, to)) if !module.starts_with(&own) && !own.starts_with(module) => {
                    edges.entry(from.clone()).or_default().insert(to.to_string());
                }
                _ => {}
            }
        }
    }
    let rings: Vec<String> = rings(&edges)
        .into_iter()
        .filter(|ring| !ring.iter().all(|f| f.starts_with("sim/")))
        .map(|r| r.join(" ⇄ "))
        .collect();
    assert!(rings.is_empty(), "files that import each other, directly or in a ring:\n{}", rings.join("\n"));
}

#[test]
fn the_path_reader_expands_use_trees_and_resolves_super() {
    let own = ["mqtt".to_string(), "settings".to_string()];
    let text = "use super::{broker_url::{a, b::C}, topics};\nlet x = crate::cloud::model::f(super::super::web::g);\n\
                // super::gc\n#[cfg(test)]\nuse super::store;\n";
    let found: Vec<String> = named_paths(text, &own).into_iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["mqtt::broker_url::a", "mqtt::broker_url::b::C", "mqtt::topics", "cloud::model::f", "web::g"]);
    let edges: BTreeMap<String, BTreeSet<String>> =
        [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")].into_iter().fold(BTreeMap::new(), |mut m, (from, to)| {
            m.entry(from.to_string()).or_default().insert(to.to_string());
            m
        });
    assert_eq!(rings(&edges), [["a", "b", "c"]]);
}
