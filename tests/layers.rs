//! The direction rule of ARCHITECTURE.md ("Layers"): a module of the library imports only from
//! layers below its own, never from its own layer's other modules nor from above. Read from the
//! source's `crate::` paths, outside comments and test modules.

use std::collections::BTreeMap;
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

/// Every `crate::<module>` a line of code names, with its line number; comments and what
/// follows a `#[cfg(test)]` are left out.
fn imports(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push((n + 1, name));
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
