//! A model-based test of the MQTT store: random sequences of operations (an owner's topics set,
//! its state updated, an owner removed, operations sent or lost, the connection dropped and made
//! again, stale-topic questions) run against the store and against a plain model that keeps
//! every payload in a `BTreeMap<topic, payload>`, the way zigbee2mqtt keeps its discovery. Each
//! side's operations are applied to a broker of its own (a map of retained messages): the two
//! brokers must always be equal, equal to what the owners want whenever connected, and the
//! store's answers to questions must be the model's.

use casambi2mqtt::mqtt::state_text::{AVAILABILITY, Leaf, StateText};
use casambi2mqtt::mqtt::store::Owner;
use casambi2mqtt::mqtt::store::{Op, StaleCheck, Store};
use casambi2mqtt::mqtt::unit_json::UNIT_KEYS;
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use std::collections::{BTreeMap, BTreeSet};

/// `n` cases, or `PROPTEST_CASES` when set (for a longer run).
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig::with_cases(std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(n))
}

/// Retained messages by topic.
type Broker = BTreeMap<String, String>;

const OWNERS: u32 = 3;

/// The topics owner `k` may want, in a renderer's order: a discovery config, a state topic,
/// levels below it the store keeps as numbers, a name below it that is no level, a level below
/// that name. Each owner's topics are its own.
fn pool(k: u32) -> Vec<String> {
    [
        format!("ha/o{k}/config"),
        format!("b/o{k}"),
        format!("b/o{k}/brightness"),
        format!("b/o{k}/state"),
        format!("b/o{k}/x"),
        format!("b/o{k}/availability"),
        format!("b/o{k}/x/state"),
    ]
    .into()
}

fn owner(k: u32) -> Owner {
    Owner::Unit("n".into(), k)
}

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    /// Owner `k` wants the topics of `pick` (bits of its pool), turned left by `turn`, with
    /// the payloads `values`.
    Set { k: u32, pick: u8, turn: usize, values: [u8; 7] },
    /// Owner `k`'s state topic and what is below it get the payloads `values` (the fast path of
    /// a state change when its names are the same).
    State { k: u32, values: [u8; 7] },
    /// Owner `k` goes.
    Remove { k: u32 },
    /// The next operations reach the client, which loses them with the connection.
    Lost { k: u32, pick: u8, values: [u8; 7] },
    /// The connection drops.
    Disconnect,
    /// A connection is made: resync, then every wanted topic published again.
    Connect,
    /// A scan asks whether a topic (of the pools, or one nobody ever had) is stale.
    Ask { k: u32, topic: usize },
}

fn step() -> impl Strategy<Value = Step> {
    let k = 1..=OWNERS;
    let values = any::<[u8; 7]>().prop_map(|v| v.map(|b| b % 3));
    prop_oneof![
        4 => (k.clone(), any::<u8>(), 0..7usize, values.clone())
            .prop_map(|(k, pick, turn, values)| Step::Set { k, pick, turn: turn * usize::from(pick % 4 == 0), values }),
        4 => (k.clone(), values.clone()).prop_map(|(k, values)| Step::State { k, values }),
        1 => k.clone().prop_map(|k| Step::Remove { k }),
        1 => (k.clone(), any::<u8>(), values).prop_map(|(k, pick, values)| Step::Lost { k, pick, values }),
        1 => Just(Step::Disconnect),
        2 => Just(Step::Connect),
        3 => (k, 0..9usize).prop_map(|(k, topic)| Step::Ask { k, topic }),
    ]
}

/// The topics of `pick` of owner `k`'s pool, turned left by `turn`, with payloads from `values`.
fn topics(k: u32, pick: u8, turn: usize, values: &[u8; 7]) -> Vec<(String, String)> {
    let mut topics: Vec<(String, String)> = pool(k)
        .into_iter()
        .zip(values)
        .enumerate()
        .filter(|(i, _)| pick & (1 << i) != 0)
        .map(|(_, (t, v))| (t, v.to_string()))
        .collect();
    if !topics.is_empty() {
        let turn = turn % topics.len();
        topics.rotate_left(turn);
    }
    topics
}

