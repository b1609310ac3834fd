//! `mqtt.protocol: auto`: MQTT 5 first, MQTT 3.1.1 when the broker turns an MQTT 5 CONNECT down
//! (docs/brokers.md, "Protocol").
//!
//! A broker that does not speak MQTT 5 either answers with a CONNACK refusing the version or,
//! more often (NATS, brokers of the 3.1.1 era), closes the connection before any CONNACK. Either
//! way the same connection attempt is made again in 3.1.1. The version is settled by the first
//! answer that is a CONNACK (accepting, or refusing for another reason such as the credentials):
//! from then on the connection keeps it, reconnections included. Failures that say nothing about
//! the protocol (nothing listening, a TLS failure, a timeout) leave it unsettled, and the next
//! attempt starts with MQTT 5 again.

use super::Spoken;
use super::answers::{describe_v3, describe_v5, v3_answer, v5_not_spoken};
use super::poll::{Backoff, EventSender, poll_v3, poll_v5};
use rumqttc::v5::ConnectionError as E5;
use rumqttc::{ConnectionError as E3, Outgoing};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Added when neither version got a CONNACK: the answers alone cannot say why.
const NEITHER_HINT: &str = "is mqtt.url an MQTT broker's, and is the broker able to serve? (a NATS server \
                            without JetStream closes MQTT connections like this; see the broker's log)";

/// The outcome of one MQTT 3.1.1 connection attempt.
async fn attempt_v3(eventloop: &mut rumqttc::EventLoop) -> Result<(), E3> {
    use rumqttc::{Event, Packet};
    loop {
        match eventloop.poll().await? {
            Event::Incoming(Packet::ConnAck(_)) => return Ok(()),
            Event::Outgoing(Outgoing::Disconnect) => return Err(E3::RequestsDone),
            _ => {}
        }
    }
}

/// Polls the MQTT 5 event loop, falling back to the 3.1.1 one as the module says, then goes on
/// as [`poll_v5`] or [`poll_v3`] with the version settled in `spoken`.
pub(super) async fn poll(
    mut v5: rumqttc::v5::EventLoop,
    mut v3: rumqttc::EventLoop,
    spoken: Arc<AtomicU8>,
    tx: EventSender,
) {
    use rumqttc::v5::Event;
    use rumqttc::v5::mqttbytes::v5::Packet;
    let settle = |version: Spoken| spoken.store(version as u8, Ordering::Release);
    let mut backoff = Backoff::new();
    loop {
        let error = match v5.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                settle(Spoken::V5);
                tracing::info!("the broker speaks MQTT 5 (mqtt.protocol: auto)");
                drop(v3);
                if backoff.connected(5, &tx).await {
                    poll_v5(v5, tx, backoff).await;
                }
                return;
            }
            Ok(Event::Outgoing(Outgoing::Disconnect)) | Err(E5::RequestsDone) => return,
            Ok(_) => continue,
            Err(e) => e,
        };
        let Some(answer_v5) = v5_not_spoken(&error) else {
            if matches!(error, E5::ConnectionRefused(_)) {
                // A CONNACK refusing for another reason (credentials, a banned client id): the
                // broker speaks MQTT 5, and the error is what the operator must fix.
                settle(Spoken::V5);
                drop(v3);
                if backoff.failed(describe_v5(&error), &tx).await {
                    poll_v5(v5, tx, backoff).await;
                }
                return;
            }
            if !backoff.failed(describe_v5(&error), &tx).await {
                return;
            }
            continue;
        };
        match attempt_v3(&mut v3).await {
            Ok(()) => {
                settle(Spoken::V311);
                tracing::info!(
                    mqtt5 = %answer_v5,
                    "the broker does not speak MQTT 5; connected with MQTT 3.1.1 (mqtt.protocol: auto)"
                );
                drop(v5);
                if backoff.connected(4, &tx).await {
                    poll_v3(v3, tx, backoff).await;
                }
                return;
            }
            Err(E3::RequestsDone) => return,
            Err(refused @ E3::ConnectionRefused(_)) => {
                // A 3.1.1 CONNACK: the broker speaks 3.1.1 and refuses for a reason of its own.
                settle(Spoken::V311);
                tracing::info!(mqtt5 = %answer_v5, "the broker does not speak MQTT 5; using MQTT 3.1.1");
                drop(v5);
                if backoff.failed(describe_v3(&refused), &tx).await {
                    poll_v3(v3, tx, backoff).await;
                }
                return;
            }
            Err(e) => {
                let error = format!(
                    "the broker speaks neither MQTT 5 nor MQTT 3.1.1: MQTT 5 CONNECT: {answer_v5}; \
                     MQTT 3.1.1 CONNECT: {}; {NEITHER_HINT}",
                    v3_answer(&e)
                );
                if !backoff.failed(error, &tx).await {
                    return;
                }
            }
        }
    }
}
