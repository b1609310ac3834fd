//! The WebSocket event channel: one socket per API key carrying one wire per network.
//!
//! Why one socket: the service limits sockets globally and answered "too many" with 429 on the
//! upgrade when clients opened one per network, so every network of a key shares one socket and
//! is told apart by its wire number.
//!
//! The channel is a task owning the socket. Networks register a wire with [`EventChannel::open`]
//! and receive [`WireEvent`]s on their own bounded queue (a slow consumer slows the socket down
//! instead of growing memory). After a socket loss the task reconnects with exponential backoff
//! and jitter and reopens every registered wire; the service then resends every unit, which is the
//! resync. It sends an app-level ping per wire at most every `ping_interval` (the service closes
//! idle wires after about 5 minutes) and a WebSocket ping every `ws_ping_interval`; a socket that
//! stays silent for two WebSocket ping intervals is considered dead.

use super::model::{ClientMessage, FrameError, Secret, ServerMessage, WireStatusKind, parse_frame};
use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior, interval, timeout};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Bytes, Message};
use tokio_util::sync::CancellationToken;

/// Largest frame the channel accepts; larger ones end the socket (and it reconnects).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;
/// How much one read from the socket may take. tungstenite zero-fills this much of its buffer
/// before every read; its 128 KiB default costs more than parsing the frame when events arrive
/// one by one. Events are ~0.5 KiB; a bigger frame just takes several reads.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Settings of one event channel.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// WebSocket URL, e.g. `wss://door.casambi.com/v1/bridge/`.
    pub url: String,
    /// API key, sent as the WebSocket subprotocol.
    pub api_key: Secret,
    /// App-level ping per wire (the service wants one at least every ~5 minutes).
    pub ping_interval: Duration,
    /// WebSocket-level ping, also the liveness check of the socket.
    pub ws_ping_interval: Duration,
    /// Time allowed for connecting and the upgrade.
    pub connect_timeout: Duration,
    /// First reconnect delay.
    pub min_backoff: Duration,
    /// Longest reconnect delay.
    pub max_backoff: Duration,
}

impl ChannelConfig {
    /// Defaults for the real service.
    pub fn new(url: impl Into<String>, api_key: Secret) -> ChannelConfig {
        ChannelConfig {
            url: url.into(),
            api_key,
            ping_interval: Duration::from_secs(240),
            ws_ping_interval: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(20),
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
        }
    }
}

/// What a network hears from its wire.
///
/// `Message` is much larger than the other variants; it is also nearly every event, so boxing it
/// would add an allocation per event on the hot path for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum WireEvent {
    /// The wire is open (`openWireSucceed`); the unit burst follows.
    Opened,
    /// The wire is down: the socket was lost or the service closed it. The channel reopens it by
    /// itself after reconnecting.
    Down {
        /// Why, for the log.
        reason: String,
    },
    /// The service refused to open the wire (`invalidSession`, `tooManyWires`, …). The channel
    /// does not retry: the network must get a new session and call [`EventChannel::open`] again.
    Refused(WireStatusKind),
    /// A message of the wire (`unitChanged`, `peerChanged`, `networkUpdated`, a control's
    /// `wireStatus` error, …).
    Message(ServerMessage),
}

/// Why a message could not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The network's wire is not open right now.
    #[error("the wire of network {0} is not open")]
    WireDown(String),
    /// The channel task has stopped.
    #[error("the event channel has stopped")]
    Stopped,
}

enum Command {
    Open {
        network: String,
        session: Secret,
        events: mpsc::Sender<WireEvent>,
    },
    Close {
        network: String,
    },
    Send {
        network: String,
        build: Box<dyn FnOnce(u32) -> ClientMessage + Send>,
        done: tokio::sync::oneshot::Sender<Result<(), ChannelError>>,
    },
}

/// Handle to a running event channel; cheap to clone.
#[derive(Clone)]
pub struct EventChannel {
    commands: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for EventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventChannel")
    }
}

