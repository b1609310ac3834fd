//! WebSocket frames: `parse_frame` on arbitrary bytes, and whatever parses goes on through the
//! bridge state and the topic renderer, as a live frame does.
#![no_main]

use casambi2mqtt::bridge::state::NetworkView;
use casambi2mqtt::cloud::model::{ServerMessage, parse_frame};
use casambi2mqtt::mqtt::DiscoveryMode;
use casambi2mqtt::mqtt::discovery::Discovery;
use casambi2mqtt::mqtt::render::{NetMirror, Renderer};
use casambi2mqtt::mqtt::topics::Layout;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = parse_frame(data) else { return };
    // What parsed serialises (the simulator and tests write frames this way) and parses again.
    let text = msg.to_json().expect("a parsed frame serialises");
    let again = parse_frame(text.as_bytes()).expect("a re-serialised frame parses");
    if let (ServerMessage::UnitChanged { unit, .. }, ServerMessage::UnitChanged { unit: u2, .. }) = (&msg, &again) {
        assert_eq!(unit.id, u2.id);
        let mut view = NetworkView::new("n");
        view.apply_unit(unit.clone(), true);
        let replay = view.apply_unit(unit.clone(), true);
        assert!(!replay.changed, "the same frame twice changed the state");
        let renderer = Renderer {
            layout: Layout::new("casambi"),
            discovery: Some(Discovery { prefix: "homeassistant".into(), mode: DiscoveryMode::Device, qos: 1 }),
            attribute_topics: true,
        };
        let mirror = NetMirror::new(view, "net".into());
        for owner in mirror.owners() {
            for (topic, _) in renderer.owner(&mirror, &owner) {
                assert!(topic.split('/').all(|l| !l.is_empty() && !l.contains(['+', '#', '\0'])), "{topic:?}");
            }
        }
    }
});
