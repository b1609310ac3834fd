//! The channel task: owns the socket, connects and reconnects, opens the wires and routes frames
//! to them.

use super::error::DownReason;
use super::wire::Wire;
use super::{ChannelConfig, ChannelError, MAX_FRAME_BYTES, Request, WireEvent};
use crate::cloud::model::{ClientMessage, FrameError, Secret, ServerMessage, parse_frame};
use crate::wake_batch::WakeBatcher;
use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior, interval, timeout};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Bytes, Message};
use tokio_util::sync::CancellationToken;

/// How much one read from the socket may take. tungstenite zero-fills this much of its buffer
/// before every read, the read that finds the socket empty included, and the zeroing evicts the
/// data the next event's parse and render need from the core's first-level cache (32–48 KiB).
/// Events are ~0.5 KiB, so a read takes the several that a wake-up batches
/// (`cloud.event_batch_window`); a bigger frame just takes several reads.
const READ_BUFFER_BYTES: usize = 4 * 1024;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The task's state: the registered wires, by wire number.
struct Channel {
    config: ChannelConfig,
    wake: WakeBatcher,
    wires: BTreeMap<u32, Wire>,
    next_wire: u32,
    /// Opens sent so far; part of every open's `ref`, so an answer to an earlier open of the same
    /// wire is never taken for the latest one's.
    opens: u64,
}

pub(super) async fn run(
    config: ChannelConfig,
    wake: WakeBatcher,
    mut requests: mpsc::UnboundedReceiver<Request>,
    shutdown: CancellationToken,
) {
    let mut ch = Channel { config, wake, wires: BTreeMap::new(), next_wire: 1, opens: 0 };
    let mut backoff = ch.backoff();
    loop {
        // Connect only while some network wants a wire.
        if ch.wires.values().all(Wire::is_refused) {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                request = requests.recv() => match request {
                    Some(request) => { ch.handle_offline(request); continue; }
                    None => return,
                },
            }
        }
        let socket = tokio::select! {
            _ = shutdown.cancelled() => return,
            s = ch.connect() => s,
        };
        match socket {
            Ok(socket) => {
                backoff = ch.backoff();
                let reason = Arc::new(ch.serve(socket, &mut requests, &shutdown).await);
                ch.all_down(&reason).await;
                if shutdown.is_cancelled() {
                    return;
                }
                tracing::warn!(reason = %reason, "event channel lost; reconnecting");
                crate::metrics::metrics().reconnect("websocket");
            }
            Err(reason) => {
                let reason = Arc::new(reason);
                ch.all_down(&reason).await;
                tracing::warn!(reason = %reason, "event channel connect failed");
            }
        }
        let delay = backoff.next().unwrap_or(ch.config.max_backoff);
        let until = Instant::now() + delay;
        // Keep taking registrations while waiting, so none is lost.
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(until) => break,
                request = requests.recv() => match request {
                    Some(request) => ch.handle_offline(request),
                    None => return,
                },
            }
        }
    }
}

impl Channel {
    fn backoff(&self) -> impl Iterator<Item = Duration> + use<> {
        ExponentialBuilder::default()
            .with_min_delay(self.config.min_backoff)
            .with_max_delay(self.config.max_backoff)
            .with_jitter()
            .without_max_times()
            .build()
    }

