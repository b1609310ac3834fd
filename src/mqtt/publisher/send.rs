//! Operations handed to the MQTT client: in batches, at the QoS their batch asks for, photos'
//! stand-ins swapped for their bytes.

use super::*;

impl Publisher {
    /// Sends `ops` when connected; while disconnected they are dropped (the store keeps the
    /// wanted state and the next connection republishes it).
    pub(super) async fn send(&mut self, ops: Vec<Op>, batch: Batch) {
        if !self.connected {
            return;
        }
        let qos = self.qos_of(batch);
        for op in ops {
            // The op's strings move into the client; the store keeps the topic's fingerprint and
            // the payload's print.
            let receipt = op.receipt();
            let sent = match op {
                Op::Publish { topic, payload, .. } if let Some(bytes) = self.photo_bytes(&payload) => {
                    self.client.publish_bytes_at(topic, bytes, true, qos).await
                }
                Op::Publish { topic, payload, previous, .. } => {
                    // HA needs a device config with a removed component cut down to its
                    // platform before the config without it. Only a replaced config has a
                    // `previous`, so a change of state alone asks nothing of the prefix.
                    if let Some(prev) = &previous
                        && let Some(prefix) = self.device_prefix()
                        && topic.starts_with(prefix.as_str())
                        && let Some(step) = discovery::removal_step(prev, &payload)
                    {
                        let _ = self.client.publish_at(topic.clone(), step, true, qos).await;
                    }
                    self.client.publish_at(topic, payload, true, qos).await
                }
                Op::Clear { topic } => self.client.publish_at(topic, "", true, qos).await,
            };
            if sent.is_err() {
                tracing::debug!("publish not sent: the MQTT client has stopped");
                return;
            }
            self.store.record(receipt);
        }
    }

    /// The PNG file a photo's stand-in payload names ([`crate::mqtt::photos`]).
    pub(super) fn photo_bytes(&self, payload: &str) -> Option<bytes::Bytes> {
        let photo = PhotoRef::parse(payload)?;
        self.nets.get(photo.network)?.photos.bytes(&photo)
    }

    /// The QoS `batch` is published at.
    pub(super) fn qos_of(&self, batch: Batch) -> u8 {
        match batch {
            Batch::Change => self.config.mqtt.qos,
            Batch::Snapshot => self.config.mqtt.snapshot_qos,
        }
    }
}

/// What a batch of operations is, which decides its QoS.
#[derive(Debug, Clone, Copy)]
pub(super) enum Batch {
    /// A change seen on the cloud (a unit, a network's status, the bridge's info): `mqtt.qos`,
    /// so subscribers that rely on QoS 1 or 2 for changes get them so.
    Change,
    /// Every topic of a network or of the whole site, sent again (start-up, reconnection, Home
    /// Assistant's birth, a network reloaded): `mqtt.snapshot_qos`.
    Snapshot,
}

/// Publications of every topic in `topics`.
pub(super) fn publications(topics: Topics) -> Vec<Op> {
    topics.into_iter().map(|(topic, payload)| Op::publish(topic, payload, None)).collect()
}
