//! Helpers shared by the datapoint tests: a simulator with a REST client and a session manager
//! for its Home network, and reference answers asked directly of the service.

#![allow(dead_code)]

use std::ops::ControlFlow;
use std::sync::Arc;

use casambi2mqtt::cloud::datapoints::{Datapoint, FetchOptions, Fetcher};
use casambi2mqtt::cloud::model::{Credentials, Secret};
use casambi2mqtt::cloud::quota::{QuotaConfig, QuotaGuard};
use casambi2mqtt::cloud::rest::{DataType, DatapointQuery};
use casambi2mqtt::cloud::session::LoginPolicy;
use casambi2mqtt::cloud::{RestClient, RestConfig, SessionManager};
use casambi2mqtt::sim::site::{DEMO_API_KEY, DEMO_NETWORK_EMAIL, DEMO_PASSWORD, Site};
use casambi2mqtt::sim::{SimConfig, Simulator};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};

/// The demo site's "Home" network.
pub const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";

/// A simulator and a client of it.
pub struct Harness {
    pub sim: Simulator,
    pub rest: RestClient,
    pub sessions: SessionManager,
}

impl Harness {
    pub async fn start(config: SimConfig) -> Harness {
        let sim = Simulator::start_local(config).await.unwrap();
        let limits = QuotaConfig {
            max_requests_per_minute: std::num::NonZeroU32::new(60_000).unwrap(),
            ..QuotaConfig::default()
        };
        let quota = Arc::new(QuotaGuard::new(&limits));
        let rest = RestClient::new(RestConfig::new(sim.base_url().parse().unwrap(), Secret::new(DEMO_API_KEY)), quota)
            .unwrap();
        let creds = Credentials::new(DEMO_NETWORK_EMAIL, DEMO_PASSWORD);
        let sessions = SessionManager::new(rest.clone(), creds, vec![HOME.into()], LoginPolicy::default());
        Harness { sim, rest, sessions }
    }

    pub async fn demo() -> Harness {
        Harness::start(SimConfig::new(Site::demo())).await
    }

    pub fn fetcher(&self, page_limit: u32) -> Fetcher<'_, RestClient, SessionManager> {
        let filter = DatapointQuery { data_types: all_types(), ..DatapointQuery::default() };
        let options = FetchOptions { filter, page_limit, ..FetchOptions::default() };
        Fetcher::new(&self.rest, &self.sessions, HOME, options)
    }

    /// Every point of `[from, to)` asked directly, in pieces of at most `piece` and one page each.
    pub async fn reference(&self, from: DateTime<Utc>, to: DateTime<Utc>, piece: TimeDelta) -> Vec<Datapoint> {
        let filter = DatapointQuery { data_types: all_types(), ..DatapointQuery::default() };
        self.reference_of(&filter, from, to, piece).await
    }

    /// The points of `filter` in `[from, to)`, asked as [`Harness::reference`] does.
    pub async fn reference_of(
        &self,
        filter: &DatapointQuery,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        piece: TimeDelta,
    ) -> Vec<Datapoint> {
        let sid = self.sessions.current(HOME).map(|s| s.session_id);
        let sid = match sid {
            Some(s) => s,
            None => self.sessions.open().await.unwrap().sessions[0].session_id.clone(),
        };
        let mut all = Vec::new();
        let mut start = from;
        while start < to {
            let end = (start + piece).min(to);
            let between = DatapointQuery::between(&start, &end);
            let query = DatapointQuery { from: between.from, to: between.to, limit: Some(100_000), ..filter.clone() };
            let page = self.rest.datapoints(&sid, HOME, &query).await.unwrap();
            assert!(!page.has_more_results);
            all.extend(page.data_points.into_iter().map(|p| Datapoint::from_wire(p).unwrap()));
            start = end;
        }
        all
    }

    /// The statuses the service answered datapoint requests with.
    pub fn statuses(&self) -> Vec<u16> {
        self.sim
            .shared()
            .log
            .requests()
            .iter()
            .filter(|r| r.path.starts_with("/datapoints"))
            .map(|r| r.status)
            .collect()
    }
}

/// A sink that keeps every point.
pub fn collect(into: &mut Vec<Datapoint>) -> impl FnMut(Vec<Datapoint>) -> ControlFlow<()> + '_ {
    |page| {
        into.extend(page);
        ControlFlow::Continue(())
    }
}

pub fn all_types() -> Vec<DataType> {
    use DataType::*;
    vec![Sensors, Vendor, Control, Energy, Details, Status]
}

/// A day ending on a whole hour two days ago: inside the retention, away from "now".
pub fn past_day() -> (DateTime<Utc>, DateTime<Utc>) {
    let to = (Utc::now() - TimeDelta::days(2)).duration_trunc(TimeDelta::hours(1)).unwrap();
    (to - TimeDelta::days(1), to)
}
