//! Wake-up batching: under a stream of cloud events, the bridge's thread takes them in batches.
//!
//! Why: at a few thousand events a second, each event would otherwise wake the thread on its own
//! (an `epoll_wait` return and a context switch), be read on its own, and each MQTT
//! acknowledgement would wake the thread again; those wake-ups cost more than the work of an
//! event. So when the thread runs out of work after taking in a frame, it pauses until a window
//! after that frame before it waits on its sockets again; whatever arrived meanwhile (frames,
//! acknowledgements) is then taken in one wake-up.
//!
//! The window is `cloud.event_batch_window` ([`DEFAULT_WINDOW`] unless configured; `0` turns the
//! pausing off).
//!
//! - A frame after a quiet spell is handled at once: the pause comes after the work, never
//!   before it.
//! - No frame waits more than the window longer than it would have. A thread that stays busy for
//!   the window after a frame does not pause at all.
//! - Without frames nothing pauses, so an idle bridge stays idle.
//!
//! The pause is a plain sleep of the runtime's thread, taken in the runtime's `on_thread_park`
//! hook ([`before_park`]) the moment it has nothing left to run. That is the point: a sleep
//! inside a task would let the other tasks wake the thread for each packet.
//!
//! # Ownership and the one-thread invariant
//!
//! Each running bridge owns one [`WakeBatcher`] and hands it to its event channel, which notes
//! every frame in it. The runtime is built before any bridge exists, so its park hook cannot be
//! given the batcher; instead a bridge started on a current-thread runtime binds its batcher to
//! that thread ([`WakeBatcher::for_current_runtime`]), and the hook consults the batcher bound to
//! the thread that parks. Pausing that thread is right only because it is the thread that reads
//! the socket, runs the bridge and carries the MQTT connection: the bridge's runtime
//! ([`crate::app::runtime`]) has exactly one thread. A batcher therefore records the thread it is
//! bound to, and debug builds check that every frame is noted on it. On a runtime with several
//! workers (tests, the simulator) nothing is bound and nothing pauses.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// How long after a frame the thread may pause unless configured: the most any frame waits for
/// the batching. It is invisible for lighting and takes in several events a wake-up under a
/// stream of changes; a longer window saves more CPU but takes the 99th percentile of a
/// change's latency at 5,000 events/s past 2 ms (BENCHMARKS.md, "Figures behind constants").
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(1);

/// The longest window the configuration accepts: the thread that pauses also carries commands
/// and the MQTT connection, which wait as long.
pub const MAX_WINDOW: Duration = Duration::from_millis(10);

thread_local! {
    /// The batcher of the bridge that runs on this thread, if one is bound. Weak: a bridge that
    /// has stopped no longer makes the thread pause.
    static BOUND: RefCell<Weak<Batch>> = const { RefCell::new(Weak::new()) };
}

/// A bridge's wake-up batching: where its event channel notes frames, and what the runtime's park
/// hook asks how long to pause. Cheap to clone; clones share the notes.
#[derive(Clone)]
pub struct WakeBatcher {
    batch: Arc<Batch>,
}

impl std::fmt::Debug for WakeBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeBatcher").field("window", &self.window()).finish_non_exhaustive()
    }
}

/// What a batcher has noted: the first frame taken in since its thread last went idle.
struct Batch {
    /// The origin of `first`.
    epoch: Instant,
    /// Nanoseconds from `epoch` to that frame, plus one; 0 when there was none.
    first: AtomicU64,
    /// The window in nanoseconds; 0 turns the pausing off.
    window: u64,
    /// The thread the batcher is bound to; unset when it is bound to none.
    thread: OnceLock<ThreadId>,
}

impl WakeBatcher {
    /// A batcher with `window` (`Duration::ZERO` turns the pausing off), bound to no thread.
    pub fn new(window: Duration) -> WakeBatcher {
        let batch =
            Batch { epoch: Instant::now(), first: AtomicU64::new(0), window: nanos(window), thread: OnceLock::new() };
        WakeBatcher { batch: Arc::new(batch) }
    }

    /// A batcher with `window`, bound to the calling thread when that thread runs a
    /// current-thread runtime (the bridge's; see the module docs). The last batcher bound to a
    /// thread is the one its park hook consults.
    pub fn for_current_runtime(window: Duration) -> WakeBatcher {
        let batcher = WakeBatcher::new(window);
        let one_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        if one_thread {
            batcher.bind_to_this_thread();
        }
        batcher
    }