/// The plain model: every wanted payload, and what it believes the broker has.
#[derive(Debug, Default)]
struct Model {
    wanted: BTreeMap<u32, Vec<(String, String)>>,
    /// What was handed to the client since the connection began (or before, not cleared since).
    sent: Broker,
    /// Topics cleared on this connection.
    cleared: BTreeSet<String>,
}

impl Model {
    fn is_wanted(&self, topic: &str) -> bool {
        self.wanted.values().flatten().any(|(t, _)| t == topic)
    }

    fn set(&mut self, k: u32, topics: Vec<(String, String)>) -> Vec<Op> {
        let old = if topics.is_empty() { self.wanted.remove(&k) } else { self.wanted.insert(k, topics.clone()) };
        let mut ops: Vec<Op> = topics
            .iter()
            .filter(|(t, p)| self.sent.get(t) != Some(p))
            .map(|(t, p)| Op::publish(t.clone(), p.clone(), None))
            .collect();
        for (t, _) in old.unwrap_or_default() {
            if !self.is_wanted(&t) && self.sent.contains_key(&t) {
                ops.push(Op::Clear { topic: t });
            }
        }
        ops
    }

    fn record(&mut self, op: &Op) {
        match op {
            Op::Publish { topic, payload, .. } => {
                self.cleared.remove(topic);
                self.sent.insert(topic.clone(), payload.clone());
            }
            Op::Clear { topic } => {
                self.sent.remove(topic);
                self.cleared.insert(topic.clone());
            }
        }
    }

    fn resync(&mut self) -> Vec<Op> {
        let stale: BTreeSet<String> =
            self.sent.keys().chain(&self.cleared).filter(|t| !self.is_wanted(t)).cloned().collect();
        self.sent.clear();
        self.cleared.clear();
        stale.into_iter().map(|topic| Op::Clear { topic }).collect()
    }

    /// Every wanted topic, as the broker should have it once all is delivered.
    fn truth(&self) -> Broker {
        self.wanted.values().flatten().cloned().collect()
    }
}

/// Applies an operation to a broker.
fn apply(broker: &mut Broker, op: &Op) {
    match op {
        Op::Publish { topic, payload, .. } => {
            broker.insert(topic.clone(), payload.clone());
        }
        Op::Clear { topic } => {
            broker.remove(topic);
        }
    }
}

/// Both sides: the store and the model, each with its broker.
#[derive(Default)]
struct Run {
    store: Store,
    model: Model,
    store_broker: Broker,
    model_broker: Broker,
    connected: bool,
    check: StaleCheck,
}

impl Run {
    /// Hands both sides' operations to their clients: delivered when connected, recorded and
    /// lost when `lost`, dropped unrecorded while disconnected (as the publisher does).
    fn send(&mut self, store_ops: Vec<Op>, model_ops: Vec<Op>, lost: bool) {
        if !self.connected {
            return;
        }
        for op in &store_ops {
            if !lost {
                apply(&mut self.store_broker, op);
            }
            self.store.record(op.receipt());
        }
        for op in &model_ops {
            if !lost {
                apply(&mut self.model_broker, op);
            }
            self.model.record(op);
        }
    }

    fn set(&mut self, k: u32, topics: Vec<(String, String)>, lost: bool) {
        let store_ops = self.store.set(owner(k), topics.clone());
        let model_ops = self.model.set(k, topics);
        self.send(store_ops, model_ops, lost);
    }

