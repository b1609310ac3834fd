//! Request counters by endpoint and outcome, for `/metrics` and `/healthz`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// The endpoints of the service, as metric labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// `POST /v1/users/session`
    UserSession,
    /// `POST /v1/networks/session`
    NetworkSessionAll,
    /// `POST /v1/networks/set/session`
    NetworkSessionSet,
    /// `POST /v1/networks/{id}/session`
    NetworkSession,
    /// `GET /v1/networks/{id}`
    Network,
    /// `GET /v1/networks/{id}/units`
    Units,
    /// `GET /v1/networks/{id}/units/{unitId}/state`
    UnitState,
    /// `GET /v1/networks/{id}/state`
    NetworkState,
    /// `GET /v1/networks/{id}/groups`
    Groups,
    /// `GET /v1/networks/{id}/scenes`
    Scenes,
    /// `GET /v1/networks/{id}/gallery`
    Gallery,
    /// `GET /v1/networks/{id}/units/{unitId}/icon`
    UnitIcon,
    /// `GET /v1/networks/{id}/images/{imageId}`
    Image,
    /// `GET /v1/fixtures/{id}`
    Fixture,
    /// `GET /v1/fixtures/{id}/icon`
    FixtureIcon,
    /// `GET /datapoints/networks/{id}/datapoints`
    Datapoints,
}

impl Endpoint {
    /// Whether requests to it yield to live work in the key's quota
    /// ([`crate::cloud::quota::QuotaGuard::acquire_background`]): logged datapoints, photos and
    /// icons are never urgent, and never worth a state poll's or a login's delay.
    pub fn is_background(self) -> bool {
        matches!(self, Self::Datapoints | Self::Gallery | Self::Image | Self::UnitIcon | Self::FixtureIcon)
    }

    /// The metric label (`network_state`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UserSession => "user_session",
            Self::NetworkSessionAll => "network_session_all",
            Self::NetworkSessionSet => "network_session_set",
            Self::NetworkSession => "network_session",
            Self::Network => "network",
            Self::Units => "units",
            Self::UnitState => "unit_state",
            Self::NetworkState => "network_state",
            Self::Groups => "groups",
            Self::Scenes => "scenes",
            Self::Gallery => "gallery",
            Self::UnitIcon => "unit_icon",
            Self::Image => "image",
            Self::Fixture => "fixture",
            Self::FixtureIcon => "fixture_icon",
            Self::Datapoints => "datapoints",
        }
    }

    /// True for the session-creation endpoints (logins).
    pub fn is_login(self) -> bool {
        matches!(self, Self::UserSession | Self::NetworkSessionAll | Self::NetworkSessionSet | Self::NetworkSession)
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// The server answered with this HTTP status.
    Status(u16),
    /// No answer (connect error, timeout, reset).
    Transport,
}

/// One row of [`RequestStats::snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestCount {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The outcome.
    pub outcome: Outcome,
    /// Requests with this endpoint and outcome.
    pub count: u64,
    /// Their summed duration.
    pub total_time: Duration,
}

/// Counters of requests by endpoint and outcome; cheap enough for the REST rate of the bridge.
#[derive(Debug, Default)]
pub struct RequestStats {
    counts: Mutex<BTreeMap<(Endpoint, Outcome), (u64, Duration)>>,
}

impl RequestStats {
    /// Counts one request.
    pub fn record(&self, endpoint: Endpoint, outcome: Outcome, elapsed: Duration) {
        if let Ok(mut counts) = self.counts.lock() {
            let entry = counts.entry((endpoint, outcome)).or_default();
            entry.0 += 1;
            entry.1 += elapsed;
        }
    }

    /// All counters, ordered by endpoint then outcome.
    pub fn snapshot(&self) -> Vec<RequestCount> {
        let Ok(counts) = self.counts.lock() else { return Vec::new() };
        counts
            .iter()
            .map(|(&(endpoint, outcome), &(count, total_time))| RequestCount { endpoint, outcome, count, total_time })
            .collect()
    }

    /// Requests to `endpoint` that ended with `outcome`.
    pub fn count(&self, endpoint: Endpoint, outcome: Outcome) -> u64 {
        self.counts.lock().ok().and_then(|c| c.get(&(endpoint, outcome)).map(|e| e.0)).unwrap_or(0)
    }

    /// All requests to `endpoint`, whatever their outcome.
    pub fn total(&self, endpoint: Endpoint) -> u64 {
        self.counts.lock().map(|c| c.iter().filter(|((e, _), _)| *e == endpoint).map(|(_, v)| v.0).sum()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_endpoint_and_outcome() {
        let s = RequestStats::default();
        s.record(Endpoint::NetworkState, Outcome::Status(200), Duration::from_millis(5));
        s.record(Endpoint::NetworkState, Outcome::Status(200), Duration::from_millis(7));
        s.record(Endpoint::NetworkState, Outcome::Status(429), Duration::from_millis(1));
        s.record(Endpoint::Fixture, Outcome::Transport, Duration::from_millis(1));
        assert_eq!(s.count(Endpoint::NetworkState, Outcome::Status(200)), 2);
        assert_eq!(s.total(Endpoint::NetworkState), 3);
        let snap = s.snapshot();
        assert_eq!(snap.len(), 3);
        assert_eq!(snap[0].total_time, Duration::from_millis(12));
        assert_eq!(Endpoint::NetworkState.as_str(), "network_state");
    }
}
