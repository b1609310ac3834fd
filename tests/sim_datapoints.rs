//! `GET /datapoints/networks/{id}/datapoints` of the simulated service: every query rule of the
//! spec (formats, `+` encoding, brackets, limit, 400/416), `hasMoreResults`, the 60-day
//! retention, the result shape and determinism for a seed.

mod sim_rest_support;

use casambi2mqtt::sim::SimConfig;
use casambi2mqtt::sim::site::Site;
use chrono::{DateTime, Duration as Span, DurationRound, Utc};
use serde_json::Value;
use sim_rest_support::{Api, HOME, OFFICE};

/// A whole hour some days ago (inside the retention, safely in the past).
fn hour_ago(days: i64) -> DateTime<Utc> {
    (Utc::now() - Span::days(days)).duration_trunc(Span::hours(1)).unwrap()
}

fn compact(t: DateTime<Utc>) -> String {
    t.format("%Y%m%d%H%M").to_string()
}

fn iso(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

struct Dp {
    api: Api,
    sid: String,
}

impl Dp {
    async fn start(config: SimConfig) -> Dp {
        let api = Api::start(config).await;
        let sid = api.session(HOME).await;
        Dp { api, sid }
    }

    async fn demo() -> Dp {
        Dp::start(SimConfig::new(Site::demo())).await
    }

    /// Queries Home with a raw (already encoded) query string.
    async fn query(&self, query: &str) -> (u16, Value) {
        self.api.get(&format!("/datapoints/networks/{HOME}/datapoints?{query}"), Some(&self.sid)).await
    }

    async fn ok(&self, query: &str) -> Value {
        let (status, body) = self.query(query).await;
        assert_eq!(status, 200, "{query}: {body}");
        body
    }
}

fn points(body: &Value) -> &Vec<Value> {
    body["dataPoints"].as_array().unwrap()
}

#[tokio::test]
async fn result_shape_and_grid() {
    let dp = Dp::demo().await;
    let from = hour_ago(2);
    let to = from + Span::hours(1);
    let body = dp.ok(&format!("keys=dimmer&units=1&from={}&to={}", compact(from), compact(to))).await;
    assert_eq!(body["resultCount"], 4);
    assert_eq!(body["queryLimit"], 10_000);
    assert!(body["processingTimeMs"].is_u64());
    assert_eq!(body["hasMoreResults"], false);
    assert_eq!(body["errors"], "");
    let p = &points(&body)[0];
    assert_eq!((p["unit"].as_i64(), p["key"].as_str()), (Some(1), Some("dimmer")));
    assert!(p["value"].is_string());
    assert_eq!(p["time"].as_str().unwrap(), from.format("%Y-%m-%dT%H:%M:%S%.3f+00:00").to_string());
    let last = points(&body)[3]["time"].as_str().unwrap().to_string();
    assert_eq!(last, (from + Span::minutes(45)).format("%Y-%m-%dT%H:%M:00.000+00:00").to_string());
}

#[tokio::test]
async fn compact_and_iso_forms_with_offsets_agree() {
    let dp = Dp::demo().await;
    let from = hour_ago(3);
    let to = from + Span::hours(2);
    let a = dp.ok(&format!("dataType=sensors&from={}&to={}", compact(from), compact(to))).await;
    let b = dp.ok(&format!("dataType=sensors&from={}&to={}", iso(from), iso(to))).await;
    let plus = |t: DateTime<Utc>| (t + Span::hours(2)).format("%Y-%m-%dT%H:%M%%2B02:00").to_string();
    let minus = |t: DateTime<Utc>| (t - Span::minutes(90)).format("%Y-%m-%dT%H:%M:%S.000-01:30").to_string();
    let c = dp.ok(&format!("dataType=sensors&from={}&to={}", plus(from), minus(to))).await;
    let d = dp
        .ok(&format!("dataType=sensors&from={}00000&to={}", compact(from), (to + Span::days(1)).format("%Y-%m-%d")))
        .await;
    assert!(!points(&a).is_empty());
    assert_eq!(a["dataPoints"], b["dataPoints"]);
    assert_eq!(a["dataPoints"], c["dataPoints"]);
    assert!(points(&d).len() >= points(&a).len());
    // Every returned key belongs to the sensors type.
    assert!(points(&a).iter().all(|p| ["presence", "lux", "battery_level"].contains(&p["key"].as_str().unwrap())));
}

#[tokio::test]
async fn unencoded_plus_is_invalid_encoded_plus_is_fine() {
    let dp = Dp::demo().await;
    let from = (hour_ago(2) + Span::hours(1)).format("%Y-%m-%dT%H:%M");
    let to = (hour_ago(2) + Span::hours(2)).format("%Y-%m-%dT%H:%M");
    let (status, body) = dp.query(&format!("keys=lux&from={from}+01:00&to={to}+01:00")).await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains('+'));
    let body = dp.ok(&format!("keys=lux&from={from}%2B01:00&to={to}%2b01:00")).await;
    assert_eq!(body["resultCount"], 4);
}