    fn bind_to_this_thread(&self) {
        let _ = self.batch.thread.set(std::thread::current().id());
        BOUND.with_borrow_mut(|bound| *bound = Arc::downgrade(&self.batch));
    }

    /// Notes that a frame was taken in (the event channel calls this for every frame).
    pub fn frame_arrived(&self) {
        debug_assert!(
            self.batch.thread.get().is_none_or(|t| *t == std::thread::current().id()),
            "a frame noted off the thread its wake-ups are batched on"
        );
        self.batch.note();
    }

    /// The window in force.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.batch.window)
    }
}

/// The runtime's `on_thread_park` hook: pauses while the first frame the thread's bound batcher
/// noted since the last park is less than the window old.
pub fn before_park() {
    let pause = BOUND.with_borrow(|bound| bound.upgrade().and_then(|batch| batch.take_pause()));
    if let Some(pause) = pause {
        std::thread::sleep(pause);
    }
}

impl Batch {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Notes a frame, unless one was noted since the last [`Batch::take_pause`].
    fn note(&self) {
        if self.first.load(Ordering::Relaxed) == 0 {
            let _ = self.first.compare_exchange(0, self.now() + 1, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Forgets the noted frame and says how long to pause for it.
    fn take_pause(&self) -> Option<Duration> {
        match self.first.swap(0, Ordering::Relaxed) {
            0 => None,
            first => pause(first, self.now(), self.window),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How long to pause at `now` (nanoseconds from the epoch) when the first frame since the last
/// park was noted as `first` (see [`Batch::first`]): until `window` nanoseconds after that
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
        let c = WakeBatcher::new(Duration::from_secs(60));
        let batch = &c.batch;
        assert_eq!(batch.take_pause(), None, "nothing noted");
        c.frame_arrived();
        let first = batch.first.load(Ordering::Relaxed);
        assert_ne!(first, 0);
        c.frame_arrived();
        assert_eq!(batch.first.load(Ordering::Relaxed), first, "a later frame does not move the window");
        let paused = batch.take_pause().expect("a pause for the noted frame");
        assert!(paused > Duration::from_secs(59) && paused <= Duration::from_secs(60), "{paused:?}");
        assert_eq!(batch.first.load(Ordering::Relaxed), 0);
        assert_eq!(batch.take_pause(), None, "the park forgot it");
    }

    #[test]
    fn the_window_bounds_the_pause_and_zero_turns_pausing_off() {
        let c = WakeBatcher::new(DEFAULT_WINDOW);
        c.frame_arrived();
        let paused = c.batch.take_pause().expect("the default window pauses");
        assert!(paused <= DEFAULT_WINDOW && paused > DEFAULT_WINDOW / 2, "{paused:?}");
        let off = WakeBatcher::new(Duration::ZERO);
        off.frame_arrived();
        assert_eq!(off.batch.take_pause(), None, "window 0: no pause right after a frame");
        assert_eq!(off.batch.first.load(Ordering::Relaxed), 0, "the frame is still forgotten");
    }

    #[test]
    fn the_park_hook_consults_only_the_batcher_bound_to_its_thread_while_it_lives() {
        let unbound = WakeBatcher::for_current_runtime(Duration::from_secs(60));
        assert!(unbound.batch.thread.get().is_none(), "no runtime here: bound to nothing");
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let bound = runtime.block_on(async { WakeBatcher::for_current_runtime(Duration::from_secs(60)) });
        assert_eq!(bound.batch.thread.get(), Some(&std::thread::current().id()));
        bound.frame_arrived();
        unbound.frame_arrived();
        let noted = |b: &WakeBatcher| b.batch.first.load(Ordering::Relaxed) != 0;
        // Another thread's hook finds nothing bound there and leaves the note alone.
        let shared = bound.clone();
        std::thread::spawn(before_park).join().expect("hook on another thread");
        assert!(noted(&shared), "a park of another thread took the note");
        drop(shared);
        // This thread's hook takes the bound batcher's note (the 60 s pause is not waited for:
        // the note is taken through the batch, as the hook does, to test the binding alone).
        let taken = BOUND.with_borrow(|b| b.upgrade().and_then(|batch| batch.take_pause()));
        assert!(taken.is_some() && !noted(&bound), "the bound batcher was not consulted");
        assert!(noted(&unbound), "an unbound batcher was consulted");
        drop(bound);
        assert!(BOUND.with_borrow(|b| b.upgrade().is_none()), "a stopped bridge's batcher stays bound");
    }
}
