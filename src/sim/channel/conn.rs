//! One WebSocket connection: its wires, the client messages it answers, the events it forwards,
//! the idle rule and the faults it acts on.
//!
//! One task owns the socket and is its only writer. Each open wire has a forwarder task that
//! turns its network's events into frames and queues them to the socket task through a bounded
//! channel; a slow client therefore makes the forwarder wait, its event receiver lag, and the
//! forwarder resend the whole network (nothing is lost). Frames of a wire that has since been
//! closed or replaced are discarded by the socket task, so nothing is sent on a closed wire.

use super::frames;
use super::{KeyStatus, SocketSlot};
use crate::sim::log::WsRecord;
use crate::sim::world::WorldEvent;
use crate::sim::{Shared, WireFault};
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures_util::SinkExt;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

/// Frames a socket buffers from its wires before their forwarders wait.
const OUT_BUFFER: usize = 1024;
/// Frames written before one flush.
const FLUSH_BATCH: usize = 256;
/// Longest client text kept in the log when a message is not JSON.
const LOG_RAW_LIMIT: usize = 1000;

/// A frame queued by a wire's forwarder.
#[derive(Debug)]
struct Outgoing {
    wire: i64,
    instance: u64,
    text: String,
}

/// The forwarder task of a wire; dropping it stops the task.
#[derive(Debug)]
struct Forwarder(JoinHandle<()>);

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One open wire.
#[derive(Debug)]
struct Wire {
    network: String,
    /// Distinguishes this opening from earlier ones of the same wire number.
    instance: u64,
    last_message: Instant,
    _forwarder: Forwarder,
}

/// How the connection ends.
enum End {
    /// The client closed or the connection failed: nothing more to send.
    Gone,
    /// Close with a close frame.
    Close(u16, &'static str),
    /// Drop the TCP connection without a close frame (fault injection).
    Abort,
}

struct Conn {
    shared: Arc<Shared>,
    socket: WebSocket,
    key: KeyStatus,
    wires: HashMap<i64, Wire>,
    next_instance: u64,
    out: mpsc::Sender<Outgoing>,
    /// Since when the socket has had no wire (it closes when that lasts `idle_timeout`).
    wireless_since: Option<Instant>,
}

/// Serves one upgraded socket until it ends.
pub(super) async fn run(socket: WebSocket, shared: Arc<Shared>, key: KeyStatus, slot: Option<SocketSlot>) {
    shared.log.ws(WsRecord::SocketOpened { at: shared.started.elapsed() });
    tracing::debug!("WebSocket opened");
    let (out, mut queued) = mpsc::channel(OUT_BUFFER);
    let mut faults = shared.wire_faults.subscribe();
    let shutdown = shared.shutdown.clone();
    let mut conn = Conn {
        shared: shared.clone(),
        socket,
        key,
        wires: HashMap::new(),
        next_instance: 0,
        out,
        wireless_since: Some(Instant::now()),
    };
    let end = loop {
        let deadline = conn.next_deadline();
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break End::Close(close_code::AWAY, "service shutting down"),
            fault = faults.recv() => match fault {
                Ok(fault) => match conn.fault(fault).await {
                    Ok(None) => {}
                    Ok(Some(end)) => break end,
                    Err(_) => break End::Gone,
                },
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break End::Close(close_code::AWAY, "service stopped"),
            },
            msg = conn.socket.recv() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => Ok(t.as_str().to_string()),
                    Some(Ok(Message::Binary(b))) => String::from_utf8(b.to_vec()).map_err(|e| e.to_string()),
                    // The WebSocket layer answers pings by itself; pongs need nothing.
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break End::Gone,
                };
                if conn.client_message(text).await.is_err() {
                    break End::Gone;
                }
            },
            Some(first) = queued.recv() => {
                if conn.write_queued(first, &mut queued).await.is_err() {
                    break End::Gone;
                }
            },
            _ = tokio::time::sleep_until(deadline.into()) => {
                if let Some(end) = conn.expire_idle() {
                    break end;
                }
            },
        }
    };
    conn.wires.clear();
    match end {
        End::Close(code, reason) => {
            let frame = CloseFrame { code, reason: reason.into() };
            let _ = conn.socket.send(Message::Close(Some(frame))).await;
            tracing::debug!(reason, "WebSocket closed by the service");
        }
        End::Abort => tracing::debug!("WebSocket dropped (fault)"),
        End::Gone => tracing::debug!("WebSocket ended by the client"),
    }
    drop(conn);
    drop(slot);
    shared.log.ws(WsRecord::SocketClosed { at: shared.started.elapsed() });
}

impl Conn {
    fn idle_timeout(&self) -> Duration {
        self.shared.config.idle_timeout
    }

    /// When the next wire (or the wireless socket) goes idle.
    fn next_deadline(&self) -> Instant {
        let idle = self.idle_timeout();
        let wires = self.wires.values().map(|w| w.last_message + idle).min();
        let socket = self.wireless_since.map(|t| t + idle);
        match (wires, socket) {
            (Some(a), Some(b)) => a.min(b),
            (Some(t), None) | (None, Some(t)) => t,
            // Far enough to never fire (a year), near enough not to overflow.
            (None, None) => Instant::now() + Duration::from_secs(365 * 24 * 3600),
        }
    }