impl EventChannel {
    /// Starts the channel task; it runs until `shutdown` is cancelled, then closes every wire and
    /// the socket cleanly.
    pub fn spawn(config: ChannelConfig, shutdown: CancellationToken) -> EventChannel {
        let (commands, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(config, rx, shutdown));
        EventChannel { commands }
    }

    /// Registers (or re-registers with a new session) the wire of a network. The wire is opened
    /// now if the socket is up, and after every reconnect.
    pub fn open(&self, network: &str, session: Secret, events: mpsc::Sender<WireEvent>) -> Result<(), ChannelError> {
        self.commands
            .send(Command::Open { network: network.to_string(), session, events })
            .map_err(|_| ChannelError::Stopped)
    }

    /// Closes and forgets the wire of a network.
    pub fn close(&self, network: &str) -> Result<(), ChannelError> {
        self.commands.send(Command::Close { network: network.to_string() }).map_err(|_| ChannelError::Stopped)
    }

    /// Sends a message on the network's wire; `build` receives the wire number. Fails when the
    /// wire is not open, so callers can wait or report instead of losing the message silently.
    pub async fn send(
        &self,
        network: &str,
        build: impl FnOnce(u32) -> ClientMessage + Send + 'static,
    ) -> Result<(), ChannelError> {
        let (done, result) = tokio::sync::oneshot::channel();
        self.commands
            .send(Command::Send { network: network.to_string(), build: Box::new(build), done })
            .map_err(|_| ChannelError::Stopped)?;
        result.await.map_err(|_| ChannelError::Stopped)?
    }
}

