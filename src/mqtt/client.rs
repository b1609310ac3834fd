//! The MQTT connection: one client over rumqttc, MQTT 5 or 3.1.1 (or whichever the broker
//! speaks, [`auto`]), plain or TLS.
//!
//! rumqttc only makes progress while its event loop is polled, so the loop runs in its own task
//! and reports what matters as [`ClientEvent`]s on an unbounded channel (bounded would let a busy
//! consumer stall the loop, and with it the very publications the consumer is waiting on).
//! rumqttc reconnects when polled after an error but does not wait, so the task backs off
//! (1 s doubling to 30 s). With a clean session nothing survives a reconnect, which is why every
//! [`ClientEvent::Connected`] means "subscribe and publish everything again" to the consumer.

use super::broker_url::{broker_address, redact_url};
use super::settings::{MqttSettings, Protocol};
use std::time::Duration;
use tls::trusted_pem;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

mod answers;
mod auto;
mod poll;
mod tls;
pub use poll::Events;
use poll::{Backoff, EventSender, poll_v3, poll_v5};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Largest packet sent or accepted: retained discovery payloads of other integrations can be
/// well above rumqttc's 10 KiB default, and a larger incoming packet would drop the connection.
/// A photo (docs/mqtt.md, "Photos") is up to 4 MiB, and the start-up clean-up reads the photos
/// retained under the base topic too; the rest is room for the topic and the packet's header.
const MAX_PACKET: usize = crate::bridge::photos::MAX_PHOTO_BYTES + 64 * 1024;
/// Largest packet the MQTT 3.1.1 event loop reads: any the protocol allows (a remaining length of
/// 256 MiB and its 5-byte header), so that none drops the connection; messages over
/// [`MAX_PACKET`] are dropped after reading (`poll::oversized`). MQTT 5 tells the broker
/// [`MAX_PACKET`] in its CONNECT, and the broker sends nothing larger.
const V3_MAX_INCOMING: usize = 268_435_455 + 5;
/// Requests queued towards the event loop before `publish` waits. Each holds its topic and
/// payload: at a big site's start-up the queue is always full, so a longer one only holds more
/// memory, for no throughput (the publisher and the event loop share one thread).
const REQUEST_CAPACITY: usize = 128;
/// The MQTT 3.1.1 window is rumqttc's default (its slots are allocated up front too).
const V3_INFLIGHT: u16 = 100;
/// The window of a connection that publishes nothing retained (the start-up scan).
pub const QUIET_INFLIGHT: u16 = 16;
/// Keep-alive interval.
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// Errors of the MQTT connection.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The broker URL cannot be used.
    #[error("mqtt.url: {0}")]
    Url(String),
    /// TLS could not be set up (no CA certificates found, unreadable CA file).
    #[error("TLS: {0}")]
    Tls(String),
    /// The event loop is gone (the client was shut down).
    #[error("the MQTT event loop has stopped")]
    Closed,
}

/// A message received on a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Topic.
    pub topic: String,
    /// Payload bytes.
    pub payload: Vec<u8>,
    /// The broker sent it from its retained store (it may be old).
    pub retain: bool,
}

/// What the connection reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    /// A `ConnAck` arrived: subscriptions and retained state must be sent again.
    Connected,
    /// The connection was lost (the task keeps trying to reconnect).
    Disconnected,
    /// A message arrived.
    Message(Message),
}

/// The last will: what the broker publishes when the connection is lost.
#[derive(Debug, Clone)]
pub struct Will {
    /// Topic.
    pub topic: String,
    /// Payload.
    pub payload: String,
}

/// A handle to publish and subscribe; cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Inner,
    qos: u8,
    /// Stops the event loop when the last handle goes: rumqttc's loop holds a sender of its
    /// own, so it would otherwise poll (and keep the connection) forever.
    _guard: std::sync::Arc<LoopGuard>,
}

/// Aborts the event-loop task on drop.
struct LoopGuard(tokio::task::AbortHandle);

impl Drop for LoopGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Clone)]
enum Inner {
    V3(rumqttc::AsyncClient),
    V5(rumqttc::v5::AsyncClient),
    /// `mqtt.protocol: auto`: both handles, and the version the polling task settled on
    /// ([`Spoken`]). Requests go to the MQTT 5 handle until 3.1.1 is chosen; nothing is sent
    /// before the first CONNACK anyway (the publisher waits for [`ClientEvent::Connected`]).
    Auto {
        v5: rumqttc::v5::AsyncClient,
        v3: rumqttc::AsyncClient,
        spoken: Arc<AtomicU8>,
    },
}

