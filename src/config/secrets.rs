//! Secrets given inline or as `*_file` (container secrets such as `/run/secrets/api_key`).
//!
//! A secret file holds the value alone; one trailing newline (`\n` or `\r\n`, what editors and
//! `echo` add) is dropped, anything else is kept as is. An empty inline value counts as not given,
//! so `password: ""` beside `password_file` is not a conflict. Relative paths are relative to the
//! working directory. Messages name the key and the file, never the content.

use super::error::{Detail, Problem};
use super::reader::Reader;
use crate::cloud::model::Secret;
use std::path::Path;

/// Resolves the secret `key` from its inline value or from `<key>_file`. Records a problem and
/// returns `None` when both are given, the file cannot be read, or a required secret is missing;
/// an optional secret that is missing is the empty secret.
pub(crate) fn resolve(
    reader: &mut Reader,
    key: &str,
    value: Option<Secret>,
    file: Option<&Path>,
    required: bool,
) -> Option<Secret> {
    let file_key = format!("{key}_file");
    let value = value.filter(|v| !v.is_empty());
    match (value, file) {
        (Some(_), Some(_)) => {
            reader.push(Problem::new(key, Detail::Conflict { other: file_key }));
            None
        }
        (None, Some(path)) => match read(path) {
            Ok(secret) => Some(secret),
            Err(reason) => {
                reader.push(Problem::invalid(file_key, reason));
                None
            }
        },
        (Some(value), None) => Some(value),
        (None, None) if required => {
            reader.push(Problem::new(key, Detail::Required { alternative: Some(file_key) }));
            None
        }
        (None, None) => Some(Secret::default()),
    }
}

/// Reads a secret file, dropping one trailing newline.
pub(crate) fn read(path: &Path) -> Result<Secret, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {}", path.display(), io_reason(&e)))?;
    let mut text = String::from_utf8(bytes).map_err(|_| format!("cannot read {}: not UTF-8 text", path.display()))?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    if text.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(Secret::from(text))
}

/// The operating system's reason without the ` (os error N)` suffix.
pub(crate) fn io_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [("a\n", "a"), ("a\r\n", "a"), ("a\n\n", "a\n"), (" a ", " a ")];
        for (content, expected) in cases {
            let path = dir.path().join("s");
            std::fs::write(&path, content).unwrap();
            assert_eq!(read(&path).unwrap().expose(), expected, "{content:?}");
        }
        let path = dir.path().join("empty");
        std::fs::write(&path, "\n").unwrap();
        assert_eq!(read(&path).unwrap_err(), format!("{} is empty", path.display()));
    }

    #[test]
    fn missing_file_reason_is_plain() {
        let e = read(Path::new("/x/y")).unwrap_err();
        assert_eq!(e, "cannot read /x/y: No such file or directory");
    }
}
