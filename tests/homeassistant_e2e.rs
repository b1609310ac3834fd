//! A real Home Assistant judges the bridge end to end (docs/homeassistant.md#checked-by-home-assistant):
//! what it lists, what is available, what its commands do, and what it logs, across restarts of
//! either side. One Home Assistant serves all checks of a test; the tests run one at a time (two
//! Home Assistants at once would only slow each other down).

mod common;
mod ha_support;

use casambi2mqtt::sim::site::Site;
use common::Mosquitto;
use ha_support::{HomeAssistant, Process, by_platform_and_state, check_discovery, published_entities, unavailable};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long Home Assistant may take to list every entity and settle their states.
const SETTLE: Duration = Duration::from_secs(60);

/// How long a new entity on a topic Home Assistant already holds may wait for the retained
/// state: Home Assistant batches subscriptions for half a second, and with mosquitto the state
/// arrives about 0.5 s after the config. Longer, and it came from a later publication, not the
/// broker's replay.
const RETAINED_REPLAY: Duration = Duration::from_secs(3);

fn site_file() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ha/site.yaml")
}

/// Names of the units that are offline in `site` (their devices' entities are unavailable).
fn offline_units(site: &Site) -> BTreeSet<String> {
    site.networks.iter().flat_map(|n| n.units.iter()).filter(|u| !u.online).map(|u| u.name.clone()).collect()
}

