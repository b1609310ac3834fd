//! Wake-up coalescing: under a stream of cloud events, the bridge's thread takes them in batches.
//!
//! Why: at a few thousand events a second, each event would otherwise wake the thread on its own
//! (an `epoll_wait` return and a context switch), be read on its own, and each MQTT
//! acknowledgement would wake the thread again. Those wake-ups cost far more than the work of
//! an event. So when the thread runs out of
//! work after taking in a frame, it pauses until a window (1 ms) after that frame before it waits
//! on its sockets again; whatever arrived meanwhile (frames, acknowledgements) is then taken in one
//! wake-up.
//!
//! The window is `cloud.event_batch_window` ([`DEFAULT_WINDOW`] unless configured; `0` turns the
//! pausing off), set once at start-up by [`set_window`].
//!
//! - A frame after a quiet spell is handled at once: the pause comes after the work, never
//!   before it.
//! - No frame waits more than the window longer than it would have. A thread that stays busy for
//!   the window after a frame does not pause at all.
//! - Without frames nothing pauses, so an idle bridge stays idle.
//!
//! The pause is a plain sleep of the runtime's one thread, taken in the runtime's
//! `on_thread_park` hook ([`before_park`]), the moment it has nothing left to run. That is the
//! point: a sleep inside a task would let the other tasks wake the thread for each packet.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long after a frame the thread may pause unless configured: the most any frame waits for
/// the batching. 1 ms is invisible for lighting and takes in ~5 events a wake-up at 5,000/s; 2 ms
/// measured no less CPU.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(1);

/// The longest window the configuration accepts: beyond a few milliseconds a pause buys no CPU,
/// and the thread that pauses also carries commands and the MQTT connection.
pub const MAX_WINDOW: Duration = Duration::from_millis(10);

/// What the process has noted: the first frame taken in since the thread last went idle.
struct Coalescer {
    /// The origin of `first`.
    epoch: Instant,
    /// Nanoseconds from `epoch` to that frame, plus one; 0 when there was none.
    first: AtomicU64,
    /// The window in nanoseconds; 0 turns the pausing off.
    window: AtomicU64,
}

/// Process-wide, as the runtime hook that reads it is: the bridge process has one runtime.
static COALESCER: LazyLock<Coalescer> = LazyLock::new(Coalescer::new);

/// Notes that a frame was taken in (the event channel calls this for every frame).
pub fn frame_arrived() {
    COALESCER.note();
}

/// Sets the window (`cloud.event_batch_window`); `Duration::ZERO` turns the pausing off.
pub fn set_window(window: Duration) {
    COALESCER.set_window(window);
}

/// The window in force.
pub fn window() -> Duration {
    Duration::from_nanos(COALESCER.window.load(Ordering::Relaxed))
}

/// The runtime's `on_thread_park` hook: pauses while the first frame taken in since the last
/// park is less than the window old.
pub fn before_park() {
    if let Some(pause) = COALESCER.take_pause() {
        std::thread::sleep(pause);
    }
}

impl Coalescer {
    fn new() -> Coalescer {
        let window = AtomicU64::new(nanos(DEFAULT_WINDOW));
        Coalescer { epoch: Instant::now(), first: AtomicU64::new(0), window }
    }

    fn set_window(&self, window: Duration) {
        self.window.store(nanos(window), Ordering::Relaxed);
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Notes a frame, unless one was noted since the last [`Coalescer::take_pause`].
    fn note(&self) {
        if self.first.load(Ordering::Relaxed) == 0 {
            let _ = self.first.compare_exchange(0, self.now() + 1, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Forgets the noted frame and says how long to pause for it.
    fn take_pause(&self) -> Option<Duration> {
        match self.first.swap(0, Ordering::Relaxed) {
            0 => None,
            first => pause(first, self.now(), self.window.load(Ordering::Relaxed)),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How long to pause at `now` (nanoseconds from the epoch) when the first frame since the last
/// park was noted as `first` (see [`Coalescer::first`]): until `window` nanoseconds after that
/// frame.
fn pause(first: u64, now: u64, window: u64) -> Option<Duration> {
    let at = first.checked_sub(1)?;
    let until = at.saturating_add(window);
    (until > now).then(|| Duration::from_nanos(until - now))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const WINDOW: u64 = MS;

    #[test]
    fn no_frame_no_pause() {
        assert_eq!(pause(0, 5 * MS, WINDOW), None);
    }

    #[test]
    fn the_pause_ends_one_window_after_the_first_frame() {
        // A frame at 2 ms, handled by 2.3 ms: pause until 3 ms.
        assert_eq!(pause(2 * MS + 1, 2 * MS + 300_000, WINDOW), Some(Duration::from_micros(700)));
        // Handled at once: the whole window.
        assert_eq!(pause(2 * MS + 1, 2 * MS, WINDOW), Some(Duration::from_millis(1)));
    }

    #[test]
    fn a_thread_busy_for_a_window_does_not_pause() {
        assert_eq!(pause(2 * MS + 1, 3 * MS, WINDOW), None);
        assert_eq!(pause(2 * MS + 1, 9 * MS, WINDOW), None);
    }

    #[test]
    fn only_the_first_frame_since_the_last_park_counts_and_a_park_forgets_it() {
        let c = Coalescer::new();
        c.set_window(Duration::from_secs(60));
        assert_eq!(c.take_pause(), None, "nothing noted");
        c.note();
        let first = c.first.load(Ordering::Relaxed);
        assert_ne!(first, 0);
        c.note();
        assert_eq!(c.first.load(Ordering::Relaxed), first, "a later frame does not move the window");
        let paused = c.take_pause().expect("a pause for the noted frame");
        assert!(paused > Duration::from_secs(59) && paused <= Duration::from_secs(60), "{paused:?}");
        assert_eq!(c.first.load(Ordering::Relaxed), 0);
        assert_eq!(c.take_pause(), None, "the park forgot it");
    }

    #[test]
    fn the_default_window_applies_until_one_is_set_and_zero_turns_pausing_off() {
        let c = Coalescer::new();
        c.note();
        let paused = c.take_pause().expect("the default window pauses");
        assert!(paused <= DEFAULT_WINDOW && paused > DEFAULT_WINDOW / 2, "{paused:?}");
        c.set_window(Duration::ZERO);
        c.note();
        assert_eq!(c.take_pause(), None, "window 0: no pause right after a frame");
        assert_eq!(c.first.load(Ordering::Relaxed), 0, "the frame is still forgotten");
        c.set_window(Duration::from_millis(5));
        c.note();
        let paused = c.take_pause().expect("a 5 ms window pauses");
        assert!(paused > Duration::from_millis(4) && paused <= Duration::from_millis(5), "{paused:?}");
    }
}