    /// A state change of owner `k`: its topics from its state topic on, with new payloads. The
    /// store takes it on its fast path when it can, else the whole list is set.
    fn state(&mut self, k: u32, values: &[u8; 7]) {
        let state_topic = format!("b/o{k}");
        let Some(current) = self.model.wanted.get(&k).cloned() else { return };
        let Some(start) = current.iter().position(|(t, _)| *t == state_topic) else { return };
        let mut text = StateText::default();
        let mut topics = current[..start].to_vec();
        for (i, (topic, _)) in current[start..].iter().enumerate() {
            let payload = values[i].to_string();
            let leaf = match topic.strip_prefix(&state_topic) {
                Some("") => Leaf::State,
                Some(below) => match leaf_name(below.trim_start_matches('/')) {
                    Some(name) => Leaf::Below(name),
                    None => return,
                },
                None => return,
            };
            text.push(leaf, &payload);
            topics.push((topic.clone(), payload));
        }
        let store_ops = match self.store.update_state(&owner(k), &text, |t| t == state_topic) {
            Some(ops) => ops,
            None => self.store.set(owner(k), topics.clone()),
        };
        let model_ops = self.model.set(k, topics);
        self.send(store_ops, model_ops, false);
    }

    fn connect(&mut self) {
        if self.connected {
            return;
        }
        self.connected = true;
        let store_ops = self.store.resync();
        let model_ops = self.model.resync();
        self.send(store_ops, model_ops, false);
        // The caller renders every wanted topic again from its own truth.
        let all: Vec<Op> =
            self.model.wanted.values().flatten().map(|(t, p)| Op::publish(t.clone(), p.clone(), None)).collect();
        self.send(all.clone(), all, false);
    }
}

/// The name of a leaf as the renderer gives it: a unit JSON key or the availability (the
/// statics), or another name below the state topic.
fn leaf_name(below: &str) -> Option<&'static str> {
    UNIT_KEYS.iter().copied().chain([AVAILABILITY]).find(|k| *k == below).or(match below {
        "x" => Some("x"),
        _ => None,
    })
}

proptest! {
    #![proptest_config(cases(1024))]

    #[test]
    fn the_store_publishes_and_clears_what_a_plain_map_does(steps in prop::collection::vec(step(), 1..40)) {
        let mut run = Run::default();
        run.connect();
        for step in steps {
            match step.clone() {
                Step::Set { k, pick, turn, values } => run.set(k, topics(k, pick, turn, &values), false),
                Step::State { k, values } => run.state(k, &values),
                Step::Remove { k } => run.set(k, Vec::new(), false),
                Step::Lost { k, pick, values } => {
                    run.set(k, topics(k, pick, 0, &values), true);
                    run.connected = false;
                }
                Step::Disconnect => run.connected = false,
                Step::Connect => run.connect(),
                Step::Ask { k, topic } => {
                    let topic = pool(k).get(topic).cloned().unwrap_or_else(|| format!("b/o{k}/dim_level"));
                    let stale = run.store.is_stale(&mut run.check, &topic);
                    let wanted = run.model.is_wanted(&topic);
                    if run.connected {
                        prop_assert_eq!(stale, !wanted, "{} stale", topic);
                    } else {
                        prop_assert!(!(stale && wanted), "{} is wanted, not stale", topic);
                    }
                }
            }
            prop_assert_eq!(&run.store_broker, &run.model_broker, "after {:?}", step);
            if run.connected {
                prop_assert_eq!(&run.store_broker, &run.model.truth(), "after {:?}", step);
            }
            for k in 1..=OWNERS {
                let want = run.model.wanted.get(&k).cloned().unwrap_or_default();
                let names: Vec<String> = want.iter().map(|(t, _)| t.clone()).collect();
                prop_assert_eq!(run.store.topics_of(&owner(k)), names, "owner {}", k);
                prop_assert!(run.store.wants_exactly(&owner(k), &want), "owner {}", k);
                if run.connected {
                    for (t, p) in &want {
                        if run.store.has_published(t, p) {
                            prop_assert_eq!(run.store_broker.get(t), Some(p), "{} published", t);
                        }
                    }
                }
            }
        }
    }
}
