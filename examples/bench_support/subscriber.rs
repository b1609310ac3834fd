//! The benchmarks' subscriber, which timestamps every message, and a plain publisher for the
//! commands they send.
//!
//! The subscriber runs on the machine it measures, so it is built to cost little per message: it
//! reads whatever the broker has sent in one read (up to a few hundred messages under load),
//! records them under one lock and one timestamp, keeps their payloads in the blocks they were
//! read into, and answers all their PUBACKs with one write. rumqttc's event loop would hand each
//! message over as an event with a copied payload and write PUBACKs ten messages at a time,
//! taking CPU from the cores the bridge and the broker are measured on. The packets are
//! rumqttc's own codec (`Packet::read` / `write`); only the loop is this file's.

use bytes::BytesMut;
use rumqttc::{AsyncClient, ConnectReturnCode, MqttOptions, Packet, PubAck, QoS, Subscribe, SubscribeFilter};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest packet accepted (a retained device config of a big site is a few KiB).
const MAX_PACKET: usize = 1024 * 1024;
/// The block the socket is read into: a burst of messages in a few reads.
const READ_BYTES: usize = 256 * 1024;
/// The least room a read is given before a new block is taken.
const MIN_READ_BYTES: usize = 16 * 1024;

/// One message as received.
#[derive(Debug, Clone)]
pub struct Received {
    /// When it arrived (since [`Recorder::base`]): when the read that brought it returned.
    pub at: Duration,
    pub topic: String,
    pub payload: bytes::Bytes,
    pub retain: bool,
}

/// Everything the subscriber received, in order.
pub struct Recorder {
    pub base: Instant,
    log: Mutex<Log>,
}

/// Messages per chunk of a [`Log`].
const CHUNK: usize = 1 << 16;

/// The messages in chunks of [`CHUNK`], so that a long set never moves what it has stored. One
/// `Vec` of them doubled by copying: at 4 and 8 million messages (in the fourth and the seventh
/// 30 s phase at 20,000 changes/s) the copy of 335 or 670 MB and the faults of the fresh pages held the
/// lock, and the harness's one thread, for ~0.4 s; the simulator's wire forwarder, on that
/// thread, then lagged behind its network's 8,192 events and the run lost changes that the
/// bridge never saw (BENCHMARKS.md, "End to end → The harness's own stalls; zero loss up to the
/// broker's saturation").
#[derive(Default)]
struct Log {
    chunks: Vec<Vec<Received>>,
    len: usize,
}

impl Log {
    fn append(&mut self, batch: &mut Vec<Received>) {
        self.len += batch.len();
        for m in batch.drain(..) {
            match self.chunks.last_mut() {
                Some(chunk) if chunk.len() < CHUNK => chunk.push(m),
                _ => {
                    let mut chunk = Vec::with_capacity(CHUNK);
                    chunk.push(m);
                    self.chunks.push(chunk);
                }
            }
        }
    }

    /// The messages from index `from` on, in order.
    fn starting_at(&self, from: usize) -> impl Iterator<Item = &Received> {
        let (first, skip) = (from / CHUNK, from % CHUNK);
        self.chunks.iter().skip(first).enumerate().flat_map(move |(i, chunk)| {
            let start = if i == 0 { skip } else { 0 };
            chunk.get(start..).unwrap_or_default().iter()
        })
    }

    fn last(&self) -> Option<&Received> {
        self.chunks.last()?.last()
    }
}

impl Recorder {
    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Messages received so far.
    pub fn len(&self) -> usize {
        self.log().len
    }

    /// A copy of the messages from index `from` on.
    pub fn since(&self, from: usize) -> Vec<Received> {
        self.log().starting_at(from).cloned().collect()
    }

    /// Calls `visit` with each message from index `from` on, without copying them (the harness
    /// reads every message of a phase on the machine it measures); returns the index after the
    /// last one, where the next scan starts.
    pub fn scan(&self, from: usize, mut visit: impl FnMut(&Received)) -> usize {
        let log = self.log();
        log.starting_at(from).for_each(&mut visit);
        log.len.max(from)
    }

