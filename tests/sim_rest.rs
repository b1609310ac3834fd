//! The simulated service's REST interface against the service's rules (docs/simulator.md): session
//! shapes, access rules (key, lockout, expiry, scope, quotas, disabled API), 404/405/500, every
//! read endpoint and the PNG images.

mod sim_rest_support;

use casambi2mqtt::sim::site::{DEMO_API_KEY, DEMO_NETWORK_EMAIL, DEMO_PASSWORD, DEMO_USER_EMAIL, Site};
use casambi2mqtt::sim::{SimConfig, Simulator};
use serde_json::{Value, json};
use sim_rest_support::{Api, HOME, OFFICE, decode_png};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

fn network_login() -> Value {
    json!({"email": DEMO_NETWORK_EMAIL, "password": DEMO_PASSWORD})
}

fn user_login() -> Value {
    json!({"email": DEMO_USER_EMAIL, "password": DEMO_PASSWORD})
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort();
    k
}

#[tokio::test]
async fn user_session_has_sites_and_networks() {
    let api = Api::demo().await;
    let (status, body) = api.post("/v1/users/session", user_login()).await;
    assert_eq!(status, 200);
    let sid = body["sessionId"].as_str().unwrap();
    assert!(sid.len() > 20 && sid.ends_with("__"));
    assert_eq!(keys(&body), ["networks", "sessionId", "sites"]);
    let site = &body["sites"]["site-1"];
    assert_eq!(site["name"], "Home");
    assert_eq!(site["address"], "");
    assert_eq!(site["role"], "ADMIN");
    for map in [&site["networks"], &body["networks"]] {
        assert_eq!(keys(map), [HOME, OFFICE]);
        let home = &map[HOME];
        assert_eq!(keys(home), ["address", "grade", "id", "name", "role", "type"]);
        assert_eq!(home["id"], HOME);
        assert_eq!(home["name"], "Home");
        assert_eq!(home["address"], "a1b2c3d4e5f6");
        assert_eq!((home["type"].as_str(), home["grade"].as_str()), (Some("OPEN"), Some("EVOLUTION")));
    }
    // One user session reads every network of the site.
    for net in [HOME, OFFICE] {
        assert_eq!(api.get(&format!("/v1/networks/{net}"), Some(sid)).await.0, 200);
    }
    // Network (admin) credentials do not open user sessions.
    let (status, body) = api.post("/v1/users/session", network_login()).await;
    assert_eq!((status, body["error"].as_str()), (401, Some("User not found")));
    // The log carries the login e-mails.
    let logins: Vec<_> = api.sim.shared().log.requests().into_iter().filter(|r| r.is_login()).collect();
    assert_eq!(logins.len(), 2);
    assert_eq!(logins[0].login_email.as_deref(), Some(DEMO_USER_EMAIL));
    assert_eq!((logins[1].status, logins[1].login_email.as_deref()), (401, Some(DEMO_NETWORK_EMAIL)));
}

#[tokio::test]
async fn network_sessions_are_per_network_and_scoped() {
    let api = Api::demo().await;
    let body = api.network_sessions().await;
    assert_eq!(keys(&body), [HOME, OFFICE]);
    let home = &body[HOME];
    assert_eq!(keys(home), ["address", "grade", "id", "name", "sessionId", "type"]);
    assert_eq!((home["id"].as_str(), home["name"].as_str()), (Some(HOME), Some("Home")));
    let (h, o) = (home["sessionId"].as_str().unwrap(), body[OFFICE]["sessionId"].as_str().unwrap());
    assert_ne!(h, o);
    assert_eq!(api.get(&format!("/v1/networks/{HOME}"), Some(h)).await.0, 200);
    // Another network's session is refused with 410.
    let (status, body) = api.get(&format!("/v1/networks/{OFFICE}"), Some(h)).await;
    assert_eq!((status, body["error"].as_str()), (410, Some("Invalid session")));
    // Site (user) credentials do not open network sessions.
    assert_eq!(api.post("/v1/networks/session", user_login()).await.0, 401);
}

