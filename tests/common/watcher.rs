//! A test MQTT client that records what it receives, and the broker's retained set read with it.

use super::render_golden;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A payload as text: UTF-8 as it is, binary (a photo) as its kind and size, so that golden files
/// stay text.
pub fn payload_text(payload: &[u8]) -> String {
    match std::str::from_utf8(payload) {
        Ok(text) => text.to_string(),
        Err(_) if payload.starts_with(b"\x89PNG\r\n\x1a\n") => format!("<png, {} bytes>", payload.len()),
        Err(_) => format!("<binary, {} bytes>", payload.len()),
    }
}

/// A message seen by a [`Watcher`].
#[derive(Debug, Clone)]
pub struct Seen {
    pub topic: String,
    pub payload: String,
    pub retain: bool,
    /// The QoS it was delivered at (the watcher subscribes at QoS 1, so the lower of 1 and the
    /// publisher's).
    pub qos: u8,
}

/// A subscriber recording everything it receives.
pub struct Watcher {
    pub client: AsyncClient,
    rx: mpsc::UnboundedReceiver<Seen>,
    pub seen: Vec<Seen>,
}

static WATCHER_IDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Watcher {
    /// Connects to `port` and subscribes to `filter`; returns once subscribed.
    pub async fn start(port: u16, filter: &str) -> Watcher {
        let n = WATCHER_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut o = MqttOptions::new(format!("test-watch-{}-{n}", std::process::id()), "127.0.0.1", port);
        o.set_max_packet_size(8 << 20, 8 << 20);
        o.set_keep_alive(Duration::from_secs(30));
        let (client, mut el) = AsyncClient::new(o, 256);
        let (tx, rx) = mpsc::unbounded_channel();
        let (sub_tx, sub_rx) = tokio::sync::oneshot::channel();
        let filter_owned = filter.to_string();
        let c2 = client.clone();
        tokio::spawn(async move {
            let mut sub_tx = Some(sub_tx);
            loop {
                match el.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        let _ = c2.subscribe(filter_owned.clone(), QoS::AtLeastOnce).await;
                    }
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        if let Some(t) = sub_tx.take() {
                            let _ = t.send(());
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let seen = Seen {
                            topic: p.topic.clone(),
                            payload: payload_text(&p.payload),
                            retain: p.retain,
                            qos: p.qos as u8,
                        };
                        if tx.send(seen).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), sub_rx).await.expect("watcher subscribed").expect("suback");
        Watcher { client, rx, seen: Vec::new() }
    }

    /// Collects messages until none arrived for `quiet` (or `max` passed); returns the new ones.
    pub async fn settle(&mut self, quiet: Duration, max: Duration) -> Vec<Seen> {
        let deadline = tokio::time::Instant::now() + max;
        let mut new = Vec::new();
        loop {
            let wait = quiet.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
            match tokio::time::timeout(wait, self.rx.recv()).await {
                Ok(Some(s)) => new.push(s),
                _ => break,
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
        }
        self.seen.extend(new.iter().cloned());
        new
    }

    /// Waits until a message matching `f` arrives (panics after `max`).
    pub async fn wait_for(&mut self, max: Duration, f: impl Fn(&Seen) -> bool) -> Seen {
        let deadline = tokio::time::Instant::now() + max;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, self.rx.recv()).await {
                Ok(Some(s)) => {
                    self.seen.push(s.clone());
                    if f(&s) {
                        return s;
                    }
                }
                _ => panic!("expected message did not arrive within {max:?}"),
            }
        }
    }

    /// Publishes from the watcher's connection.
    pub async fn publish(&self, topic: &str, payload: &str, retain: bool) {
        self.client.publish(topic, QoS::AtLeastOnce, retain, payload.as_bytes().to_vec()).await.expect("publish");
    }
}

/// Every retained message on the broker (topic → payload), read by a fresh subscriber to `#`.
pub async fn retained(port: u16) -> BTreeMap<String, String> {
    let mut w = Watcher::start(port, "#").await;
    let seen = w.settle(Duration::from_millis(400), Duration::from_secs(10)).await;
    let _ = w.client.disconnect().await;
    seen.into_iter().filter(|s| s.retain).map(|s| (s.topic, s.payload)).collect()
}

/// Polls the broker's retained set until `f` holds (panics after `max` with the last set).
pub async fn retained_until(
    port: u16,
    max: Duration,
    f: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let deadline = Instant::now() + max;
    loop {
        let r = retained(port).await;
        if f(&r) {
            return r;
        }
        assert!(Instant::now() < deadline, "retained state never matched; last:\n{}", render_golden(&r));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