    /// When the last message from index `from` on arrived (`None` if none has).
    pub fn last_since(&self, from: usize) -> Option<Duration> {
        let log = self.log();
        log.last().filter(|_| log.len > from).map(|r| r.at)
    }

    /// Time since the last message (`None` before the first).
    pub fn quiet_for(&self) -> Option<Duration> {
        self.last_since(0).map(|at| self.base.elapsed().saturating_sub(at))
    }

    /// Waits until nothing arrived for `quiet` (at most `max`).
    pub async fn settle(&self, quiet: Duration, max: Duration) {
        let deadline = Instant::now() + max;
        while Instant::now() < deadline {
            if self.quiet_for().is_some_and(|q| q >= quiet) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A running subscriber; dropping it closes its connection.
pub struct Subscriber {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Subscribes to `filters` at QoS 1 on `port` and records everything; returns once subscribed.
pub async fn subscribe(port: u16, id: &str, filters: &[&str], base: Instant) -> (Arc<Recorder>, Subscriber) {
    let recorder = Arc::new(Recorder { base, log: Mutex::new(Log::default()) });
    let (socket, buffer) = tokio::time::timeout(Duration::from_secs(10), connect(port, id, filters))
        .await
        .unwrap_or_else(|_| Err(format!("subscriber {id}: not subscribed within 10 s")))
        .unwrap_or_else(|e| panic!("{e}"));
    let task = tokio::spawn(record(socket, buffer, recorder.clone()));
    (recorder, Subscriber { task })
}

/// Connects (clean session, keep-alive off: the subscriber may be quiet for minutes between
/// phases) and subscribes; returns the socket and whatever followed the SUBACK in its read.
async fn connect(port: u16, id: &str, filters: &[&str]) -> Result<(TcpStream, BytesMut), String> {
    let mut socket =
        TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| format!("connecting to the broker: {e}"))?;
    socket.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut connect = rumqttc::Connect::new(id);
    connect.keep_alive = 0;
    let mut subscribe =
        Subscribe::new_many(filters.iter().map(|f| SubscribeFilter::new(f.to_string(), QoS::AtLeastOnce)));
    subscribe.pkid = 1;
    let mut out = BytesMut::new();
    for packet in [Packet::Connect(connect), Packet::Subscribe(subscribe)] {
        packet.write(&mut out, MAX_PACKET).map_err(|e| format!("encoding {packet:?}: {e}"))?;
    }
    socket.write_all(&out).await.map_err(|e| format!("writing CONNECT: {e}"))?;
    let mut buffer = BytesMut::with_capacity(READ_BYTES);
    loop {
        match next_packet(&mut socket, &mut buffer).await? {
            Packet::ConnAck(ack) if ack.code != ConnectReturnCode::Success => {
                return Err(format!("the broker refused the subscriber: {:?}", ack.code));
            }
            Packet::SubAck(ack) => {
                return match ack.return_codes.iter().position(|c| *c == rumqttc::SubscribeReasonCode::Failure) {
                    Some(i) => Err(format!("the broker refused the subscription to {:?}", filters.get(i))),
                    None => Ok((socket, buffer)),
                };
            }
            _ => {}
        }
    }
}

/// The next whole packet, reading more as needed.
async fn next_packet(socket: &mut TcpStream, buffer: &mut BytesMut) -> Result<Packet, String> {
    loop {
        match Packet::read(buffer, MAX_PACKET) {
            Ok(packet) => return Ok(packet),
            Err(rumqttc::Error::InsufficientBytes(_)) => fill(socket, buffer).await?,
            Err(e) => return Err(format!("a malformed packet from the broker: {e}")),
        }
    }
}

/// Reads what the socket has (at least one byte) into `buffer`.
///
/// A new block is taken only when the current one is nearly full: the recorded payloads share
/// the blocks they were read into, so a block taken for every read would be held mostly empty.
async fn fill(socket: &mut TcpStream, buffer: &mut BytesMut) -> Result<(), String> {
    if buffer.capacity() - buffer.len() < MIN_READ_BYTES {
        buffer.reserve(READ_BYTES);
    }
    match socket.read_buf(buffer).await {
        Ok(0) => Err("the broker closed the connection".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("reading from the broker: {e}")),
    }
}

/// The subscriber's loop: every read's messages recorded under one lock and one timestamp, their
/// PUBACKs sent in one write.
async fn record(mut socket: TcpStream, mut buffer: BytesMut, recorder: Arc<Recorder>) {
    let mut acks = BytesMut::new();
    let mut batch = Vec::new();
    loop {
        let at = recorder.base.elapsed();
        loop {
            match Packet::read(&mut buffer, MAX_PACKET) {
                Ok(Packet::Publish(p)) => {
                    if p.qos != QoS::AtMostOnce {
                        // A PUBACK of 4 bytes cannot fail to encode.
                        let _ = PubAck::new(p.pkid).write(&mut acks);
                    }
                    batch.push(Received { at, topic: p.topic, payload: p.payload, retain: p.retain });
                }
                Ok(_) => {}
                Err(rumqttc::Error::InsufficientBytes(_)) => break,
                Err(e) => return eprintln!("subscriber: a malformed packet from the broker: {e}"),
            }
        }
        if !batch.is_empty() {
            recorder.log().append(&mut batch);
        }
        if !acks.is_empty() {
            if let Err(e) = socket.write_all(&acks).await {
                return eprintln!("subscriber: writing PUBACKs: {e}");
            }
            acks.clear();
        }
        if let Err(e) = fill(&mut socket, &mut buffer).await {
            return eprintln!("subscriber: {e}");
        }
    }
}

/// A client that only publishes (the commands), its event loop polled in a task of its own.
pub fn publisher(port: u16, id: &str) -> AsyncClient {
    let mut o = MqttOptions::new(id, "127.0.0.1", port);
    o.set_keep_alive(Duration::from_secs(30));
    let (client, mut eventloop) = AsyncClient::new(o, 64);
    // As the commands' client before it (the subscriber's): each command leaves at once.
    let mut net = rumqttc::NetworkOptions::new();
    net.set_tcp_nodelay(true);
    eventloop.set_network_options(net);
    tokio::spawn(async move {
        loop {
            match eventloop.poll().await {
                Ok(_) => {}
                // Every handle dropped: the run is over.
                Err(rumqttc::ConnectionError::RequestsDone) => break,
                Err(e) => {
                    eprintln!("command publisher: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    });
    client
}

#[cfg(test)]
mod tests {
    use super::{CHUNK, Log, Received};
    use std::time::Duration;

    fn message(i: usize) -> Received {
        Received {
            at: Duration::from_nanos(i as u64),
            topic: i.to_string(),
            payload: bytes::Bytes::new(),
            retain: false,
        }
    }

    #[test]
    fn the_log_reads_back_in_order_from_any_index_across_chunks() {
        let mut log = Log::default();
        let total = 2 * CHUNK + 5;
        // Batches that straddle the chunk boundaries.
        let mut next = 0;
        for size in [1, CHUNK - 2, 3, CHUNK, 3] {
            let mut batch: Vec<Received> = (next..next + size).map(message).collect();
            next += size;
            log.append(&mut batch);
            assert!(batch.is_empty());
        }
        assert_eq!((next, log.len), (total, total));
        assert!(log.chunks.iter().all(|c| c.len() <= CHUNK), "a chunk never grows past its size");
        for from in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, total - 1, total, total + 7] {
            let read: Vec<String> = log.starting_at(from).map(|m| m.topic.clone()).collect();
            let expected: Vec<String> = (from..total).map(|i| i.to_string()).collect();
            assert_eq!(read, expected, "from {from}");
        }
        assert_eq!(log.last().map(|m| m.topic.as_str()), Some((total - 1).to_string().as_str()));
    }
}
