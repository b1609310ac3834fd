//! The [`CommandDispatcher`]: takes commands as they arrive, refuses bad ones at once, and puts
//! good ones on their network's wire in order, one target at a time.
//!
//! - **Order.** Each target (a unit with its attribute topics, a group, a scene, the network
//!   level) has its own queue and at most one message in flight: a command is sent only after
//!   the previous one for the same target went out (or was given up). Targets do not wait for
//!   each other.
//! - **Coalescing.** After a message for a target, the next one for it waits until
//!   `coalesce_window` has passed. Meanwhile a new command that sets exactly the same fields as
//!   the last queued one (same `state`, both brightness-only, both colour-temperature-only, …)
//!   replaces it: a slider flood becomes the first value at once plus at most one message per
//!   window, the last value winning. A command that sets something else (an `OFF` after
//!   brightness, a `TOGGLE`, a colour after a brightness) is never merged away, so no state
//!   change is lost and nothing is reordered.
//! - **Wire down.** When the network's supervisor answers that the wire is down (or the network
//!   has no supervisor yet), the command is retried every `retry_interval` until `wire_retry` has
//!   passed since it arrived, then refused visibly. A newer command that would replace it
//!   replaces it during the wait.
//! - **Refusals** go out on the [`Rejection`] stream (for `<base>/bridge/error`) and to the log.
//!   Nothing is published here: state comes back from the cloud as events.

use super::error::CommandError;
use super::known::{Key, Known};
use super::map::{self, with_wire};
use super::parse::{Command, LevelCommand, LightCommand, Switch, Target, parse};
use crate::bridge::network::Outgoing;
use crate::bridge::update::Update;
use crate::cloud::model::ClientMessage;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

/// A command as the MQTT side hands it over: the topic it came on, resolved to a network id and
/// a target, and the raw payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The `…/set` topic (used in rejections).
    pub topic: String,
    /// Network id.
    pub network: String,
    /// What the topic names.
    pub target: Target,
    /// The payload.
    pub payload: Vec<u8>,
}

/// A refused command, for `<base>/bridge/error` (non-retained JSON `{"topic":…,"reason":…}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// The topic the command came on.
    pub topic: String,
    /// The network id, when the command was resolved to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Why it was refused.
    pub reason: String,
}

impl Rejection {
    /// The JSON payload: `{"topic", "network" (when known), "reason"}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Where the messages of each network go: [`crate::bridge::Bridge`] in the product, a map of
/// fake channels in tests.
pub trait Wires: Send + Sync + 'static {
    /// The outgoing queue of a network's supervisor, when it runs.
    fn outgoing(&self, network: &str) -> Option<mpsc::Sender<Outgoing>>;

    /// Asks every network's supervisor to fetch its network again; `false` when every one
    /// has a reload waiting already (none is asked twice).
    fn reload(&self) -> bool {
        true
    }
}

impl Wires for crate::bridge::Bridge {
    fn outgoing(&self, network: &str) -> Option<mpsc::Sender<Outgoing>> {
        self.network(network).map(|h| h.outgoing)
    }

    fn reload(&self) -> bool {
        crate::bridge::Bridge::reload(self)
    }
}

impl Wires for HashMap<String, mpsc::Sender<Outgoing>> {
    fn outgoing(&self, network: &str) -> Option<mpsc::Sender<Outgoing>> {
        self.get(network).cloned()
    }
}

/// Timings and limits of the dispatcher.
#[derive(Debug, Clone)]
pub struct DispatchConfig {
    /// Least time between two messages for one target; commands arriving meanwhile coalesce.
    pub coalesce_window: Duration,
    /// How long a command is retried while its network's wire is down.
    pub wire_retry: Duration,
    /// Pause between retries.
    pub retry_interval: Duration,
    /// Commands waiting per target beyond which new ones are refused.
    pub max_queued: usize,
    /// How long a sent command's expected on/off counts for the next `TOGGLE`.
    pub toggle_memory: Duration,
    /// Capacity of the rejection stream (rejections beyond it are only logged).
    pub rejection_capacity: usize,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            coalesce_window: Duration::from_millis(80),
            wire_retry: Duration::from_secs(5),
            retry_interval: Duration::from_millis(250),
            max_queued: 32,
            toggle_memory: Duration::from_millis(1500),
            rejection_capacity: 256,
        }
    }
}

