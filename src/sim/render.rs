//! Renders the simulator's truth in the exact shapes the real service uses: REST objects (ints as
//! ints, controls nested `[[...]]`, offline units without `on`/`controls`/`dimLevel`/`status`) and
//! WebSocket `unitChanged` bodies (ints as floats such as `3.0`, controls flat). Colour
//! conversions live in [`crate::color`].

use super::world::{NetView, NetworkTruth, UnitTruth, control_value, round6};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// A unit's `dimLevel`: its Dimmer level (1 for units without one) scaled by the network dim
/// level, 0 when off. Matches the real service, where `dimLevel` and the Dimmer value differ.
fn unit_dim_level(net: &NetView<'_>, u: &UnitTruth) -> f64 {
    if !u.def.on {
        return 0.0;
    }
    round6(control_value(&u.def.controls, "Dimmer", "value").unwrap_or(1.0) * net.dim_level)
}

/// Whether the unit is reachable right now (the gateway carries every unit).
fn reachable(net: &NetView<'_>, u: &UnitTruth) -> bool {
    u.def.online && net.gateway_online
}

/// The `unitChanged` body of a unit (without `wire` and `method`), as one JSON object text.
///
/// Serialised from borrowed fields, with the keys in the order the service's bodies have (sorted),
/// so a change costs one pass over the unit and one string: the simulator renders every change
/// twice (before and after) under the world lock, and at benchmark rates its CPU is taken from the
/// same cores as the bridge and the broker.
pub fn unit_event<'a>(net: impl Into<NetView<'a>>, u: &UnitTruth) -> Arc<str> {
    let net = net.into();
    let d = &u.def;
    let online = reachable(&net, u);
    let body = EventBody {
        active_scene_id: u.active_scene_id as f64,
        address: &d.address,
        condition: 0.0,
        controls: online.then_some(d.controls.as_slice()),
        dim_level: online.then(|| unit_dim_level(&net, u)),
        firmware_version: &d.firmware,
        fixture_id: d.fixture as f64,
        group_id: d.group as f64,
        id: d.id,
        name: &d.name,
        on: online.then_some(d.on),
        online,
        priority: online.then_some(3.0),
        scene: u.active_scene_id as f64,
        sensors: &[],
        status: online.then_some("ok"),
        kind: &d.kind,
    };
    // Serialising borrowed strings, floats and `Value`s cannot fail.
    Arc::from(serde_json::to_string(&body).unwrap_or_default())
}

/// A `unitChanged` body's fields in the order the service sends them (alphabetical); an offline
/// unit has no `controls`, `dimLevel`, `on`, `priority` or `status`. Numbers the service sends as
/// floats (`3.0`) are `f64` here.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EventBody<'a> {
    active_scene_id: f64,
    address: &'a str,
    condition: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    controls: Option<&'a [Value]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dim_level: Option<f64>,
    firmware_version: &'a str,
    fixture_id: f64,
    group_id: f64,
    id: i64,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    on: Option<bool>,
    online: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<f64>,
    scene: f64,
    sensors: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(rename = "type")]
    kind: &'a str,
}

/// A unit as listed in the network and in `/units` (no state).
pub fn unit_info(u: &UnitTruth) -> Value {
    let d = &u.def;
    let mut v = json!({
        "id": d.id, "address": d.address, "name": d.name, "position": d.position,
        "fixtureId": d.fixture, "firmwareVersion": d.firmware, "groupId": d.group,
        "labels": {}, "type": d.kind,
    });
    if let (Some(image), Some(obj)) = (&d.image, v.as_object_mut()) {
        obj.insert("image".into(), json!(image));
    }
    v
}

/// A unit-state object (`/units/{id}/state` and the units of `/state`).
pub fn unit_state(net: &NetworkTruth, u: &UnitTruth) -> Value {
    let view = NetView::from(net);
    let d = &u.def;
    let online = reachable(&view, u);
    let mut v = unit_info(u);
    if let Some(obj) = v.as_object_mut() {
        obj.remove("labels");
        obj.insert("priority".into(), json!(3));
        obj.insert("scene".into(), json!(u.active_scene_id));
        obj.insert("online".into(), json!(online));
        obj.insert("condition".into(), json!(0));
        obj.insert("activeSceneId".into(), json!(u.active_scene_id));
        if online {
            obj.insert("on".into(), json!(d.on));
            obj.insert("status".into(), json!("ok"));
            obj.insert("dimLevel".into(), json!(unit_dim_level(&view, u)));
            obj.insert("controls".into(), json!([d.controls]));
        }
    }
    v
}

/// The scenes map (`/scenes` and inside the network); keyed by the scene's key, which need not
/// equal its id.
pub fn scenes(net: &NetworkTruth) -> Value {
    let mut m = Map::new();
    for s in &net.scenes {
        let units: Map<String, Value> = s.units.iter().map(|u| (u.id.to_string(), json!({"id": u.id}))).collect();
        let key = s.key.clone().unwrap_or_else(|| s.id.to_string());
        m.insert(
            key,
            json!({"id": s.id, "name": s.name, "position": s.position, "icon": s.icon, "color": s.color,
                   "type": "REGULAR", "hidden": false, "units": units}),
        );
    }
    Value::Object(m)
}

