//! The publisher's side of the broker connection: what it does once connected (subscribe,
//! republish), `<base>/bridge/info`, and the orderly goodbye.

use super::*;

impl Publisher {
    pub(super) async fn stop(&mut self) {
        let state = self.renderer.layout.bridge_state();
        let grace = self.tuning.shutdown_grace;
        let client = self.client.clone();
        let done = tokio::time::timeout(grace, async move {
            let _ = client.publish(state, "offline", true).await;
            let _ = client.disconnect().await;
        })
        .await;
        if done.is_err() {
            tracing::warn!("MQTT shutdown timed out");
        }
    }

    /// `<base>/bridge/info`.
    pub(super) fn info(&self) -> Value {
        let networks: Vec<Value> = self
            .nets
            .values()
            .map(|mirror| {
                json!({"id": mirror.view.status.id, "name": mirror.view.status.name, "slug": mirror.slug,
                       "connection": mirror.view.status.connection.as_str()})
            })
            .collect();
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "mqtt_protocol": self.client.protocol_name(),
            "networks": networks,
            "started_at": self.started_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        })
    }

    pub(super) async fn on_connected(&mut self) {
        let protocol = self.client.protocol_name().unwrap_or_default();
        tracing::info!(url = %crate::mqtt::broker_url::redact_url(&self.config.mqtt.url), protocol, "connected to the MQTT broker");
        self.connected = true;
        if let Some(spoken) = self.client.protocol() {
            // The scans speak what the broker took, without asking it again.
            self.sweeper.speak(spoken);
        }
        // The bridge's subscriptions are QoS 0 whatever `mqtt.qos` says. Its sessions are clean,
        // so a higher QoS would keep nothing across a reconnection, and every delivery would
        // cost an acknowledgement: a packet the broker never answers, behind which Nagle's
        // algorithm (on at QoS 1, `MqttSettings::nodelay`) holds the command's new state for a
        // delayed acknowledgement's time. Commands keep their retain flag (MQTT 5), so one
        // published retained is ignored at once, not only when it is replayed on the next
        // connection.
        if self.client.subscribe_with(&self.renderer.layout.command_filters(), 0, true).await.is_err() {
            tracing::warn!("could not subscribe to the command topics");
        }
        if self.config.homeassistant.enabled
            && self
                .client
                .subscribe_with(std::slice::from_ref(&self.config.homeassistant.status_topic), 0, false)
                .await
                .is_err()
        {
            tracing::warn!("could not subscribe to the Home Assistant status topic");
        }
        let ops = self.store.resync();
        self.send(ops, Batch::Snapshot).await;
        self.republish().await;
        self.sweeper.connected();
        while let Some(error) = self.held_errors.pop_front() {
            self.publish_transient(&self.renderer.layout.bridge_error(), error).await;
        }
    }

    /// Publishes every wanted topic again (a new connection, HA's birth): the bridge's, then
    /// network by network, [`OWNERS_PER_SEND`] owners at a time, each rendered from the mirror
    /// (the store keeps no payloads) and sent before the next are rendered.
    pub(super) async fn republish(&mut self) {
        let bridge = self.renderer.bridge(&self.info());
        self.send(publications(bridge), Batch::Snapshot).await;
        let ids: Vec<String> = self.nets.keys().cloned().collect();
        for id in ids {
            let Some(owners) = self.nets.get(&id).map(NetMirror::owners) else { continue };
            let mut owed = Vec::new();
            for chunk in owners.chunks(OWNERS_PER_SEND) {
                let Some(mirror) = self.nets.get(&id) else { break };
                let ops = plan::publications_owing(&self.renderer, mirror, chunk, &mut owed);
                self.send(ops, Batch::Snapshot).await;
            }
            if let Some(mirror) = self.nets.get(&id) {
                self.owed.push(&mirror.key, &owed);
            }
        }
    }
}
