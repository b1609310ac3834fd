//! Non-retained messages: a unit's events, and the problems and refusals published on
//! `<base>/bridge/error` (held while disconnected).

use super::*;

/// A `bridge/error` message: every one has these four keys (docs/mqtt.md), `null` where the
/// topic or the network is none.
pub(super) fn error_payload(topic: Option<&str>, network: Option<&str>, reason: &str) -> Value {
    let time = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
    json!({"topic": topic, "network": network, "reason": reason, "time": time})
}

impl Publisher {
    /// Publishes a `bridge/error` payload, or holds it until the next connection.
    pub(super) async fn publish_error(&mut self, payload: Value) {
        if self.connected {
            self.publish_transient(&self.renderer.layout.bridge_error(), payload).await;
            return;
        }
        if self.held_errors.len() == HELD_ERRORS {
            self.held_errors.pop_front();
        }
        self.held_errors.push_back(payload);
    }

    /// Refuses a command the dispatcher never gets: logged and on `bridge/error` with the same
    /// keys as the dispatcher's own refusals (`network` is `null` when the topic names none).
    pub(super) async fn refuse(&mut self, topic: &str, network: Option<&str>, reason: &str) {
        tracing::warn!(%topic, reason, "command rejected");
        self.publish_error(error_payload(Some(topic), network, reason)).await;
    }

    pub(super) async fn publish_event(&mut self, network: &str, unit: u32, event: UnitEvent, at: DateTime<Utc>) {
        let Some(slug) = self
            .nets
            .get(network)
            .and_then(|mirror| mirror.unit_slugs.get(&unit).map(|s| (mirror.slug.clone(), s.to_string())))
        else {
            tracing::debug!(%network, unit, "event of an unknown unit");
            return;
        };
        let time = at.to_rfc3339_opts(SecondsFormat::Millis, true);
        let payload = match event {
            UnitEvent::Occupancy(v) => json!({"type": "occupancy", "value": v, "unit": unit, "time": time}),
            UnitEvent::Switch(controls) => json!({
                "type": "switch",
                "unit": unit,
                "controls": controls.iter().map(Control::to_value).collect::<Vec<_>>(),
                "time": time,
            }),
        };
        let topic = self.renderer.layout.unit_leaf(&slug.0, &slug.1, "event");
        self.publish_transient(&topic, payload).await;
    }

    /// Publishes a non-retained message (dropped while disconnected: it would be stale later).
    pub(super) async fn publish_transient(&self, topic: &str, payload: Value) {
        if !self.connected {
            tracing::debug!(%topic, "not connected; event dropped");
            return;
        }
        if self.client.publish(topic, payload.to_string(), false).await.is_err() {
            tracing::debug!(%topic, "event not sent: the MQTT client has stopped");
        }
    }
}
