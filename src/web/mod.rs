//! The bridge's web page (docs/web.md): at `/` on the HTTP listener (`http.listen`), what the
//! bridge sees — the bridge, each network, its units, groups and scenes — live, with control
//! through the same command path as MQTT.
//!
//! - [`mirror`]: the page's copy of the bridge's state, kept from the update stream.
//! - [`model`]: the page model (JSON) built from it.
//! - [`live`]: the live stream (server-sent events) and the hub that feeds every page.
//! - [`control`]: `POST /api/control` → the command dispatcher; [`access`]: who may.
//! - [`icons`]: fixture icons, fetched once; [`assets`]: the page itself, embedded.
//!
//! The listener runs on a thread of its own ([`serve`]): rendering a page or a live frame, and
//! writing to slow browsers, never takes the bridge's thread (app.rs: one thread carries every
//! event). The bridge's path only updates the mirror.

pub mod access;
mod assets;
mod browse;
pub mod control;
pub mod icons;
pub mod listener;
pub mod live;
pub mod mirror;
pub mod model;
mod rest_rate;

use crate::cloud::datapoints::{Datapoint, DatapointValue};
use crate::cloud::model::Secret;
use crate::cloud::rest::RequestStats;
use crate::health::{self, HealthState};
use access::Access;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use control::{ControlRequest, Controller};
use icons::Icons;
use mirror::{Mirror, ProblemNote};
use model::{BridgeModel, NetworkModel, PageModel, RestWindow, UnitModel};
use rest_rate::RestRate;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// What the page shows of the bridge's settings.
#[derive(Debug, Clone)]
pub struct WebSettings {
    /// The listener's address (decides the control rule with `token`).
    pub listen: SocketAddr,
    /// `http.token`.
    pub token: Option<Secret>,
    /// The MQTT broker's URL without credentials.
    pub broker: String,
    /// The MQTT protocol setting.
    pub protocol: String,
    /// `cloud.max_requests_per_minute`.
    pub rest_limit: u32,
    /// `http.public_host`: names the listener answers to besides IP addresses and `localhost`.
    pub public_host: Vec<String>,
    /// The listener's limits (`http.max_connections`, `http.header_timeout`, `http.idle_timeout`).
    pub limits: listener::Limits,
    /// `http.max_live_streams`.
    pub max_live_streams: usize,
}

/// Latest logged datapoints by network id and unit id.
type Datapoints = HashMap<String, HashMap<u32, BTreeMap<String, DatapointValue>>>;

/// Everything the page's routes share.
#[derive(Debug)]
pub struct WebState {
    /// The page's copy of the bridge's state; feed it every update ([`Mirror::observe`]).
    pub mirror: Mirror,
    pages: broadcast::Sender<Arc<live::Frame>>,
    rest: RestRate,
    health: Arc<HealthState>,
    access: Access,
    control: Option<Controller>,
    icons: Option<Icons>,
    datapoints: Mutex<Datapoints>,
    broker: String,
    protocol: String,
    started: Instant,
    shutdown: CancellationToken,
    limits: listener::Limits,
    /// One place per open live stream (`http.max_live_streams`).
    live: Arc<tokio::sync::Semaphore>,
}

/// The latest datapoints, locked once for a whole render.
pub struct Latest<'a>(MutexGuard<'a, Datapoints>);

impl Latest<'_> {
    /// Fills the battery and energy of `unit` of `network` from its latest datapoints.
    pub fn fill(&self, network: &str, unit: &mut UnitModel) {
        if let Some(latest) = self.0.get(network).and_then(|units| units.get(&unit.id)) {
            unit.fill_datapoints(latest);
        }
    }
}

impl WebState {
    /// The page's state; its live stream and thread stop with `shutdown`.
    pub fn new(settings: WebSettings, health: Arc<HealthState>, shutdown: CancellationToken) -> WebState {
        WebState {
            mirror: Mirror::default(),
            pages: live::page_queue(),
            rest: RestRate::new(None, settings.rest_limit),
            health,
            access: Access::new(settings.listen, settings.token, settings.public_host),
            control: None,
            icons: None,
            datapoints: Mutex::new(HashMap::new()),
            broker: settings.broker,
            protocol: settings.protocol,
            started: Instant::now(),
            shutdown,
            limits: settings.limits,
            live: Arc::new(tokio::sync::Semaphore::new(settings.max_live_streams.max(1))),
        }
    }

    /// Control goes to `controller` (without one, the page is read-only).
    pub fn with_control(mut self, controller: Controller) -> WebState {
        self.control = Some(controller);
        self
    }

    /// Icons come through `icons`.
    pub fn with_icons(mut self, icons: Icons) -> WebState {
        self.icons = Some(icons);
        self
    }

    /// The REST requests of the last minute are counted from `stats`.
    pub fn with_rest_stats(mut self, stats: Arc<RequestStats>) -> WebState {
        self.rest = RestRate::new(Some(stats), self.rest.window().limit);
        self
    }