/// Polls Home Assistant and the broker until Home Assistant lists exactly the entities the
/// retained discovery holds and the unavailable ones are those of `offline` devices (or `max`
/// passes); returns the last listing and the number published.
async fn settled(ha: &HomeAssistant, port: u16, bases: &[&str], offline: &BTreeSet<String>) -> (Vec<Value>, usize) {
    let deadline = Instant::now() + SETTLE;
    loop {
        let expected = published_entities(&retained_discovery(port, bases).await);
        let entities = ha.entities(expected, Duration::from_secs(5));
        let want: BTreeSet<String> = entities
            .iter()
            .filter(|e| e["device"].as_str().is_some_and(|d| offline.contains(d)))
            .filter_map(|e| e["entity_id"].as_str().map(str::to_string))
            .collect();
        if (entities.len() == expected && unavailable(&entities) == want) || Instant::now() > deadline {
            return (entities, expected);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Asserts what a user must see: every published entity listed, every entity available except
/// those of offline units, energy sensors numeric and `total_increasing`.
fn assert_judged(what: &str, entities: &[Value], expected: usize, offline: &BTreeSet<String>, bridges: usize) {
    let ids: Vec<&str> = entities.iter().filter_map(|e| e["entity_id"].as_str()).collect();
    assert_eq!(
        entities.len(),
        expected,
        "{what}: Home Assistant lists {} entities, the bridges published {expected}: {ids:?}",
        entities.len()
    );
    for e in entities {
        let device = e["device"].as_str().unwrap_or_default();
        let down = e["state"].as_str().is_none_or(|s| s == "unavailable");
        assert_eq!(down, offline.contains(device), "{what}: {} of {device:?} is {}", e["entity_id"], e["state"]);
    }
    let energy: Vec<&Value> = entities.iter().filter(|e| e["attributes"]["device_class"] == "energy").collect();
    assert!(energy.len() >= bridges, "{what}: an energy sensor per bridge at least: {energy:?}");
    for e in energy {
        assert_eq!(e["attributes"]["state_class"], "total_increasing", "{what}: {e}");
        assert_eq!(e["attributes"]["unit_of_measurement"], "kWh", "{what}: {e}");
        if !offline.contains(e["device"].as_str().unwrap_or_default()) {
            let state = e["state"].as_str().unwrap_or_default();
            assert!(state.parse::<f64>().is_ok_and(f64::is_finite), "{what}: energy {state:?} is not a number: {e}");
        }
    }
}

/// Prints the entities per platform and state, all of them and those of the test site (entity
/// ids `<platform>.studio_…`) apart.
fn print_entities(what: &str, entities: &[Value]) {
    let studio = |e: &&Value| {
        e["entity_id"].as_str().is_some_and(|id| id.split_once('.').is_some_and(|(_, o)| o.starts_with("studio_")))
    };
    let site: Vec<Value> = entities.iter().filter(studio).cloned().collect();
    for (part, list) in [(what.to_string(), entities.to_vec()), (format!("{what}, of them the test site"), site)] {
        if list.is_empty() {
            continue;
        }
        println!("{part}: {} entities", list.len());
        for (platform, states) in by_platform_and_state(&list) {
            println!("  {platform:<14} {states:?}");
        }
    }
}

/// Warnings and errors of Home Assistant's log about MQTT or the bridge.
fn assert_quiet_log(ha: &HomeAssistant) {
    let records = ha.log();
    let ours: Vec<&String> = records
        .iter()
        .filter(|r| {
            let l = r.to_lowercase();
            l.contains("mqtt") || l.contains("discovery") || l.contains("casambi")
        })
        .collect();
    for r in &records {
        println!("  Home Assistant log: {}", r.lines().next().unwrap_or_default());
    }
    assert!(ours.is_empty(), "Home Assistant logs about the bridge's discovery:\n{ours:#?}");
}

/// The retained set once both bridges published their datapoint sensors; with `bases` the base
/// topics whose bridges must report online.
async fn retained_discovery(port: u16, bases: &[&str]) -> BTreeMap<String, String> {
    let mut last = retained_complete(port, bases).await;
    // Datapoint sensors follow each network's first fetch: the set is complete once it stays
    // the same for a while.
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = retained_complete(port, bases).await;
        let configs = |r: &BTreeMap<String, String>| -> Vec<String> {
            r.iter().filter(|(t, _)| t.starts_with("homeassistant/")).map(|(t, p)| format!("{t}{p}")).collect()
        };
        if configs(&now) == configs(&last) {
            return now;
        }
        last = now;
    }
}

async fn retained_complete(port: u16, bases: &[&str]) -> BTreeMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = ha_support::retained_configs(port);
        let online = bases.iter().all(|b| r.get(&format!("{b}/bridge/state")).is_some_and(|s| s == "online"));
        let energy = bases.iter().all(|b| {
            r.iter().any(|(t, p)| {
                t.starts_with("homeassistant/") && p.contains("_data_energy") && p.contains(&format!("\"{b}/"))
            })
        });
        if online && energy {
            return r;
        }
        assert!(Instant::now() < deadline, "the bridges never published everything; last:\n{r:#?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Bridge configuration of the test site's bridge: the `component` layout, its own base topic.
fn site_bridge_config(dir: &Path, sim_url: &str, broker: &str) -> std::path::PathBuf {
    let ws_url = format!("{}/v1/bridge/", sim_url.replacen("http://", "ws://", 1));
    let file = dir.join("config.yaml");
    let yaml = format!(
        "cloud:\n  base_url: {sim_url}\n  ws_url: {ws_url}\n  api_key: demo-key\nnetworks:\n  - email: demo@example.com\n    password: demo\n\
         mqtt:\n  url: {broker}\n  base_topic: studio\n  client_id: casambi2mqtt-studio\n\
         homeassistant:\n  discovery: component\nhttp:\n  listen: 127.0.0.1:0\n"
    );
    std::fs::write(&file, yaml).expect("write config");
    file
}

/// The test site's simulator and its bridge (`run`); the simulator's URL.
fn start_site_bridge(dir: &Path, broker: &str) -> (Process, Process) {
    let site = site_file().display().to_string();
    let (sim, out) = Process::bridge("sim", &["sim", "--site", &site, "--listen", "127.0.0.1:0"], &[]);
    let line = Process::line_with(out, "REST");
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("the simulator's URL").to_string();
    let config = site_bridge_config(dir, &url, broker).display().to_string();
    let (bridge, out) =
        Process::bridge("site bridge", &["run", "-c", &config], &[("CASAMBI2MQTT_LOG__FORMAT", "text")]);
    Process::drain(out);
    (sim, bridge)
}

/// Home Assistant subscribes again to a topic it already holds whenever another entity takes it
/// up, and relies on the broker to send the retained message again (MQTT 3.1.1, 3.8.4). An MQTT
/// sensor a user adds on the kitchen ceiling's state topic must therefore show its brightness
/// at once, not only at the light's next change.
fn a_late_entity_on_a_held_topic_gets_the_retained_state(ha: &HomeAssistant, port: u16) {
    let light = ha.entities(0, Duration::from_secs(1));
    let brightness = light
        .iter()
        .find(|e| e["entity_id"] == "light.home_kitchen_ceiling")
        .and_then(|e| e["attributes"]["brightness"].as_f64())
        .expect("the kitchen ceiling is on with a brightness");
    let topic = "homeassistant/sensor/e2e_kitchen_brightness/config";
    let config = json!({
        "name": "Kitchen brightness (e2e)",
        "state_topic": "casambi/home/unit/kitchen-ceiling",
        "value_template": "{{ value_json.brightness }}",
        "unique_id": "e2e_kitchen_brightness",
        "default_entity_id": "sensor.e2e_kitchen_brightness",
    });
    let publish = |payload: &str| {
        let status = std::process::Command::new("mosquitto_pub")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-r", "-t", topic, "-m", payload])
            .status()
            .expect("run mosquitto_pub");
        assert!(status.success(), "mosquitto_pub failed");
    };
    publish(&config.to_string());
    let t = Instant::now();
    ha.wait("sensor.e2e_kitchen_brightness", json!({"state_num": brightness}), RETAINED_REPLAY);
    println!("  a late entity on a held topic got its retained state in {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);
    publish("");
}

fn start_demo(broker: &str) -> Process {
    let (demo, out) = Process::bridge("demo", &["demo", "--mqtt-url", broker, "--activity", "0"], &[]);
    Process::line_with(out, "simulated cloud");
    demo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_assistant_lists_drives_and_keeps_both_bridges() {
    let _one = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let broker = Mosquitto::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = start_demo(&broker.url());
    let (_sim, mut site_bridge) = start_site_bridge(dir.path(), &broker.url());
    let bases = ["casambi", "studio"];
    retained_discovery(broker.port(), &bases).await;

    let site = Site::load(&site_file()).expect("the test site loads");
    let offline: BTreeSet<String> = offline_units(&Site::demo()).into_iter().chain(offline_units(&site)).collect();
    assert!(!offline.is_empty(), "the sites have offline units to check");

    let ha = HomeAssistant::start(broker.port());
    let (entities, expected) = settled(&ha, broker.port(), &bases, &offline).await;
    print_entities("demo + test site", &entities);
    // Home Assistant's schemas take every config as published, checked once the set is complete.
    let summary = check_discovery(&ha_support::retained_configs(broker.port()));
    println!("schema check: {summary}");
    assert_judged("first start", &entities, expected, &offline, 2);

    // A switch's presses as device triggers: one for the demo's switch (its fixture names one
    // button), one per button for the test site's (four named buttons).
    let trigger =
        |device: &str, subtype: &str| (device.to_string(), "button_short_press".to_string(), subtype.to_string());
    let mut want = BTreeSet::from([trigger("Entrance switch", "switch")]);
    want.extend((1..=4).map(|b| trigger("Studio switch", &format!("button_{b}"))));
    assert_eq!(ha.triggers(), want, "the device triggers Home Assistant offers");

    // Commands from Home Assistant come back as its state.
    let commands: Vec<(&str, &str, &str, Value, Value)> = vec![
        ("light off", "light.home_kitchen_ceiling", "light/turn_off", json!({}), json!({"state": "off"})),
        ("light on", "light.home_kitchen_ceiling", "light/turn_on", json!({}), json!({"state": "on"})),
        (
            "brightness",
            "light.home_kitchen_ceiling",
            "light/turn_on",
            json!({"brightness": 128}),
            json!({"state": "on", "attributes": {"brightness": 128}}),
        ),
        (
            "colour temperature",
            "light.home_kuche_spots",
            "light/turn_on",
            json!({"color_temp_kelvin": 3000}),
            json!({"state": "on", "attributes": {"color_temp_kelvin": 3000}}),
        ),
        (
            "hs colour",
            "light.home_living_room_lamp",
            "light/turn_on",
            json!({"hs_color": [240, 100]}),
            json!({"state": "on", "attributes": {"hs_color": [240, 100]}}),
        ),
        ("group off", "light.home_group_kitchen", "light/turn_off", json!({}), json!({"state": "off"})),
        ("scene", "switch.home_scene_evening", "switch/turn_on", json!({}), json!({"state": "on"})),
        ("dim level", "number.home_dim_level", "number/set_value", json!({"value": 40}), json!({"state_num": 40})),
        ("component layout: light off", "light.studio_desk_lamp", "light/turn_off", json!({}), json!({"state": "off"})),
        (
            "component layout: brightness",
            "light.studio_desk_lamp",
            "light/turn_on",
            json!({"brightness": 77}),
            json!({"state": "on", "attributes": {"brightness": 77}}),
        ),
    ];
    println!("round trips (Home Assistant service call → state in Home Assistant):");
    for (what, entity, service, mut data, expect) in commands {
        if data.get("entity_id").is_none() {
            data["entity_id"] = json!(entity);
        }
        let ms = ha.roundtrip(entity, service, data, expect);
        println!("  {what:<30} {entity:<30} {ms:>7.1} ms");
    }

    // Reload: Home Assistant holds a stale state (a state message the bridge did not send), and
    // the Reload button makes the bridge publish the truth again.
    let unit = "casambi/home/unit/kitchen-ceiling";
    let truth = common::retained(broker.port()).await.remove(unit).expect("the unit's state is retained");
    assert!(truth.contains("\"state\":\"ON\""), "{truth}");
    let watcher = common::Watcher::start(broker.port(), "casambi/bridge/state").await;
    watcher.publish(unit, &truth.replace("\"state\":\"ON\"", "\"state\":\"OFF\""), false).await;
    ha.wait("light.home_kitchen_ceiling", json!({"state": "off"}), Duration::from_secs(15));
    let data = json!({"entity_id": "button.casambi_bridge_reload"});
    let ms = ha.roundtrip("light.home_kitchen_ceiling", "button/press", data, json!({"state": "on"}));
    println!("  {:<30} {:<30} {ms:>7.1} ms", "Reload (stale state repaired)", "light.home_kitchen_ceiling");
    assert_quiet_log(&ha);

    // Home Assistant restarts: the retained configs and the bridges' answer to its birth bring
    // every entity back.
    let t = Instant::now();
    ha.restart();
    let (entities, now_expected) = settled(&ha, broker.port(), &bases, &offline).await;
    println!("after Home Assistant's restart (settled in {:.1} s):", t.elapsed().as_secs_f64());
    print_entities("demo + test site", &entities);
    assert!(
        now_expected >= expected,
        "after Home Assistant's restart: {now_expected} entities published, {expected} before"
    );
    assert_judged("after Home Assistant's restart", &entities, now_expected, &offline, 2);

    // The bridges restart.
    let t = Instant::now();
    demo.terminate();
    site_bridge.terminate();
    let _demo = start_demo(&broker.url());
    let (_sim2, _site_bridge) = start_site_bridge(dir.path(), &broker.url());
    let (entities, now_expected) = settled(&ha, broker.port(), &bases, &offline).await;
    println!("after the bridges' restart (settled in {:.1} s):", t.elapsed().as_secs_f64());
    print_entities("demo + test site", &entities);
    assert!(
        now_expected >= expected,
        "after the bridges' restart: {now_expected} entities published, {expected} before"
    );
    assert_judged("after the bridges' restart", &entities, now_expected, &offline, 2);
    a_late_entity_on_a_held_topic_gets_the_retained_state(&ha, broker.port());
    assert_quiet_log(&ha);
    println!("home_assistant_lists_drives_and_keeps_both_bridges took {:.1} s", started.elapsed().as_secs_f64());
}

/// The demo with its embedded broker, as a user runs it: Home Assistant connects to that broker,
/// every entity is back after Home Assistant restarts, and an entity Home Assistant adds on a
/// topic it already holds gets the retained state (the broker re-sends it on an identical
/// re-subscription).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_assistant_restart_on_the_demos_embedded_broker_keeps_every_entity() {
    let _one = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let port = common::free_port();
    let (_demo, out) = Process::bridge("demo", &["demo", "--mqtt-port", &port.to_string(), "--activity", "0"], &[]);
    Process::line_with(out, "simulated cloud");
    let offline = offline_units(&Site::demo());
    let ha = HomeAssistant::start(port);
    let (entities, expected) = settled(&ha, port, &["casambi"], &offline).await;
    print_entities("demo, embedded broker", &entities);
    assert_judged("embedded broker, first start", &entities, expected, &offline, 1);
    ha.restart();
    // Datapoint sensors of a network whose first fetch came later may have joined meanwhile:
    // Home Assistant must list what the bridge publishes now, and nothing may have gone.
    let (entities, now_expected) = settled(&ha, port, &["casambi"], &offline).await;
    print_entities("demo, embedded broker, after Home Assistant's restart", &entities);
    assert!(now_expected >= expected, "the bridge published {now_expected} entities, {expected} before the restart");
    assert_judged("embedded broker, after Home Assistant's restart", &entities, now_expected, &offline, 1);
    a_late_entity_on_a_held_topic_gets_the_retained_state(&ha, port);
    assert_quiet_log(&ha);
    println!("embedded broker test took {:.1} s", started.elapsed().as_secs_f64());
}
