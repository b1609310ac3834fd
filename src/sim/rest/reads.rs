//! The read endpoints: network, state, units, groups, scenes, gallery, icons, images, fixtures
//! and datapoints. Each takes the world lock only to copy or render what it needs; PNG encoding
//! and datapoint generation happen after the lock is released.

use super::{ApiError, authorize, json_response, png_response};
use crate::sim::datapoints::{self, History, Query, QueryError, UnitSeries};
use crate::sim::world::{NetworkTruth, World};
use crate::sim::{Shared, images, render};
use axum::response::Response;
use http::HeaderMap;
use serde_json::{Map, Value};
use std::time::Instant;

/// Runs `f` on a network the request's session may read (410/404 otherwise).
fn read<T>(
    shared: &Shared,
    headers: &HeaderMap,
    network: &str,
    f: impl FnOnce(&World, &NetworkTruth) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    authorize(shared, headers, network)?;
    let world = shared.world();
    let net = world.networks.get(network).ok_or_else(|| ApiError::NotFound(format!("Network {network} not found")))?;
    f(&world, net)
}

fn unit_id(text: &str) -> Result<i64, ApiError> {
    text.parse().map_err(|_| ApiError::NotFound(format!("Unit {text} not found")))
}

fn unit_not_found(id: i64) -> ApiError {
    ApiError::NotFound(format!("Unit {id} not found"))
}

fn encoded(png: Result<Vec<u8>, images::ImageError>) -> Result<Response, ApiError> {
    png.map(png_response).map_err(|e| ApiError::Internal(e.to_string()))
}

/// `GET /v1/networks/{id}` and, with `state`, `GET /v1/networks/{id}/state`.
pub(super) fn network(shared: &Shared, headers: &HeaderMap, id: &str, state: bool) -> Result<Response, ApiError> {
    read(shared, headers, id, |_, net| Ok(json_response(render::network(net, state))))
}

/// `GET /v1/networks/{id}/units`: unit id → unit.
pub(super) fn units(shared: &Shared, headers: &HeaderMap, id: &str) -> Result<Response, ApiError> {
    read(shared, headers, id, |_, net| {
        let units: Map<String, Value> =
            net.units.values().map(|u| (u.def.id.to_string(), render::unit_info(u))).collect();
        Ok(json_response(Value::Object(units)))
    })
}

/// `GET /v1/networks/{id}/units/{unitId}/state`.
pub(super) fn unit_state(shared: &Shared, headers: &HeaderMap, id: &str, unit: &str) -> Result<Response, ApiError> {
    read(shared, headers, id, |_, net| {
        let unit = unit_id(unit)?;
        let u = net.units.get(&unit).ok_or_else(|| unit_not_found(unit))?;
        Ok(json_response(render::unit_state(net, u)))
    })
}

/// `GET /v1/networks/{id}/groups`: group id → group (unit entries keyed `id`).
pub(super) fn groups(shared: &Shared, headers: &HeaderMap, id: &str) -> Result<Response, ApiError> {
    read(shared, headers, id, |_, net| Ok(json_response(render::groups(net, false))))
}

/// `GET /v1/networks/{id}/scenes`: scene key → scene.
pub(super) fn scenes(shared: &Shared, headers: &HeaderMap, id: &str) -> Result<Response, ApiError> {
    read(shared, headers, id, |_, net| Ok(json_response(render::scenes(net))))
}

/// `GET /v1/networks/{id}/gallery`: the photos.
pub(super) fn gallery(shared: &Shared, headers: &HeaderMap, id: &str) -> Result<Response, ApiError> {
    read(shared, headers, id, |_, net| Ok(json_response(render::photos(net))))
}

/// What a unit's icon is drawn from.
enum IconSource {
    /// The unit's own image.
    Image(String),
    /// Its fixture's icon.
    Fixture(i64),
}