    /// Records a unit's latest logged datapoints (`key → value`): the page shows its battery
    /// and energy from them ([`model::battery_and_energy`]); open pages get the unit again at the
    /// next tick.
    pub fn set_latest_datapoints(&self, network: &str, unit: u32, latest: BTreeMap<String, DatapointValue>) {
        {
            let mut all = self.datapoints.lock().unwrap_or_else(|p| p.into_inner());
            all.entry(network.to_string()).or_default().insert(unit, latest);
        }
        self.mirror.touch(network, unit);
    }

    /// Takes in new logged datapoints of `network` (oldest first), keeping the newest value of
    /// the keys the page shows ([`model::BATTERY_KEY`], [`model::ENERGY_KEY`]) per unit; open
    /// pages get those units again at the next tick.
    pub fn note_datapoints(&self, network: &str, points: &[Datapoint]) {
        let shown = points.iter().filter(|p| p.key == model::BATTERY_KEY || p.key == model::ENERGY_KEY);
        let mut touched = BTreeSet::new();
        {
            let mut all = self.datapoints.lock().unwrap_or_else(|p| p.into_inner());
            for p in shown {
                let Some(unit) = p.unit else { continue };
                let units = all.entry(network.to_string()).or_default();
                units.entry(unit).or_default().insert(p.key.clone(), p.value.clone());
                touched.insert(unit);
            }
        }
        for unit in touched {
            self.mirror.touch(network, unit);
        }
    }

    /// The latest datapoints, for filling unit models.
    pub fn latest(&self) -> Latest<'_> {
        Latest(self.datapoints.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn bridge_model<'a>(&'a self, problems: &'a [ProblemNote], rest: RestWindow) -> BridgeModel<'a> {
        let (networks_to_come, logins_to_come) = self.health.to_come();
        BridgeModel {
            version: env!("CARGO_PKG_VERSION"),
            uptime_s: self.started.elapsed().as_secs(),
            broker: &self.broker,
            protocol: &self.protocol,
            protocol_spoken: self.health.mqtt_protocol(),
            mqtt_connected: self.health.mqtt_connected(),
            rest,
            networks_to_come,
            logins_to_come,
            problems,
        }
    }

    /// A `bridge` frame of the live stream.
    fn bridge_frame(&self) -> Option<live::Frame> {
        let problems = self.mirror.bridge_problems();
        let model = self.bridge_model(&problems, self.rest.window());
        serde_json::to_string(&model).ok().map(|data| live::Frame { event: "bridge", data })
    }

    /// The whole page model as JSON (`GET /api/state`, and the first frame of the live stream).
    pub fn page_json(&self) -> String {
        let (nets, problems) = self.mirror.snapshot();
        let rest = self.rest.window();
        let latest = self.latest();
        let fill = |network: &str, unit: &mut UnitModel| latest.fill(network, unit);
        let page = PageModel {
            bridge: self.bridge_model(&problems, rest),
            networks: {
                let with_units = nets.iter().map(|n| n.units.len()).sum::<usize>() <= model::LEAN_ABOVE;
                nets.iter().map(|n| NetworkModel::of(n, rest, &fill, with_units)).collect()
            },
        };
        serde_json::to_string(&page).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot render the page model");
            "{}".into()
        })
    }
}

/// The largest body `POST /api/control` takes: a command is a few dozen bytes.
pub const CONTROL_BODY_LIMIT: usize = 16 * 1024;

/// The page's routes (without `/healthz` and `/metrics`).
pub fn routes(web: Arc<WebState>) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/style.css", get(assets::style))
        .route("/favicon.ico", get(assets::favicon))
        .route("/unit.svg", get(assets::unit_icon))
        .route("/api/state", get(state))
        .route("/api/events", get(live::events))
        .route("/api/access", get(access_verdict))
        .route("/api/networks/{id}", get(browse::network))
        .route("/api/units", get(browse::search))
        .route("/api/control", post(control).layer(axum::extract::DefaultBodyLimit::max(CONTROL_BODY_LIMIT)))
        .route("/icon/fixture/{id}", get(icon))
        .route("/icon/unit/{network}/{unit}", get(unit_icon))
        .with_state(web)
}

/// Everything the listener serves: the page's routes and the health endpoints, each answer
/// (404 and 405 included) only to a `Host` that names the bridge, and with the security headers.
pub fn app(web: Arc<WebState>, health: Arc<HealthState>) -> Router {
    routes(web.clone())
        .merge(health::routes(health))
        .layer(axum::middleware::from_fn_with_state(web, guard_host))
        .layer(axum::middleware::map_response(assets::security_headers))
}

/// Answers `421` to a request whose `Host` does not name the bridge (DNS rebinding,
/// docs/web.md#security).
async fn guard_host(
    State(web): State<Arc<WebState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match web.access.check_host(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refused(StatusCode::MISDIRECTED_REQUEST, refusal.reason),
    }
}

