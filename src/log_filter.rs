//! What the log never shows, whatever `log.level` or `RUST_LOG` asks for.
//!
//! The WebSocket library dumps the handshake request (the API key header) and every frame (the
//! session ids of the wire-open messages) at trace level. Its targets are held at debug, so
//! secrets stay out of the log at every level (docs/configuration.md, `log.level`).

use tracing_subscriber::EnvFilter;

/// The library's targets (its modules): each is held, so that a directive naming a module
/// (`tungstenite::protocol=trace`) is replaced too, not only one naming the crate.
const HELD: [&str; 10] = [
    "tungstenite",
    "tungstenite::handshake",
    "tungstenite::handshake::client",
    "tungstenite::handshake::server",
    "tungstenite::handshake::machine",
    "tungstenite::protocol",
    "tungstenite::protocol::frame",
    "tungstenite::protocol::frame::frame",
    "tokio_tungstenite",
    "tokio_tungstenite::compat",
];

/// `filter` with the targets that would print secrets held at debug. A filter that enables
/// nothing at trace is left as it is (holding would enable the library's debug lines).
pub fn without_secrets(filter: EnvFilter) -> EnvFilter {
    if filter.max_level_hint().is_some_and(|max| max < tracing::level_filters::LevelFilter::TRACE) {
        return filter;
    }
    HELD.iter().filter_map(|target| format!("{target}=debug").parse().ok()).fold(filter, EnvFilter::add_directive)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_websocket_library_s_dump_never_reaches_the_log() {
        for asked in ["trace", "tungstenite=trace", "info,tungstenite::handshake::client=trace", "info"] {
            let buffer = Buffer::default();
            let writer = buffer.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter(without_secrets(EnvFilter::new(asked)))
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::with_default(subscriber, || {
                tracing::trace!(target: "tungstenite::handshake::client", "Request: X-Casambi-Key: k3y");
                tracing::trace!(target: "tungstenite::protocol", "Received message session-1d");
                tracing::debug!(target: "tungstenite::handshake::client", "Client handshake done.");
                tracing::trace!(target: "casambi2mqtt::cloud", "shown at trace");
            });
            let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
            assert!(!text.contains("k3y") && !text.contains("session-1d"), "{asked}: {text}");
            if asked == "info" {
                assert!(text.is_empty(), "nothing below info is raised: {text}");
                continue;
            }
            assert!(text.contains("handshake done"), "{asked}: the library's debug lines stay: {text}");
            if asked == "trace" {
                assert!(text.contains("shown at trace"), "{text}");
            }
        }
    }
}