/// The version an `auto` connection settled on, as kept in its `AtomicU8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Spoken {
    Unknown = 0,
    V5 = 5,
    V311 = 3,
}

impl Spoken {
    fn load(cell: &AtomicU8) -> Spoken {
        match cell.load(Ordering::Acquire) {
            5 => Spoken::V5,
            3 => Spoken::V311,
            _ => Spoken::Unknown,
        }
    }
}

/// The handle requests go to now.
enum Conn<'a> {
    V3(&'a rumqttc::AsyncClient),
    V5(&'a rumqttc::v5::AsyncClient),
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("protocol", &self.protocol_name()).field("qos", &self.qos).finish()
    }
}

/// Socket options: `TCP_NODELAY` as [`MqttSettings::nodelay`] says (off at QoS 1 and 2, where
/// Nagle's algorithm gathers the packets rumqttc writes one by one; on at QoS 0).
fn network_options(nodelay: bool) -> rumqttc::NetworkOptions {
    let mut n = rumqttc::NetworkOptions::new();
    n.set_tcp_nodelay(nodelay);
    n
}

fn qos3(q: u8) -> rumqttc::QoS {
    match q {
        0 => rumqttc::QoS::AtMostOnce,
        1 => rumqttc::QoS::AtLeastOnce,
        _ => rumqttc::QoS::ExactlyOnce,
    }
}

fn qos5(q: u8) -> rumqttc::v5::mqttbytes::QoS {
    use rumqttc::v5::mqttbytes::QoS;
    match q {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        _ => QoS::ExactlyOnce,
    }
}

/// What both protocol versions' options are made of.
struct Spec<'a> {
    client_id: &'a str,
    host: String,
    port: u16,
    transport: Option<rumqttc::Transport>,
    user: Option<(String, String)>,
    will: Option<Will>,
    qos: u8,
    inflight: u16,
    nodelay: bool,
}

impl Spec<'_> {
    /// An MQTT 3.1.1 client and its event loop. The loop reports no delivery events (a publish
    /// written, its acknowledgement): the polling task ignores them, and each would cost it a poll.
    fn v3(&self) -> (rumqttc::AsyncClient, rumqttc::EventLoop) {
        let mut o = rumqttc::MqttOptions::new(self.client_id, self.host.clone(), self.port);
        o.set_keep_alive(KEEP_ALIVE)
            .set_max_packet_size(V3_MAX_INCOMING, MAX_PACKET)
            .set_clean_session(true)
            .set_inflight(self.inflight.min(V3_INFLIGHT));
        if let Some(t) = &self.transport {
            o.set_transport(t.clone());
        }
        if let Some((u, p)) = &self.user {
            o.set_credentials(u.clone(), p.clone());
        }
        if let Some(w) = &self.will {
            o.set_last_will(rumqttc::LastWill::new(w.topic.clone(), w.payload.clone(), qos3(self.qos), true));
        }
        let (client, mut eventloop) = rumqttc::AsyncClient::new(o, REQUEST_CAPACITY);
        eventloop.set_network_options(network_options(self.nodelay));
        eventloop.state.delivery_events = false;
        (client, eventloop)
    }

    /// An MQTT 5 client and its event loop, reporting no delivery events (as [`Spec::v3`]).
    fn v5(&self) -> (rumqttc::v5::AsyncClient, rumqttc::v5::EventLoop) {
        let mut o = rumqttc::v5::MqttOptions::new(self.client_id, self.host.clone(), self.port);
        o.set_keep_alive(KEEP_ALIVE)
            .set_max_packet_size(Some(MAX_PACKET as u32))
            .set_clean_start(true)
            .set_outgoing_inflight_upper_limit(self.inflight);
        if let Some(t) = &self.transport {
            o.set_transport(t.clone());
        }
        if let Some((u, p)) = &self.user {
            o.set_credentials(u.clone(), p.clone());
        }
        if let Some(w) = &self.will {
            o.set_last_will(rumqttc::v5::mqttbytes::v5::LastWill::new(
                w.topic.clone(),
                w.payload.clone(),
                qos5(self.qos),
                true,
                None,
            ));
        }
        o.set_network_options(network_options(self.nodelay));
        let (client, mut eventloop) = rumqttc::v5::AsyncClient::new(o, REQUEST_CAPACITY);
        eventloop.state.delivery_events = false;
        (client, eventloop)
    }
}