/// Binds the HTTP listener (before anything else starts, so a taken address fails early).
pub fn bind(listen: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(listen)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serves the page and the health endpoints on `listener` ([`bind`]), on a thread of its own,
/// until `web`'s shutdown. Returns the bound address.
pub fn serve(
    listener: std::net::TcpListener,
    web: Arc<WebState>,
    health: Arc<HealthState>,
) -> std::io::Result<SocketAddr> {
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let app = app(web.clone(), health);
    let mut limits = web.limits;
    let files = listener::open_files_limit();
    limits.max_connections = listener::connection_cap(limits.max_connections, files);
    if limits.max_connections < web.limits.max_connections {
        tracing::warn!(
            configured = web.limits.max_connections,
            cap = limits.max_connections,
            open_files = files,
            "http.max_connections lowered: the process may open too few files (ulimit -n) for it"
        );
    }
    std::thread::Builder::new().name("http".into()).spawn(move || {
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "the HTTP listener cannot start");
                    return;
                }
            };
            let shutdown = web.shutdown.clone();
            tokio::spawn(live::hub(web));
            listener::run(listener, app, limits, shutdown).await;
        });
    })?;
    Ok(addr)
}

async fn state(State(web): State<Arc<WebState>>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], web.page_json()).into_response()
}

/// `GET /api/access`: whether this request's credentials allow control, and why not.
async fn access_verdict(State(web): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    let verdict = match (&web.control, web.access.check(&headers)) {
        (None, _) => Err("read-only: this bridge takes no commands from the page".to_string()),
        (Some(_), Err(refusal)) => {
            web.access.slow_down(&refusal).await;
            Err(refusal.reason)
        }
        (Some(_), Ok(())) => Ok(()),
    };
    let body = match verdict {
        Ok(()) => json!({"control": true, "reason": null, "loopback": web.access.is_loopback()}),
        Err(reason) => json!({"control": false, "reason": reason, "loopback": web.access.is_loopback()}),
    };
    axum::Json(body).into_response()
}

fn refused(code: StatusCode, reason: impl Into<String>) -> Response {
    (code, axum::Json(json!({"error": reason.into()}))).into_response()
}

/// `POST /api/control`.
async fn control(
    State(web): State<Arc<WebState>>,
    headers: HeaderMap,
    body: Result<axum::Json<ControlRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Some(controller) = &web.control else {
        return refused(StatusCode::FORBIDDEN, "read-only: this bridge takes no commands from the page");
    };
    if let Err(refusal) = web.access.check(&headers) {
        web.access.slow_down(&refusal).await;
        return refused(StatusCode::FORBIDDEN, refusal.reason);
    }
    let request = match body {
        Ok(axum::Json(body)) => body.into_request(),
        // The parser's message may quote the body: a short prefix only.
        Err(e) => {
            let code = match e.status() {
                StatusCode::PAYLOAD_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::BAD_REQUEST,
            };
            return refused(code, access::quote(&e.body_text()));
        }
    };
    let request = match request {
        Ok(r) => r,
        Err(reason) => return refused(StatusCode::BAD_REQUEST, reason),
    };
    match controller.submit(request).await {
        Ok(()) => (StatusCode::ACCEPTED, axum::Json(json!({"ok": true}))).into_response(),
        Err(reason) => refused(StatusCode::UNPROCESSABLE_ENTITY, reason),
    }
}

/// `GET /icon/fixture/<id>`: the fixture's icon, or the page's own picture when it has none.
async fn icon(State(web): State<Arc<WebState>>, Path(id): Path<u32>) -> Response {
    let found = match &web.icons {
        Some(icons) if web.mirror.knows_fixture(id) => icons.fixture(id).await,
        _ => None,
    };
    picture(found)
}

/// `GET /icon/unit/<network>/<unit>`: the unit's icon as the service's unit-icon route gives it
/// (its image, or its fixture's icon), else its fixture's icon, else the page's own picture.
async fn unit_icon(State(web): State<Arc<WebState>>, Path((network, unit)): Path<(String, u32)>) -> Response {
    let (Some(icons), Some((has_image, fixture))) = (&web.icons, web.mirror.icon_source(&network, unit)) else {
        return picture(None);
    };
    let mut found = None;
    if has_image {
        found = icons.unit(&network, unit).await;
    }
    if found.is_none()
        && let Some(fixture) = fixture
    {
        found = icons.fixture(fixture).await;
    }
    picture(found)
}

/// An icon as served: a picture from the service under its own type (never SVG, which may
/// carry script), or the page's own picture.
fn picture(icon: Option<icons::Icon>) -> Response {
    let Some(icon) = icon else { return assets::unit_icon_response() };
    let content_type = icons::image_type(&icon.content_type)
        .and_then(|t| HeaderValue::from_str(t).ok())
        .unwrap_or_else(|| HeaderValue::from_static("application/octet-stream"));
    let cache = HeaderValue::from_static("max-age=86400");
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, cache)], icon.bytes).into_response()
}