/// One registered wire.
struct Wire {
    network: String,
    session: Secret,
    events: mpsc::Sender<WireEvent>,
    /// `ref` of the pending open, `None` once answered.
    pending_ref: Option<String>,
    open: bool,
    /// The service refused the open; wait for a new registration.
    refused: bool,
    last_ping: Instant,
    /// The last message sent on the wire was an app ping. An error `wireStatus` naming the wire
    /// then answers the ping: the service no longer knows the wire (closed for idleness or
    /// dropped), so the wire is reopened. (Pongs do not name their wire, so they cannot clear it;
    /// a control message sent later does.)
    ping_outstanding: bool,
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Channel {
    config: ChannelConfig,
    wires: BTreeMap<u32, Wire>,
    next_wire: u32,
    opens: u64,
}

async fn run(config: ChannelConfig, mut commands: mpsc::UnboundedReceiver<Command>, shutdown: CancellationToken) {
    let mut ch = Channel { config, wires: BTreeMap::new(), next_wire: 1, opens: 0 };
    let mut backoff = ch.backoff();
    loop {
        // Connect only while some network wants a wire.
        if ch.wires.values().all(|w| w.refused) {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                cmd = commands.recv() => match cmd {
                    Some(cmd) => { ch.handle_offline(cmd); continue; }
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
                let reason = ch.serve(socket, &mut commands, &shutdown).await;
                ch.all_down(&reason).await;
                if shutdown.is_cancelled() {
                    return;
                }
                tracing::warn!(reason = %reason, "event channel lost; reconnecting");
                crate::health::metrics::metrics().reconnect("websocket");
            }
            Err(reason) => {
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
                cmd = commands.recv() => match cmd {
                    Some(cmd) => ch.handle_offline(cmd),
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

    async fn connect(&self) -> Result<Socket, String> {
        let mut request =
            self.config.url.as_str().into_client_request().map_err(|e| format!("bad WebSocket URL: {e}"))?;
        let key =
            HeaderValue::from_str(self.config.api_key.expose()).map_err(|_| "API key is not a valid header value")?;
        request.headers_mut().insert("Sec-WebSocket-Protocol", key);
        let ws_config = WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME_BYTES))
            .max_frame_size(Some(MAX_FRAME_BYTES))
            .read_buffer_size(READ_BUFFER_BYTES);
        let connect = tokio_tungstenite::connect_async_with_config(request, Some(ws_config), true);
        match timeout(self.config.connect_timeout, connect).await {
            Err(_) => Err("connect timed out".into()),
            Ok(Err(e)) => Err(describe_ws_error(&e)),
            Ok(Ok((socket, _))) => Ok(socket),
        }
    }

    /// Handles a command while no socket is up.
    fn handle_offline(&mut self, cmd: Command) {
        match cmd {
            Command::Open { network, session, events } => {
                self.register(network, session, events);
            }
            Command::Close { network } => self.wires.retain(|_, w| w.network != network),
            Command::Send { network, done, .. } => {
                let _ = done.send(Err(ChannelError::WireDown(network)));
            }
        }
    }

    /// Adds or updates a wire registration; returns its wire number.
    fn register(&mut self, network: String, session: Secret, events: mpsc::Sender<WireEvent>) -> u32 {
        if let Some((n, w)) = self.wires.iter_mut().find(|(_, w)| w.network == network) {
            w.session = session;
            w.events = events;
            w.refused = false;
            w.open = false;
            w.pending_ref = None;
            return *n;
        }
        let n = self.next_wire;
        self.next_wire += 1;
        self.wires.insert(
            n,
            Wire {
                network,
                session,
                events,
                pending_ref: None,
                open: false,
                refused: false,
                last_ping: Instant::now(),
                ping_outstanding: false,
            },
        );
        n
    }

    async fn send_open(&mut self, socket: &mut Socket, wire: u32) -> Result<(), String> {
        self.opens += 1;
        let Some(w) = self.wires.get_mut(&wire) else { return Ok(()) };
        let r = format!("casambi2mqtt-{wire}-{}", self.opens);
        let msg = ClientMessage::open(w.network.clone(), w.session.clone(), r.clone(), wire);
        w.pending_ref = Some(r);
        w.open = false;
        w.last_ping = Instant::now();
        send_json(socket, &msg).await
    }

    /// Runs one connected socket until it fails or shutdown; returns why it ended.
    async fn serve(
        &mut self,
        mut socket: Socket,
        commands: &mut mpsc::UnboundedReceiver<Command>,
        shutdown: &CancellationToken,
    ) -> String {
        let wires: Vec<u32> = self.wires.iter().filter(|(_, w)| !w.refused).map(|(n, _)| *n).collect();
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
                    let wires: Vec<u32> = self.wires.iter().filter(|(_, w)| w.open).map(|(n, _)| *n).collect();
                    for wire in wires {
                        let _ = send_json(&mut socket, &ClientMessage::Close { wire }).await;
                    }
                    let _ = socket.close(None).await;
                    return "shutting down".into();
                }
                frame = socket.next() => {
                    last_heard = Instant::now();
                    crate::coalesce::frame_arrived();
                    match frame {
                        Some(Ok(Message::Binary(bytes))) => {
                            if let Err(e) = self.dispatch(&mut socket, &bytes).await { return e; }
                        }
                        Some(Ok(Message::Text(text))) => {
                            if let Err(e) = self.dispatch(&mut socket, text.as_bytes()).await { return e; }
                        }
                        Some(Ok(Message::Close(frame))) => {
                            return format!("closed by the service ({})", frame.map(|f| f.reason.to_string()).unwrap_or_default());
                        }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return describe_ws_error(&e),
                        None => return "connection closed".into(),
                    }
                }
                cmd = commands.recv() => {
                    let Some(cmd) = cmd else { return "channel handle dropped".into() };
                    if let Err(e) = self.handle_online(&mut socket, cmd).await {
                        return e;
                    }
                }
                _ = ws_ping.tick() => {
                    if last_heard.elapsed() > self.config.ws_ping_interval * 2 {
                        return "no answer to WebSocket pings".into();
                    }
                    if let Err(e) = socket.send(Message::Ping(Bytes::new())).await {
                        return describe_ws_error(&e);
                    }
                }
                _ = ping_check.tick() => {
                    let due: Vec<u32> = self.wires.iter()
                        .filter(|(_, w)| w.open && w.last_ping.elapsed() >= self.config.ping_interval)
                        .map(|(n, _)| *n).collect();
                    for wire in due {
                        if let Some(w) = self.wires.get_mut(&wire) {
                            w.last_ping = Instant::now();
                            w.ping_outstanding = true;
                        }
                        if let Err(e) = send_json(&mut socket, &ClientMessage::Ping { wire }).await {
                            return e;
                        }
                    }
                }
            }
        }
    }

