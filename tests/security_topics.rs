//! Names cannot inject topic levels: a simulated site whose network, unit, scene and group names
//! contain `/`, `+`, `#`, NUL, `$`, path tricks and non-ASCII text runs through the whole bridge
//! (REST + WebSocket parsing, state, publisher) to a real mosquitto, including a live rename to
//! such a name. Every topic published has the level count of its kind, only `[a-z0-9_-]` in the
//! levels taken from names and ids, and exactly the slugs the collision rule gives.

mod common;

use casambi2mqtt::mqtt::topics::assign;
use casambi2mqtt::mqtt::unit_json::UNIT_KEYS;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const UNIT_NAMES: [&str; 8] = ["Lamp/1", "lamp+1", "#", "x\0y", "日本語", "🙂 Ü", "../../etc/passwd", "$SYS/+"];
const SCENE_NAMES: [&str; 3] = ["Evening/#", "+", "Nacht\0licht"];
const GROUP_NAMES: [&str; 2] = ["Kitchen/+/#", "Living\0room"];
const RENAMED: &str = "new/+#\0name ☃";

fn site() -> Site {
    let mut site = Site::demo();
    site.networks[0].name = "Home/+/#\0 ☃".into();
    // The reserved slug, and a name that is only punctuation.
    site.networks[1].name = "bridge".into();
    for (unit, name) in site.networks[0].units.iter_mut().zip(UNIT_NAMES) {
        unit.name = name.into();
    }
    for (scene, name) in site.networks[0].scenes.iter_mut().zip(SCENE_NAMES) {
        scene.name = name.into();
    }
    for (group, name) in site.networks[0].groups.iter_mut().zip(GROUP_NAMES) {
        group.name = name.into();
    }
    if let Some(u) = site.networks[1].units.first_mut() {
        u.name = "/+#".into();
    }
    site
}

/// The slugs the contract gives a network's things.
struct Expected {
    nets: BTreeMap<String, String>,
    units: BTreeMap<String, BTreeSet<String>>,
    groups: BTreeMap<String, BTreeSet<String>>,
    scenes: BTreeMap<String, BTreeSet<String>>,
}

fn expected(site: &Site) -> Expected {
    let nets = assign(site.networks.iter().map(|n| (n.id.clone(), n.name.clone())), &["bridge"]);
    let mut e =
        Expected { nets: BTreeMap::new(), units: BTreeMap::new(), groups: BTreeMap::new(), scenes: BTreeMap::new() };
    for n in &site.networks {
        let slug = nets[&n.id].clone();
        let set = |m: BTreeMap<i64, String>| m.into_values().collect::<BTreeSet<String>>();
        e.units.insert(slug.clone(), set(assign(n.units.iter().map(|u| (u.id, u.name.clone())), &[])));
        e.groups.insert(slug.clone(), set(assign(n.groups.iter().map(|g| (g.id, g.name.clone())), &[])));
        e.scenes.insert(slug.clone(), set(assign(n.scenes.iter().map(|s| (s.id, s.name.clone())), &[])));
        e.nets.insert(n.id.clone(), slug);
    }
    e
}

