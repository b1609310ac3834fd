//! The HTTP listener's accept loop and its defences (docs/web.md#limits): a cap on open
//! connections (a short `503` beyond it), a deadline for a request's headers (hyper's
//! `header_read_timeout`, which also closes a keep-alive connection that sends nothing more),
//! and an idle deadline for a connection that neither reads nor writes (a body that never comes,
//! an answer nobody reads).
//!
//! The cap stays well below the process's limit of open files (`ulimit -n`), so a flood of
//! connections never takes the descriptors that the MQTT and cloud connections need to reconnect.
//! A few connections are kept for loopback peers beyond the cap: a container's health check
//! (`casambi2mqtt healthcheck`) still answers while others hold every regular place.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Descriptors kept for everything but the listener's connections: the MQTT and cloud
/// connections, the REST client's pool, the runtime's own, files read at run time.
pub const FD_RESERVE: u64 = 128;
/// Connections beyond the cap kept for loopback peers (health checks on this machine).
pub const LOOPBACK_SPARE: usize = 4;
/// Refusals (`503`) being written at once; beyond that a connection is closed unanswered.
const REFUSING: usize = 64;
/// How long a refusal may take to write and to read what the client sent (closing with unread
/// bytes would reset the connection, and the client could lose the answer).
const REFUSAL_TIME: Duration = Duration::from_millis(250);
/// How long open connections may take to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// A connection's read buffer: far above any request this listener takes (headers included).
const READ_BUFFER: usize = 64 * 1024;

/// The listener's limits (`http.*`, docs/configuration.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open connections at most (lowered by [`connection_cap`] to what the process may open).
    pub max_connections: usize,
    /// Time for a request's headers, and for the next request of a kept-alive connection.
    pub header_timeout: Duration,
    /// Time a connection may neither read nor write.
    pub idle_timeout: Duration,
}

/// The process's limit of open files (the soft limit, `ulimit -n`), from `/proc/self/limits`;
/// `None` when unknown or unlimited.
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    soft_open_files(&limits)
}

/// The soft limit of the `Max open files` line of a `/proc/<pid>/limits` text.
fn soft_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files").split_whitespace().next()?.parse().ok()
}

/// The connection cap for `configured` under a limit of `open_files`: at most the limit less
/// [`FD_RESERVE`], [`LOOPBACK_SPARE`] and the refusals in flight, and at least 1.
pub fn connection_cap(configured: usize, open_files: Option<u64>) -> usize {
    let Some(files) = open_files else { return configured };
    let room = files.saturating_sub(FD_RESERVE + (LOOPBACK_SPARE + REFUSING) as u64);
    configured.min(usize::try_from(room).unwrap_or(usize::MAX)).max(1)
}

/// The answer to a connection beyond the cap, with the headers every answer carries.
fn refusal() -> Vec<u8> {
    let body = r#"{"error":"too many connections; try again shortly"}"#;
    let mut text = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 5\r\nconnection: close\r\ncache-control: no-store\r\n",
        body.len()
    );
    for (name, value) in super::assets::SECURITY_HEADERS {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text.into_bytes()
}

/// Serves `app` on `listener` within `limits` until `shutdown`; then stops accepting and lets
/// each open connection finish its request.
pub async fn run(listener: TcpListener, app: Router, limits: Limits, shutdown: CancellationToken) {
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let spare = Arc::new(Semaphore::new(LOOPBACK_SPARE));
    let refusing = Arc::new(Semaphore::new(REFUSING));
    let refusal: Arc<[u8]> = refusal().into();
    let mut warned: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors (or a connection gone before it was taken): wait a little
                // rather than spin; say so once a minute at most.
                if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(error = %e, "the HTTP listener cannot accept a connection");
                    warned = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let place = places
            .clone()
            .try_acquire_owned()
            .or_else(|e| if peer.ip().is_loopback() { spare.clone().try_acquire_owned() } else { Err(e) });
        match place {
            Ok(place) => {
                tokio::spawn(serve_connection(stream, app.clone(), limits, shutdown.clone(), place));
            }
            Err(_) => {
                if let Ok(permit) = refusing.clone().try_acquire_owned() {
                    tokio::spawn(refuse(stream, refusal.clone(), permit));
                }
            }
        }
    }
    // Each open connection finishes its request (live streams end at shutdown).
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, places.acquire_many(all)).await;
}

/// Answers `503` to a connection beyond the cap and closes it (after reading what it sent, so
/// the client reads the answer rather than a reset).
async fn refuse(mut stream: TcpStream, answer: Arc<[u8]>, _permit: OwnedSemaphorePermit) {
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(&answer).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 1024];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), io::Error>(())
    })
    .await;
}

/// One connection: HTTP/1.1 with the header deadline, closed when idle past the idle deadline.
async fn serve_connection(
    stream: TcpStream,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
    _place: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched { inner: stream, activity: activity.clone() });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).max_buf_size(READ_BUFFER);
    let connection = builder.serve_connection(io, TowerToHyperService::new(app));
    tokio::pin!(connection);
    let mut check = tokio::time::interval((limits.idle_timeout / 4).max(Duration::from_millis(10)));
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = shutdown.cancelled(), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = check.tick() => {
                if activity.idle_for() >= limits.idle_timeout {
                    tracing::debug!("an idle HTTP connection closed");
                    return;
                }
            }
        }
    }
}

/// When a connection last read or wrote a byte.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity { start: Instant::now(), last_ms: AtomicU64::new(0) }
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        self.start.elapsed().saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// A stream that notes its progress in [`Activity`].
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_descriptors_for_the_bridge() {
        assert_eq!(connection_cap(256, None), 256);
        assert_eq!(connection_cap(256, Some(1_048_576)), 256);
        assert_eq!(connection_cap(256, Some(1024)), 256);
        let reserved = FD_RESERVE + (LOOPBACK_SPARE + REFUSING) as u64;
        assert_eq!(connection_cap(256, Some(300)), usize::try_from(300 - reserved).unwrap());
        assert_eq!(connection_cap(256, Some(64)), 1, "never none");
    }

    #[test]
    fn the_limit_is_read_from_proc() {
        let text = "Max cpu time              unlimited            unlimited            seconds\n\
                    Max open files            1024                 524288               files\n";
        assert_eq!(soft_open_files(text), Some(1024));
        assert_eq!(soft_open_files("Max open files            unlimited            unlimited            files"), None);
        assert!(open_files_limit().is_some(), "this machine has a limit");
    }

    #[test]
    fn the_refusal_is_a_whole_http_answer() {
        let text = String::from_utf8(refusal()).unwrap();
        assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{text}");
        assert!(text.contains("content-security-policy: default-src 'self'"), "{text}");
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())), "{text}");
    }
}