    async fn handle_online(&mut self, socket: &mut Socket, cmd: Command) -> Result<(), String> {
        match cmd {
            Command::Open { network, session, events } => {
                let wire = self.register(network, session, events);
                self.send_open(socket, wire).await
            }
            Command::Close { network } => {
                let found: Vec<u32> =
                    self.wires.iter().filter(|(_, w)| w.network == network).map(|(n, _)| *n).collect();
                for wire in found {
                    if self.wires.remove(&wire).is_some_and(|w| w.open) {
                        send_json(socket, &ClientMessage::Close { wire }).await?;
                    }
                }
                Ok(())
            }
            Command::Send { network, build, done } => {
                let wire = self.wires.iter().find(|(_, w)| w.network == network && w.open).map(|(n, _)| *n);
                let Some(wire) = wire else {
                    let _ = done.send(Err(ChannelError::WireDown(network)));
                    return Ok(());
                };
                let msg = build(wire);
                let result = send_json(socket, &msg).await;
                if let Some(w) = self.wires.get_mut(&wire) {
                    // Any message keeps the wire from idling out; a refusal now concerns this
                    // message, not a ping.
                    w.last_ping = Instant::now();
                    w.ping_outstanding = false;
                }
                let _ = done.send(if result.is_ok() { Ok(()) } else { Err(ChannelError::WireDown(network)) });
                result
            }
        }
    }

    /// Routes one frame to its wire. Malformed frames are logged and skipped; they never end the
    /// socket.
    async fn dispatch(&mut self, socket: &mut Socket, bytes: &[u8]) -> Result<(), String> {
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
                let target = self
                    .wires
                    .iter()
                    .find(|(_, w)| w.pending_ref.is_some() && w.pending_ref.as_deref() == ref_.as_deref())
                    .map(|(n, _)| *n)
                    .or(wire.filter(|n| self.wires.get(n).is_some_and(|w| w.pending_ref.is_some())));
                match target.and_then(|n| self.wires.get_mut(&n)) {
                    Some(w) => {
                        w.pending_ref = None;
                        let event = if status.is_success() {
                            w.open = true;
                            WireEvent::Opened
                        } else {
                            w.refused = true;
                            WireEvent::Refused(status)
                        };
                        let _ = w.events.send(event).await;
                    }
                    None => {
                        let lost = wire.filter(|n| {
                            self.wires.get(n).is_some_and(|w| w.open && w.ping_outstanding && !status.is_success())
                        });
                        if let Some(n) = lost {
                            // The service no longer knows this wire: report it down and reopen it.
                            if let Some(w) = self.wires.get_mut(&n) {
                                w.open = false;
                                w.ping_outstanding = false;
                                let reason = format!("the service closed the wire ({})", status.as_str());
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

    /// Tells every wire that was open or opening that it is down.
    async fn all_down(&mut self, reason: &str) {
        for w in self.wires.values_mut() {
            let was = w.open || w.pending_ref.is_some();
            w.open = false;
            w.pending_ref = None;
            w.ping_outstanding = false;
            if was || !w.refused {
                let _ = w.events.send(WireEvent::Down { reason: reason.to_string() }).await;
            }
        }
    }
}

async fn send_json(socket: &mut Socket, msg: &ClientMessage) -> Result<(), String> {
    let text = msg.to_json().map_err(|e| format!("cannot encode a message: {e}"))?;
    socket.send(Message::text(text)).await.map_err(|e| describe_ws_error(&e))
}

fn log_bad_frame(e: &FrameError, len: usize) {
    tracing::warn!(error = %e, bytes = len, "malformed frame skipped");
}

/// A WebSocket error in words, with the HTTP status of a refused upgrade (429 = too many sockets).
fn describe_ws_error(e: &tokio_tungstenite::tungstenite::Error) -> String {
    use tokio_tungstenite::tungstenite::Error;
    match e {
        Error::Http(response) => format!("upgrade refused with HTTP {}", response.status()),
        other => other.to_string(),
    }
}