/// A command waiting for its turn.
#[derive(Debug, Clone)]
struct Queued {
    topic: String,
    command: Command,
    arrived: Instant,
}

#[derive(Debug, Default)]
struct Queue {
    pending: VecDeque<Queued>,
    /// A worker task is serving this queue.
    running: bool,
}

type QueueKey = (String, Key);

struct Inner {
    wires: Box<dyn Wires>,
    config: DispatchConfig,
    known: Mutex<Known>,
    queues: Mutex<HashMap<QueueKey, Queue>>,
    rejections: mpsc::Sender<Rejection>,
    /// Cancelled at shutdown ([`CommandDispatcher::abandon_pending`]): a command waiting for its
    /// wire is refused instead of waiting on.
    closing: CancellationToken,
}

/// Why commands are refused at shutdown.
pub const SHUTTING_DOWN: &str = "the bridge is shutting down";

/// Applies commands from MQTT to the cloud. Cheap to clone; all clones share the queues.
#[derive(Clone)]
pub struct CommandDispatcher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CommandDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandDispatcher").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn key_of(target: &Target) -> Key {
    match target {
        Target::Unit { id, .. } => Key::Unit(*id),
        Target::Group(id) => Key::Group(*id),
        Target::Scene(id) => Key::Scene(*id),
        Target::Network | Target::Reload => Key::Network,
    }
}

/// Whether `newer` may replace `older` (queued just before it for the same target): both set
/// the same fields, with the same `state`, and neither toggles.
fn replaces(older: &Command, newer: &Command) -> bool {
    fn light_shape(c: &LightCommand) -> (Option<Switch>, bool, bool, bool) {
        (c.state, c.brightness.is_some(), c.color_temp.is_some(), c.color.is_some())
    }
    fn level_shape(c: &LevelCommand) -> (Option<Switch>, bool) {
        (c.state, c.brightness.is_some())
    }
    let toggles = |s: Option<Switch>| s == Some(Switch::Toggle);
    match (older, newer) {
        (Command::Unit(a), Command::Unit(b)) => !toggles(a.state) && light_shape(a) == light_shape(b),
        (Command::Group(a), Command::Group(b)) | (Command::Scene(a), Command::Scene(b)) => {
            !toggles(a.state) && level_shape(a) == level_shape(b)
        }
        (Command::Network { .. }, Command::Network { .. }) => true,
        _ => false,
    }
}

/// Why one attempt to send failed.
enum Failure {
    /// The command cannot be sent (the target vanished, …): refuse it.
    Refused(CommandError),
    /// The wire is down or the network not running yet: retry.
    WireDown(String),
}

impl CommandDispatcher {
    /// A dispatcher sending through `wires`, and the stream of its rejections (for the MQTT side
    /// to publish on `<base>/bridge/error`).
    pub fn new(wires: impl Wires, config: DispatchConfig) -> (CommandDispatcher, mpsc::Receiver<Rejection>) {
        let (tx, rx) = mpsc::channel(config.rejection_capacity.max(1));
        let inner = Inner {
            wires: Box::new(wires),
            config,
            known: Mutex::new(Known::default()),
            queues: Mutex::new(HashMap::new()),
            rejections: tx,
            closing: CancellationToken::new(),
        };
        (CommandDispatcher { inner: Arc::new(inner) }, rx)
    }

    /// Takes in an update of the bridge core (feed it every update, before or beside the MQTT
    /// publisher): unit states, capabilities, last levels, groups, scenes, active scenes.
    pub fn observe(&self, update: &Update) {
        lock(&self.inner.known).observe(update);
    }

    /// Refuses a command visibly (also for the MQTT side's own refusals, such as a topic naming
    /// no known unit, so every refusal goes out the same way).
    pub fn reject(&self, topic: &str, network: Option<&str>, reason: &str) {
        reject(&self.inner, topic, network, reason);
    }

    /// Takes one command: parses and checks it now (a bad one is refused at once, on the
    /// rejection stream and in the returned error), then queues it for its target. Must be called
    /// inside a Tokio runtime (it may start the target's worker task).
    pub fn submit(&self, request: Request) -> Result<(), CommandError> {
        let result = self.accept(&request);
        if let Err(e) = &result {
            // A reload names no network.
            let network = Some(request.network.as_str()).filter(|n| !n.is_empty());
            reject(&self.inner, &request.topic, network, &e.to_string());
        }
        result
    }

