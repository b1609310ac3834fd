//! Broker conformance: what Home Assistant, Node-RED and the bridge rely on a broker for, checked
//! with a plain MQTT client against the demo's embedded broker (started in-process through
//! `broker::start`, as `demo` does), mosquitto and NATS's MQTT gateway, each started by the test
//! on free ports (docs/brokers.md has the table). Where a broker lacks a feature by design (NATS
//! speaks no MQTT 5) or differs (its payload limit, `$` filters), the test of that broker asserts
//! what it does instead; nothing is skipped.

mod common;
#[path = "common/nats.rs"]
mod nats_server;
#[path = "common/probe.rs"]
mod probe;

use common::Mosquitto;
use probe::{Ev, Msg, Options, Probe, Version, topics};
use std::time::Duration;

/// The packet limit the test's mosquitto is given: the embedded broker's, so both are checked
/// at the same size.
const MOSQUITTO_MAX_PACKET: usize = casambi2mqtt::broker::MAX_PACKET_SIZE;
/// `max_payload` of the test's NATS server (tests/common/nats.rs).
const NATS_MAX_PAYLOAD: usize = 1 << 20;
/// How long a check waits for something that must not come, after a marker that comes later.
const GRACE: Duration = Duration::from_millis(500);
const WAIT: Duration = Duration::from_secs(10);

/// How a broker bounds a PUBLISH.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// The largest remaining length (what follows the fixed header) of a packet it takes; a
    /// bigger one closes the connection.
    RemainingLength(usize),
    /// No limit of its own: a payload of this size is delivered.
    Unbounded { tried: usize },
}

/// How a broker sends again a QoS 1 message left unacked by a lost connection.
#[derive(Debug, Clone, Copy)]
struct Redelivery {
    /// At the latest this long after the client is back.
    within: Duration,
    /// With the DUP flag, as [MQTT-3.3.1-1] requires.
    dup: bool,
}

/// A broker under test, kept running while the value lives.
struct Target {
    name: &'static str,
    port: u16,
    /// It speaks MQTT 5 (NATS does not: it closes the connection of an MQTT 5 CONNECT).
    mqtt5: bool,
    limit: Limit,
    redelivery: Redelivery,
    /// MQTT 5 retain as published is honoured.
    retain_as_published: bool,
    /// `#` and `+/…` leave `$` topics out [MQTT-4.7.2-1].
    wildcards_skip_dollar: bool,
    /// It takes subscriptions to filters starting with `$` (rumqttd closes the connection of a
    /// client asking for one, `$share/…` aside).
    dollar_filters: bool,
    _broker: Box<dyn std::any::Any + Send>,
}

async fn embedded() -> Target {
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], nats_server::free_port()));
    let bound = casambi2mqtt::broker::start(listen).await.expect("the embedded broker starts");
    Target {
        name: "embedded",
        port: bound.port(),
        mqtt5: true,
        limit: Limit::RemainingLength(casambi2mqtt::broker::MAX_PACKET_SIZE),
        // rumqttd sends again what follows the oldest unacked message, read anew from its log.
        redelivery: Redelivery { within: WAIT, dup: false },
        retain_as_published: true,
        wildcards_skip_dollar: true,
        dollar_filters: false,
        _broker: Box::new(()),
    }
}

async fn mosquitto() -> Target {
    let broker = Mosquitto::start_with_max_packet_size(MOSQUITTO_MAX_PACKET);
    Target {
        name: "mosquitto",
        port: broker.port(),
        mqtt5: true,
        // mosquitto 2.0 compares `max_packet_size` with the remaining length plus one byte.
        limit: Limit::RemainingLength(MOSQUITTO_MAX_PACKET - 1),
        redelivery: Redelivery { within: WAIT, dup: true },
        retain_as_published: true,
        wildcards_skip_dollar: true,
        dollar_filters: true,
        _broker: Box::new(broker),
    }
}