    async fn connect(&self) -> Result<Socket, DownReason> {
        let mut request = self.config.url.as_str().into_client_request().map_err(DownReason::Url)?;
        let key = HeaderValue::from_str(self.config.api_key.expose()).map_err(|_| DownReason::ApiKeyHeader)?;
        request.headers_mut().insert("Sec-WebSocket-Protocol", key);
        let ws_config = WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME_BYTES))
            .max_frame_size(Some(MAX_FRAME_BYTES))
            .read_buffer_size(READ_BUFFER_BYTES);
        let connect = tokio_tungstenite::connect_async_with_config(request, Some(ws_config), true);
        match timeout(self.config.connect_timeout, connect).await {
            Err(_) => Err(DownReason::ConnectTimeout),
            Ok(Err(e)) => Err(e.into()),
            Ok(Ok((socket, _))) => Ok(socket),
        }
    }

    /// Handles a command while no socket is up.
    fn handle_offline(&mut self, request: Request) {
        match request {
            Request::Open { network, session, events } => {
                self.register(network, session, events);
            }
            Request::Close { network } => self.wires.retain(|_, w| w.network != network),
            Request::Send { network, done, .. } => {
                let _ = done.send(Err(ChannelError::WireDown(network)));
            }
        }
    }

    /// Adds or updates a wire registration (closed until opened); returns its wire number.
    fn register(&mut self, network: String, session: Secret, events: mpsc::Sender<WireEvent>) -> u32 {
        if let Some((n, w)) = self.wires.iter_mut().find(|(_, w)| w.network == network) {
            *w = Wire::new(network, session, events);
            return *n;
        }
        let n = self.next_wire;
        self.next_wire += 1;
        self.wires.insert(n, Wire::new(network, session, events));
        n
    }

    async fn send_open(&mut self, socket: &mut Socket, wire: u32) -> Result<(), DownReason> {
        self.opens += 1;
        let Some(w) = self.wires.get_mut(&wire) else { return Ok(()) };
        let r = format!("casambi2mqtt-{wire}-{}", self.opens);
        let msg = ClientMessage::open(w.network.clone(), w.session.clone(), r.clone(), wire);
        w.opening(r);
        send_json(socket, &msg).await
    }

    /// Runs one connected socket until it fails or shutdown; returns why it ended.
    async fn serve(
        &mut self,
        mut socket: Socket,
        requests: &mut mpsc::UnboundedReceiver<Request>,
        shutdown: &CancellationToken,
    ) -> DownReason {
        let wires: Vec<u32> = self.wires.iter().filter(|(_, w)| !w.is_refused()).map(|(n, _)| *n).collect();
        for wire in wires {
            if let Err(e) = self.send_open(&mut socket, wire).await {
                return e;
            }
        }
        let mut ws_ping = interval(self.config.ws_ping_interval);
        ws_ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut last_heard = Instant::now();
        // Made once, not per turn of the loop: a timer made anew each turn would restart with
        // every frame, and a wire with a frame at least every second would never be pinged (the
        // service closes it after ~5 minutes without a ping, however busy it is).
        let mut ping_check = interval(Duration::from_secs(1).min(self.config.ping_interval));
        ping_check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let stopping = shutdown.cancelled();
        tokio::pin!(stopping);
        loop {
            tokio::select! {
                () = &mut stopping => {
                    let wires: Vec<u32> = self.wires.iter().filter(|(_, w)| w.is_open()).map(|(n, _)| *n).collect();
                    for wire in wires {
                        let _ = send_json(&mut socket, &ClientMessage::Close { wire }).await;
                    }
                    let _ = socket.close(None).await;
                    return DownReason::ShuttingDown;
                }
                frame = socket.next() => {
                    last_heard = Instant::now();
                    self.wake.frame_arrived();
                    match frame {
                        Some(Ok(Message::Binary(bytes))) => {
                            if let Err(e) = self.dispatch(&mut socket, &bytes).await { return e; }
                        }
                        Some(Ok(Message::Text(text))) => {
                            if let Err(e) = self.dispatch(&mut socket, text.as_bytes()).await { return e; }
                        }
                        Some(Ok(Message::Close(frame))) => {
                            return DownReason::ClosedByService(frame.map(|f| f.reason.to_string()).unwrap_or_default());
                        }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return e.into(),
                        None => return DownReason::ConnectionClosed,
                    }
                }
                request = requests.recv() => {
                    let Some(request) = request else { return DownReason::HandleDropped };
                    if let Err(e) = self.handle_online(&mut socket, request).await {
                        return e;
                    }
                }
                _ = ws_ping.tick() => {
                    if last_heard.elapsed() > self.config.ws_ping_interval * 2 {
                        return DownReason::NoPongs;
                    }
                    if let Err(e) = socket.send(Message::Ping(Bytes::new())).await {
                        return e.into();
                    }
                }
                _ = ping_check.tick() => {
                    let due: Vec<u32> = self.wires.iter()
                        .filter(|(_, w)| w.ping_due(self.config.ping_interval))
                        .map(|(n, _)| *n).collect();
                    for wire in due {
                        if let Some(w) = self.wires.get_mut(&wire) {
                            w.sent(true);
                        }
                        if let Err(e) = send_json(&mut socket, &ClientMessage::Ping { wire }).await {
                            return e;
                        }
                    }
                }
            }
        }
    }

    async fn handle_online(&mut self, socket: &mut Socket, request: Request) -> Result<(), DownReason> {
        match request {
            Request::Open { network, session, events } => {
                let wire = self.register(network, session, events);
                self.send_open(socket, wire).await
            }
            Request::Close { network } => {
                let found: Vec<u32> =
                    self.wires.iter().filter(|(_, w)| w.network == network).map(|(n, _)| *n).collect();
                for wire in found {
                    if self.wires.remove(&wire).is_some_and(|w| w.is_open()) {
                        send_json(socket, &ClientMessage::Close { wire }).await?;
                    }
                }
                Ok(())
            }
            Request::Send { network, build, done } => {
                let wire = self.wires.iter().find(|(_, w)| w.network == network && w.is_open()).map(|(n, _)| *n);
                let Some(wire) = wire else {
                    let _ = done.send(Err(ChannelError::WireDown(network)));
                    return Ok(());
                };
                let msg = build(wire);
                let result = send_json(socket, &msg).await;
                if let Some(w) = self.wires.get_mut(&wire) {
                    // Any message keeps the wire from idling out; a refusal now concerns this
                    // message, not a ping.
                    w.sent(false);
                }
                let _ = done.send(if result.is_ok() { Ok(()) } else { Err(ChannelError::WireDown(network)) });
                result
            }
        }
    }

    /// Routes one frame to its wire. Malformed frames are logged and skipped; they never end the
    /// socket.
    async fn dispatch(&mut self, socket: &mut Socket, bytes: &[u8]) -> Result<(), DownReason> {
        let msg = match parse_frame(bytes) {
            Ok(msg) => msg,
            Err(e) => {
                log_bad_frame(&e, bytes.len());
                return Ok(());
            }
        };
        match msg {
            ServerMessage::Pong => {}
            ServerMessage::WireStatus { status, ref_, wire } => {
                // The answer to an open: by its `ref`, else by the wire number of an opening wire.
                let target = self
                    .wires
                    .iter()
                    .find(|(_, w)| w.awaits(ref_.as_deref()))
                    .map(|(n, _)| *n)
                    .or(wire.filter(|n| self.wires.get(n).is_some_and(Wire::is_opening)));
                match target.and_then(|n| self.wires.get_mut(&n)) {
                    Some(w) => {
                        let event = w.answered(status);
                        let _ = w.events.send(event).await;
                    }
                    None => {
                        let lost = wire
                            .filter(|n| !status.is_success() && self.wires.get(n).is_some_and(Wire::ping_outstanding));
                        if let Some(n) = lost {
                            // The service no longer knows this wire: report it down and reopen it.
                            if let Some(w) = self.wires.get_mut(&n) {
                                w.down();
                                let reason = Arc::new(DownReason::WireClosed(status));
                                tracing::warn!(network = %w.network, %reason, "wire lost; reopening");
                                let _ = w.events.send(WireEvent::Down { reason }).await;
                            }
                            return self.send_open(socket, n).await;
                        }
                        // A status about a control message on an open wire.
                        if let Some(w) = wire.and_then(|n| self.wires.get(&n)) {
                            let _ = w
                                .events
                                .send(WireEvent::Message(ServerMessage::WireStatus { status, ref_, wire }))
                                .await;
                        }
                    }
                }
            }
            other => {
                let wire = match &other {
                    ServerMessage::UnitChanged { wire, .. }
                    | ServerMessage::PeerChanged { wire, .. }
                    | ServerMessage::NetworkUpdated { wire } => Some(*wire),
                    ServerMessage::NetworkLog { wire, .. }
                    | ServerMessage::Response { wire, .. }
                    | ServerMessage::Unknown { wire, .. } => *wire,
                    _ => None,
                };
                match wire.and_then(|n| self.wires.get(&n)) {
                    Some(w) => {
                        // A closed receiver means the network is shutting down; nothing to do.
                        let _ = w.events.send(WireEvent::Message(other)).await;
                    }
                    None => tracing::debug!(?wire, "frame for an unknown wire ignored"),
                }
            }
        }
        Ok(())
    }

    /// Closes every wire the socket carried and tells each network that is not refused.
    async fn all_down(&mut self, reason: &Arc<DownReason>) {
        for w in self.wires.values_mut() {
            if w.down() {
                let _ = w.events.send(WireEvent::Down { reason: reason.clone() }).await;
            }
        }
    }
}

async fn send_json(socket: &mut Socket, msg: &ClientMessage) -> Result<(), DownReason> {
    let text = msg.to_json().map_err(DownReason::Encode)?;
    Ok(socket.send(Message::text(text)).await?)
}

fn log_bad_frame(e: &FrameError, len: usize) {
    tracing::warn!(error = %e, bytes = len, "malformed frame skipped");
}