#[tokio::test]
async fn session_set_and_session_by_network_id() {
    let api = Api::demo().await;
    let mut login = network_login();
    login["networks"] = json!([HOME, "ffffffffffffffffffffffffffffffff"]);
    let (status, body) = api.post("/v1/networks/set/session", login.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(keys(&body), [HOME], "only accessible networks");
    assert_eq!(body[HOME]["id"], HOME);
    assert!(body[HOME]["sessionId"].is_string());
    login["networks"] = json!((0..101).map(|i| format!("{i:032x}")).collect::<Vec<_>>());
    assert_eq!(api.post("/v1/networks/set/session", login.clone()).await.0, 400, "more than 100");
    login["networks"] = json!((0..100).map(|i| format!("{i:032x}")).collect::<Vec<_>>());
    let (status, body) = api.post("/v1/networks/set/session", login).await;
    assert_eq!((status, body), (200, json!({})), "100 ids are allowed");
    assert_eq!(api.post("/v1/networks/set/session", network_login()).await.0, 400, "networks missing");

    let (status, body) = api.post(&format!("/v1/networks/{OFFICE}/session"), network_login()).await;
    assert_eq!(status, 200);
    assert_eq!(keys(&body), [OFFICE]);
    assert_eq!(keys(&body[OFFICE]), ["address", "grade", "id", "name", "sessionId", "type"]);
    let sid = body[OFFICE]["sessionId"].as_str().unwrap();
    assert_eq!(api.get(&format!("/v1/networks/{OFFICE}/units"), Some(sid)).await.0, 200);
    assert_eq!(api.get(&format!("/v1/networks/{HOME}/units"), Some(sid)).await.0, 410);
    let (status, body) = api.post("/v1/networks/ffffffffffffffffffffffffffffffff/session", network_login()).await;
    assert_eq!((status, body["error"].is_string()), (404, true));
    assert_eq!(api.post("/v1/users/session", json!({"email": DEMO_USER_EMAIL})).await.0, 400, "password missing");
}

#[tokio::test]
async fn three_failures_lock_login_until_the_lock_ends() {
    let mut config = SimConfig::new(Site::demo());
    config.lock_duration = Duration::from_millis(1000);
    let api = Api::start(config).await;
    let wrong = json!({"email": DEMO_NETWORK_EMAIL, "password": "wrong"});
    for _ in 0..3 {
        assert_eq!(api.post("/v1/networks/session", wrong.clone()).await.0, 401);
    }
    // Locked, even with the right password, and on every session endpoint.
    let (status, body) = api.post("/v1/networks/session", network_login()).await;
    assert_eq!((status, body["error"].is_string()), (403, true));
    assert_eq!(api.post(&format!("/v1/networks/{HOME}/session"), network_login()).await.0, 403);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(api.post("/v1/networks/session", network_login()).await.0, 200);
    let statuses: Vec<u16> = api.sim.shared().log.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [401, 401, 401, 403, 403, 200]);
}