    /// Ends idle wires; closes the socket when it has none left.
    fn expire_idle(&mut self) -> Option<End> {
        let now = Instant::now();
        let idle = self.idle_timeout();
        let before = self.wires.len();
        self.wires.retain(|_, w| now < w.last_message + idle);
        let expired = before - self.wires.len();
        if expired > 0 {
            tracing::debug!(expired, "idle wires ended");
        }
        let socket_idle = self.wireless_since.is_some_and(|t| now >= t + idle);
        if self.wires.is_empty() && (expired > 0 || socket_idle) {
            return Some(End::Close(close_code::NORMAL, "idle timeout"));
        }
        None
    }

    fn frame(&self, text: String) -> Message {
        if self.shared.config.text_frames { Message::Text(text.into()) } else { Message::Binary(text.into()) }
    }

    async fn send(&mut self, text: String) -> Result<(), axum::Error> {
        let msg = self.frame(text);
        self.socket.send(msg).await
    }

    /// Writes queued event frames in one batch, dropping those of wires no longer open.
    async fn write_queued(
        &mut self,
        first: Outgoing,
        queued: &mut mpsc::Receiver<Outgoing>,
    ) -> Result<(), axum::Error> {
        let mut next = Some(first);
        let mut written = 0;
        while let Some(out) = next.take() {
            if self.wires.get(&out.wire).is_some_and(|w| w.instance == out.instance) {
                let msg = self.frame(out.text);
                self.socket.feed(msg).await?;
                written += 1;
            }
            if written < FLUSH_BATCH {
                next = queued.try_recv().ok();
            }
        }
        self.socket.flush().await
    }

    /// Acts on a fault if it concerns this connection.
    async fn fault(&mut self, fault: WireFault) -> Result<Option<End>, axum::Error> {
        match fault {
            WireFault::DropSockets => return Ok(Some(End::Abort)),
            WireFault::DropWire { network } => {
                self.wires.retain(|_, w| w.network != network);
                if self.wires.is_empty() && self.wireless_since.is_none() {
                    self.wireless_since = Some(Instant::now());
                }
            }
            WireFault::Malformed { network } => {
                for wire in self.wires_of(&network) {
                    self.send(frames::malformed(wire)).await?;
                }
            }
            WireFault::Oversized { network, bytes } => {
                for wire in self.wires_of(&network) {
                    self.send(frames::oversized(wire, bytes)).await?;
                }
            }
        }
        Ok(None)
    }

    fn wires_of(&self, network: &str) -> Vec<i64> {
        let mut wires: Vec<i64> = self.wires.iter().filter(|(_, w)| w.network == network).map(|(n, _)| *n).collect();
        wires.sort_unstable();
        wires
    }

    /// Answers one client message (text of a text or binary frame).
    async fn client_message(&mut self, text: Result<String, String>) -> Result<(), axum::Error> {
        let at = self.shared.started.elapsed();
        let parsed = text.as_ref().ok().and_then(|t| serde_json::from_str::<Value>(t).ok());
        let Some(Value::Object(msg)) = parsed else {
            let raw = match &text {
                Ok(t) => t.chars().take(LOG_RAW_LIMIT).collect(),
                Err(e) => format!("(not UTF-8: {e})"),
            };
            self.shared.log.ws(WsRecord::Message {
                at,
                network: None,
                message: Value::String(raw),
                result: frames::INVALID_DATA.into(),
            });
            return self.send(frames::status(frames::INVALID_DATA, None, None)).await;
        };
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("").to_string();
        if method == "open" {
            return self.open(msg).await;
        }
        let wire = frames::int(&msg, "wire").ok();
        // Any message naming an open wire keeps it alive.
        let network = wire.and_then(|w| self.wires.get_mut(&w)).map(|open| {
            open.last_message = Instant::now();
            open.network.clone()
        });
        let (result, reply) = match (method.as_str(), wire, &network) {
            // A ping that names no wire keeps nothing alive but is still answered.
            ("ping", None, _) if !msg.contains_key("wire") => ("ok".to_string(), Some(frames::pong(None))),
            ("ping", Some(w), Some(_)) => ("ok".to_string(), Some(frames::pong(Some(w)))),
            ("close", Some(w), Some(_)) => {
                self.wires.remove(&w);
                if self.wires.is_empty() {
                    self.wireless_since = Some(Instant::now());
                }
                ("ok".to_string(), None)
            }
            (m, Some(w), Some(net)) if frames::is_control(m) => {
                let outcome = frames::apply_control(&mut self.shared.world(), net, m, &msg);
                match outcome {
                    Ok(()) => ("ok".to_string(), None),
                    Err(e) => {
                        tracing::debug!(method = m, error = %e, "control refused");
                        let status = frames::refusal(&e);
                        (status.to_string(), Some(frames::status(status, Some(w), msg.get("ref"))))
                    }
                }
            }
            // Unknown method, or a wire that is not open.
            _ => {
                let status = frames::INVALID_DATA;
                (status.to_string(), Some(frames::status(status, wire, msg.get("ref"))))
            }
        };
        self.shared.log.ws(WsRecord::Message { at, network, message: Value::Object(msg), result });
        match reply {
            Some(text) => self.send(text).await,
            None => Ok(()),
        }
    }

