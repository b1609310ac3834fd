//! What the chaos test checks at the end: the retained state against the simulator's truth, and
//! the cloud's safety (no login lockout, the request rate, growing waits after 429s) from the
//! simulator's request log.

use super::*;

// ---------------------------------------------------------------------------------------------
// The retained state against the truth
// ---------------------------------------------------------------------------------------------

/// Numbers compare as floats (`1` = `1.0`); everything else as JSON.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() < 1e-9,
        _ => a == b,
    }
}

fn check(out: &mut Vec<String>, what: &str, actual: &Value, expected: &Value) {
    if !same(actual, expected) {
        out.push(format!("{what}: published {actual}, truth {expected}"));
    }
}

fn json_at(r: &BTreeMap<String, String>, topic: &str, out: &mut Vec<String>) -> Option<Value> {
    let Some(payload) = r.get(topic) else {
        out.push(format!("missing {topic}"));
        return None;
    };
    match serde_json::from_str(payload) {
        Ok(v) => Some(v),
        Err(e) => {
            out.push(format!("{topic}: not JSON ({e}): {payload}"));
            None
        }
    }
}

fn control<'v>(controls: &'v [Value], kind: &str) -> Option<&'v Value> {
    controls.iter().find(|c| c["type"] == kind)
}

/// Every `…topic` string a discovery config refers to.
fn referenced_topics(v: &Value, key: Option<&str>, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, v)| referenced_topics(v, Some(k), out)),
        Value::Array(a) => a.iter().for_each(|v| referenced_topics(v, key, out)),
        Value::String(s) if key.is_some_and(|k| k == "topic" || k.ends_with("_topic")) => out.push(s.clone()),
        _ => {}
    }
}

/// What a device's discovery config must satisfy.
struct DeviceWant {
    /// The device name.
    name: Option<String>,
    /// Topics its entities must name (each of them).
    mentions: Vec<String>,
    /// A topic its entities must name, or one below it (a unit's state or, for a switch, its
    /// `event` topic).
    under: Option<String>,
}

