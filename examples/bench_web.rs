//! The web page's server-side costs (docs/web.md#performance), on one network of 1,000 units
//! (dimmers, tunable white and colour lights, sensors; 50 groups, 20 scenes):
//!
//! - the whole page model (`GET /api/state`, the live stream's first frame): target ≤ 200 ms;
//! - one live tick in which every unit changed (the hub's worst case);
//! - the bridge's share: [`Mirror::observe`] of one unit change, with no page open and with one.
//!
//! `cargo run --release --example bench_web` prints min / median / max of each.

use casambi2mqtt::bridge::state::{GroupInfo, NetworkView, SceneInfo, Topology};
use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::cloud::model::UnitState;
use casambi2mqtt::health::HealthState;
use casambi2mqtt::web::mirror::Mirror;
use casambi2mqtt::web::{WebSettings, WebState, live};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const UNITS: u32 = 1000;

fn unit(id: u32, level: f64) -> UnitState {
    let controls = match id % 4 {
        0 => format!(r#"[{{"type":"Dimmer","value":{level}}}]"#),
        1 => format!(r#"[{{"type":"Dimmer","value":{level}}},{{"type":"CCT","min":2200,"max":6500,"value":3000}}]"#),
        2 => format!(
            r#"[{{"type":"Dimmer","value":{level}}},{{"type":"Colorsource","source":"XY"}},{{"type":"Color","x":0.3,"y":0.32}}]"#
        ),
        _ => r#"[{"type":"Presence","status":"present"},{"type":"Lux","value":412}]"#.to_string(),
    };
    let kind = if id % 4 == 3 { "Sensor" } else { "Luminaire" };
    serde_json::from_str(&format!(
        r#"{{"id":{id},"name":"Unit {id} on floor {}","type":"{kind}","on":true,"online":true,"fixtureId":{},"controls":{controls}}}"#,
        id / 100,
        1000 + id % 8
    ))
    .unwrap_or_default()
}

fn view() -> NetworkView {
    let mut view = NetworkView::new("net-1000");
    view.status.name = "Big site".into();
    for id in 1..=UNITS {
        view.apply_unit(unit(id, 0.5), false);
    }
    for g in 0..50u32 {
        let units = (1..=UNITS).filter(|u| u % 50 == g).collect();
        view.groups.insert(g + 1, GroupInfo { id: g + 1, name: format!("Group {}", g + 1), units });
    }
    for s in 0..20u32 {
        let units = (1..=UNITS).filter(|u| u % 20 == s).collect();
        view.scenes.insert(s + 1, SceneInfo { id: s + 1, name: format!("Scene {}", s + 1), units, hidden: false });
    }
    view
}

/// min / median / max of `runs` timings of `f`.
fn measure(what: &str, runs: usize, mut f: impl FnMut()) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    println!("{what:<58} min {:>10.3?}  median {:>10.3?}  max {:>10.3?}", times[0], times[runs / 2], times[runs - 1]);
}

fn main() {
    let settings = WebSettings {
        listen: "127.0.0.1:0".parse().expect("an address"),
        token: None,
        broker: "mqtt://127.0.0.1:1883".into(),
        protocol: "auto".into(),
        rest_limit: 60,
        public_host: Vec::new(),
        limits: casambi2mqtt::config::HttpSettings::default().limits,
        max_live_streams: 32,
    };
    let web = WebState::new(settings, HealthState::new(), CancellationToken::new());
    let view = Arc::new(view());
    web.mirror.observe(&Update::Network { view: view.clone(), topology: Box::new(Topology::default()) });

    let mut bytes = 0;
    measure("page model of 1,000 units (GET /api/state)", 50, || bytes = web.page_json().len());
    println!("{:<58} {} bytes", "  its JSON", bytes);

    web.mirror.set_watching(true);
    let changed: Vec<Arc<UnitState>> = (1..=UNITS).map(|id| Arc::new(unit(id, 0.25))).collect();
    measure("live tick with all 1,000 units changed (one frame)", 50, || {
        for u in &changed {
            web.mirror.observe(&Update::Unit { network: "net-1000".into(), unit: u.clone() });
        }
        let frames = live::frames(&web);
        assert!(!frames.is_empty());
    });

    let mirror = Mirror::default();
    mirror.observe(&Update::Network { view, topology: Box::new(Topology::default()) });
    let network: Arc<str> = "net-1000".into();
    for watching in [false, true] {
        mirror.set_watching(watching);
        let label = if watching { "one page open" } else { "no page open" };
        measure(&format!("bridge path: 1,000 unit changes into the mirror, {label}"), 50, || {
            for u in &changed {
                mirror.observe(&Update::Unit { network: network.clone(), unit: u.clone() });
            }
        });
        drop(mirror.take_changes());
    }
}