/// The groups map. The groups endpoint names the unit key `id`; the network and state responses
/// use the odd numeric key `"0"` (as the real service does).
pub fn groups(net: &NetworkTruth, numeric_key: bool) -> Value {
    let mut m = Map::new();
    for g in &net.groups {
        let units: Vec<Value> = g
            .units
            .iter()
            .enumerate()
            .map(|(i, id)| if numeric_key { json!({"0": id, "position": i}) } else { json!({"id": id, "position": i}) })
            .collect();
        m.insert(g.id.to_string(), json!({"id": g.id, "name": g.name, "position": g.position, "units": units}));
    }
    Value::Object(m)
}

/// The gallery (photos).
pub fn photos(net: &NetworkTruth) -> Value {
    Value::Array(
        net.def
            .photos
            .iter()
            .map(|p| json!({"name": p.name, "controls": [], "image": p.image, "position": p.position}))
            .collect(),
    )
}

/// `GET /v1/networks/{id}`; with `state`, `GET /v1/networks/{id}/state` (unit states, `dimLevel`,
/// `activeScenes`).
pub fn network(net: &NetworkTruth, state: bool) -> Value {
    let units: Map<String, Value> = net
        .units
        .values()
        .map(|u| (u.def.id.to_string(), if state { unit_state(net, u) } else { unit_info(u) }))
        .collect();
    let mut v = json!({
        "id": net.def.id, "name": net.def.name, "revision": net.revision, "grade": net.def.grade,
        "address": net.def.address, "gateway": {"name": net.def.gateway}, "type": net.def.kind,
        "timezone": net.def.timezone, "photos": photos(net), "units": units,
        "scenes": scenes(net), "groups": groups(net, true),
    });
    if let (true, Some(obj)) = (state, v.as_object_mut()) {
        obj.insert("dimLevel".into(), json!(net.dim_level));
        obj.insert("activeScenes".into(), json!(net.active_scenes.iter().collect::<Vec<_>>()));
    }
    v
}

/// `GET /v1/fixtures/{id}`: the fixture catalogue entry (`translations` is always empty: the
/// simulated catalogue has no translated labels).
pub fn fixture(f: &super::site::Fixture) -> Value {
    json!({"id": f.id, "type": f.kind, "vendor": f.vendor, "model": f.model, "translations": {},
           "controls": f.controls})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::site::Site;
    use crate::sim::world::World;

    /// The body as a JSON map builds it: keys sorted, absent fields left out. The serialised
    /// struct must give the same text, byte for byte.
    fn body_via_map(net: &NetworkTruth, u: &UnitTruth) -> String {
        let view = NetView::from(net);
        let d = &u.def;
        let online = reachable(&view, u);
        let mut m = Map::new();
        for (k, v) in [
            ("id", json!(d.id)),
            ("address", json!(d.address)),
            ("name", json!(d.name)),
            ("type", json!(d.kind)),
            ("fixtureId", json!(d.fixture as f64)),
            ("firmwareVersion", json!(d.firmware)),
            ("groupId", json!(d.group as f64)),
            ("online", json!(online)),
            ("condition", json!(0.0)),
            ("scene", json!(u.active_scene_id as f64)),
            ("activeSceneId", json!(u.active_scene_id as f64)),
            ("sensors", json!([])),
        ] {
            m.insert(k.into(), v);
        }
        if online {
            m.insert("on".into(), json!(d.on));
            m.insert("status".into(), json!("ok"));
            m.insert("priority".into(), json!(3.0));
            m.insert("dimLevel".into(), json!(unit_dim_level(&view, u)));
            m.insert("controls".into(), Value::Array(d.controls.clone()));
        }
        Value::Object(m).to_string()
    }

    #[test]
    fn unit_event_bodies_are_the_sorted_json_objects_of_the_service() {
        let mut world = World::new(&Site::generate(1, 40));
        let net_id = world.networks.keys().next().cloned().unwrap_or_default();
        // Vary what the body depends on: a scene, a unit off, a unit offline, a dimmed network.
        let _ = world.control_scene(&net_id, 1, 0.4);
        let ids: Vec<i64> = world.networks[&net_id].units.keys().copied().take(3).collect();
        let _ = world.set_unit_state(&net_id, ids[0], None, Some(false), &[]);
        let _ = world.set_unit_state(&net_id, ids[1], Some(false), None, &[]);
        let _ = world.control_network(&net_id, 0.7);
        let net = &world.networks[&net_id];
        let (mut offline, mut off, mut kinds) = (0, 0, std::collections::BTreeSet::new());
        for u in net.units.values() {
            let text = unit_event(net, u);
            assert_eq!(&*text, body_via_map(net, u), "unit {}", u.def.id);
            offline += usize::from(!u.def.online);
            off += usize::from(!u.def.on);
            kinds.insert(u.def.kind.clone());
        }
        assert!(offline > 0 && off > 0 && kinds.len() > 1, "cases covered: {offline} offline, {off} off, {kinds:?}");
        // With the gateway gone every unit renders offline.
        let _ = world.set_gateway(&net_id, false);
        let net = &world.networks[&net_id];
        for u in net.units.values() {
            let text = unit_event(net, u);
            assert!(!text.contains("\"controls\""), "{text}");
            assert_eq!(&*text, body_via_map(net, u));
        }
    }
}