fn clean(level: &str) -> bool {
    !level.is_empty() && level.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Checks one published topic against the layout; returns what is wrong.
fn check(topic: &str, e: &Expected) -> Option<String> {
    if !topic.is_ascii() || topic.contains(['+', '#', '\0']) {
        return Some("non-ASCII, wildcard or NUL".into());
    }
    let levels: Vec<&str> = topic.split('/').collect();
    if levels.iter().any(|l| l.is_empty()) {
        return Some("empty level".into());
    }
    let in_set =
        |m: &BTreeMap<String, BTreeSet<String>>, net: &str, s: &str| m.get(net).is_some_and(|set| set.contains(s));
    let net_ok = |net: &str| e.nets.values().any(|n| n == net);
    let ok = match levels.as_slice() {
        ["casambi", "bridge", "state" | "info" | "error"] => true,
        ["homeassistant", "device", oid, "config"] => clean(oid),
        ["casambi", net] | ["casambi", net, "availability"] => net_ok(net),
        ["casambi", net, "unit", unit] => in_set(&e.units, net, unit),
        ["casambi", net, "unit", unit, leaf] => {
            in_set(&e.units, net, unit) && (UNIT_KEYS.contains(leaf) || ["availability", "event"].contains(leaf))
        }
        ["casambi", net, "group", group] => in_set(&e.groups, net, group),
        ["casambi", net, "scene", scene] => in_set(&e.scenes, net, scene),
        _ => false,
    };
    (!ok).then(|| format!("{} levels, not a topic of the layout or an unexpected slug", levels.len()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_with_separators_wildcards_nul_and_unicode_cannot_inject_topic_levels() {
    let broker = Mosquitto::start();
    let site = site();
    let sim = Simulator::start_local(SimConfig::new(site.clone())).await.unwrap();
    let mut watcher = Watcher::start(broker.port(), "#").await;
    let yaml = format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\n\
         networks:\n  - email: demo@example.com\n    password: demo\n\
         mqtt:\n  url: {}\n  client_id: topics-test\nhealth:\n  listen: \"\"\n",
        sim.base_url(),
        sim.ws_url(),
        broker.url()
    );
    let config = casambi2mqtt::config::parse(&yaml, Vec::new()).unwrap_or_else(|e| panic!("{e}"));
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(casambi2mqtt::app::run(config, shutdown.clone(), None));

    let mut e = expected(&site);
    let home = e.nets[&site.networks[0].id].clone();
    println!("network slugs: {:?}", e.nets.values().collect::<Vec<_>>());
    println!("unit slugs of {home}: {:?}", e.units[&home]);
    assert_eq!(home, "home-snowman", "\"Home/+/#\\0 ☃\" transliterates to home-snowman");
    assert!(e.nets.values().all(|s| s != "bridge"), "the reserved slug was handed out");
    let first_unit = format!(
        "casambi/{home}/unit/{}",
        assign(site.networks[0].units.iter().map(|u| (u.id, u.name.clone())), &[])[&1]
    );
    retained_until(broker.port(), Duration::from_secs(15), |r| {
        r.contains_key(&first_unit) && e.nets.values().all(|n| r.contains_key(&format!("casambi/{n}/availability")))
    })
    .await;

    // A live rename to a hostile name.
    let mut renamed = site.clone();
    renamed.networks[0].units[0].name = RENAMED.into();
    sim.rename(&site.networks[0].id, "unit", 1, RENAMED).unwrap();
    let new_slugs = expected(&renamed);
    let new_unit = format!(
        "casambi/{home}/unit/{}",
        assign(renamed.networks[0].units.iter().map(|u| (u.id, u.name.clone())), &[])[&1]
    );
    // Both the old and the new slugs are legitimate topics during the change.
    for (net, set) in new_slugs.units {
        e.units.entry(net).or_default().extend(set);
    }
    // The old slug leaves unit 1; it may pass to a unit whose name it suffixed until now
    // (docs/mqtt.md#slugs: the lowest id of a shared slug keeps it).
    let r = retained_until(broker.port(), Duration::from_secs(15), |r| {
        r.contains_key(&new_unit) && !r.get(&first_unit).is_some_and(|p| p.contains("\"id\":1,"))
    })
    .await;
    println!("renamed {:?}: {first_unit} -> {new_unit}", RENAMED);

    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    watcher.settle(Duration::from_millis(300), Duration::from_secs(5)).await;

    let topics: BTreeSet<&str> =
        watcher.seen.iter().map(|s| s.topic.as_str()).chain(r.keys().map(String::as_str)).collect();
    let bad: Vec<String> = topics.iter().filter_map(|t| check(t, &e).map(|why| format!("{t:?}: {why}"))).collect();
    println!("{} messages on {} distinct topics checked", watcher.seen.len(), topics.len());
    assert!(bad.is_empty(), "topics outside the layout:\n{}", bad.join("\n"));
    // Every unit, group and scene got its topic: nothing was silently dropped either.
    for (net, units) in &e.units {
        for u in units {
            let t = format!("casambi/{net}/unit/{u}");
            assert!(topics.contains(t.as_str()) || t == first_unit, "no topic for unit {t}");
        }
    }
    for (kind, map) in [("group", &e.groups), ("scene", &e.scenes)] {
        for (net, set) in map {
            for s in set {
                let t = format!("casambi/{net}/{kind}/{s}");
                assert!(topics.contains(t.as_str()), "no topic for {t}");
            }
        }
    }
}
