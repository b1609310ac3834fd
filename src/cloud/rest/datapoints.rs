//! The query of `GET /datapoints/networks/{id}/datapoints`, validated and URL-encoded.

use chrono::{DateTime, TimeZone};
use url::Url;

use crate::cloud::CloudError;

/// Highest `limit` the service accepts.
pub const MAX_LIMIT: u32 = 100_000;

/// A datapoint category for `dataType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `sensors`
    Sensors,
    /// `vendor`
    Vendor,
    /// `control`
    Control,
    /// `energy`
    Energy,
    /// `details`
    Details,
    /// `status`
    Status,
}

impl DataType {
    /// The query spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sensors => "sensors",
            Self::Vendor => "vendor",
            Self::Control => "control",
            Self::Energy => "energy",
            Self::Details => "details",
            Self::Status => "status",
        }
    }
}

/// A datapoint query. `from` and `to` are strings in one of the service's formats
/// (`yyyyMMdd[hh[mm[ss[fff]]]]` or ISO 8601 with an optional offset); [`DatapointQuery::between`]
/// builds them from timestamps. Values are URL-encoded when the query is applied, so the `+` of
/// an offset goes out as `%2B` (an unencoded `+` would be read as a space and make the query
/// invalid).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DatapointQuery {
    /// Categories (`dataType`); this or `keys` must be non-empty.
    pub data_types: Vec<DataType>,
    /// Keys such as `dimmer`, `lux`, `presence`, `battery_level`.
    pub keys: Vec<String>,
    /// Restrict to these unit ids.
    pub units: Vec<u32>,
    /// Start of the range.
    pub from: String,
    /// End of the range.
    pub to: String,
    /// At most this many datapoints (1..=100000; the service's default is 10000).
    pub limit: Option<u32>,
}

impl DatapointQuery {
    /// A query over `[from, to]`, formatted as ISO 8601 with milliseconds and offset.
    pub fn between<Tz: TimeZone>(from: &DateTime<Tz>, to: &DateTime<Tz>) -> Self
    where
        Tz::Offset: std::fmt::Display,
    {
        const FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.3f%:z";
        Self { from: from.format(FORMAT).to_string(), to: to.format(FORMAT).to_string(), ..Self::default() }
    }

    /// Checks the rules the service would answer with 400, before spending a request on it.
    pub fn validate(&self) -> Result<(), CloudError> {
        if self.data_types.is_empty() && self.keys.is_empty() {
            return Err(CloudError::InvalidRequest("a datapoint query needs dataType or keys".into()));
        }
        if self.from.trim().is_empty() || self.to.trim().is_empty() {
            return Err(CloudError::InvalidRequest("a datapoint query needs from and to".into()));
        }
        if let Some(limit) = self.limit
            && !(1..=MAX_LIMIT).contains(&limit)
        {
            return Err(CloudError::InvalidRequest(format!("datapoint limit {limit} is outside 1..={MAX_LIMIT}")));
        }
        Ok(())
    }

    /// Validates the query and appends it to `url`, URL-encoded.
    pub fn apply(&self, url: &mut Url) -> Result<(), CloudError> {
        self.validate()?;
        let mut pairs = url.query_pairs_mut();
        if !self.data_types.is_empty() {
            let list: Vec<&str> = self.data_types.iter().map(|t| t.as_str()).collect();
            pairs.append_pair("dataType", &list.join(","));
        }
        if !self.keys.is_empty() {
            pairs.append_pair("keys", &self.keys.join(","));
        }
        if !self.units.is_empty() {
            let list: Vec<String> = self.units.iter().map(u32::to_string).collect();
            pairs.append_pair("units", &list.join(","));
        }
        pairs.append_pair("from", &self.from);
        pairs.append_pair("to", &self.to);
        if let Some(limit) = self.limit {
            pairs.append_pair("limit", &limit.to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use chrono::FixedOffset;

    use super::*;

    fn url_for(q: &DatapointQuery) -> String {
        let mut url = Url::parse("https://door.example.com/datapoints/networks/n1/datapoints").unwrap();
        q.apply(&mut url).map(|()| url.to_string()).unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn plus_in_offsets_is_percent_encoded() {
        let q = DatapointQuery {
            keys: vec!["lux".into(), "presence".into()],
            units: vec![12, 13],
            from: "2026-11-20T08:00+02:00".into(),
            to: "20261121".into(),
            limit: Some(500),
            ..DatapointQuery::default()
        };
        let url = url_for(&q);
        assert_eq!(
            url,
            "https://door.example.com/datapoints/networks/n1/datapoints?keys=lux%2Cpresence&units=12%2C13\
             &from=2026-11-20T08%3A00%2B02%3A00&to=20261121&limit=500"
        );
        assert!(!url.contains('+'));
        // The server decodes it back to the original value.
        let parsed = Url::parse(&url).unwrap();
        let from = parsed.query_pairs().find(|(k, _)| k == "from").map(|(_, v)| v.into_owned());
        assert_eq!(from.as_deref(), Some("2026-11-20T08:00+02:00"));
    }

    #[test]
    fn between_formats_iso_with_offset() {
        let tz = FixedOffset::east_opt(2 * 3600).unwrap();
        let from = tz.with_ymd_and_hms(2026, 11, 20, 8, 0, 0).unwrap();
        let to = tz.with_ymd_and_hms(2026, 11, 20, 9, 30, 0).unwrap();
        let mut q = DatapointQuery::between(&from, &to);
        q.data_types = vec![DataType::Sensors, DataType::Energy];
        assert_eq!(q.from, "2026-11-20T08:00:00.000+02:00");
        assert!(url_for(&q).contains("dataType=sensors%2Cenergy&from=2026-11-20T08%3A00%3A00.000%2B02%3A00"));
    }

    #[test]
    fn invalid_queries_are_refused_before_sending() {
        let base = DatapointQuery {
            keys: vec!["lux".into()],
            from: "20261120".into(),
            to: "20261121".into(),
            ..Default::default()
        };
        assert!(base.validate().is_ok());
        assert!(DatapointQuery { keys: vec![], ..base.clone() }.validate().is_err());
        assert!(DatapointQuery { from: String::new(), ..base.clone() }.validate().is_err());
        assert!(DatapointQuery { limit: Some(0), ..base.clone() }.validate().is_err());
        assert!(DatapointQuery { limit: Some(100_001), ..base.clone() }.validate().is_err());
        assert!(DatapointQuery { limit: Some(100_000), ..base }.validate().is_ok());
    }
}