async fn nats() -> Target {
    let broker = nats_server::Nats::start();
    nats_server::wait_mqtt_ready(broker.port(), Duration::from_secs(30)).await.unwrap_or_else(|e| panic!("{e}"));
    Target {
        name: "nats",
        port: broker.port(),
        mqtt5: false,
        // `max_payload` bounds NATS clients, not MQTT ones.
        limit: Limit::Unbounded { tried: 2 * NATS_MAX_PAYLOAD },
        // NATS sends an unacked message again once its `mqtt.ack_wait` (30 s) has passed, not
        // when the client comes back.
        redelivery: Redelivery { within: Duration::from_secs(40), dup: true },
        retain_as_published: false,
        wildcards_skip_dollar: false,
        dollar_filters: true,
        _broker: Box::new(broker),
    }
}

impl Target {
    /// A connected probe with a clean session.
    async fn probe(&self, id: &str, v: Version) -> Probe {
        self.probe_with(id, &Options::new(v)).await
    }

    async fn probe_with(&self, id: &str, o: &Options) -> Probe {
        Probe::accepted(self.port, id, o).await.0
    }

    /// For MQTT 5 checks: true when the broker speaks MQTT 5; otherwise asserts that it refuses
    /// an MQTT 5 client and says so, and the check ends there.
    async fn speaks_mqtt5(&self, check: &str) -> bool {
        if self.mqtt5 {
            return true;
        }
        let (_probe, answer) = Probe::connect(self.port, "mqtt5-probe", &Options::new(Version::V5)).await;
        assert!(matches!(answer, Ev::Closed(_)), "{}: an MQTT 5 CONNECT was answered: {answer:?}", self.name);
        println!("{}: no MQTT 5 (the CONNECT is closed unanswered: {answer:?}), so no {check}", self.name);
        false
    }
}

/// Publishes `marker` from `from` and returns what `to` received up to it and for [`GRACE`]
/// after, the marker left out. The marker goes at QoS 0: no PUBACK of it can be taken for that
/// of a later [`Probe::publish_acked`].
async fn seen_until_marker(from: &Probe, to: &mut Probe, marker: &str) -> Vec<Msg> {
    from.publish(marker, "marker", 0, false).await;
    seen_until(to, marker).await
}

/// What `to` received up to a message on `marker` and for [`GRACE`] after, the marker left out.
async fn seen_until(to: &mut Probe, marker: &str) -> Vec<Msg> {
    let mut seen = to.until(marker, WAIT).await;
    seen.pop();
    while let Some(m) = to.message(GRACE).await {
        seen.push(m);
    }
    seen
}

fn summary(msgs: &[Msg]) -> Vec<(String, String, bool)> {
    msgs.iter().map(|m| (m.topic.clone(), m.text(), m.retain)).collect()
}