    /// Answers an `open` and, when it succeeds, starts the wire.
    async fn open(&mut self, msg: Map<String, Value>) -> Result<(), axum::Error> {
        let reference = msg.get("ref").cloned();
        let wire = frames::int(&msg, "wire");
        let network = msg.get("id").and_then(Value::as_str).map(str::to_string);
        let session = msg.get("session").and_then(Value::as_str);
        let status = match (self.key, &wire, &network, session) {
            (KeyStatus::Unknown, ..) => frames::KEY_AUTHENTICATE_FAILED,
            (KeyStatus::Disabled, ..) => frames::KEY_AUTHORIZE_FAILED,
            (KeyStatus::Valid, Ok(w), Some(net), Some(_)) => {
                let valid = self.shared.auth().check_session(session, Some(net), Instant::now()).is_ok();
                let full = !self.wires.contains_key(w) && self.wires.len() >= self.shared.config.max_wires_per_socket;
                if !valid {
                    frames::INVALID_SESSION
                } else if full {
                    frames::TOO_MANY_WIRES
                } else if self.start_wire(*w, net) {
                    frames::OPEN_SUCCEED
                } else {
                    frames::INVALID_SESSION
                }
            }
            _ => frames::INVALID_DATA,
        };
        tracing::debug!(status, "wire open answered");
        self.shared.log.ws(WsRecord::Open {
            at: self.shared.started.elapsed(),
            network: network.unwrap_or_default(),
            wire: wire.as_ref().copied().unwrap_or(0),
            status: status.to_string(),
        });
        self.send(frames::status(status, wire.ok(), reference.as_ref())).await?;
        Ok(())
    }

    /// Subscribes a wire to its network and starts its forwarder, which first sends the gateway
    /// presence and the initial `unitChanged` burst. Re-opening a wire number replaces it.
    /// `false` when the network does not exist.
    fn start_wire(&mut self, wire: i64, network: &str) -> bool {
        let view = {
            let world = self.shared.world();
            let gateway = world.networks.get(network).map(|n| n.gateway_online);
            gateway.zip(world.open_view(network))
        };
        let Some((gateway, (burst, rx))) = view else { return false };
        self.next_instance += 1;
        let instance = self.next_instance;
        let first: Vec<String> = std::iter::once(frames::peer_changed(wire, gateway))
            .chain(burst.iter().map(|body| frames::unit_changed(wire, body)))
            .collect();
        let task = tokio::spawn(forward(
            self.shared.clone(),
            network.to_string(),
            wire,
            instance,
            first,
            rx,
            self.out.clone(),
        ));
        self.wires.insert(
            wire,
            Wire { network: network.to_string(), instance, last_message: Instant::now(), _forwarder: Forwarder(task) },
        );
        self.wireless_since = None;
        true
    }
}

/// Forwards a wire's first frames and then its network's events to the socket task. On lag it
/// resends the whole network, so the client ends up with the current truth.
async fn forward(
    shared: Arc<Shared>,
    network: String,
    wire: i64,
    instance: u64,
    first: Vec<String>,
    mut rx: broadcast::Receiver<WorldEvent>,
    out: mpsc::Sender<Outgoing>,
) {
    // Whether the last frame had to wait for room in the queue to the socket: the client was not
    // reading. A lag right after such a wait is the client's; after none, this task did not get
    // to run in time (the simulator's own CPU).
    let mut waited = false;
    for text in first {
        let Some(w) = queue(&out, Outgoing { wire, instance, text }).await else { return };
        waited = w;
    }
    loop {
        let texts = match rx.recv().await {
            Ok(event) => vec![frames::event(wire, &event)],
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                let world = shared.world();
                let Some((burst, fresh)) = world.open_view(&network) else { return };
                // The events still buffered for the old receiver came before the burst, which
                // supersedes them: they are dropped too. Counted under the lock, which every event
                // is sent under, so none after the burst is among them.
                let dropped = missed + rx.len() as u64;
                drop(world);
                shared.note_lag(dropped, waited);
                tracing::debug!(dropped, client_behind = waited, "wire lagged; resending the network");
                rx = fresh;
                burst.iter().map(|body| frames::unit_changed(wire, body)).collect()
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        for text in texts {
            let Some(w) = queue(&out, Outgoing { wire, instance, text }).await else { return };
            waited = w;
        }
    }
}

/// Queues a frame for the socket task: `Some(true)` when it had to wait for room (the queue was
/// full, its client behind), `None` when the socket is gone.
async fn queue(out: &mpsc::Sender<Outgoing>, frame: Outgoing) -> Option<bool> {
    match out.try_send(frame) {
        Ok(()) => Some(false),
        Err(mpsc::error::TrySendError::Full(frame)) => out.send(frame).await.ok().map(|()| true),
        Err(mpsc::error::TrySendError::Closed(_)) => None,
    }
}
