//! Renders the simulator's truth in the exact shapes the real service uses: REST objects (ints as
//! ints, controls nested `[[...]]`, offline units without `on`/`controls`/`dimLevel`/`status`) and
//! WebSocket `unitChanged` bodies (ints as floats such as `3.0`, controls flat). Also the colour
//! conversions the simulated luminaires need.

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
pub fn unit_event<'a>(net: impl Into<NetView<'a>>, u: &UnitTruth) -> Arc<str> {
    let net = net.into();
    let d = &u.def;
    let online = reachable(&net, u);
    let mut m = Map::with_capacity(20);
    m.insert("id".into(), json!(d.id));
    m.insert("address".into(), json!(d.address));
    m.insert("name".into(), json!(d.name));
    m.insert("type".into(), json!(d.kind));
    m.insert("fixtureId".into(), json!(d.fixture as f64));
    m.insert("firmwareVersion".into(), json!(d.firmware));
    m.insert("groupId".into(), json!(d.group as f64));
    m.insert("online".into(), json!(online));
    m.insert("condition".into(), json!(0.0));
    m.insert("scene".into(), json!(u.active_scene_id as f64));
    m.insert("activeSceneId".into(), json!(u.active_scene_id as f64));
    m.insert("sensors".into(), json!([]));
    if online {
        m.insert("on".into(), json!(d.on));
        m.insert("status".into(), json!("ok"));
        m.insert("priority".into(), json!(3.0));
        m.insert("dimLevel".into(), json!(unit_dim_level(&net, u)));
        m.insert("controls".into(), Value::Array(d.controls.clone()));
    }
    Arc::from(Value::Object(m).to_string())
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

/// Parses `rgb(r, g, b)` (spaces optional).
pub fn parse_rgb(text: &str) -> Option<(u8, u8, u8)> {
    let inner = text.trim().strip_prefix("rgb(")?.strip_suffix(')')?;
    let mut parts = inner.split(',').map(|p| p.trim().parse::<u8>());
    let rgb = (parts.next()?.ok()?, parts.next()?.ok()?, parts.next()?.ok()?);
    parts.next().is_none().then_some(rgb)
}

/// Full-value HSV (hue and saturation 0..1) to 8-bit RGB.
pub fn hsv_to_rgb(hue: f64, sat: f64) -> (u8, u8, u8) {
    let h = (hue.rem_euclid(1.0)) * 6.0;
    let c = sat;
    let x = c * (1.0 - ((h % 2.0) - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = 1.0 - c;
    let to8 = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (to8(r), to8(g), to8(b))
}

/// 8-bit RGB to hue and saturation (0..1).
pub fn rgb_to_hue_sat(r: u8, g: u8, b: u8) -> (f64, f64) {
    let (r, g, b) = (f64::from(r) / 255.0, f64::from(g) / 255.0, f64::from(b) / 255.0);
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let d = max - min;
    if max <= 0.0 || d <= 0.0 {
        return (0.0, 0.0);
    }
    let h = if max == r {
        ((g - b) / d).rem_euclid(6.0)
    } else if max == g {
        (b - r) / d + 2.0
    } else {
        (r - g) / d + 4.0
    };
    (round6(h / 6.0), round6(d / max))
}

fn srgb_to_linear(c: f64) -> f64 {
    if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
}

fn linear_to_srgb(c: f64) -> f64 {
    if c <= 0.003_130_8 { 12.92 * c } else { 1.055 * c.powf(1.0 / 2.4) - 0.055 }
}

/// 8-bit sRGB to CIE xy (sRGB primaries, D65 white). Black maps to the white point.
pub fn rgb_to_xy(r: u8, g: u8, b: u8) -> (f64, f64) {
    let (r, g, b) = (
        srgb_to_linear(f64::from(r) / 255.0),
        srgb_to_linear(f64::from(g) / 255.0),
        srgb_to_linear(f64::from(b) / 255.0),
    );
    let x = 0.4124 * r + 0.3576 * g + 0.1805 * b;
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    let z = 0.0193 * r + 0.1192 * g + 0.9505 * b;
    let sum = x + y + z;
    if sum <= 0.0 {
        return (0.3127, 0.329);
    }
    (round6(x / sum), round6(y / sum))
}

/// CIE xy to 8-bit sRGB at full brightness (sRGB primaries, D65 white, sRGB gamma).
pub fn xy_to_rgb(x: f64, y: f64) -> (u8, u8, u8) {
    if y <= 0.0 {
        return (0, 0, 0);
    }
    let big_y = 1.0;
    let big_x = x * big_y / y;
    let big_z = (1.0 - x - y) * big_y / y;
    let r = 3.2406 * big_x - 1.5372 * big_y - 0.4986 * big_z;
    let g = -0.9689 * big_x + 1.8758 * big_y + 0.0415 * big_z;
    let b = 0.0557 * big_x - 0.2040 * big_y + 1.0570 * big_z;
    let (r, g, b) = (r.max(0.0), g.max(0.0), b.max(0.0));
    let max = r.max(g).max(b);
    let scale = if max > 1.0 { max } else { 1.0 };
    let to8 = |v: f64| (linear_to_srgb(v / scale) * 255.0).round().clamp(0.0, 255.0) as u8;
    (to8(r), to8(g), to8(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rgb_text_parsing() {
        assert_eq!(parse_rgb("rgb(255, 10, 0)"), Some((255, 10, 0)));
        assert_eq!(parse_rgb("rgb(1,2,3)"), Some((1, 2, 3)));
        assert_eq!(parse_rgb("rgb(256, 0, 0)"), None);
        assert_eq!(parse_rgb("rgb(1, 2)"), None);
        assert_eq!(parse_rgb("1, 2, 3"), None);
    }

    #[test]
    fn colour_round_trips() {
        assert_eq!(hsv_to_rgb(0.0, 1.0), (255, 0, 0));
        assert_eq!(rgb_to_hue_sat(0, 255, 0), (round6(1.0 / 3.0), 1.0));
        let (x, y) = rgb_to_xy(255, 255, 255);
        assert!((x - 0.3127).abs() < 0.001 && (y - 0.329).abs() < 0.001);
        let (r, g, b) = xy_to_rgb(0.64, 0.33);
        assert!(r > 250 && g < 10 && b < 10, "{r} {g} {b}");
    }
}
