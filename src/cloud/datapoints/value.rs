//! A datapoint's value: the service sends strings or numbers, and a value that reads as a number
//! is handed on as one; anything else (`present`, `ok`, a malformed reading) stays text.

use serde::Serialize;

/// The value of a [`super::Datapoint`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum DatapointValue {
    /// A JSON number (kept as the service spelled it: `1` stays an integer, `12.5` a float).
    Number(serde_json::Number),
    /// Anything that is not a finite JSON number.
    Text(String),
}

impl DatapointValue {
    /// Reads `text` as a JSON number when it is exactly one, else keeps it as text.
    pub fn parse(text: &str) -> DatapointValue {
        // JSON number syntax refuses what f64 parsing would accept but means something else
        // (` 12`, `+1`, `inf`, `NaN`), and an out-of-range number fails rather than turn infinite.
        text.parse::<serde_json::Number>()
            .map_or_else(|_| DatapointValue::Text(text.to_string()), DatapointValue::Number)
    }

    /// The value as a float, when it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            DatapointValue::Number(n) => n.as_f64(),
            DatapointValue::Text(_) => None,
        }
    }
}

impl std::fmt::Display for DatapointValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DatapointValue::Number(n) => n.fmt(f),
            DatapointValue::Text(t) => f.write_str(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_numbers_and_the_rest_stays_text() {
        for (text, json) in [("1", "1"), ("0.25", "0.25"), ("-3", "-3"), ("2000.0", "2000.0"), ("1e3", "1000.0")] {
            let v = DatapointValue::parse(text);
            assert!(matches!(v, DatapointValue::Number(_)), "{text}");
            assert_eq!(serde_json::to_string(&v).unwrap(), json, "{text}");
        }
        for text in ["present", "ok", "", " 12", "12 ", "+1", "NaN", "inf", "1e999", "0x10", "1,5", "007"] {
            assert_eq!(DatapointValue::parse(text), DatapointValue::Text(text.to_string()), "{text:?}");
        }
        assert_eq!(DatapointValue::parse("12.5").as_f64(), Some(12.5));
        assert_eq!(DatapointValue::parse("absent").as_f64(), None);
        assert_eq!(DatapointValue::parse("absent").to_string(), "absent");
        assert_eq!(serde_json::to_string(&DatapointValue::parse("absent")).unwrap(), "\"absent\"");
    }
}