#[tokio::test]
async fn units_with_or_without_brackets() {
    let dp = Dp::demo().await;
    let range = format!("from={}&to={}", compact(hour_ago(1)), compact(hour_ago(1) + Span::hours(1)));
    let plain = dp.ok(&format!("keys=status&units=1,4&{range}")).await;
    let bracketed = dp.ok(&format!("keys=status&units=%5B1,4%5D&{range}")).await;
    let raw_brackets = dp.ok(&format!("keys=status&units=[1,4]&{range}")).await;
    assert_eq!(plain["resultCount"], 8);
    assert_eq!(plain["dataPoints"], bracketed["dataPoints"]);
    assert_eq!(plain["dataPoints"], raw_brackets["dataPoints"]);
    let units: Vec<i64> = points(&plain).iter().map(|p| p["unit"].as_i64().unwrap()).collect();
    assert!(units.iter().all(|u| *u == 1 || *u == 4));
    for bad in ["units=1,x", "units=[1,2", "units=", "units=one"] {
        assert_eq!(dp.query(&format!("keys=status&{bad}&{range}")).await.0, 400, "{bad}");
    }
}

#[tokio::test]
async fn invalid_queries_are_400() {
    let dp = Dp::demo().await;
    let (f, t) = (compact(hour_ago(2)), compact(hour_ago(1)));
    for bad in [
        format!("from={f}&to={t}"),
        format!("dataType=lights&from={f}&to={t}"),
        format!("dataType=0&from={f}&to={t}"),
        format!("dataType=sensors,&from={f}&to={t}"),
        format!("keys=dimmer&to={t}"),
        format!("keys=dimmer&from={f}"),
        format!("keys=dimmer&from={t}&to={f}"),
        format!("keys=dimmer&from=2026-13-01&to={t}"),
        format!("keys=dimmer&from=yesterday&to={t}"),
        format!("keys=dimmer&from={f}1&to={t}"),
        format!("keys=dimmer&from={f}&to={t}&limit=0"),
        format!("keys=dimmer&from={f}&to={t}&limit=100001"),
        format!("keys=dimmer&from={f}&to={t}&limit=-5"),
        String::new(),
    ] {
        let (status, body) = dp.query(&bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"].is_string());
    }
    assert_eq!(dp.ok(&format!("keys=dimmer&from={f}&to={t}&limit=100000")).await["queryLimit"], 100_000);
    assert_eq!(dp.ok(&format!("keys=dimmer&from={f}&to={t}&limit=1")).await["queryLimit"], 1);
}

#[tokio::test]
async fn too_long_interval_is_416() {
    let dp = Dp::demo().await;
    let to = hour_ago(1);
    let (status, body) =
        dp.query(&format!("keys=dimmer&from={}&to={}", compact(to - Span::days(32)), compact(to))).await;
    assert_eq!((status, body["error"].is_string()), (416, true));
    dp.ok(&format!("keys=dimmer&from={}&to={}&limit=1", compact(to - Span::days(31)), compact(to))).await;
    // A configured maximum applies.
    let mut config = SimConfig::new(Site::demo());
    config.max_datapoint_interval = std::time::Duration::from_secs(3600);
    let short = Dp::start(config).await;
    let from = compact(to - Span::hours(2));
    assert_eq!(short.query(&format!("keys=dimmer&from={from}&to={}", compact(to))).await.0, 416);
}

#[tokio::test]
async fn has_more_results_exactly_when_the_limit_cuts() {
    let dp = Dp::demo().await;
    let from = hour_ago(5);
    let range = format!("from={}&to={}", compact(from), compact(from + Span::hours(2)));
    // 8 slots × units 1 and 2.
    let all = dp.ok(&format!("keys=dimmer&units=1,2&{range}")).await;
    assert_eq!((all["resultCount"].as_u64(), all["hasMoreResults"].as_bool()), (Some(16), Some(false)));
    let exact = dp.ok(&format!("keys=dimmer&units=1,2&{range}&limit=16")).await;
    assert_eq!(exact["hasMoreResults"], false);
    let cut = dp.ok(&format!("keys=dimmer&units=1,2&{range}&limit=15")).await;
    assert_eq!((cut["resultCount"].as_u64(), cut["hasMoreResults"].as_bool()), (Some(15), Some(true)));
    assert_eq!(cut["queryLimit"], 15);
    assert_eq!(points(&cut)[..], points(&all)[..15]);
    // The implicit limit of 10000 cuts a 31-day query of every key.
    let to = hour_ago(1);
    let big = dp.ok(&format!("dataType=control,status&from={}&to={}", compact(to - Span::days(30)), compact(to))).await;
    assert_eq!((big["resultCount"].as_u64(), big["hasMoreResults"].as_bool()), (Some(10_000), Some(true)));
}

#[tokio::test]
async fn nothing_older_than_sixty_days() {
    let dp = Dp::demo().await;
    let to = hour_ago(65);
    let body = dp.ok(&format!("dataType=status&from={}&to={}", compact(to - Span::days(5)), compact(to))).await;
    assert_eq!((body["resultCount"].as_u64(), body["hasMoreResults"].as_bool()), (Some(0), Some(false)));
    // A range across the boundary returns only what is younger than 60 days.
    let body = dp.ok(&format!("keys=status&units=1&from={}&to={}", compact(hour_ago(62)), compact(hour_ago(58)))).await;
    let oldest = Utc::now() - Span::days(60);
    let times: Vec<DateTime<Utc>> =
        points(&body).iter().map(|p| p["time"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap()).collect();
    assert!(!times.is_empty() && times.len() < 4 * 24 * 4);
    assert!(times.iter().all(|t| *t >= oldest));
    // Nothing from the future either.
    let now = Utc::now();
    let future =
        dp.ok(&format!("keys=status&units=1&from={}&to={}", compact(hour_ago(0)), compact(hour_ago(-2)))).await;
    assert!(points(&future).iter().all(|p| p["time"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap() <= now));
}

#[tokio::test]
async fn history_is_deterministic_for_the_seed() {
    let query = format!(
        "dataType=sensors,control,energy,vendor,details,status&from={}&to={}",
        compact(hour_ago(4)),
        compact(hour_ago(4) + Span::hours(3))
    );
    let a = Dp::demo().await.ok(&query).await;
    let b = Dp::demo().await.ok(&query).await;
    assert_eq!(a["dataPoints"], b["dataPoints"]);
    let mut config = SimConfig::new(Site::demo());
    config.seed = 99;
    let c = Dp::start(config).await.ok(&query).await;
    assert_eq!(a["resultCount"], c["resultCount"]);
    assert_ne!(a["dataPoints"], c["dataPoints"]);
    let keys: std::collections::BTreeSet<&str> = points(&a).iter().map(|p| p["key"].as_str().unwrap()).collect();
    for key in ["dimmer", "cct", "presence", "lux", "battery_level", "power", "energy", "status"] {
        assert!(keys.contains(key), "{key}");
    }
}

#[tokio::test]
async fn datapoints_follow_the_session_rules() {
    let dp = Dp::demo().await;
    let q = format!("keys=dimmer&from={}&to={}", compact(hour_ago(2)), compact(hour_ago(1)));
    let path = |net: &str| format!("/datapoints/networks/{net}/datapoints?{q}");
    assert_eq!(dp.api.get(&path(HOME), None).await.0, 410);
    assert_eq!(dp.api.get(&path(OFFICE), Some(&dp.sid)).await.0, 410, "another network's session");
    let user = dp.api.user_session().await;
    assert_eq!(dp.api.get(&path(OFFICE), Some(&user)).await.0, 200);
    assert_eq!(dp.api.get(&path("ffffffffffffffffffffffffffffffff"), Some(&user)).await.0, 404);
    // The versioned path does not exist.
    assert_eq!(dp.api.get(&format!("/v1/networks/{HOME}/datapoints?{q}"), Some(&dp.sid)).await.0, 404);
}
