//! What the page of a big site asks for as the user goes (docs/web.md#routes): one network in
//! full when it is opened (`GET /api/networks/<id>`), and the units whose names hold a text
//! (`GET /api/units?q=`), so the first answer of the page never carries every unit
//! ([`super::model::LEAN_ABOVE`]).

use super::WebState;
use super::model::{NetworkModel, UnitModel, unit_model};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Most units a search answers with; the answer says how many matched in all.
pub const SEARCH_MAX: usize = 500;
/// Longest search text taken.
pub const QUERY_MAX: usize = 64;

fn json(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /api/networks/<id>`: the network with its units, or 404.
pub async fn network(State(web): State<Arc<WebState>>, Path(id): Path<String>) -> Response {
    let Some(net) = web.mirror.network(&id) else {
        let body = axum::Json(serde_json::json!({"error": "no such network"}));
        return (StatusCode::NOT_FOUND, body).into_response();
    };
    let rest = web.rest.window();
    let latest = web.latest();
    let fill = |network: &str, unit: &mut UnitModel| latest.fill(network, unit);
    match serde_json::to_string(&NetworkModel::of(&net, rest, &fill, true)) {
        Ok(body) => json(body),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The query of `GET /api/units`.
#[derive(Debug, Deserialize)]
pub struct Search {
    q: String,
}

/// The units of one network that a search found.
#[derive(Serialize)]
struct Found {
    network: String,
    units: Vec<UnitModel>,
}

/// The answer of a search.
#[derive(Serialize)]
struct Answer {
    /// The networks whose names hold the text (all their units match).
    networks: Vec<String>,
    /// The units found, by network, at most [`SEARCH_MAX`].
    found: Vec<Found>,
    /// How many units matched in all.
    total: usize,
}

/// Whether `name` holds `query` (lower-case), in any case.
fn holds(name: &str, query: &str) -> bool {
    name.to_lowercase().contains(query)
}

/// `GET /api/units?q=<text>`: the units whose names (or whose network's name) hold the text.
pub async fn search(State(web): State<Arc<WebState>>, Query(search): Query<Search>) -> Response {
    let query: String = search.q.trim().chars().take(QUERY_MAX).collect::<String>().to_lowercase();
    let (nets, _) = web.mirror.snapshot();
    let latest = web.latest();
    let fill = |network: &str, unit: &mut UnitModel| latest.fill(network, unit);
    let mut answer = Answer { networks: Vec::new(), found: Vec::new(), total: 0 };
    for net in &nets {
        let whole = holds(&net.status.name, &query);
        if whole {
            answer.networks.push(net.status.id.clone());
        }
        let mut units = Vec::new();
        for unit in net.units.values() {
            if !whole && !unit.name.as_deref().is_some_and(|n| holds(n, &query)) {
                continue;
            }
            answer.total += 1;
            if answer.total <= SEARCH_MAX {
                units.push(unit_model(net, unit, &fill));
            }
        }
        if !units.is_empty() {
            answer.found.push(Found { network: net.status.id.clone(), units });
        }
    }
    drop(latest);
    match serde_json::to_string(&answer) {
        Ok(body) => json(body),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
