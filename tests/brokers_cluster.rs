//! Scaling out on a clustered broker (docs/brokers.md, "Scaling out"): a three-node NATS
//! cluster (routes on loopback, JetStream and MQTT on every node), two bridge instances with
//! disjoint credentials — the demo site's Home network and its Office network, which gets
//! credentials of its own — sharing the base topic, each connected to its own node, and a
//! subscriber on the third node. It sees every retained unit state and discovery config of both,
//! and each instance's own bridge topics; neither instance's start-up clean-up clears the
//! other's; and the node one bridge is connected to, stopped and started again, loses nothing
//! once that bridge has reconnected.

mod common;
#[path = "common/matrix.rs"]
mod matrix;
#[path = "common/nats.rs"]
mod nats;

use casambi2mqtt::sim::site::{Credentials, Site};
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::Watcher;
use matrix::{run_bridge, seen_all, snapshot_topics, yaml};
use nats::NatsCluster;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const HOME_ID: &str = "casambi2mqtt-home";
const OFFICE_ID: &str = "casambi2mqtt-office";

/// What both instances together retain: the demo snapshot's network topics, and each instance's
/// own bridge topics in place of the single bridge's.
fn expected() -> BTreeSet<String> {
    let mut topics: BTreeSet<String> = snapshot_topics()
        .into_iter()
        .filter(|t| !t.starts_with("casambi/bridge/") && !t.contains("casambi2mqtt_bridge_"))
        .collect();
    for id in [HOME_ID, OFFICE_ID] {
        topics.insert(format!("casambi/bridge/{id}/state"));
        topics.insert(format!("casambi/bridge/{id}/info"));
        topics.insert(format!("homeassistant/device/casambi2mqtt_bridge-{id}_casambi/config"));
    }
    topics
}

/// The retained set on `port` until it holds every expected topic with both instances online
/// (panics after `max`); returns how many retained messages it holds.
async fn all_there(port: u16, max: Duration) -> usize {
    let wanted = expected();
    let deadline = Instant::now() + max;
    loop {
        let r = matrix::retained_now(port).await;
        let online = [HOME_ID, OFFICE_ID]
            .iter()
            .all(|id| r.get(&format!("casambi/bridge/{id}/state")).is_some_and(|s| s == "online"));
        let missing: Vec<&String> = wanted.iter().filter(|t| !r.contains_key(*t)).collect();
        if missing.is_empty() && online {
            return r.len();
        }
        assert!(
            Instant::now() < deadline,
            "{} missing, e.g. {:?}; both online: {online}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_three_nats_nodes_share_one_base_topic() {
    let mut cluster = NatsCluster::start().await;
    let mut site = Site::demo();
    let office = site.networks.iter_mut().find(|n| n.name == "Office").expect("the demo site has an Office");
    office.credentials = Credentials { email: "office@example.com".into(), password: "office".into() };
    let sim = Simulator::start_local(SimConfig::new(site)).await.expect("simulator");

    let observer = cluster.nodes[2].port();
    let mut watch = Watcher::start(observer, "#").await;
    let t0 = Instant::now();
    let mut bridges = Vec::new();
    for (node, id, networks) in
        [(0, HOME_ID, matrix::DEMO_NETWORKS), (1, OFFICE_ID, "  - email: office@example.com\n    password: office\n")]
    {
        let extra = format!("  client_id: {id}\n  instance_topics: true\n");
        bridges.push(run_bridge(&yaml(&sim, &cluster.nodes[node].url(), "auto", &extra, networks)).await);
    }
    let seen = seen_all(&mut watch, &expected(), Duration::from_secs(60)).await;
    println!(
        "cluster: {} topics of both instances seen on the third node {:?} after the start ({} messages)",
        expected().len(),
        t0.elapsed(),
        watch.seen.len()
    );
    for (id, net) in [(HOME_ID, "Home"), (OFFICE_ID, "Office")] {
        let info: serde_json::Value = serde_json::from_str(&seen[&format!("casambi/bridge/{id}/info")]).expect("JSON");
        let names: Vec<&str> =
            info["networks"].as_array().into_iter().flatten().filter_map(|n| n["name"].as_str()).collect();
        assert_eq!(names, [net], "{id} publishes only its own network: {info}");
        assert_eq!(info["mqtt_protocol"], "3.1.1");
    }
    let _ = watch.client.disconnect().await;

    // Both instances' start-up clean-up (10 s after connecting, then 2 s of quiet) has run:
    // neither cleared a topic of the other.
    tokio::time::sleep(Duration::from_secs(14)).await;
    let retained_count = all_there(observer, Duration::from_secs(5)).await;
    println!("cluster: {retained_count} retained messages on the third node after both clean-ups");

    // The node the Home bridge is connected to goes down, a Home unit changes meanwhile, and
    // the node comes back: once the bridge has reconnected, nothing is missing and the change is
    // there.
    cluster.nodes[0].stop();
    let dimmer = serde_json::json!({"controls": [{"type": "Dimmer", "value": 0.2}]});
    sim.set_unit_state(matrix::HOME, 1, &dimmer).expect("unit 1 exists");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t1 = Instant::now();
    cluster.nodes[0].start_again();
    matrix::retained_is(observer, &format!("{}/brightness", matrix::CEILING), "51", Duration::from_secs(60)).await;
    let count = all_there(observer, Duration::from_secs(30)).await;
    println!(
        "cluster: {count} retained on the third node, the outage's change included, {:?} after node 1 started again",
        t1.elapsed()
    );
    all_there(cluster.nodes[0].port(), Duration::from_secs(30)).await;

    for (shutdown, task) in bridges {
        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
}
