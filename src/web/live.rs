//! The live stream of the page: `GET /api/events`, server-sent events (docs/web.md#live).
//!
//! One hub renders what changed once per [`TICK`], whatever the number of pages, and hands the
//! frames to every page through a broadcast queue of [`PAGE_QUEUE`] frames. The bridge's path
//! only marks changes in the mirror; it never waits on the hub or on a page. A page that falls
//! [`PAGE_QUEUE`] frames behind (a stalled browser, a slow link) is dropped: its stream ends, and
//! the browser's `EventSource` reconnects and starts again from a fresh snapshot.
//!
//! Frames: `snapshot` (the whole page model, first on every stream), `network` (one network in
//! full, after its configuration changed), `status` (a network's own fields), `units` (changed
//! units of one network and the groups they are in), `bridge` (the bridge's fields).

use super::WebState;
use super::model::{NetworkHeader, NetworkModel, UnitModel, groups};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Serialize;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::broadcast::{self, error::RecvError};

/// How often the hub sends what changed: a change reaches an open page within this plus the
/// time to render and send it (the contract allows 1 s).
pub const TICK: Duration = Duration::from_millis(200);
/// Frames a page may be behind before it is dropped (at one `units` frame per network per
/// [`TICK`], several seconds of a busy site).
pub const PAGE_QUEUE: usize = 256;
/// Longest time between two writes of a live stream (a comment when nothing happens).
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How often the bridge's fields (uptime, REST requests of the last minute) are sent when
/// nothing else changes them, in ticks.
const BRIDGE_EVERY: u32 = 25;

/// One rendered frame: an event name and its JSON.
#[derive(Debug)]
pub struct Frame {
    /// `network`, `status`, `units` or `bridge`.
    pub event: &'static str,
    /// The JSON text.
    pub data: String,
}

impl Frame {
    fn of(event: &'static str, value: &impl Serialize) -> Option<Frame> {
        match serde_json::to_string(value) {
            Ok(data) => Some(Frame { event, data }),
            Err(e) => {
                tracing::warn!(event, error = %e, "cannot render a page frame");
                None
            }
        }
    }
}

/// The body of a `units` frame.
#[derive(Serialize)]
struct UnitsFrame<'a> {
    network: &'a str,
    units: Vec<UnitModel>,
    groups: Vec<crate::mqtt::unit_json::GroupJson<'a>>,
}

/// Renders what changed since the last tick into frames.
pub fn frames(web: &WebState) -> Vec<Frame> {
    let changes = web.mirror.take_changes();
    let rest = web.rest.window();
    let latest = web.latest();
    let fill = |network: &str, unit: &mut UnitModel| latest.fill(network, unit);
    let mut out = Vec::new();
    let with_units = changes.networks.is_empty() || web.mirror.unit_total() <= super::model::LEAN_ABOVE;
    for net in &changes.networks {
        out.extend(Frame::of("network", &NetworkModel::of(net, rest, &fill, with_units)));
    }
    for net in &changes.statuses {
        out.extend(Frame::of("status", &NetworkHeader::of(net, rest)));
    }
    for batch in &changes.units {
        let network = &batch.view.status.id;
        let units = batch
            .changed
            .iter()
            .filter_map(|id| batch.units.get(id))
            .map(|u| {
                let mut model = UnitModel::of(u, &batch.view);
                fill(network, &mut model);
                model
            })
            .collect();
        let groups = groups(&batch.view, &batch.units, Some(&batch.changed));
        out.extend(Frame::of("units", &UnitsFrame { network, units, groups }));
    }
    drop(latest);
    // A network read for the first time changes how many are still to come.
    if changes.bridge_problems || !changes.networks.is_empty() {
        out.extend(web.bridge_frame());
    }
    out
}

/// Runs the hub until `web`'s shutdown.
pub async fn hub(web: Arc<WebState>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut ticks = 0u32;
    let mut mqtt_was = None;
    loop {
        tokio::select! {
            _ = web.shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        web.rest.sample();
        let watching = web.pages.receiver_count() > 0;
        web.mirror.set_watching(watching);
        if !watching {
            // Nothing to send; forget what changed (a new page starts from a snapshot).
            drop(web.mirror.take_changes());
            continue;
        }
        let mut out = frames(&web);
        ticks = ticks.wrapping_add(1);
        let mqtt = web.health.mqtt_connected();
        if ticks.is_multiple_of(BRIDGE_EVERY) || mqtt_was != Some(mqtt) {
            mqtt_was = Some(mqtt);
            out.extend(web.bridge_frame());
        }
        for frame in out {
            // No page left: nothing to do.
            let _ = web.pages.send(Arc::new(frame));
        }
    }
}

/// What a page's stream holds between events.
struct Page {
    first: Option<Event>,
    frames: broadcast::Receiver<Arc<Frame>>,
    web: Arc<WebState>,
    /// Its place among `http.max_live_streams`, given back when the stream ends.
    _place: Option<OwnedSemaphorePermit>,
}

/// `GET /api/events`; `503` while `http.max_live_streams` streams are open.
pub async fn events(State(web): State<Arc<WebState>>) -> Response {
    let Ok(place) = web.live.clone().try_acquire_owned() else {
        let body = axum::Json(serde_json::json!({"error": "too many open pages; try again shortly"}));
        return (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "10")], body).into_response();
    };
    // Subscribe and start noting changes before the snapshot: whatever changes after it reaches
    // the page as a frame, so nothing falls between the two.
    let frames = web.pages.subscribe();
    web.mirror.set_watching(true);
    let first = Event::default().event("snapshot").data(web.page_json());
    // A comment at least every half idle deadline: an open page is never idle (docs/web.md#limits).
    let every = (web.limits.idle_timeout / 2).min(KEEP_ALIVE);
    let keep_alive = KeepAlive::new().interval(every);
    Sse::new(page_stream(web, frames, first, Some(place))).keep_alive(keep_alive).into_response()
}

