//! MQTT commands: the first byte picks the command topic kind, the rest is the payload, parsed
//! as the command layer does; the whole input is also tried as a topic (intake and resolution).
#![no_main]

use std::collections::BTreeMap;

use casambi2mqtt::commands::parse::{Target, parse};
use casambi2mqtt::mqtt::client::Message;
use casambi2mqtt::mqtt::command_intake::{classify, resolve};
use casambi2mqtt::mqtt::topics::Layout;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, payload)) = data.split_first() else { return };
    let target = match kind % 9 {
        0 => Target::Unit { id: 1, attr: None },
        1 => Target::Unit { id: 1, attr: Some("state".into()) },
        2 => Target::Unit { id: 1, attr: Some("brightness".into()) },
        3 => Target::Unit { id: 1, attr: Some("color_temp".into()) },
        4 => Target::Unit { id: 1, attr: Some("color".into()) },
        5 => Target::Group(1),
        6 => Target::Scene(1),
        7 => Target::Network,
        _ => Target::Unit { id: 1, attr: Some(String::from_utf8_lossy(payload).into_owned()) },
    };
    if let Err(e) = parse(&target, payload) {
        assert!(!e.to_string().is_empty());
    }
    let layout = Layout::new("casambi");
    let topic = String::from_utf8_lossy(data).into_owned();
    let _ = layout.is_command(&topic);
    let _ = classify(&layout, &Message { topic: topic.clone(), payload: payload.to_vec(), retain: kind & 1 == 1 });
    let _ = resolve(&layout, &BTreeMap::new(), &topic);
});