    fn accept(&self, request: &Request) -> Result<(), CommandError> {
        let command = parse(&request.target, &request.payload)?;
        if command == Command::Reload {
            // Not a message for a wire: each supervisor fetches through the quota guard.
            return if self.inner.wires.reload() { Ok(()) } else { Err(CommandError::ReloadWaiting) };
        }
        let key = key_of(&request.target);
        {
            let known = lock(&self.inner.known);
            let net =
                known.network(&request.network).ok_or_else(|| CommandError::UnknownNetwork(request.network.clone()))?;
            map::check(&command, key, net)?;
        }
        let queued = Queued { topic: request.topic.clone(), command, arrived: Instant::now() };
        let queue_key = (request.network.clone(), key);
        let start = {
            let mut queues = lock(&self.inner.queues);
            let queue = queues.entry(queue_key.clone()).or_default();
            let full = queue.pending.len() >= self.inner.config.max_queued;
            match queue.pending.back_mut() {
                Some(last) if replaces(&last.command, &queued.command) => {
                    // Keep the older arrival time: the retry budget counts from the first.
                    *last = Queued { arrived: last.arrived, ..queued };
                }
                _ if full => return Err(CommandError::QueueFull),
                _ => queue.pending.push_back(queued),
            }
            !std::mem::replace(&mut queue.running, true)
        };
        if start {
            tokio::spawn(worker(self.inner.clone(), queue_key));
        }
        Ok(())
    }

    /// For a shutdown: refuses every command still waiting in a queue with [`SHUTTING_DOWN`]
    /// (on `<base>/bridge/error`), and makes one waiting for its wire give up the same way, so
    /// none is dropped without a word. Returns how many queued commands were refused.
    pub fn abandon_pending(&self) -> usize {
        self.inner.closing.cancel();
        let abandoned: Vec<(String, Queued)> = {
            let mut queues = lock(&self.inner.queues);
            queues
                .iter_mut()
                .flat_map(|((network, _), queue)| queue.pending.drain(..).map(|q| (network.clone(), q)))
                .collect()
        };
        for (network, item) in &abandoned {
            reject(&self.inner, &item.topic, Some(network), SHUTTING_DOWN);
        }
        abandoned.len()
    }

    /// Serves a stream of requests until it ends or `shutdown` (the MQTT side's command channel
    /// mapped to [`Request`]s). Refusals go to the rejection stream.
    pub async fn run(self, mut requests: mpsc::Receiver<Request>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                request = requests.recv() => match request {
                    Some(request) => { let _ = self.submit(request); }
                    None => break,
                },
            }
        }
    }
}

fn reject(inner: &Inner, topic: &str, network: Option<&str>, reason: &str) {
    tracing::warn!(%topic, network = network.unwrap_or(""), %reason, "command refused");
    let rejection =
        Rejection { topic: topic.to_string(), network: network.map(str::to_string), reason: reason.to_string() };
    if inner.rejections.try_send(rejection).is_err() {
        tracing::debug!(%topic, "rejection stream full or closed; logged only");
    }
}

/// Takes the next command of a queue, or marks the queue idle (atomically with the check, so a
/// command pushed meanwhile starts a new worker).
fn pop(inner: &Inner, key: &QueueKey) -> Option<Queued> {
    let mut queues = lock(&inner.queues);
    let queue = queues.get_mut(key)?;
    let next = queue.pending.pop_front();
    if next.is_none() {
        queues.remove(key);
    }
    next
}

/// Replaces `current` (waiting for a retry) with newer commands that replace it.
fn absorb(inner: &Inner, key: &QueueKey, mut current: Queued) -> Queued {
    let mut queues = lock(&inner.queues);
    if let Some(queue) = queues.get_mut(key) {
        while queue.pending.front().is_some_and(|next| replaces(&current.command, &next.command)) {
            if let Some(next) = queue.pending.pop_front() {
                current = Queued { arrived: current.arrived, ..next };
            }
        }
    }
    current
}

