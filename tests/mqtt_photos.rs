//! Network photos end to end (docs/mqtt.md, "Photos"): the whole bridge (`app::run`) on the
//! simulator publishes each gallery photo's PNG retained with an `image` entity, skips a photo
//! too large or not a PNG with a warning naming it, and clears a photo removed from the gallery.

mod common;
#[path = "common/matrix.rs"]
mod matrix;

use casambi2mqtt::bridge::photos::MAX_PHOTO_BYTES;
use casambi2mqtt::sim::images::picture;
use casambi2mqtt::sim::site::{Photo, Site};
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::{Mosquitto, logs};
use matrix::{DEMO_NETWORKS, HOME, run_bridge, yaml};
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const GROUND_FLOOR: &str = "casambi/home/photo/ground-floor";
const HOME_DEVICE: &str = "homeassistant/device/casambi2mqtt_7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b/config";

fn photo(name: &str, image: &str) -> Photo {
    Photo { name: name.into(), image: image.into(), position: 0, size: None, corrupt: false }
}

/// Every retained message under `filter`, payloads as bytes (photos are binary).
async fn retained_bytes(port: u16, filter: &str) -> BTreeMap<String, Vec<u8>> {
    static IDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut o = MqttOptions::new(format!("photos-{}-{n}", std::process::id()), "127.0.0.1", port);
    o.set_max_packet_size(8 << 20, 8 << 20);
    let (client, mut el) = AsyncClient::new(o, 16);
    client.subscribe(filter, QoS::AtMostOnce).await.expect("subscribe queued");
    let mut out = BTreeMap::new();
    let mut subscribed = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        let wait = if subscribed { Duration::from_millis(300) } else { Duration::from_secs(5) };
        match tokio::time::timeout(wait, el.poll()).await {
            Ok(Ok(Event::Incoming(Packet::Publish(p)))) if p.retain => {
                out.insert(p.topic.clone(), p.payload.to_vec());
            }
            Ok(Ok(Event::Incoming(Packet::SubAck(_)))) => subscribed = true,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("reading retained messages: {e}"),
            Err(_) => break,
        }
    }
    let _ = client.disconnect().await;
    out
}

/// Reads the retained set until `f` holds (panics after 20 s with the last set).
async fn retained_until(port: u16, f: impl Fn(&BTreeMap<String, Vec<u8>>) -> bool) -> BTreeMap<String, Vec<u8>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = retained_bytes(port, "#").await;
        if f(&r) {
            return r;
        }
        let topics: Vec<&String> = r.keys().filter(|t| t.contains("/photo")).collect();
        assert!(tokio::time::Instant::now() < deadline, "never held; photo topics: {topics:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The components of the Home network's device config.
fn home_components(r: &BTreeMap<String, Vec<u8>>) -> serde_json::Map<String, Value> {
    let config: Value = serde_json::from_slice(&r[HOME_DEVICE]).expect("device config is JSON");
    config["cmps"].as_object().expect("cmps").clone()
}

async fn start(site: Site, broker: &Mosquitto) -> (Simulator, CancellationToken, tokio::task::JoinHandle<impl Sized>) {
    let sim = Simulator::start_local(SimConfig::new(site)).await.expect("simulator");
    let (shutdown, task) = run_bridge(&yaml(&sim, &broker.url(), "v5", "", DEMO_NETWORKS)).await;
    (sim, shutdown, task)
}

#[tokio::test]
async fn gallery_photos_are_retained_pngs_and_bad_files_are_skipped_by_name() {
    let (logs, _guard) = logs::capture("casambi2mqtt=info");
    let mut site = Site::demo();
    let home = site.networks.iter_mut().find(|n| n.id == HOME).expect("Home");
    home.photos.push(Photo { size: Some(MAX_PHOTO_BYTES + 1), ..photo("Roof plan", "photo-huge") });
    home.photos.push(Photo { corrupt: true, ..photo("Cellar", "photo-broken") });
    let broker = Mosquitto::start();
    let (_sim, shutdown, task) = start(site, &broker).await;

    let r = retained_until(broker.port(), |r| r.contains_key(GROUND_FLOOR) && r.contains_key(HOME_DEVICE)).await;
    assert_eq!(r[GROUND_FLOOR], picture("photo-home-1").unwrap(), "the PNG file, byte for byte");
    let photos: Vec<&String> = r.keys().filter(|t| t.contains("/photo/")).collect();
    assert_eq!(photos, [GROUND_FLOOR], "only the good photo is published");

    let cmps = home_components(&r);
    let images: Vec<(&String, &Value)> = cmps.iter().filter(|(_, c)| c["p"] == "image").collect();
    assert_eq!(images.len(), 1, "one image entity: {images:?}");
    let (key, c) = images[0];
    assert_eq!(key, "photo_photo-home-1");
    assert_eq!(c["image_topic"], GROUND_FLOOR);
    assert_eq!(c["content_type"], "image/png");
    assert_eq!(c["name"], "Ground floor");

    let warned =
        |name: &str, why: &str| logs.lines_with("photo skipped").iter().any(|l| l.contains(name) && l.contains(why));
    assert!(warned("Roof plan", "more than"), "no warning names the oversized photo:\n{}", logs.text());
    assert!(warned("Cellar", "not a PNG"), "no warning names the photo that is not a PNG:\n{}", logs.text());
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}

#[tokio::test]
async fn a_photo_removed_from_the_gallery_is_cleared_with_its_entity() {
    let broker = Mosquitto::start();
    let (sim, shutdown, task) = start(Site::demo(), &broker).await;
    retained_until(broker.port(), |r| r.contains_key(GROUND_FLOOR)).await;

    // A new revision whose gallery has another photo instead.
    sim.set_photos(HOME, vec![photo("Garden", "photo-garden")]).expect("gallery replaced");
    let garden = "casambi/home/photo/garden";
    let r = retained_until(broker.port(), |r| r.contains_key(garden) && !r.contains_key(GROUND_FLOOR)).await;
    assert_eq!(r[garden], picture("photo-garden").unwrap());
    let cmps = home_components(&r);
    assert!(cmps.contains_key("photo_photo-garden"), "{cmps:?}");
    assert!(!cmps.contains_key("photo_photo-home-1"), "the removed photo's entity stays: {cmps:?}");

    // An empty gallery: no photo topic and no image entity remain.
    sim.set_photos(HOME, Vec::new()).expect("gallery emptied");
    let r = retained_until(broker.port(), |r| !r.keys().any(|t| t.contains("/photo/"))).await;
    assert!(!home_components(&r).values().any(|c| c["p"] == "image"), "an image entity stays");
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}