fn owned(list: &[(&str, &str, bool)]) -> Vec<(String, String, bool)> {
    list.iter().map(|(t, p, r)| (t.to_string(), p.to_string(), *r)).collect()
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

/// Retained messages reach a new subscriber with the retain flag, and an existing one without it
/// [MQTT-3.3.1-9]; an empty retained payload clears the topic's retained message.
async fn retained_delivered_and_cleared(t: &Target, v: Version) {
    let mut p = t.probe("ret-pub", v).await;
    for (topic, payload) in [("ret/a", "1"), ("ret/b", "2")] {
        assert!(p.publish_acked(topic, payload, true).await.is_accepted(), "{}", t.name);
    }
    let mut s = t.probe("ret-sub", v).await;
    s.subscribe("ret/#", 1).await;
    let mut got = summary(&seen_until_marker(&p, &mut s, "ret/marker").await);
    got.sort();
    assert_eq!(got, owned(&[("ret/a", "1", true), ("ret/b", "2", true)]), "{}", t.name);
    assert!(p.publish_acked("ret/c", "3", true).await.is_accepted(), "{}", t.name);
    let got = summary(&seen_until_marker(&p, &mut s, "ret/marker").await);
    assert_eq!(got, owned(&[("ret/c", "3", false)]), "{}: live to an existing subscription", t.name);
    assert!(p.publish_acked("ret/a", "", true).await.is_accepted(), "{}", t.name);
    let mut late = t.probe("ret-late", v).await;
    late.subscribe("ret/#", 1).await;
    let mut got = summary(&seen_until_marker(&p, &mut late, "ret/marker").await);
    got.sort();
    assert_eq!(got, owned(&[("ret/b", "2", true), ("ret/c", "3", true)]), "{}: ret/a cleared", t.name);
}

/// A SUBSCRIBE to a filter the client already holds sends its retained messages again
/// ([MQTT-3.8.4-3]; MQTT 5 retain handling 0), as Home Assistant needs for availability topics
/// that several entities share. On MQTT 5, retain handling 1 sends them only for a new
/// subscription, and 2 never.
async fn retained_resent_on_identical_resubscribe(t: &Target, v: Version) {
    let mut p = t.probe("resub-pub", v).await;
    assert!(p.publish_acked("resub/dev/availability", "online", true).await.is_accepted(), "{}", t.name);
    let mut s = t.probe("resub-sub", v).await;
    for round in 1..=3 {
        s.subscribe("resub/+/availability", 1).await;
        let got = summary(&seen_until_marker(&p, &mut s, "resub/marker/availability").await);
        let want = owned(&[("resub/dev/availability", "online", true)]);
        assert_eq!(got, want, "{}: subscribe number {round} of the same filter", t.name);
    }
    if v == Version::V5 {
        s.subscribe_with("resub/+/availability", 1, false, 1).await;
        let got = seen_until_marker(&p, &mut s, "resub/marker/availability").await;
        assert!(got.is_empty(), "{}: retain handling 1 on a held filter sent {:?}", t.name, topics(&got));
        let mut fresh = t.probe("resub-fresh", v).await;
        fresh.subscribe_with("resub/+/availability", 1, false, 1).await;
        let got = summary(&seen_until_marker(&p, &mut fresh, "resub/marker/availability").await);
        assert_eq!(got, owned(&[("resub/dev/availability", "online", true)]), "{}: handling 1, new", t.name);
        let mut never = t.probe("resub-never", v).await;
        never.subscribe_with("resub/+/availability", 1, false, 2).await;
        let got = seen_until_marker(&p, &mut never, "resub/marker/availability").await;
        assert!(got.is_empty(), "{}: retain handling 2 sent {:?}", t.name, topics(&got));
    }
}

/// MQTT 5 retain as published: a subscriber asking for it sees a live retained message with the
/// retain flag; one not asking sees it cleared (Node-RED's MQTT 5 "retain as published").
async fn retain_as_published(t: &Target) {
    if !t.speaks_mqtt5("retain as published").await {
        return;
    }
    let (mut rap, mut plain) = (t.probe("rap-on", Version::V5).await, t.probe("rap-off", Version::V5).await);
    rap.subscribe_with("rap/t", 1, true, 0).await;
    plain.subscribe_with("rap/t", 1, false, 0).await;
    let p = t.probe("rap-pub", Version::V5).await;
    p.publish("rap/t", "live", 1, true).await;
    let (a, b) = (rap.message(WAIT).await, plain.message(WAIT).await);
    let (a, b) = (a.expect("delivered to rap-on"), b.expect("delivered to rap-off"));
    println!("{}: retain flag with retain-as-published {}, without {}", t.name, a.retain, b.retain);
    assert_eq!(a.retain, t.retain_as_published, "{}: the flag with retain as published", t.name);
    assert!(!b.retain, "{}: without retain as published the flag is cleared", t.name);
}

/// A client's will is published when its connection is lost, not when it disconnects.
async fn will_on_lost_connection_only(t: &Target) {
    let v = Version::V3;
    let mut watcher = t.probe("will-watch", v).await;
    watcher.subscribe("will/#", 1).await;
    let will = |topic: &str| Options { will: Some((topic.into(), "offline".into(), false)), ..Options::new(v) };
    let lost = t.probe_with("will-lost", &will("will/lost")).await;
    lost.die().await;
    let m = watcher.message(WAIT).await.unwrap_or_else(|| panic!("{}: no will after a lost connection", t.name));
    assert_eq!((m.topic.as_str(), m.text().as_str()), ("will/lost", "offline"), "{}", t.name);
    let clean = t.probe_with("will-clean", &will("will/clean")).await;
    clean.disconnect().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let p = t.probe("will-pub", v).await;
    let got = seen_until_marker(&p, &mut watcher, "will/marker").await;
    assert!(got.is_empty(), "{}: a clean DISCONNECT published {:?}", t.name, topics(&got));
}

/// A QoS 1 message delivered but not acked when the connection was lost is sent again, with the
/// DUP flag, when the client comes back to its persistent session.
async fn qos1_redelivered_after_reconnect(t: &Target) {
    let o = Options { clean: false, manual_acks: true, ..Options::new(Version::V3) };
    let mut s = t.probe_with("redeliver", &o).await;
    s.subscribe("redeliver/t", 1).await;
    let mut p = t.probe("redeliver-pub", Version::V3).await;
    p.publish_acked("redeliver/t", "m1", false).await;
    let first = s.message(WAIT).await.unwrap_or_else(|| panic!("{}: m1 not delivered", t.name));
    assert_eq!((first.text().as_str(), first.qos), ("m1", 1), "{}", t.name);
    s.die().await;
    let (mut back, present) = Probe::accepted(t.port, "redeliver", &Options { manual_acks: false, ..o }).await;
    assert!(present, "{}: the session is present", t.name);
    let t0 = std::time::Instant::now();
    let again = back.message(t.redelivery.within).await.unwrap_or_else(|| panic!("{}: m1 not sent again", t.name));
    println!("{}: redelivered {:?} after {:?}, dup={}", t.name, again.text(), t0.elapsed(), again.dup);
    assert_eq!((again.topic.as_str(), again.text().as_str(), again.qos), ("redeliver/t", "m1", 1), "{}", t.name);
    assert_eq!(again.dup, t.redelivery.dup, "{}: the DUP flag of a redelivery", t.name);
}

/// A persistent session (clean session off) keeps its subscriptions and queues QoS 1 messages
/// while the client is away; they arrive in order when it comes back, without a new SUBSCRIBE.
async fn persistent_session_keeps_subscriptions_and_queues(t: &Target) {
    let o = Options { clean: false, ..Options::new(Version::V3) };
    let mut s = t.probe_with("persist", &o).await;
    s.subscribe("persist/t", 1).await;
    s.disconnect().await;
    let mut p = t.probe("persist-pub", Version::V3).await;
    for n in ["1", "2", "3"] {
        assert!(p.publish_acked("persist/t", n, false).await.is_accepted(), "{}", t.name);
    }
    let (mut back, present) = Probe::accepted(t.port, "persist", &o).await;
    assert!(present, "{}: the session is present", t.name);
    let mut got = Vec::new();
    while got.len() < 3 {
        let m = back.message(WAIT).await.unwrap_or_else(|| panic!("{}: queued so far {got:?}", t.name));
        got.push(m.text());
    }
    assert_eq!(got, ["1", "2", "3"], "{}: queued while away, in order", t.name);
    p.publish("persist/t", "4", 1, false).await;
    let m = back.message(WAIT).await.unwrap_or_else(|| panic!("{}: the kept subscription got nothing", t.name));
    assert_eq!(m.text(), "4", "{}", t.name);
}

/// Topics starting with `$` are not matched by filters starting with a wildcard (`#`, `+/…`),
/// live or retained [MQTT-4.7.2-1].
async fn dollar_topics_not_matched_by_wildcards(t: &Target) {
    let v = Version::V3;
    let (mut all, mut plus) = (t.probe("dollar-all", v).await, t.probe("dollar-plus", v).await);
    all.subscribe("#", 1).await;
    plus.subscribe("+/d", 1).await;
    let mut p = t.probe("dollar-pub", v).await;
    let acked = p.publish_acked("$c2m/d", "dollar", true).await;
    assert!(acked.is_accepted(), "{}: publish to $c2m/d: {acked:?}", t.name);
    p.publish("c2m/d", "marker", 0, false).await;
    for s in [&mut all, &mut plus] {
        let got = seen_until(s, "c2m/d").await;
        let dollar: Vec<&str> = topics(&got).into_iter().filter(|t| t.starts_with('$')).collect();
        println!("{}: {} got {} `$` topics: {:?}", t.name, s.id, dollar.len(), &dollar[..dollar.len().min(3)]);
        if t.wildcards_skip_dollar {
            assert!(got.is_empty(), "{}: {} got {:?}", t.name, s.id, topics(&got));
        } else {
            assert!(dollar.contains(&"$c2m/d"), "{}: {} matched no `$` topic: {:?}", t.name, s.id, topics(&got));
        }
    }
    let mut late = t.probe("dollar-late", v).await;
    late.subscribe("#", 1).await;
    let got = seen_until_marker(&p, &mut late, "c2m/d").await;
    let retained_dollar = got.iter().any(|m| m.topic == "$c2m/d");
    assert_eq!(retained_dollar, !t.wildcards_skip_dollar, "{}: retained {:?}", t.name, topics(&got));
    // The message did reach the broker: a subscriber to the topic itself gets it retained, on a
    // broker that takes `$` filters; rumqttd closes the connection of a client asking for one.
    let (mut exact, _) = Probe::accepted(t.port, "dollar-exact", &Options::new(v)).await;
    if t.dollar_filters {
        exact.subscribe("$c2m/d", 1).await;
        let m = exact.message(WAIT).await.unwrap_or_else(|| panic!("{}: $c2m/d not retained", t.name));
        assert_eq!((m.topic.as_str(), m.text().as_str(), m.retain), ("$c2m/d", "dollar", true), "{}", t.name);
    } else {
        let closed = exact.subscribe_refused("$c2m/d").await;
        println!("{}: a subscription to $c2m/d: {closed}", t.name);
    }
}

/// The largest payload the broker takes is delivered whole; one byte more is refused, and the
/// publisher sees its connection closed (the message reaches no one).
async fn payload_limit(t: &Target) {
    let topic = "big/t";
    let largest = match t.limit {
        // Topic length prefix, topic, packet id.
        Limit::RemainingLength(n) => n - (2 + topic.len() + 2),
        Limit::Unbounded { tried } => tried,
    };
    let mut s = t.probe("big-sub", Version::V3).await;
    s.subscribe(topic, 1).await;
    let mut p = t.probe("big-pub", Version::V3).await;
    let acked = p.publish_acked(topic, vec![b'x'; largest], false).await;
    assert!(acked.is_accepted(), "{}: {largest} bytes: {acked:?}", t.name);
    let m = s.message(WAIT).await.unwrap_or_else(|| panic!("{}: {largest} bytes not delivered", t.name));
    assert_eq!(m.payload.len(), largest, "{}", t.name);
    if let Limit::Unbounded { .. } = t.limit {
        println!("{}: no payload limit of its own; {largest} bytes delivered", t.name);
        return;
    }
    let refused = p.publish_acked(topic, vec![b'x'; largest + 1], false).await;
    println!("{}: largest payload on {topic} {largest} bytes; one more: {refused:?}", t.name);
    assert!(matches!(refused, Ev::Closed(_)), "{}: {} bytes: {refused:?}", t.name, largest + 1);
    let marker = t.probe("big-marker", Version::V3).await;
    let got = seen_until_marker(&marker, &mut s, topic).await;
    assert!(got.is_empty(), "{}: the refused payload was delivered", t.name);
}

// ---------------------------------------------------------------------------------------------
// Every check on every broker
// ---------------------------------------------------------------------------------------------

macro_rules! conformance {
    ($broker:ident) => {
        mod $broker {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retained_delivered_and_cleared_mqtt311() {
                retained_delivered_and_cleared(&super::$broker().await, Version::V3).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retained_delivered_and_cleared_mqtt5() {
                let t = super::$broker().await;
                if t.speaks_mqtt5("retained messages over MQTT 5").await {
                    retained_delivered_and_cleared(&t, Version::V5).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retained_resent_on_identical_resubscribe_mqtt311() {
                retained_resent_on_identical_resubscribe(&super::$broker().await, Version::V3).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retained_resent_on_identical_resubscribe_mqtt5() {
                let t = super::$broker().await;
                if t.speaks_mqtt5("re-subscribe over MQTT 5").await {
                    retained_resent_on_identical_resubscribe(&t, Version::V5).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retain_as_published_mqtt5() {
                retain_as_published(&super::$broker().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn will_on_lost_connection_not_on_disconnect() {
                will_on_lost_connection_only(&super::$broker().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn qos1_redelivered_after_reconnect() {
                super::qos1_redelivered_after_reconnect(&super::$broker().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn persistent_session_keeps_subscriptions_and_queues() {
                super::persistent_session_keeps_subscriptions_and_queues(&super::$broker().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn dollar_topics_not_matched_by_wildcards() {
                super::dollar_topics_not_matched_by_wildcards(&super::$broker().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn payload_limit() {
                super::payload_limit(&super::$broker().await).await;
            }
        }
    };
}

conformance!(embedded);
conformance!(mosquitto);
conformance!(nats);