/// Serves one target's queue until it is empty.
async fn worker(inner: Arc<Inner>, key: QueueKey) {
    let mut last_sent: Option<Instant> = None;
    while let Some(mut item) = {
        if let Some(at) = last_sent {
            sleep_until(at + inner.config.coalesce_window).await;
        }
        pop(&inner, &key)
    } {
        loop {
            match attempt(&inner, &key, &item).await {
                Ok(()) => break,
                Err(Failure::Refused(e)) => {
                    reject(&inner, &item.topic, Some(&key.0), &e.to_string());
                    break;
                }
                Err(Failure::WireDown(_)) if inner.closing.is_cancelled() => {
                    reject(&inner, &item.topic, Some(&key.0), SHUTTING_DOWN);
                    break;
                }
                Err(Failure::WireDown(last)) => {
                    let waited = item.arrived.elapsed();
                    if waited >= inner.config.wire_retry {
                        let network =
                            lock(&inner.known).network(&key.0).map_or_else(|| key.0.clone(), |n| n.name.clone());
                        let e = CommandError::WireDown { network, waited, last };
                        reject(&inner, &item.topic, Some(&key.0), &e.to_string());
                        break;
                    }
                    tracing::debug!(network = %key.0, reason = %last, "wire down; retrying command");
                    tokio::select! {
                        _ = sleep(inner.config.retry_interval.min(inner.config.wire_retry - waited)) => {}
                        _ = inner.closing.cancelled() => {}
                    }
                    item = absorb(&inner, &key, item);
                }
            }
        }
        last_sent = Some(Instant::now());
    }
}

/// Builds the messages from what is known now and hands them to the network's supervisor, each
/// once the one before went out. A failure part-way retries them all: every message sets levels,
/// so sending one again changes nothing.
async fn attempt(inner: &Inner, key: &QueueKey, item: &Queued) -> Result<(), Failure> {
    let plan = {
        let known = lock(&inner.known);
        let net = known.network(&key.0).ok_or_else(|| Failure::Refused(CommandError::UnknownNetwork(key.0.clone())))?;
        map::plan(&item.command, key.1, net, inner.config.toggle_memory).map_err(Failure::Refused)?
    };
    let outgoing =
        inner.wires.outgoing(&key.0).ok_or_else(|| Failure::WireDown("the network is not connected yet".into()))?;
    for message in std::iter::once(plan.message).chain(plan.then) {
        hand_over(inner, item, &outgoing, message, plan.refresh_after).await?;
    }
    if let Some(on) = plan.expect_on
        && let Some(net) = lock(&inner.known).network_mut(&key.0)
    {
        net.expect(key.1, on);
    }
    Ok(())
}

/// Hands one message to the supervisor and waits for it to go out (within the retry budget).
async fn hand_over(
    inner: &Inner,
    item: &Queued,
    outgoing: &mpsc::Sender<Outgoing>,
    message: ClientMessage,
    refresh_after: bool,
) -> Result<(), Failure> {
    let (done, mut answer) = oneshot::channel();
    // The supervisor builds the message when it gets to it. If it does not answer within the
    // retry budget (a network still starting up), the command is given up, and the build turns
    // into a harmless ping so a stale command is never applied late.
    let state = Arc::new(AtomicU8::new(PENDING));
    let build_state = state.clone();
    let build = move |wire: u32| {
        if build_state.compare_exchange(PENDING, BUILT, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            with_wire(message, wire)
        } else {
            ClientMessage::Ping { wire }
        }
    };
    let out = Outgoing { build: Box::new(build), refresh_after, done };
    let stopped = || Failure::WireDown("the network's supervisor stopped".into());
    outgoing.send(out).await.map_err(|_| stopped())?;
    let budget = inner.config.wire_retry.saturating_sub(item.arrived.elapsed()).max(inner.config.retry_interval);
    let answer = match tokio::time::timeout(budget, &mut answer).await {
        Ok(answer) => answer,
        Err(_) if state.compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire).is_ok() => {
            return Err(Failure::WireDown("no answer from the network (still starting?)".into()));
        }
        // Built just now: it is going out; wait for the answer.
        Err(_) => answer.await,
    };
    match answer {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Failure::WireDown(e.to_string())),
        Err(_) => Err(stopped()),
    }
}

/// States of a message handed to a supervisor.
const PENDING: u8 = 0;
const BUILT: u8 = 1;
const CANCELLED: u8 = 2;

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
