//! A small MQTT test client over rumqttc, MQTT 3.1.1 or MQTT 5, for the broker conformance
//! tests (tests/broker_conformance.rs): every packet the broker sends arrives on a channel, acks
//! can be held back, and the connection can be cut without a DISCONNECT (the client "dies").
#![allow(dead_code)]

use rumqttc::v5::mqttbytes::v5 as p5;
use rumqttc::{QoS, v5};
use std::time::Duration;
use tokio::sync::mpsc;

/// The protocol version a probe speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V3,
    V5,
}

/// How a probe connects.
#[derive(Debug, Clone)]
pub struct Options {
    pub version: Version,
    /// Clean session (3.1.1) / clean start (5). With `false` on MQTT 5 the session lasts an hour
    /// after the connection ends (session expiry interval), as a 3.1.1 persistent session does.
    pub clean: bool,
    /// A last will: topic, payload, retained.
    pub will: Option<(String, String, bool)>,
    /// The test acks QoS 1 messages itself ([`Probe::ack`]); unacked ones stay in flight.
    pub manual_acks: bool,
    /// The largest packet the probe sends and accepts.
    pub max_packet: usize,
}

impl Options {
    pub fn new(version: Version) -> Options {
        Options { version, clean: true, will: None, manual_acks: false, max_packet: 4 << 20 }
    }
}

/// A message the broker delivered.
#[derive(Debug, Clone)]
pub struct Msg {
    pub topic: String,
    pub payload: Vec<u8>,
    pub retain: bool,
    pub dup: bool,
    pub qos: u8,
    /// The packet as received, for [`Probe::ack`] (boxed: an MQTT 5 PUBLISH is large).
    raw: Box<Raw>,
}

#[derive(Debug, Clone)]
enum Raw {
    V3(rumqttc::Publish),
    V5(p5::Publish),
}

impl Msg {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }
}

/// What the broker sent, or how the connection ended.
#[derive(Debug, Clone)]
pub enum Ev {
    ConnAck {
        session_present: bool,
        refused: Option<String>,
    },
    SubAck {
        granted: Vec<Option<u8>>,
    },
    PubAck {
        reason: Option<String>,
    },
    Publish(Msg),
    /// The broker's DISCONNECT (MQTT 5), with its reason.
    Disconnect(String),
    /// The connection ended: rumqttc's error.
    Closed(String),
}

enum Handle {
    V3(rumqttc::AsyncClient),
    V5(v5::AsyncClient),
}

/// One client connection; the event loop runs in a task until the connection ends.
pub struct Probe {
    handle: Handle,
    events: mpsc::UnboundedReceiver<Ev>,
    /// Messages that arrived while waiting for an acknowledgement, handed out first.
    early: std::collections::VecDeque<Msg>,
    task: tokio::task::JoinHandle<()>,
    pub id: String,
}

fn qos(q: u8) -> QoS {
    match q {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        _ => QoS::ExactlyOnce,
    }
}

fn qos5(q: u8) -> v5::mqttbytes::QoS {
    match q {
        0 => v5::mqttbytes::QoS::AtMostOnce,
        1 => v5::mqttbytes::QoS::AtLeastOnce,
        _ => v5::mqttbytes::QoS::ExactlyOnce,
    }
}

