//! Start-up clean-up of retained topics this bridge left behind in an earlier run: discovery
//! configs of units, scenes or groups that no longer exist (ghost entities in HA) and state
//! topics under the base topic that nothing publishes any more.
//!
//! A short-lived second connection subscribes to the discovery configs and to `<base>/#` for a
//! moment and keeps only retained messages (the broker's store). Each is tied to a scope — the
//! bridge, or a network by id (discovery object ids start with the network id) or by slug (state
//! topics) — and is only judged once that network's first full view has arrived: until then the
//! bridge cannot know what it will want, and a network whose credentials fail keeps its topics.
//! A second connection keeps the main one free of duplicate deliveries of command topics.

use super::client::{Client, ClientEvent, Message};
use super::discovery::{self, ORIGIN_NAME};
use super::settings::MqttSettings;
use std::time::Duration;

/// Which part of the bridge a retained topic belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The bridge itself.
    Bridge,
    /// A network, by the `key` of its id (from a discovery object id).
    NetworkKey(String),
    /// A network, by its slug (from a state topic).
    NetworkSlug(String),
}

/// A retained topic found at start-up, waiting to be judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The topic.
    pub topic: String,
    /// What it belongs to.
    pub scope: Scope,
}

/// The scope of a retained message, or `None` when it is not this bridge's.
pub fn scope_of(msg: &Message, base: &str, prefix: Option<&str>) -> Option<Scope> {
    if let Some(rest) = msg.topic.strip_prefix(base).and_then(|r| r.strip_prefix('/')) {
        let first = rest.split('/').next().unwrap_or_default();
        return match first {
            "" => None,
            "bridge" => Some(Scope::Bridge),
            net => Some(Scope::NetworkSlug(net.to_string())),
        };
    }
    let rest = msg.topic.strip_prefix(prefix?)?.strip_prefix('/')?;
    let levels: Vec<&str> = rest.split('/').collect();
    let [_, object_id, "config"] = levels.as_slice() else { return None };
    let payload: serde_json::Value = serde_json::from_slice(&msg.payload).ok()?;
    if !discovery::is_ours(&payload, base) {
        return None;
    }
    let id = object_id.strip_prefix(ORIGIN_NAME)?.strip_prefix('_')?;
    if id.starts_with("bridge_") {
        return Some(Scope::Bridge);
    }
    Some(Scope::NetworkKey(id.split('_').next().unwrap_or_default().to_string()))
}

/// Collects the retained messages on `filters` for `wait`, over a separate connection with the
/// client id `<client_id>-scan`. Errors are logged; the result is then what was collected.
pub async fn scan(settings: &MqttSettings, filters: Vec<String>, wait: Duration) -> Vec<Message> {
    let id = format!("{}-scan", settings.client_id);
    let (client, mut events, task) = match Client::start(settings, &id, None, super::client::QUIET_INFLIGHT) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot scan for stale retained topics");
            return Vec::new();
        }
    };
    let mut found = Vec::new();
    let deadline = tokio::time::sleep(wait);
    tokio::pin!(deadline);
    let mut subscribed = false;
    loop {
        tokio::select! {
            _ = &mut deadline => break,
            ev = events.recv() => match ev {
                Some(ClientEvent::Connected) if !subscribed => {
                    subscribed = client.subscribe(&filters).await.is_ok();
                    // Time starts once the subscription is on its way.
                    deadline.as_mut().reset(tokio::time::Instant::now() + wait);
                }
                Some(ClientEvent::Message(m)) if m.retain && !m.payload.is_empty() => found.push(m),
                Some(_) => {}
                None => break,
            },
        }
    }
    let _ = client.disconnect().await;
    let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    tracing::debug!(count = found.len(), "retained topics found at start-up");
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(topic: &str, payload: &str) -> Message {
        Message { topic: topic.into(), payload: payload.as_bytes().to_vec(), retain: true }
    }

    #[test]
    fn scopes() {
        let p = Some("homeassistant");
        assert_eq!(scope_of(&msg("casambi/bridge/info", "{}"), "casambi", p), Some(Scope::Bridge));
        assert_eq!(scope_of(&msg("casambi/home/unit/x", "{}"), "casambi", p), Some(Scope::NetworkSlug("home".into())));
        let ours = r#"{"origin":{"name":"casambi2mqtt"},"cmps":{"a":{"state_topic":"casambi/home/unit/x"}}}"#;
        assert_eq!(
            scope_of(&msg("homeassistant/device/casambi2mqtt_abc123_d0c0ffee0001/config", ours), "casambi", p),
            Some(Scope::NetworkKey("abc123".into()))
        );
        assert_eq!(
            scope_of(&msg("homeassistant/light/casambi2mqtt_abc123_d0c0ffee0001_light/config", ours), "casambi", p),
            Some(Scope::NetworkKey("abc123".into()))
        );
        // Another bridge's base topic, or another origin: not ours.
        assert_eq!(scope_of(&msg("homeassistant/device/casambi2mqtt_abc/config", ours), "other", p), None);
        let theirs = r#"{"origin":{"name":"zigbee2mqtt"},"state_topic":"casambi/x"}"#;
        assert_eq!(scope_of(&msg("homeassistant/device/casambi2mqtt_abc/config", theirs), "casambi", p), None);
    }
}