/// `GET /v1/networks/{id}/units/{unitId}/icon`: the unit's image, else its fixture's icon, else 404.
pub(super) fn unit_icon(shared: &Shared, headers: &HeaderMap, id: &str, unit: &str) -> Result<Response, ApiError> {
    let source = read(shared, headers, id, |world, net| {
        let unit = unit_id(unit)?;
        let u = net.units.get(&unit).ok_or_else(|| unit_not_found(unit))?;
        if let Some(image) = &u.def.image {
            return Ok(IconSource::Image(image.clone()));
        }
        match world.fixtures.get(&u.def.fixture) {
            Some(f) if f.icon => Ok(IconSource::Fixture(f.id)),
            _ => Err(ApiError::NotFound(format!("Unit {unit} has no icon"))),
        }
    })?;
    encoded(match source {
        IconSource::Image(image) => images::picture(&image),
        IconSource::Fixture(fixture) => images::fixture_icon(fixture),
    })
}

/// `GET /v1/networks/{id}/images/{imageId}`: a unit image or gallery photo of that network.
pub(super) fn image(shared: &Shared, headers: &HeaderMap, id: &str, image: &str) -> Result<Response, ApiError> {
    let photo = read(shared, headers, id, |_, net| {
        let photo = net.def.photos.iter().find(|p| p.image == image).map(|p| (p.size, p.corrupt));
        let known = photo.is_some() || net.units.values().any(|u| u.def.image.as_deref() == Some(image));
        if known { Ok(photo) } else { Err(ApiError::NotFound(format!("Image {image} not found"))) }
    })?;
    let (size, corrupt) = photo.unwrap_or_default();
    encoded(images::picture(image).map(|png| images::served_as(png, size, corrupt)))
}

/// Looks a fixture up by its path text; a non-numeric id is as unknown as a missing one.
fn fixture_id(shared: &Shared, text: &str) -> Result<i64, ApiError> {
    let not_found = || ApiError::NotFound(format!("Fixture {text} not found"));
    let id: i64 = text.parse().map_err(|_| not_found())?;
    if shared.world().fixtures.contains_key(&id) { Ok(id) } else { Err(not_found()) }
}

/// `GET /v1/fixtures/{id}` (key only, no session).
pub(super) fn fixture(shared: &Shared, id: &str) -> Result<Response, ApiError> {
    let id = fixture_id(shared, id)?;
    let world = shared.world();
    let f = world.fixtures.get(&id).ok_or_else(|| ApiError::NotFound(format!("Fixture {id} not found")))?;
    Ok(json_response(render::fixture(f)))
}

/// `GET /v1/fixtures/{id}/icon` (key only, no session); 404 when the fixture has no icon.
pub(super) fn fixture_icon(shared: &Shared, id: &str) -> Result<Response, ApiError> {
    let id = fixture_id(shared, id)?;
    let has_icon = shared.world().fixtures.get(&id).is_some_and(|f| f.icon);
    if !has_icon {
        return Err(ApiError::NotFound(format!("Fixture {id} has no icon")));
    }
    encoded(images::fixture_icon(id))
}

/// `GET /datapoints/networks/{id}/datapoints` (rules in [`crate::sim::datapoints`]).
pub(super) fn datapoints(
    shared: &Shared,
    headers: &HeaderMap,
    id: &str,
    raw_query: Option<&str>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let units: Vec<UnitSeries> =
        read(shared, headers, id, |_, net| Ok(net.units.values().map(|u| UnitSeries::of(&u.def)).collect()))?;
    let query = Query::parse(raw_query)
        .and_then(|q| q.check_interval(shared.config.max_datapoint_interval).map(|()| q))
        .map_err(|e| match e {
            QueryError::Invalid(text) => ApiError::BadRequest(text),
            QueryError::IntervalTooLong => ApiError::IntervalTooLong,
        })?;
    let history = History {
        seed: shared.config.seed,
        network: id,
        now_ms: chrono::Utc::now().timestamp_millis(),
        energy: &shared.energy,
    };
    let answer = history.answer(&query, &units);
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(json_response(datapoints::render(&answer, query.limit, elapsed)))
}
