//! mosquitto's own ceiling, measured in the same run as the phases: a plain publisher → the
//! subscriber, at the size of the bridge's unit JSON.

use super::Rig;
use super::support::cpu_time;
use std::time::{Duration, Instant};

/// One ceiling run.
pub struct Ceiling {
    pub sent: usize,
    pub rate: f64,
    pub lost: usize,
    pub cpu_us_per_message: f64,
    /// This process's CPU (the publisher and the subscriber) per message.
    pub harness_us_per_message: f64,
}

impl Ceiling {
    /// The share of one core the broker used at the ceiling's rate: near 1.0, the ceiling is
    /// mosquitto's single thread saturated, not the machine.
    pub fn broker_cores(&self) -> f64 {
        self.cpu_us_per_message * self.rate / 1e6
    }
}

/// mosquitto alone: a plain rumqttc publisher (MQTT 5, QoS 1, retained, as the bridge publishes)
/// sends `count` messages of `size` bytes as fast as it can to the subscriber.
pub async fn ceiling(rig: &Rig, count: usize, size: usize) -> anyhow::Result<Ceiling> {
    use rumqttc::v5::mqttbytes::QoS;
    use rumqttc::v5::{AsyncClient, Event, MqttOptions};
    let mut o = MqttOptions::new("bench-ceiling-publisher", "127.0.0.1", rig.broker.port);
    o.set_keep_alive(Duration::from_secs(30)).set_clean_start(true);
    let (client, mut eventloop) = AsyncClient::new(o, 1024);
    let (connected_tx, connected_rx) = tokio::sync::oneshot::channel();
    let poller = tokio::spawn(async move {
        let mut connected_tx = Some(connected_tx);
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(rumqttc::v5::mqttbytes::v5::Packet::ConnAck(_))) => {
                    if let Some(t) = connected_tx.take() {
                        let _ = t.send(());
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(10), connected_rx).await??;
    let from = rig.recorder.len();
    let (broker0, harness0) = (cpu_time(rig.broker.pid()), cpu_time(std::process::id()));
    let filler = "x".repeat(size.saturating_sub(40));
    let start = rig.recorder.base.elapsed();
    for i in 0..count {
        let payload = format!("{{\"seq\":{i:>10},\"pad\":\"{filler}\"}}");
        client.publish(format!("bench/ceiling/{}", i % 400), QoS::AtLeastOnce, true, payload).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut received = 0usize;
    let mut last = start;
    let mut scanned = from;
    while received < count && Instant::now() < deadline {
        scanned = rig.recorder.scan(scanned, |m| {
            if m.topic.starts_with("bench/ceiling/") {
                received += 1;
                last = m.at;
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (broker1, harness1) = (cpu_time(rig.broker.pid()), cpu_time(std::process::id()));
    let _ = client.disconnect().await;
    poller.abort();
    // Clear the retained test topics.
    let (clear, mut el) = AsyncClient::new(MqttOptions::new("bench-ceiling-clear", "127.0.0.1", rig.broker.port), 1024);
    let clearer = tokio::spawn(async move { while el.poll().await.is_ok() {} });
    for t in 0..400 {
        clear.publish(format!("bench/ceiling/{t}"), QoS::AtLeastOnce, true, Vec::<u8>::new()).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    clearer.abort();
    Ok(Ceiling {
        sent: count,
        rate: received as f64 / (last.saturating_sub(start)).as_secs_f64(),
        lost: count - received,
        cpu_us_per_message: broker1.saturating_sub(broker0).as_secs_f64() * 1e6 / count as f64,
        harness_us_per_message: harness1.saturating_sub(harness0).as_secs_f64() * 1e6 / count as f64,
    })
}