impl Probe {
    /// Connects `id` to the broker on `port` and returns once the broker has answered the
    /// CONNECT (or the connection ended): that answer is the first event.
    pub async fn connect(port: u16, id: &str, o: &Options) -> (Probe, Ev) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (handle, task) = match o.version {
            Version::V3 => {
                let mut m = rumqttc::MqttOptions::new(id, "127.0.0.1", port);
                m.set_clean_session(o.clean).set_manual_acks(o.manual_acks).set_keep_alive(Duration::from_secs(30));
                m.set_max_packet_size(o.max_packet, o.max_packet);
                if let Some((topic, payload, retain)) = &o.will {
                    m.set_last_will(rumqttc::LastWill::new(topic, payload.as_bytes(), QoS::AtLeastOnce, *retain));
                }
                let (client, el) = rumqttc::AsyncClient::new(m, 64);
                (Handle::V3(client), tokio::spawn(forward(el, v3_event, tx)))
            }
            Version::V5 => {
                let mut m = v5::MqttOptions::new(id, "127.0.0.1", port);
                m.set_clean_start(o.clean).set_manual_acks(o.manual_acks).set_keep_alive(Duration::from_secs(30));
                m.set_max_packet_size(Some(o.max_packet as u32));
                if !o.clean {
                    m.set_session_expiry_interval(Some(3600));
                }
                if let Some((topic, payload, retain)) = &o.will {
                    let will = p5::LastWill::new(topic, payload.as_bytes(), qos5(1), *retain, None);
                    m.set_last_will(will);
                }
                let (client, el) = v5::AsyncClient::new(m, 64);
                (Handle::V5(client), tokio::spawn(forward(el, v5_event, tx)))
            }
        };
        let mut probe = Probe { handle, events: rx, early: Default::default(), task, id: id.to_string() };
        let first = probe.next(Duration::from_secs(15)).await.unwrap_or(Ev::Closed("no CONNACK within 15 s".into()));
        (probe, first)
    }

    /// Connects and panics unless the broker accepted the connection; returns the CONNACK's
    /// session-present flag.
    pub async fn accepted(port: u16, id: &str, o: &Options) -> (Probe, bool) {
        match Probe::connect(port, id, o).await {
            (probe, Ev::ConnAck { session_present, refused: None }) => (probe, session_present),
            (_, other) => panic!("{id}: the broker did not accept the connection: {other:?}"),
        }
    }

    /// The next event within `max`.
    pub async fn next(&mut self, max: Duration) -> Option<Ev> {
        tokio::time::timeout(max, self.events.recv()).await.ok().flatten()
    }

    /// The next delivered message within `max`, other events skipped (a closed connection
    /// ends the wait).
    pub async fn message(&mut self, max: Duration) -> Option<Msg> {
        if let Some(m) = self.early.pop_front() {
            return Some(m);
        }
        let deadline = tokio::time::Instant::now() + max;
        loop {
            match self.next(deadline.saturating_duration_since(tokio::time::Instant::now())).await? {
                Ev::Publish(m) => return Some(m),
                Ev::Closed(_) => return None,
                _ => {}
            }
        }
    }

    /// Every message delivered until one on `marker` arrives (returned last), within `max`.
    pub async fn until(&mut self, marker: &str, max: Duration) -> Vec<Msg> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + max;
        while let Some(m) = self.message(deadline.saturating_duration_since(tokio::time::Instant::now())).await {
            let done = m.topic == marker;
            seen.push(m);
            if done {
                return seen;
            }
        }
        panic!("{}: no message on {marker} within {max:?}; seen {:?}", self.id, topics(&seen));
    }

    /// Subscribes and waits for the SUBACK; returns the granted QoS (None: refused).
    pub async fn subscribe(&mut self, filter: &str, q: u8) -> Option<u8> {
        self.subscribe_with(filter, q, false, 0).await
    }

    /// Subscribes with MQTT 5 options (retain as published, retain handling; ignored on 3.1.1)
    /// and waits for the SUBACK.
    pub async fn subscribe_with(&mut self, filter: &str, q: u8, rap: bool, handling: u8) -> Option<u8> {
        let queued = match &self.handle {
            Handle::V3(c) => c.subscribe(filter, qos(q)).await.map_err(|e| e.to_string()),
            Handle::V5(c) => {
                let mut f = p5::Filter::new(filter, qos5(q));
                f.preserve_retain = rap;
                f.retain_forward_rule = match handling {
                    0 => p5::RetainForwardRule::OnEverySubscribe,
                    1 => p5::RetainForwardRule::OnNewSubscribe,
                    _ => p5::RetainForwardRule::Never,
                };
                c.subscribe_many([f]).await.map_err(|e| e.to_string())
            }
        };
        queued.unwrap_or_else(|e| panic!("{}: subscribe to {filter} not queued: {e}", self.id));
        loop {
            match self.next(Duration::from_secs(10)).await {
                Some(Ev::SubAck { granted }) => return granted.first().copied().flatten(),
                Some(Ev::Publish(m)) => self.early.push_back(m),
                Some(Ev::Closed(e)) => panic!("{}: connection closed while subscribing to {filter}: {e}", self.id),
                Some(_) => {}
                None => panic!("{}: no SUBACK for {filter} within 10 s", self.id),
            }
        }
    }

    /// Subscribes to a filter the broker must refuse; returns how it did (a SUBACK failure or
    /// the connection closed) and panics on a grant.
    pub async fn subscribe_refused(&mut self, filter: &str) -> String {
        let queued = match &self.handle {
            Handle::V3(c) => c.subscribe(filter, QoS::AtLeastOnce).await.map_err(|e| e.to_string()),
            Handle::V5(c) => c.subscribe(filter, qos5(1)).await.map_err(|e| e.to_string()),
        };
        queued.unwrap_or_else(|e| panic!("{}: subscribe to {filter} not queued: {e}", self.id));
        loop {
            match self.next(Duration::from_secs(10)).await {
                Some(Ev::SubAck { granted }) if granted.first().copied().flatten().is_none() => {
                    return "SUBACK failure".into();
                }
                Some(Ev::Closed(e)) => return format!("connection closed ({e})"),
                Some(Ev::Disconnect(reason)) => return format!("DISCONNECT {reason}"),
                Some(Ev::SubAck { granted }) => panic!("{}: {filter} granted {granted:?}", self.id),
                Some(Ev::Publish(m)) => self.early.push_back(m),
                Some(_) => {}
                None => panic!("{}: no answer to a subscription to {filter} within 10 s", self.id),
            }
        }
    }

    /// Publishes (queued; QoS 1 completes in the background).
    pub async fn publish(&self, topic: &str, payload: impl Into<Vec<u8>>, q: u8, retain: bool) {
        let payload: Vec<u8> = payload.into();
        let queued = match &self.handle {
            Handle::V3(c) => c.publish(topic, qos(q), retain, payload).await.map_err(|e| e.to_string()),
            Handle::V5(c) => c.publish(topic, qos5(q), retain, payload).await.map_err(|e| e.to_string()),
        };
        queued.unwrap_or_else(|e| panic!("{}: publish to {topic} not queued: {e}", self.id));
    }

    /// Publishes at QoS 1 and waits for the broker's PUBACK (its reason code on MQTT 5).
    pub async fn publish_acked(&mut self, topic: &str, payload: impl Into<Vec<u8>>, retain: bool) -> Ev {
        self.publish(topic, payload, 1, retain).await;
        loop {
            match self.next(Duration::from_secs(10)).await {
                Some(ack @ (Ev::PubAck { .. } | Ev::Closed(_) | Ev::Disconnect(_))) => return ack,
                Some(Ev::Publish(m)) => self.early.push_back(m),
                Some(_) => {}
                None => return Ev::Closed("no PUBACK within 10 s".into()),
            }
        }
    }

    /// Acks a QoS 1 message delivered to a probe with manual acks.
    pub async fn ack(&self, m: &Msg) {
        let sent = match (&self.handle, m.raw.as_ref()) {
            (Handle::V3(c), Raw::V3(p)) => c.ack(p).await.map_err(|e| e.to_string()),
            (Handle::V5(c), Raw::V5(p)) => c.ack(p).await.map_err(|e| e.to_string()),
            _ => Err("a message of another protocol".into()),
        };
        sent.unwrap_or_else(|e| panic!("{}: ack not queued: {e}", self.id));
    }

    /// Ends the session cleanly (DISCONNECT) and waits until the connection is closed.
    pub async fn disconnect(mut self) {
        let sent = match &self.handle {
            Handle::V3(c) => c.disconnect().await.map_err(|e| e.to_string()),
            Handle::V5(c) => c.disconnect().await.map_err(|e| e.to_string()),
        };
        sent.unwrap_or_else(|e| panic!("{}: disconnect not queued: {e}", self.id));
        while let Some(ev) = self.next(Duration::from_secs(10)).await {
            if matches!(ev, Ev::Closed(_)) {
                return;
            }
        }
        panic!("{}: the connection did not close within 10 s of DISCONNECT", self.id);
    }

    /// Cuts the connection without a DISCONNECT, as a crashed client or a lost network does.
    pub async fn die(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

impl Ev {
    /// A PUBACK that accepts the message: success, or on MQTT 5 "no matching subscribers"
    /// (which still stores a retained message).
    pub fn is_accepted(&self) -> bool {
        match self {
            Ev::PubAck { reason } => reason.as_deref().is_none_or(|r| r == "NoMatchingSubscribers"),
            _ => false,
        }
    }
}

/// The topics of `msgs`, for messages in assertions.
pub fn topics(msgs: &[Msg]) -> Vec<&str> {
    msgs.iter().map(|m| m.topic.as_str()).collect()
}

/// A connection's event loop, of either protocol.
trait EventLoop {
    type Event;
    fn next(&mut self) -> impl Future<Output = Result<Self::Event, String>> + Send;
}

impl EventLoop for rumqttc::EventLoop {
    type Event = rumqttc::Event;
    async fn next(&mut self) -> Result<rumqttc::Event, String> {
        self.poll().await.map_err(|e| e.to_string())
    }
}

impl EventLoop for v5::EventLoop {
    type Event = v5::Event;
    async fn next(&mut self) -> Result<v5::Event, String> {
        self.poll().await.map_err(|e| e.to_string())
    }
}

/// Polls a connection's event loop until it ends or nobody listens, handing on each event
/// `convert` makes something of, and the error that ended it as [`Ev::Closed`].
async fn forward<L: EventLoop>(mut el: L, convert: fn(L::Event) -> Option<Ev>, tx: mpsc::UnboundedSender<Ev>) {
    loop {
        let ev = match el.next().await {
            Ok(event) => match convert(event) {
                Some(ev) => ev,
                None => continue,
            },
            Err(e) => {
                let _ = tx.send(Ev::Closed(e));
                return;
            }
        };
        if tx.send(ev).is_err() {
            return;
        }
    }
}

/// What a test sees of an MQTT 3.1.1 event; `None` for those it does not look at.
fn v3_event(event: rumqttc::Event) -> Option<Ev> {
    use rumqttc::{ConnectReturnCode, Event, Packet};
    Some(match event {
        Event::Incoming(Packet::ConnAck(a)) => Ev::ConnAck {
            session_present: a.session_present,
            refused: (a.code != ConnectReturnCode::Success).then(|| format!("{:?}", a.code)),
        },
        Event::Incoming(Packet::SubAck(s)) => Ev::SubAck {
            granted: s
                .return_codes
                .iter()
                .map(|c| match c {
                    rumqttc::SubscribeReasonCode::Success(q) => Some(*q as u8),
                    rumqttc::SubscribeReasonCode::Failure => None,
                })
                .collect(),
        },
        Event::Incoming(Packet::PubAck(_)) => Ev::PubAck { reason: None },
        Event::Incoming(Packet::Publish(p)) => Ev::Publish(Msg {
            topic: p.topic.clone(),
            payload: p.payload.to_vec(),
            retain: p.retain,
            dup: p.dup,
            qos: p.qos as u8,
            raw: Box::new(Raw::V3(p)),
        }),
        _ => return None,
    })
}

/// What a test sees of an MQTT 5 event; `None` for those it does not look at.
fn v5_event(event: v5::Event) -> Option<Ev> {
    use v5::Event;
    Some(match event {
        Event::Incoming(p5::Packet::ConnAck(a)) => Ev::ConnAck {
            session_present: a.session_present,
            refused: (a.code != p5::ConnectReturnCode::Success).then(|| format!("{:?}", a.code)),
        },
        Event::Incoming(p5::Packet::SubAck(s)) => Ev::SubAck {
            granted: s
                .return_codes
                .iter()
                .map(|c| match c {
                    p5::SubscribeReasonCode::Success(q) => Some(*q as u8),
                    _ => None,
                })
                .collect(),
        },
        Event::Incoming(p5::Packet::PubAck(a)) => {
            Ev::PubAck { reason: (a.reason != p5::PubAckReason::Success).then(|| format!("{:?}", a.reason)) }
        }
        Event::Incoming(p5::Packet::Publish(p)) => Ev::Publish(Msg {
            topic: String::from_utf8_lossy(&p.topic).into_owned(),
            payload: p.payload.to_vec(),
            retain: p.retain,
            dup: p.dup,
            qos: p.qos as u8,
            raw: Box::new(Raw::V5(p)),
        }),
        Event::Incoming(p5::Packet::Disconnect(d)) => Ev::Disconnect(format!("{:?}", d.reason_code)),
        _ => return None,
    })
}
