//! [`ConfigError`] and [`Problem`]: what is wrong with a configuration, one line per problem.
//!
//! Every problem names the configuration key (`mqtt.qos`, `networks[0].password`) and, when the
//! value came from an environment variable, that variable too, so the user knows what to edit.
//! Secrets never reach these messages: the code that builds them renders secret values as their
//! kind only (see `reader::render`).

use std::fmt;
use std::path::PathBuf;

/// The prefix of every configuration variable: the reader looks for it, and problems found in
/// the environment name it.
pub const PREFIX: &str = "CASAMBI2MQTT_";

/// Why the configuration could not be loaded. The binary exits with [`ConfigError::EXIT_CODE`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("cannot read configuration file {}: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (the operating system's words).
        reason: String,
    },
    /// The file is not YAML, or not a mapping of sections.
    #[error("{source_name}: invalid YAML: {reason}")]
    Yaml {
        /// The file name, or `configuration` when the text did not come from a file.
        source_name: String,
        /// The parser's message (line and column included).
        reason: String,
    },
    /// The configuration parsed but some keys are wrong; every problem found is listed.
    #[error("{}", Problems(.0))]
    Invalid(Vec<Problem>),
}

impl ConfigError {
    /// The process exit code for a bad configuration (docs/cli.md).
    pub const EXIT_CODE: u8 = 2;

    /// The individual problems (one for [`ConfigError::Read`] and [`ConfigError::Yaml`] is not
    /// listed: those have no key).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Invalid(problems) => problems,
            _ => &[],
        }
    }
}

/// Displays problems one per line.
struct Problems<'a>(&'a [Problem]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// One thing wrong with one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The dotted key, e.g. `mqtt.qos` or `networks[0].password` (empty for a bad variable name).
    pub key: String,
    /// The environment variable the value came from, if it did.
    pub env_var: Option<String>,
    /// What is wrong.
    pub detail: Detail,
}

/// What is wrong with a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// The key does not exist; `valid` lists the keys its section has.
    Unknown {
        /// The keys allowed at that place.
        valid: Vec<String>,
    },
    /// The value cannot be used; the text says why and what is expected.
    Invalid(String),
    /// A required key is missing; `alternative` is the `*_file` key that may replace it.
    Required {
        /// E.g. `cloud.api_key_file`.
        alternative: Option<String>,
    },
    /// A secret and its `*_file` are both set.
    Conflict {
        /// The other key, e.g. `cloud.api_key_file`.
        other: String,
    },
    /// An environment variable with the prefix whose name does not spell a key.
    BadEnvName,
}

impl Problem {
    /// A problem with the key's value.
    pub fn invalid(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Problem { key: key.into(), env_var: None, detail: Detail::Invalid(reason.into()) }
    }

    /// A problem of any kind.
    pub fn new(key: impl Into<String>, detail: Detail) -> Self {
        Problem { key: key.into(), env_var: None, detail }
    }

    /// The key, followed by ` (from VAR)` when an environment variable set it.
    fn key_with_origin(&self) -> String {
        match &self.env_var {
            Some(var) => format!("{} (from {var})", self.key),
            None => self.key.clone(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.key_with_origin();
        match &self.detail {
            Detail::Unknown { valid } if valid.is_empty() => write!(f, "unknown key {key}"),
            Detail::Unknown { valid } => write!(f, "unknown key {key}; valid keys: {}", valid.join(", ")),
            Detail::Invalid(reason) => write!(f, "{key}: {reason}"),
            Detail::Required { alternative: Some(alt) } => write!(f, "{key} is required (or {alt})"),
            Detail::Required { alternative: None } => write!(f, "{key} is required"),
            Detail::Conflict { other } => write!(f, "{key} and {other} are both set; use only one"),
            Detail::BadEnvName => match &self.env_var {
                Some(var) => {
                    write!(f, "{var}: not a configuration variable (expected {}<SECTION>__<KEY>)", PREFIX)
                }
                None => write!(f, "{key}: not a configuration variable"),
            },
        }
    }
}