/// The differences between the retained topics `r` and the simulator's truth (empty = equal).
pub(super) fn differences(sim: &Simulator, r: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    // Retained topics that must exist (and no others), and topics discovery may also name.
    let mut want: BTreeSet<String> = BTreeSet::new();
    let mut referable: BTreeSet<String> = BTreeSet::new();
    let mut devices: BTreeMap<String, DeviceWant> = BTreeMap::new();

    let nets: Vec<(String, String, bool)> = {
        let world = sim.shared().world();
        world.networks.values().map(|n| (n.def.id.clone(), n.def.name.clone(), n.gateway_online)).collect()
    };
    let net_slugs = topics::assign(nets.iter().map(|(id, name, _)| (id.clone(), name.as_str())), &["bridge"]);

    // The bridge.
    let state_topic = format!("{BASE}/bridge/state");
    let info_topic = format!("{BASE}/bridge/info");
    want.extend([state_topic.clone(), info_topic.clone()]);
    // The bridge's Reload button sends here.
    referable.insert(format!("{BASE}/bridge/request/reload"));
    if r.get(&state_topic).map(String::as_str) != Some("online") {
        out.push(format!("{state_topic}: {:?}", r.get(&state_topic)));
    }
    if let Some(info) = json_at(r, &info_topic, &mut out) {
        let listed: BTreeMap<String, (String, String)> = info["networks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
                (s("id"), (s("name"), s("slug")))
            })
            .collect();
        let expected: BTreeMap<String, (String, String)> =
            nets.iter().map(|(id, name, _)| (id.clone(), (name.clone(), net_slugs[id].clone()))).collect();
        if listed != expected {
            out.push(format!("bridge/info networks {listed:?} != {expected:?}"));
        }
    }
    devices.insert(bridge_object_id(BASE), DeviceWant { name: None, mentions: vec![state_topic.clone()], under: None });

    for (id, _, gateway_online) in &nets {
        let truth = sim.network_state(id).unwrap();
        let net = &net_slugs[id];
        let root = format!("{BASE}/{net}");
        referable.insert(format!("{root}/set"));

        // Scenes.
        let scenes: BTreeMap<u32, String> = truth["scenes"]
            .as_object()
            .unwrap()
            .values()
            .map(|s| (s["id"].as_u64().unwrap() as u32, s["name"].as_str().unwrap().to_string()))
            .collect();
        let scene_slugs = topics::assign(scenes.iter().map(|(id, n)| (*id, n.as_str())), &[]);
        let active: Vec<u32> =
            truth["activeScenes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let mut network_mentions = Vec::new();
        for (sid, slug) in &scene_slugs {
            let topic = format!("{root}/scene/{slug}");
            let expected = if active.contains(sid) { "ON" } else { "OFF" };
            match r.get(&topic) {
                Some(p) if p == expected => {}
                other => {
                    out.push(format!("{topic} (scene {sid} {:?}): published {other:?}, truth {expected}", scenes[sid]))
                }
            }
            want.insert(topic.clone());
            referable.insert(format!("{topic}/set"));
            network_mentions.push(topic);
        }

        // The network.
        if let Some(j) = json_at(r, &root, &mut out) {
            check(&mut out, &format!("{root} id"), &j["id"], &json!(id));
            check(&mut out, &format!("{root} name"), &j["name"], &truth["name"]);
            check(&mut out, &format!("{root} gateway_online"), &j["gateway_online"], &json!(gateway_online));
            check(&mut out, &format!("{root} dim_level"), &j["dim_level"], &truth["dimLevel"]);
            let expected: Vec<Value> = active.iter().map(|s| json!({"id": s, "name": scenes.get(s)})).collect();
            check(&mut out, &format!("{root} active_scenes"), &j["active_scenes"], &json!(expected));
        }
        let available = if *gateway_online { "online" } else { "offline" };
        let topic = format!("{root}/availability");
        if r.get(&topic).map(String::as_str) != Some(available) {
            out.push(format!("{topic}: published {:?}, truth {available}", r.get(&topic)));
        }
        want.extend([root.clone(), topic]);

        // Photos: every image of the simulator's galleries is a valid PNG, published as it is.
        let photos: Vec<(String, String)> =
            sim.shared().world().networks[id].def.photos.iter().map(|p| (p.image.clone(), p.name.clone())).collect();
        for (image, slug) in topics::assign(photos.iter().map(|(image, name)| (image.clone(), name.as_str())), &[]) {
            let topic = format!("{root}/photo/{slug}");
            let expected = common::payload_text(&casambi2mqtt::sim::images::picture(&image).unwrap());
            if r.get(&topic) != Some(&expected) {
                out.push(format!("{topic} (photo {image}): published {:?}, truth {expected}", r.get(&topic)));
            }
            want.insert(topic.clone());
            network_mentions.push(topic);
        }

        // Units.
        let units = truth["units"].as_object().unwrap();
        let unit_slugs = topics::assign(
            units.values().map(|u| (u["id"].as_u64().unwrap() as u32, u["name"].as_str().unwrap_or_default())),
            &[],
        );
        // Expected (state, brightness) of reachable units, for their groups.
        let mut readings: BTreeMap<u32, (Value, Value)> = BTreeMap::new();
        for tu in units.values() {
            let uid = tu["id"].as_u64().unwrap() as u32;
            let topic = format!("{root}/unit/{}", unit_slugs[&uid]);
            let online = tu["online"].as_bool() == Some(true);
            let name = tu["name"].as_str().unwrap_or_default().to_string();
            want.insert(topic.clone());
            referable.extend([format!("{topic}/set"), format!("{topic}/event")]);
            // Logged datapoints are fetched on a schedule of their own, not part of the live
            // truth: a live unit may have them (and its device name them), a gone unit may not.
            let data = format!("{topic}/data");
            want.extend(r.keys().filter(|t| **t == data || t.starts_with(&format!("{data}/"))).cloned());
            referable.insert(data);
            let availability = format!("{topic}/availability");
            let expected = if online && *gateway_online { "online" } else { "offline" };
            if r.get(&availability).map(String::as_str) != Some(expected) {
                out.push(format!("{availability}: published {:?}, truth {expected}", r.get(&availability)));
            }
            want.insert(availability);
            let state: UnitState = serde_json::from_value(tu.clone()).unwrap();
            devices.insert(
                unit_object_id(id, &state),
                DeviceWant { name: Some(name.clone()), mentions: Vec::new(), under: Some(topic.clone()) },
            );
            let Some(j) = json_at(r, &topic, &mut out) else { continue };
            let what = |k: &str| format!("{topic} (unit {uid}) {k}");
            check(&mut out, &what("id"), &j["id"], &json!(uid));
            check(&mut out, &what("name"), &j["name"], &json!(name));
            check(&mut out, &what("online"), &j["online"], &json!(online));
            if online {
                let controls = tu["controls"][0].as_array().cloned().unwrap_or_default();
                let level = |kind: &str| control(&controls, kind).and_then(|c| c["value"].as_f64());
                let (dimmer, onoff) = (level("Dimmer"), level("OnOff"));
                let on = tu["on"].as_bool() == Some(true);
                // ON when on and its Dimmer (and OnOff, if any) is above 0; sensors have none.
                let light_state = if tu["type"] == "Luminaire" {
                    let lit = on && dimmer.is_none_or(|d| d > 0.0) && onoff.is_none_or(|o| o > 0.0);
                    json!(if lit { "ON" } else { "OFF" })
                } else {
                    Value::Null
                };
                let brightness = dimmer.map_or(Value::Null, |d| json!((d * 255.0).round()));
                check(&mut out, &what("state"), &j["state"], &light_state);
                check(&mut out, &what("brightness"), &j["brightness"], &brightness);
                let kelvin = level("CCT").map_or(Value::Null, |k| json!(k.round()));
                check(&mut out, &what("color_temp"), &j["color_temp"], &kelvin);
                let occupancy = control(&controls, "Presence").map_or(Value::Null, |p| json!(p["status"] != "absent"));
                check(&mut out, &what("occupancy"), &j["occupancy"], &occupancy);
                check(
                    &mut out,
                    &what("illuminance"),
                    &j["illuminance"],
                    &level("Lux").map_or(Value::Null, |l| json!(l)),
                );
                check(&mut out, &what("dim_level"), &j["dim_level"], &tu["dimLevel"]);
                check(&mut out, &what("active_scene_id"), &j["active_scene_id"], &tu["activeSceneId"]);
                readings.insert(uid, (light_state, brightness));
            }
            // The plain attribute topics follow the JSON.
            for key in UNIT_KEYS {
                let Some(text) = j.get(key).and_then(plain) else { continue };
                let leaf = format!("{topic}/{key}");
                if r.get(&leaf) != Some(&text) {
                    out.push(format!("{leaf}: published {:?}, JSON says {text:?}", r.get(&leaf)));
                }
                want.insert(leaf);
            }
        }

        // Groups.
        let groups: Vec<&Value> = truth["groups"].as_object().unwrap().values().collect();
        let group_slugs = topics::assign(
            groups.iter().map(|g| (g["id"].as_u64().unwrap() as u32, g["name"].as_str().unwrap_or_default())),
            &[],
        );
        for g in groups {
            let gid = g["id"].as_u64().unwrap() as u32;
            let topic = format!("{root}/group/{}", group_slugs[&gid]);
            want.insert(topic.clone());
            referable.insert(format!("{topic}/set"));
            network_mentions.push(topic.clone());
            let members: Vec<u64> = g["units"].as_array().unwrap().iter().map(|m| m["0"].as_u64().unwrap()).collect();
            let Some(j) = json_at(r, &topic, &mut out) else { continue };
            check(&mut out, &format!("{topic} name"), &j["name"], &g["name"]);
            check(&mut out, &format!("{topic} members"), &j["members"], &json!(members));
            // State and brightness summarise the members (when every member is reachable).
            let known: Vec<&(Value, Value)> = members.iter().filter_map(|m| readings.get(&(*m as u32))).collect();
            if known.len() == members.len() {
                let state = if known.iter().any(|(s, _)| s == "ON") {
                    json!("ON")
                } else if known.iter().any(|(s, _)| s == "OFF") {
                    json!("OFF")
                } else {
                    Value::Null
                };
                // The highest of the members that are on (an on/off-only member that is on counts
                // as 255), or of all members while none is on (docs/mqtt.md).
                let lit = known.iter().filter(|(s, _)| s == "ON").map(|(_, b)| b.as_f64().unwrap_or(255.0));
                let any = known.iter().filter_map(|(_, b)| b.as_f64());
                let brightness = lit.reduce(f64::max).or(any.reduce(f64::max)).map_or(Value::Null, |b| json!(b));
                check(&mut out, &format!("{topic} state"), &j["state"], &state);
                check(&mut out, &format!("{topic} brightness"), &j["brightness"], &brightness);
            }
        }
        devices.insert(
            network_object_id(id),
            DeviceWant { name: Some(truth["name"].as_str().unwrap().into()), mentions: network_mentions, under: None },
        );
    }

    // Discovery: one device config per bridge, network and unit; each names only live topics.
    for (oid, device) in &devices {
        let topic = format!("{PREFIX}/device/{oid}/config");
        want.insert(topic.clone());
        let Some(config) = json_at(r, &topic, &mut out) else { continue };
        if let Some(name) = &device.name
            && config["device"]["name"] != json!(name)
        {
            out.push(format!("{topic}: device name {} != {name:?}", config["device"]["name"]));
        }
        let mut named = Vec::new();
        referenced_topics(&config, None, &mut named);
        for t in &device.mentions {
            if !named.contains(t) {
                out.push(format!("{topic}: does not name {t}"));
            }
        }
        if let Some(u) = &device.under
            && !named.iter().any(|t| t == u || t.starts_with(&format!("{u}/")))
        {
            out.push(format!("{topic}: names nothing of {u}"));
        }
        for t in &named {
            let command = t.rsplit_once("/set/").is_some_and(|(unit, _)| referable.contains(&format!("{unit}/set")));
            if !want.contains(t) && !referable.contains(t) && !command {
                out.push(format!("{topic}: names {t}, which is not a live topic"));
            }
        }
    }

    // Exactly these retained topics, no stale ones.
    for (topic, payload) in r {
        let ours = topic.starts_with(&format!("{BASE}/")) || topic.starts_with(&format!("{PREFIX}/"));
        if ours && !want.contains(topic) {
            let shown: String = payload.chars().take(120).collect();
            out.push(format!("stale retained topic {topic} = {shown}"));
        }
    }
    for topic in &want {
        if !r.contains_key(topic) && !out.iter().any(|o| o.contains(topic.as_str())) {
            out.push(format!("missing {topic}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Cloud safety from the simulator's request log
// ---------------------------------------------------------------------------------------------

/// A login the service judged and refused (401 wrong credentials, 403 locked). 429 and 5xx are
/// answers without a judgement and do not count toward the lockout.
pub(super) fn failed_login(r: &RequestRecord) -> bool {
    r.is_login() && matches!(r.status, 401 | 403)
}

pub(super) fn check_login_safety(log: &[RequestRecord]) -> Vec<String> {
    let mut out = Vec::new();
    let mut by_email: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    for r in log.iter().filter(|r| failed_login(r)) {
        by_email.entry(r.login_email.clone().unwrap_or_default()).or_default().push(r.at);
    }
    for (email, times) in by_email {
        for (i, t) in times.iter().enumerate() {
            let within = times[i..].iter().take_while(|o| **o - *t < Duration::from_secs(60)).count();
            if within > 2 {
                out.push(format!("{within} failed logins of {email} within 60 s from {t:?}"));
            }
        }
    }
    if let Some(r) = log.iter().find(|r| r.status == 403) {
        out.push(format!("403 (lockout) on {} {} at {:?}", r.method, r.path, r.at));
    }
    out
}

/// The most requests in any rolling 60 s window, and when that window starts.
pub(super) fn peak_per_minute(log: &[RequestRecord]) -> (usize, Duration) {
    let mut best = (0, Duration::ZERO);
    for (i, r) in log.iter().enumerate() {
        let within = log[i..].iter().take_while(|o| o.at - r.at < Duration::from_secs(60)).count();
        if within > best.0 {
            best = (within, r.at);
        }
    }
    best
}

/// After a 429 the client waits, and the waits between successive refusals of one exhaustion
/// grow: no hammering. Refusals less than 250 ms apart are one wave (requests already in
/// flight together).
pub(super) fn check_backoff(log: &[RequestRecord], exhaustions: &[(Duration, Duration)]) -> Vec<String> {
    let mut out = Vec::new();
    for (start, length) in exhaustions {
        let end = *start + *length + Duration::from_millis(500);
        let refused: Vec<Duration> =
            log.iter().filter(|r| r.status == 429 && r.at >= *start && r.at <= end).map(|r| r.at).collect();
        let mut waves: Vec<Duration> = Vec::new();
        for at in refused {
            if waves.last().is_none_or(|w| at - *w > Duration::from_millis(250)) {
                waves.push(at);
            }
        }
        let gaps: Vec<Duration> = waves.windows(2).map(|w| w[1] - w[0]).collect();
        if gaps.windows(2).any(|g| g[1] + Duration::from_millis(100) < g[0]) {
            out.push(format!("waits after 429 shrink in the exhaustion at {start:?} ({length:?}): {gaps:?}"));
        }
    }
    out
}
