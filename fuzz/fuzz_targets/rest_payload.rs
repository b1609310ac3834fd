//! REST response bodies: every resource the bridge reads (network state, network, unit state,
//! session responses, fixture, groups, scenes, photos) from arbitrary bytes; a parsed network
//! goes on through the bridge state and the topic renderer.
#![no_main]

use std::collections::BTreeMap;

use casambi2mqtt::bridge::state::NetworkView;
use casambi2mqtt::cloud::model::{
    Control, Fixture, Group, Network, NetworkSessions, NetworkState, Photo, Scene, Unit, UnitState, UserSession,
};
use casambi2mqtt::mqtt::DiscoveryMode;
use casambi2mqtt::mqtt::discovery::Discovery;
use casambi2mqtt::mqtt::render::{NetMirror, Renderer};
use casambi2mqtt::mqtt::topics::Layout;
use libfuzzer_sys::fuzz_target;

fn render(view: NetworkView) {
    let renderer = Renderer {
        layout: Layout::new("casambi"),
        discovery: Some(Discovery { prefix: "homeassistant".into(), mode: DiscoveryMode::Component, qos: 1 }),
        attribute_topics: true,
    };
    let mirror = NetMirror::new(view, "net".into());
    for owner in mirror.owners() {
        for (topic, _) in renderer.owner(&mirror, &owner) {
            assert!(topic.split('/').all(|l| !l.is_empty() && !l.contains(['+', '#', '\0'])), "{topic:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(state) = serde_json::from_slice::<NetworkState>(data) {
        serde_json::to_string(&state).expect("state serialises");
        let mut view = NetworkView::new("n");
        view.apply_snapshot(state.clone());
        let again = view.apply_snapshot(state);
        assert!(again.changed_units.is_empty() && again.topology.is_empty(), "the same snapshot twice changed");
        render(view);
    }
    if let Ok(net) = serde_json::from_slice::<Network>(data) {
        let mut view = NetworkView::new("n");
        view.apply_config(&net);
        render(view);
    }
    if let Ok(unit) = serde_json::from_slice::<UnitState>(data) {
        serde_json::to_string(&unit).expect("unit serialises");
    }
    let _ = serde_json::from_slice::<NetworkSessions>(data);
    let _ = serde_json::from_slice::<UserSession>(data);
    let _ = serde_json::from_slice::<Fixture>(data);
    let _ = serde_json::from_slice::<BTreeMap<String, Unit>>(data);
    let _ = serde_json::from_slice::<BTreeMap<String, Group>>(data);
    let _ = serde_json::from_slice::<BTreeMap<String, Scene>>(data);
    let _ = serde_json::from_slice::<Vec<Photo>>(data);
    if let Ok(controls) = serde_json::from_slice::<Vec<Control>>(data) {
        for c in &controls {
            let _ = (c.to_value(), c.type_name(), c.name());
        }
    }
});
