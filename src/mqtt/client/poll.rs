//! The task that polls a connection's event loop and reports its [`ClientEvent`]s, and the
//! channel they go through: unbounded for the publishing connection (see the parent module),
//! bounded for a connection whose consumer sets the pace.

use super::answers::{describe_v3, describe_v5, v5_not_spoken};
use super::{ClientEvent, Message};
use std::time::Duration;
use tokio::sync::mpsc;

/// First and longest wait between reconnection attempts.
const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The polling task's end of the events channel.
pub(super) enum EventSender {
    /// Never waits.
    Unbounded(mpsc::UnboundedSender<ClientEvent>),
    /// Waits while the consumer is behind.
    Paced(mpsc::Sender<ClientEvent>),
}

impl EventSender {
    /// Sends `event`; false once the consumer is gone.
    async fn send(&self, event: ClientEvent) -> bool {
        match self {
            EventSender::Unbounded(tx) => tx.send(event).is_ok(),
            EventSender::Paced(tx) => tx.send(event).await.is_ok(),
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            EventSender::Unbounded(tx) => tx.is_closed(),
            EventSender::Paced(tx) => tx.is_closed(),
        }
    }
}

/// What a connection reports, in order ([`super::Client::start`]).
#[derive(Debug)]
pub enum Events {
    /// The publishing connection's.
    Unbounded(mpsc::UnboundedReceiver<ClientEvent>),
    /// A paced connection's ([`super::Client::start_paced`]).
    Paced(mpsc::Receiver<ClientEvent>),
}

impl Events {
    /// The next event; `None` once the polling task has ended. Cancel-safe.
    pub async fn recv(&mut self) -> Option<ClientEvent> {
        match self {
            Events::Unbounded(rx) => rx.recv().await,
            Events::Paced(rx) => rx.recv().await,
        }
    }
}

/// Backoff state of the polling task.
pub(super) struct Backoff {
    next: Duration,
    connected: bool,
}

impl Backoff {
    pub(super) fn new() -> Backoff {
        Backoff { next: BACKOFF_START, connected: false }
    }

    /// Whether the last connection attempt has not (yet) got its CONNACK: a failure now is the
    /// broker's answer to the CONNECT, not the loss of a working connection.
    pub(super) fn connecting(&self) -> bool {
        !self.connected
    }

    /// A CONNACK at protocol `level` (4 = 3.1.1, 5 = MQTT 5).
    pub(super) async fn connected(&mut self, level: i64, tx: &EventSender) -> bool {
        self.next = BACKOFF_START;
        self.connected = true;
        crate::metrics::metrics().mqtt_protocol.set(level);
        crate::metrics::metrics().mqtt_connected.set(1);
        tx.send(ClientEvent::Connected).await
    }

    /// Reports the loss once, then waits before the next attempt.
    pub(super) async fn failed(&mut self, error: String, tx: &EventSender) -> bool {
        if std::mem::replace(&mut self.connected, false) {
            tracing::warn!(%error, "MQTT connection lost; reconnecting");
            crate::metrics::metrics().mqtt_connected.set(0);
            crate::metrics::metrics().reconnect("mqtt");
            if !tx.send(ClientEvent::Disconnected).await {
                return false;
            }
        } else {
            tracing::warn!(%error, retry_in = ?self.next, "MQTT connection failed");
        }
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        !tx.is_closed()
    }
}

/// Whether an incoming message is too big to take; logs it once when so. MQTT 3.1.1 has no
/// way to tell the broker the largest packet the client takes, so the MQTT 3.1.1 event loop
/// reads packets of any size (a refused one would drop the connection, and a retained one would
/// come back with every reconnection) and the oversized ones end here.
fn oversized(topic: &str, size: usize) -> bool {
    if size <= super::MAX_PACKET {
        return false;
    }
    let topic: String = topic.chars().take(120).collect();
    tracing::warn!(topic, bytes = size, limit = super::MAX_PACKET, "an MQTT message too big to take; dropped");
    true
}

/// Polls an MQTT 3.1.1 event loop until the client disconnects or the consumer is gone.
pub(super) async fn poll_v3(mut eventloop: rumqttc::EventLoop, tx: EventSender, mut backoff: Backoff) {
    use rumqttc::{Event, Outgoing, Packet};
    loop {
        let keep_going = match eventloop.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(_))) => backoff.connected(4, &tx).await,
            Ok(Event::Incoming(Packet::Publish(p))) if oversized(&p.topic, p.topic.len() + p.payload.len()) => true,
            Ok(Event::Incoming(Packet::Publish(p))) => {
                tx.send(ClientEvent::Message(Message { topic: p.topic, payload: p.payload.to_vec(), retain: p.retain }))
                    .await
            }
            Ok(Event::Outgoing(Outgoing::Disconnect)) => false,
            Ok(_) => true,
            Err(rumqttc::ConnectionError::RequestsDone) => false,
            Err(e) => backoff.failed(describe_v3(&e), &tx).await,
        };
        if !keep_going {
            break;
        }
    }
    tracing::debug!("MQTT event loop ended");
}

/// Polls an MQTT 5 event loop until the client disconnects or the consumer is gone.
pub(super) async fn poll_v5(mut eventloop: rumqttc::v5::EventLoop, tx: EventSender, mut backoff: Backoff) {
    use rumqttc::Outgoing;
    use rumqttc::v5::Event;
    use rumqttc::v5::mqttbytes::v5::Packet;
    loop {
        let keep_going = match eventloop.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(_))) => backoff.connected(5, &tx).await,
            Ok(Event::Incoming(Packet::Publish(p))) => match String::from_utf8(p.topic.to_vec()) {
                Ok(topic) => {
                    tx.send(ClientEvent::Message(Message { topic, payload: p.payload.to_vec(), retain: p.retain }))
                        .await
                }
                Err(_) => true,
            },
            Ok(Event::Incoming(Packet::Disconnect(d))) => {
                tracing::warn!(reason = ?d.reason_code, "the broker closed the MQTT session");
                true
            }
            Ok(Event::Outgoing(Outgoing::Disconnect)) => false,
            Ok(_) => true,
            Err(rumqttc::v5::ConnectionError::RequestsDone) => false,
            Err(e) if backoff.connecting() => {
                // A broker that does not speak MQTT 5 often just hangs up: say what would help.
                let error = match v5_not_spoken(&e) {
                    Some(answer) => format!(
                        "{answer}: the broker may not speak MQTT 5 (mqtt.protocol: v5); \
                         mqtt.protocol: auto or v3 tries MQTT 3.1.1"
                    ),
                    None => describe_v5(&e),
                };
                backoff.failed(error, &tx).await
            }
            Err(e) => backoff.failed(describe_v5(&e), &tx).await,
        };
        if !keep_going {
            break;
        }
    }
    tracing::debug!("MQTT event loop ended");
}