/// One page's events: `first`, then every frame, until shutdown or until the page falls
/// [`PAGE_QUEUE`] frames behind.
fn page_stream(
    web: Arc<WebState>,
    frames: broadcast::Receiver<Arc<Frame>>,
    first: Event,
    place: Option<OwnedSemaphorePermit>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let page = Page { first: Some(first), frames, web, _place: place };
    futures_util::stream::unfold(page, |mut page| async move {
        if let Some(first) = page.first.take() {
            return Some((Ok(first), page));
        }
        let received = tokio::select! {
            _ = page.web.shutdown.cancelled() => return None,
            received = page.frames.recv() => received,
        };
        match received {
            Ok(frame) => {
                let event = Event::default().event(frame.event).data(frame.data.as_str());
                Some((Ok(event), page))
            }
            Err(RecvError::Lagged(missed)) => {
                tracing::info!(missed, "a page could not keep up with the live stream; dropped");
                None
            }
            Err(RecvError::Closed) => None,
        }
    })
}

/// A new queue of page frames.
pub fn page_queue() -> broadcast::Sender<Arc<Frame>> {
    broadcast::channel(PAGE_QUEUE).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::HealthState;
    use crate::web::WebSettings;
    use futures_util::StreamExt;
    use tokio_util::sync::CancellationToken;

    fn web() -> Arc<WebState> {
        let settings = WebSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            token: None,
            broker: String::new(),
            protocol: "auto".into(),
            rest_limit: 60,
            public_host: Vec::new(),
            limits: crate::config::HttpSettings::default().limits,
            max_live_streams: 4,
        };
        Arc::new(WebState::new(settings, HealthState::new(), CancellationToken::new()))
    }

    fn frame(n: usize) -> Arc<Frame> {
        Arc::new(Frame { event: "units", data: n.to_string() })
    }

    #[tokio::test]
    async fn a_page_that_keeps_up_gets_every_frame() {
        let web = web();
        let stream = page_stream(web.clone(), web.pages.subscribe(), Event::default(), None);
        for n in 0..PAGE_QUEUE {
            web.pages.send(frame(n)).unwrap();
        }
        let got: Vec<_> = stream.take(PAGE_QUEUE + 1).collect().await;
        assert_eq!(got.len(), PAGE_QUEUE + 1, "the snapshot and every frame");
    }

    #[tokio::test]
    async fn a_page_that_falls_behind_is_dropped_without_holding_anyone() {
        let web = web();
        let slow = page_stream(web.clone(), web.pages.subscribe(), Event::default(), None);
        let mut keeping_up = web.pages.subscribe();
        for n in 0..=PAGE_QUEUE {
            // Never waits, whoever reads or not.
            web.pages.send(frame(n)).unwrap();
            assert_eq!(keeping_up.recv().await.unwrap().data, n.to_string());
        }
        let got: Vec<_> = slow.collect().await;
        assert_eq!(got.len(), 1, "the snapshot, then the stream ends: the page is dropped");
    }

    #[test]
    fn datapoints_reach_open_pages_as_a_units_frame() {
        use crate::bridge::state::{NetworkView, Topology};
        use crate::bridge::update::Update;
        use crate::cloud::datapoints::DatapointValue;
        let web = web();
        let mut view = NetworkView::new("n1");
        view.apply_unit(serde_json::from_str(r#"{"id":6,"name":"Switch","type":"BatterySwitch"}"#).unwrap(), false);
        web.mirror.observe(&Update::Network { view: Arc::new(view), topology: Box::new(Topology::default()) });
        web.mirror.set_watching(true);
        drop(web.mirror.take_changes());
        let latest = [("battery_level".to_string(), DatapointValue::parse("87"))].into_iter().collect();
        web.set_latest_datapoints("n1", 6, latest);
        let frames = frames(&web);
        assert_eq!(frames.len(), 1);
        let units: serde_json::Value = serde_json::from_str(&frames[0].data).unwrap();
        assert_eq!(units["units"][0]["battery"], 87.0, "{units}");
        assert!(web.page_json().contains(r#""battery":87.0"#));
    }

    #[tokio::test]
    async fn a_page_ends_at_shutdown() {
        let web = web();
        let stream = page_stream(web.clone(), web.pages.subscribe(), Event::default(), None);
        web.shutdown.cancel();
        assert_eq!(stream.collect::<Vec<_>>().await.len(), 1);
    }
}