impl Client {
    /// Connects (in the background) with `client_id`, the last will `will` (retained), and
    /// returns the handle, the event stream and the event-loop task. The task ends after
    /// [`Client::disconnect`], and is aborted when every handle is dropped.
    pub fn start(
        settings: &MqttSettings,
        client_id: &str,
        will: Option<Will>,
        inflight: u16,
    ) -> Result<(Client, Events, JoinHandle<()>), ClientError> {
        let (tx, rx) = mpsc::unbounded_channel();
        Client::start_with(settings, client_id, will, inflight, EventSender::Unbounded(tx), Events::Unbounded(rx))
    }

    /// [`Client::start`] for a connection whose consumer paces it: at most `capacity` events
    /// wait for the consumer, then the event loop waits too (and the broker with it). For a
    /// connection that only receives, such as a scan of a big retained store.
    pub fn start_paced(
        settings: &MqttSettings,
        client_id: &str,
        inflight: u16,
        capacity: usize,
    ) -> Result<(Client, Events, JoinHandle<()>), ClientError> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        Client::start_with(settings, client_id, None, inflight, EventSender::Paced(tx), Events::Paced(rx))
    }

    fn start_with(
        settings: &MqttSettings,
        client_id: &str,
        will: Option<Will>,
        inflight: u16,
        tx: EventSender,
        rx: Events,
    ) -> Result<(Client, Events, JoinHandle<()>), ClientError> {
        let (host, port, tls) = broker_address(&settings.url)
            .ok_or_else(|| ClientError::Url(format!("cannot use {:?}", redact_url(&settings.url))))?;
        let transport = if tls {
            let ca = trusted_pem(settings.ca_file.as_deref())?;
            Some(rumqttc::Transport::tls(ca, None, None))
        } else {
            None
        };
        let qos = settings.qos.min(2);
        let user = settings.credentials();
        let spec = Spec { client_id, host, port, transport, user, will, qos, inflight, nodelay: settings.nodelay() };
        let (inner, task) = match settings.protocol {
            Protocol::V311 => {
                let (client, eventloop) = spec.v3();
                (Inner::V3(client), tokio::spawn(poll_v3(eventloop, tx, Backoff::new())))
            }
            Protocol::V5 => {
                let (client, eventloop) = spec.v5();
                (Inner::V5(client), tokio::spawn(poll_v5(eventloop, tx, Backoff::new())))
            }
            Protocol::Auto => {
                let (v5, v5_loop) = spec.v5();
                let (v3, v3_loop) = spec.v3();
                let spoken = Arc::new(AtomicU8::new(Spoken::Unknown as u8));
                let task = tokio::spawn(auto::poll(v5_loop, v3_loop, spoken.clone(), tx));
                (Inner::Auto { v5, v3, spoken }, task)
            }
        };
        let guard = Arc::new(LoopGuard(task.abort_handle()));
        Ok((Client { inner, qos, _guard: guard }, rx, task))
    }

    /// The handle requests go to now.
    fn conn(&self) -> Conn<'_> {
        match &self.inner {
            Inner::V3(c) => Conn::V3(c),
            Inner::V5(c) => Conn::V5(c),
            Inner::Auto { v5, v3, spoken } => match Spoken::load(spoken) {
                Spoken::V311 => Conn::V3(v3),
                Spoken::V5 | Spoken::Unknown => Conn::V5(v5),
            },
        }
    }

    /// The protocol version spoken: `V5` or `V311`; `None` while `auto` has not settled (before
    /// the broker's first answer).
    pub fn protocol(&self) -> Option<Protocol> {
        match &self.inner {
            Inner::V3(_) => Some(Protocol::V311),
            Inner::V5(_) => Some(Protocol::V5),
            Inner::Auto { spoken, .. } => match Spoken::load(spoken) {
                Spoken::V5 => Some(Protocol::V5),
                Spoken::V311 => Some(Protocol::V311),
                Spoken::Unknown => None,
            },
        }
    }

    /// [`Client::protocol`] as published in `<base>/bridge/info` (`mqtt_protocol`): `"5"` or
    /// `"3.1.1"`, the names of the MQTT specifications; `None` while unsettled.
    pub fn protocol_name(&self) -> Option<&'static str> {
        match self.protocol()? {
            Protocol::V5 => Some("5"),
            Protocol::V311 => Some("3.1.1"),
            Protocol::Auto => None,
        }
    }

    /// Publishes `payload` to `topic` at the configured QoS. Waits only while the request queue
    /// is full. Owned strings move into the request without a copy (a big site's start-up hands
    /// over every topic and payload it renders).
    pub async fn publish(
        &self,
        topic: impl Into<String>,
        payload: impl Into<String>,
        retain: bool,
    ) -> Result<(), ClientError> {
        self.publish_at(topic, payload, retain, self.qos).await
    }

    /// [`Client::publish`] at `qos` (0, 1 or 2; more is taken as 2) instead of the configured
    /// QoS: whole-network snapshots go at `mqtt.snapshot_qos`.
    pub async fn publish_at(
        &self,
        topic: impl Into<String>,
        payload: impl Into<String>,
        retain: bool,
        qos: u8,
    ) -> Result<(), ClientError> {
        let (topic, payload) = (topic.into(), payload.into().into_bytes());
        let ok = match self.conn() {
            Conn::V3(c) => c.publish(topic, qos3(qos), retain, payload).await.is_ok(),
            Conn::V5(c) => c.publish(topic, qos5(qos), retain, payload).await.is_ok(),
        };
        Self::published(ok)
    }

    /// [`Client::publish_at`] of a binary payload (a photo), shared rather than copied: a photo
    /// is published again after every reconnection.
    pub async fn publish_bytes_at(
        &self,
        topic: String,
        payload: bytes::Bytes,
        retain: bool,
        qos: u8,
    ) -> Result<(), ClientError> {
        let ok = match self.conn() {
            Conn::V3(c) => c.publish_bytes(topic, qos3(qos), retain, payload).await.is_ok(),
            Conn::V5(c) => c.publish_bytes(topic, qos5(qos), retain, payload).await.is_ok(),
        };
        Self::published(ok)
    }

    /// Counts a publication handed over, or says the client has stopped.
    fn published(ok: bool) -> Result<(), ClientError> {
        if ok {
            crate::metrics::metrics().messages_published.inc();
            Ok(())
        } else {
            Err(ClientError::Closed)
        }
    }

    /// Subscribes to `filters` at the configured QoS.
    pub async fn subscribe(&self, filters: &[String]) -> Result<(), ClientError> {
        self.subscribe_with(filters, self.qos, false).await
    }

    /// Subscribes to `filters` at QoS `qos`; with `retain_as_published` (MQTT 5 only) the broker
    /// keeps the retain flag of messages published while subscribed, so a live retained command
    /// can be told from a plain one. MQTT 3.1.1 clears the flag on live messages whatever is asked.
    pub async fn subscribe_with(
        &self,
        filters: &[String],
        qos: u8,
        retain_as_published: bool,
    ) -> Result<(), ClientError> {
        if filters.is_empty() {
            return Ok(());
        }
        let r = match self.conn() {
            Conn::V3(c) => c
                .subscribe_many(filters.iter().map(|f| rumqttc::SubscribeFilter::new(f.clone(), qos3(qos))))
                .await
                .is_ok(),
            Conn::V5(c) => c
                .subscribe_many(filters.iter().map(|f| {
                    let mut filter = rumqttc::v5::mqttbytes::v5::Filter::new(f.clone(), qos5(qos));
                    filter.preserve_retain = retain_as_published;
                    filter
                }))
                .await
                .is_ok(),
        };
        if r { Ok(()) } else { Err(ClientError::Closed) }
    }

    /// Ends the subscription to `filter`.
    pub async fn unsubscribe(&self, filter: &str) -> Result<(), ClientError> {
        let r = match self.conn() {
            Conn::V3(c) => c.unsubscribe(filter).await.is_ok(),
            Conn::V5(c) => c.unsubscribe(filter).await.is_ok(),
        };
        if r { Ok(()) } else { Err(ClientError::Closed) }
    }

    /// Sends a clean DISCONNECT (after everything queued before it); the event loop then ends.
    pub async fn disconnect(&self) -> Result<(), ClientError> {
        let r = match self.conn() {
            Conn::V3(c) => c.disconnect().await.is_ok(),
            Conn::V5(c) => c.disconnect().await.is_ok(),
        };
        if r { Ok(()) } else { Err(ClientError::Closed) }
    }
}
