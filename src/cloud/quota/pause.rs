//! The key-wide pause after 429s, and the one request that probes its end
//! (docs/cloud.md#quota-429).
//!
//! After a 429 every request of the key waits out the pause. When it ends, one request goes
//! alone (the probe) and the others wait for its answer: a success lets them all go, another 429
//! starts a longer pause, and any other end (an error, a 5xx, a cancelled request) passes the
//! probe to the next request. So a key the service still refuses costs one refused request per
//! pause, not one per request waiting.

use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The pause and the probe of one key.
#[derive(Debug, Default)]
pub(super) struct PauseGate {
    state: Mutex<State>,
    /// Woken when a probe ends.
    probe_done: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Requests wait until then.
    until: Option<Instant>,
    /// 429s in a row that each started a pause.
    strikes: u32,
    /// Counts the pauses begun; a request carries the value it left with.
    generation: u64,
    /// A 429 came and no success since: the next request to leave probes alone.
    probe_due: bool,
    /// The probe in flight, by number.
    probe: Option<u64>,
    /// Probes begun, to number them.
    probes: u64,
}

/// What a request leaves the gate with.
#[derive(Debug)]
pub(super) struct Turn {
    /// The pause generation it left in.
    pub generation: u64,
    /// Set when the request is the probe: the gate and the probe's number.
    pub probe: Option<Probe>,
}

/// A request's role as the probe; dropping it without an answer passes the role on.
#[derive(Debug)]
pub(super) struct Probe {
    gate: Arc<PauseGate>,
    id: u64,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        if state.probe == Some(self.id) {
            state.probe = None;
            drop(state);
            self.gate.probe_done.notify_waiters();
        }
    }
}

/// Where a request stands at the gate.
enum Stand {
    Pass(Turn),
    Sleep(Instant),
    AwaitProbe,
}

impl PauseGate {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent between statements, so a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits while a pause is on or a probe is out. With `claim`, a request that finds a probe
    /// due becomes the probe; without, it passes (it claims later, once it holds its slot).
    pub(super) async fn wait(self: &Arc<Self>, claim: bool) -> Turn {
        loop {
            let mut done = pin!(self.probe_done.notified());
            // Registered before the state is read, so a probe ending between the two is not missed.
            done.as_mut().enable();
            match self.stand(claim) {
                Stand::Pass(turn) => return turn,
                Stand::Sleep(until) => tokio::time::sleep_until(until).await,
                Stand::AwaitProbe => done.await,
            }
        }
    }

    /// [`PauseGate::wait`] with `claim`, without waiting: `None` when the request would wait.
    pub(super) fn try_pass(self: &Arc<Self>) -> Option<Turn> {
        match self.stand(true) {
            Stand::Pass(turn) => Some(turn),
            Stand::Sleep(_) | Stand::AwaitProbe => None,
        }
    }

    fn stand(self: &Arc<Self>, claim: bool) -> Stand {
        let mut state = self.lock();
        if let Some(until) = state.until.filter(|t| *t > Instant::now()) {
            return Stand::Sleep(until);
        }
        if state.probe.is_some() {
            return Stand::AwaitProbe;
        }
        let generation = state.generation;
        if !(claim && state.probe_due) {
            return Stand::Pass(Turn { generation, probe: None });
        }
        state.probes = state.probes.wrapping_add(1);
        let id = state.probes;
        state.probe = Some(id);
        Stand::Pass(Turn { generation, probe: Some(Probe { gate: Arc::clone(self), id }) })
    }

    /// A 429 to a request that left in `generation`: a new pause (a strike) if the request left
    /// after the latest pause began, and never shorter than `retry_after`. `pause_for` gives the
    /// pause after the n-th strike.
    pub(super) fn note_quota_exceeded(
        &self,
        generation: u64,
        probe: Option<&Probe>,
        retry_after: Option<Duration>,
        pause_for: impl FnOnce(u32) -> Duration,
    ) {
        let mut state = self.lock();
        let now = Instant::now();
        let mut until = now + retry_after.unwrap_or(Duration::ZERO);
        if generation == state.generation {
            state.strikes = state.strikes.saturating_add(1);
            state.generation = state.generation.wrapping_add(1);
            until = until.max(now + pause_for(state.strikes));
        }
        if state.until.is_none_or(|p| p < until) {
            state.until = Some(until);
        }
        state.probe_due = true;
        let ended = probe.is_some_and(|p| state.probe == Some(p.id));
        if ended {
            state.probe = None;
        }
        drop(state);
        if ended {
            self.probe_done.notify_waiters();
        }
    }

    /// A success: the run of 429s ends, the requests waiting for a probe go.
    pub(super) fn note_success(&self) {
        let mut state = self.lock();
        state.strikes = 0;
        let waiting = state.probe_due || state.probe.is_some();
        state.probe_due = false;
        state.probe = None;
        drop(state);
        if waiting {
            self.probe_done.notify_waiters();
        }
    }

    /// The end of the pause set so far.
    #[cfg(test)]
    pub(super) fn until(&self) -> Option<Instant> {
        self.lock().until
    }

    /// 429s in a row so far.
    #[cfg(test)]
    pub(super) fn strikes(&self) -> u32 {
        self.lock().strikes
    }

    /// The current pause generation.
    #[cfg(test)]
    pub(super) fn generation(&self) -> u64 {
        self.lock().generation
    }
}
