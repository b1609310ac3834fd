//! Captures log output in memory: every event the tracing macros emit (with all its fields), as
//! the `fmt` subscriber would print it, for tests that assert on what users see in the log or
//! that nothing secret reaches it.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// The captured log text; cheap to clone.
#[derive(Clone, Default)]
pub struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Forgets what was captured so far.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The captured lines containing `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text().lines().filter(|l| l.contains(needle)).map(str::to_string).collect()
    }
}

/// A writer appending to the buffer.
pub struct BufferWriter(Arc<Mutex<Vec<u8>>>);

impl Write for BufferWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
    type Writer = BufferWriter;

    fn make_writer(&'a self) -> Self::Writer {
        BufferWriter(self.0.clone())
    }
}

/// Captures the current thread's log events matching `filter` (an `EnvFilter` directive such as
/// `casambi2mqtt=trace`) until the guard is dropped. Use with a current-thread runtime
/// (`#[tokio::test]`), so that every task the test spawns logs on this thread.
pub fn capture(filter: &str) -> (LogBuffer, tracing::subscriber::DefaultGuard) {
    capture_with(tracing_subscriber::EnvFilter::new(filter))
}

/// As [`capture`], with a filter built by the caller.
#[allow(dead_code)]
pub fn capture_with(filter: tracing_subscriber::EnvFilter) -> (LogBuffer, tracing::subscriber::DefaultGuard) {
    let buffer = LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(buffer.clone())
        .with_ansi(false)
        .with_target(true)
        .finish();
    (buffer, tracing::subscriber::set_default(subscriber))
}