#[tokio::test]
async fn sessions_expire_after_their_lifetime_and_on_demand() {
    let mut config = SimConfig::new(Site::demo());
    config.session_lifetime = Some(Duration::from_millis(1000));
    let api = Api::start(config).await;
    let sid = api.session(HOME).await;
    let path = format!("/v1/networks/{HOME}/state");
    assert_eq!(api.get(&path, Some(&sid)).await.0, 200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(api.get(&path, Some(&sid)).await.0, 410);

    let api = Api::demo().await;
    let sid = api.user_session().await;
    assert_eq!(api.get(&path, Some(&sid)).await.0, 200);
    api.sim.shared().auth().expire_sessions();
    assert_eq!(api.get(&path, Some(&sid)).await.0, 410);
    assert_eq!(api.get(&path, None).await.0, 410, "no session header");
    assert_eq!(api.get(&path, Some("bogus__")).await.0, 410, "unknown session");
}

#[tokio::test]
async fn unknown_key_is_401_with_the_services_reason_phrase() {
    let api = Api::demo().await;
    let kh = api.key_header();
    let answer = api
        .raw(&format!("GET /v1/fixtures/1001 HTTP/1.1\r\nHost: sim\r\n{kh}: nope\r\nConnection: close\r\n\r\n"))
        .await;
    assert!(answer.starts_with("HTTP/1.1 401 Api authorization failed.\r\n"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body, json!({"error": "Api authorization failed."}));
    // No key at all: the same.
    let answer = api.raw("GET /v1/fixtures/1001 HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 401 Api authorization failed.\r\n"), "{answer}");
    // Wrong credentials: 401 with the ordinary phrase and "user not found".
    let body = r#"{"email":"demo@example.com","password":"bad"}"#;
    let answer = api
        .raw(&format!(
            "POST /v1/networks/session HTTP/1.1\r\nHost: sim\r\n{kh}: {DEMO_API_KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ))
        .await;
    assert!(answer.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{answer}");
    assert!(answer.contains(r#"{"error":"User not found"}"#), "{answer}");
    // Every attempt is logged, including the rejected keys.
    let statuses: Vec<u16> = api.sim.shared().log.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [401, 401, 401]);
}

#[tokio::test]
async fn disabled_key_is_403_on_every_request() {
    let mut site = Site::demo();
    site.api_keys[0].enabled = false;
    let mut api = Api::start(SimConfig::new(site)).await;
    assert_eq!(api.post("/v1/networks/session", network_login()).await.0, 403);
    assert_eq!(api.get("/v1/fixtures/1001", None).await.0, 403);
    assert_eq!(api.get(&format!("/v1/networks/{HOME}"), Some("x")).await.0, 403);
    api.key = "unknown".into();
    assert_eq!(api.get("/v1/fixtures/1001", None).await.0, 401);
}

#[tokio::test]
async fn quota_per_minute_gives_429_with_retry_after() {
    let mut site = Site::demo();
    site.api_keys[0].requests_per_minute = 3;
    let api = Api::start(SimConfig::new(site)).await;
    for _ in 0..3 {
        assert_eq!(api.get("/v1/fixtures/1001", None).await.0, 200);
    }
    let r = api.get_raw("/v1/fixtures/1001", None).await;
    assert_eq!(r.status().as_u16(), 429);
    let retry: u64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].is_string());
    assert_eq!(api.sim.shared().log.requests().last().unwrap().status, 429);
}

#[tokio::test]
async fn quota_on_concurrent_requests() {
    let mut site = Site::demo();
    site.api_keys[0].concurrent_requests = 1;
    let api = Api::start(SimConfig::new(site)).await;
    let kh = api.key_header();
    // A login whose body never finishes arriving stays in flight.
    let mut slow = tokio::net::TcpStream::connect(api.sim.addr()).await.unwrap();
    let head = format!(
        "POST /v1/networks/session HTTP/1.1\r\nHost: sim\r\n{kh}: {DEMO_API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{{"
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    // Once the slow request is admitted, every other request is refused.
    let mut refused = None;
    for _ in 0..100 {
        let r = api.get_raw("/v1/fixtures/1001", None).await;
        if r.status().as_u16() == 429 {
            refused = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = refused.expect("a second concurrent request is refused");
    assert_eq!(r.headers()["retry-after"], "1");
    // When it ends (the client gives up), requests are admitted again.
    drop(slow);
    let mut status = 0;
    for _ in 0..100 {
        status = api.get("/v1/fixtures/1001", None).await.0;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200);
}

#[tokio::test]
async fn wrong_method_unknown_ids_and_injected_failures() {
    let api = Api::demo().await;
    let sid = api.user_session().await;
    let r = api
        .http
        .delete(api.url(&format!("/v1/networks/{HOME}")))
        .header(api.key_header(), DEMO_API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    assert!(r.json::<Value>().await.unwrap()["error"].is_string());
    assert_eq!(api.get("/v1/users/session", None).await.0, 405);
    assert_eq!(api.get("/v1/networks/session", Some(&sid)).await.0, 405);
    let r = api.http.post(api.url("/v1/fixtures/1001")).header(api.key_header(), DEMO_API_KEY).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);
    for path in [
        "/v1/nothing".to_string(),
        "/v1/networks/ffffffffffffffffffffffffffffffff".to_string(),
        format!("/v1/networks/{HOME}/units/99/state"),
        format!("/v1/networks/{HOME}/units/abc/state"),
        format!("/v1/networks/{HOME}/units/99/icon"),
        format!("/v1/networks/{HOME}/images/nope"),
        format!("/v1/networks/{HOME}/lights"),
        "/v1/fixtures/9999".to_string(),
        "/v1/fixtures/abc".to_string(),
        "/datapoints/networks/ffffffffffffffffffffffffffffffff/datapoints".to_string(),
    ] {
        let (status, body) = api.get(&path, Some(&sid)).await;
        assert_eq!(status, 404, "{path}");
        assert!(body["error"].is_string(), "{path}");
    }
    api.sim.shared().fail_next.store(2, Ordering::SeqCst);
    assert_eq!(api.get("/v1/fixtures/1001", None).await.0, 500);
    assert_eq!(
        api.get(&format!("/v1/networks/{HOME}"), Some(&sid)).await,
        (500, json!({"error": "Internal server error"}))
    );
    assert_eq!(api.get("/v1/fixtures/1001", None).await.0, 200);
    let log = api.sim.shared().log.requests();
    assert!(log.iter().any(|r| r.status == 405 && r.method == "DELETE" && r.path == format!("/v1/networks/{HOME}")));
    assert_eq!(log.iter().filter(|r| r.status == 404).count(), 10);
    assert_eq!(log.iter().filter(|r| r.status == 500).count(), 2);
}

#[tokio::test]
async fn network_units_and_state_shapes() {
    let api = Api::demo().await;
    let sid = api.session(HOME).await;
    let s = Some(sid.as_str());
    let (status, net) = api.get(&format!("/v1/networks/{HOME}"), s).await;
    assert_eq!(status, 200);
    assert_eq!(
        keys(&net),
        [
            "address", "gateway", "grade", "groups", "id", "name", "photos", "revision", "scenes", "timezone", "type",
            "units"
        ]
    );
    assert_eq!((net["id"].as_str(), net["revision"].as_i64()), (Some(HOME), Some(42)));
    assert_eq!(net["gateway"]["name"], "Kitchen tablet");
    assert_eq!(net["timezone"], "Europe/Helsinki");
    assert_eq!(net["units"]["1"]["image"], "unit-image-1");
    assert!(net["units"]["2"].get("image").is_none());
    assert_eq!(net["units"]["1"]["position"], 0, "grouped unit");
    assert_eq!(net["groups"]["1"]["units"][0], json!({"0": 1, "position": 0}));
    assert_eq!(net["photos"][0]["image"], "photo-home-1");

    let (_, units) = api.get(&format!("/v1/networks/{HOME}/units"), s).await;
    assert_eq!(units.as_object().unwrap().len(), 8);
    let u = &units["2"];
    for field in ["id", "address", "name", "position", "fixtureId", "firmwareVersion", "groupId", "labels", "type"] {
        assert!(u.get(field).is_some(), "{field}");
    }
    assert_eq!((u["fixtureId"].as_i64(), u["type"].as_str()), (Some(1002), Some("Luminaire")));

    let (status, us) = api.get(&format!("/v1/networks/{HOME}/units/2/state"), s).await;
    assert_eq!(status, 200);
    assert!(us.get("labels").is_none());
    assert_eq!(us["online"], true);
    assert!(us["controls"][0].as_array().unwrap().iter().any(|c| c["type"] == "CCT"), "controls nested [[...]]");
    for field in ["priority", "scene", "condition", "status", "activeSceneId", "dimLevel"] {
        assert!(us.get(field).is_some(), "{field}");
    }
    let (_, offline) = api.get(&format!("/v1/networks/{HOME}/units/7/state"), s).await;
    assert_eq!(offline["online"], false);

    let (_, state) = api.get(&format!("/v1/networks/{HOME}/state"), s).await;
    assert!(state["dimLevel"].is_number());
    assert!(state["activeScenes"].is_array());
    assert_eq!(state["units"]["2"], us);
    assert_eq!(state["units"]["1"]["controls"][0][0]["type"], "Dimmer");
    assert_eq!(api.sim.network_state(HOME).unwrap(), state);
}

#[tokio::test]
async fn groups_scenes_and_gallery() {
    let api = Api::demo().await;
    let sid = api.user_session().await;
    let s = Some(sid.as_str());
    let (_, groups) = api.get(&format!("/v1/networks/{HOME}/groups"), s).await;
    assert_eq!(keys(&groups), ["1", "2"]);
    assert_eq!(groups["1"]["name"], "Kitchen");
    assert_eq!(groups["1"]["units"], json!([{"id": 1, "position": 0}, {"id": 2, "position": 1}]));
    let (_, scenes) = api.get(&format!("/v1/networks/{HOME}/scenes"), s).await;
    assert_eq!(keys(&scenes), ["1", "2", "3"]);
    assert_eq!(scenes["3"]["id"], 5, "the map key need not equal the id");
    let evening = &scenes["1"];
    assert_eq!(keys(evening), ["color", "hidden", "icon", "id", "name", "position", "type", "units"]);
    assert_eq!(evening["units"]["2"], json!({"id": 2}));
    assert_eq!((evening["type"].as_str(), evening["hidden"].as_bool()), (Some("REGULAR"), Some(false)));
    let (_, gallery) = api.get(&format!("/v1/networks/{HOME}/gallery"), s).await;
    assert_eq!(gallery, json!([{"name": "Ground floor", "controls": [], "image": "photo-home-1", "position": 0}]));
    let (_, empty) = api.get(&format!("/v1/networks/{OFFICE}/gallery"), s).await;
    assert_eq!(empty, json!([]));
}

#[tokio::test]
async fn fixtures_need_only_the_key() {
    let api = Api::demo().await;
    let (status, f) = api.get("/v1/fixtures/1002", None).await;
    assert_eq!(status, 200);
    assert_eq!(keys(&f), ["controls", "id", "model", "translations", "type", "vendor"]);
    assert_eq!((f["id"].as_i64(), f["type"].as_str()), (Some(1002), Some("Driver")));
    assert_eq!(f["controls"][1]["type"], "temperature");
    let (status, icon) = api.get_png("/v1/fixtures/1001/icon", None).await;
    assert_eq!(status, 200);
    assert_eq!(decode_png(&icon).0, 32);
    let (status, body) = api.get("/v1/fixtures/1003/icon", None).await;
    assert_eq!((status, body["error"].is_string()), (404, true), "fixture without icon");
    assert_eq!(api.get("/v1/fixtures/9999/icon", None).await.0, 404);
}

#[tokio::test]
async fn icons_and_images_are_pngs() {
    let api = Api::demo().await;
    let home = api.session(HOME).await;
    let h = Some(home.as_str());
    // A unit with an image: its icon is that image.
    let (status, unit_icon) = api.get_png(&format!("/v1/networks/{HOME}/units/1/icon"), h).await;
    assert_eq!(status, 200);
    let (w, hgt, pixels) = decode_png(&unit_icon);
    assert_eq!((w, hgt, pixels.len()), (32, 32, 32 * 32 * 4));
    let (_, image) = api.get_png(&format!("/v1/networks/{HOME}/images/unit-image-1"), h).await;
    assert_eq!(image, unit_icon);
    // Without an image: the fixture icon.
    let (status, fixture_icon) = api.get_png(&format!("/v1/networks/{HOME}/units/2/icon"), h).await;
    assert_eq!(status, 200);
    assert_eq!(fixture_icon, api.get_png("/v1/fixtures/1002/icon", None).await.1);
    // Neither: 404 (unit 3's fixture 1003 has no icon).
    assert_eq!(api.get(&format!("/v1/networks/{HOME}/units/3/icon"), h).await.0, 404);
    // Photos of the network.
    let (status, photo) = api.get_png(&format!("/v1/networks/{HOME}/images/photo-home-1"), h).await;
    assert_eq!(status, 200);
    decode_png(&photo);
    assert_ne!(photo, image);
    // Images of another network are not found there.
    let office = api.session(OFFICE).await;
    assert_eq!(api.get(&format!("/v1/networks/{OFFICE}/images/photo-home-1"), Some(&office)).await.0, 404);
    // And images need the session.
    assert_eq!(api.get(&format!("/v1/networks/{HOME}/images/photo-home-1"), None).await.0, 410);
}

#[tokio::test]
async fn every_request_is_logged_with_its_path_and_status() {
    let api = Api::demo().await;
    api.sim.shared().log.clear();
    let sid = api.session(HOME).await;
    api.get(&format!("/datapoints/networks/{HOME}/datapoints?keys=dimmer&from=20260101&to=20260102"), Some(&sid)).await;
    api.get("/nothing?x=1", None).await;
    let log = api.sim.shared().log.requests();
    let seen: Vec<(&str, &str, u16)> = log.iter().map(|r| (r.method.as_str(), r.path.as_str(), r.status)).collect();
    let dp = format!("/datapoints/networks/{HOME}/datapoints");
    assert_eq!(seen, [("POST", "/v1/networks/session", 200), ("GET", dp.as_str(), 200), ("GET", "/nothing", 404)]);
    assert!(log.windows(2).all(|w| w[0].at <= w[1].at));
    assert!(log[0].is_login() && !log[1].is_login());
}

#[tokio::test]
async fn simulators_do_not_share_state() {
    let a = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let b = Api::demo().await;
    assert_ne!(a.addr(), b.sim.addr());
    let sid = b.session(HOME).await;
    assert_eq!(b.get(&format!("/v1/networks/{HOME}"), Some(&sid)).await.0, 200);
    assert!(a.shared().log.requests().is_empty());
    a.stop().await;
}
