//! The start-up gate: background work (logged datapoints, photos) begins only once every network
//! the bridge supervises has its start-up snapshot, so it never delays a network's first state
//! nor adds to the start-up's requests (docs/cloud.md#start-up-cost).
//!
//! The gate counts networks claimed but not yet snapshotted, and credentials entries still
//! logging in (an entry's networks are claimed before it counts as logged in, so the count never
//! passes through zero early). A network whose snapshot never comes (its cloud down for long)
//! must not hold every other network's background work back for ever: past [`GATE_MAX_WAIT`] the
//! gate opens anyway.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The longest the gate stays shut after the bridge starts.
pub const GATE_MAX_WAIT: Duration = Duration::from_secs(10 * 60);

/// What keeps the gate shut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    /// Credentials entries still logging in.
    logins: usize,
    /// Networks claimed whose start-up snapshot has not arrived.
    snapshots: usize,
}

/// Shared by the bridge's credential tasks and supervisors (cheap to clone).
#[derive(Debug, Clone)]
pub struct StartupGate {
    pending: Arc<watch::Sender<Pending>>,
    opens_by: tokio::time::Instant,
}

impl StartupGate {
    /// A gate shut until `logins` credentials entries have logged in (or been rejected) and the
    /// networks they claim have their snapshots.
    pub fn new(logins: usize) -> StartupGate {
        StartupGate::with_max_wait(logins, GATE_MAX_WAIT)
    }

    /// [`StartupGate::new`] with another longest wait.
    pub fn with_max_wait(logins: usize, max_wait: Duration) -> StartupGate {
        let (pending, _) = watch::channel(Pending { logins, snapshots: 0 });
        StartupGate { pending: Arc::new(pending), opens_by: tokio::time::Instant::now() + max_wait }
    }

    /// A network was claimed; its snapshot is awaited. The token hands it in on
    /// [`SnapshotToken::done`], or when dropped (a supervisor that ends holds nobody back).
    pub fn claim(&self) -> SnapshotToken {
        self.pending.send_modify(|p| p.snapshots += 1);
        SnapshotToken { gate: Some(self.clone()) }
    }

    /// A credentials entry has logged in (after claiming its networks) or is rejected for good.
    pub fn login_settled(&self) {
        self.pending.send_modify(|p| p.logins = p.logins.saturating_sub(1));
    }

    /// Whether the gate is open now.
    pub fn is_open(&self) -> bool {
        let p = *self.pending.borrow();
        (p.logins == 0 && p.snapshots == 0) || tokio::time::Instant::now() >= self.opens_by
    }

    /// Resolves once the gate is open.
    pub async fn opened(&self) {
        let mut rx = self.pending.subscribe();
        let settled = rx.wait_for(|p| p.logins == 0 && p.snapshots == 0);
        if tokio::time::timeout_at(self.opens_by, settled).await.is_err() {
            tracing::info!(
                "some networks have no start-up snapshot yet; logged datapoints and photos start without waiting longer"
            );
        }
    }
}

/// A network's pending snapshot ([`StartupGate::claim`]).
#[derive(Debug)]
pub struct SnapshotToken {
    gate: Option<StartupGate>,
}

impl SnapshotToken {
    /// The network has its start-up snapshot.
    pub fn done(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.pending.send_modify(|p| p.snapshots = p.snapshots.saturating_sub(1));
        }
    }
}

impl Drop for SnapshotToken {
    fn drop(&mut self) {
        self.done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gate_opens_after_every_login_and_snapshot() {
        let gate = StartupGate::new(2);
        let mut a = gate.claim();
        gate.login_settled();
        assert!(!gate.is_open(), "a login is still pending");
        let b = gate.claim();
        gate.login_settled();
        assert!(!gate.is_open(), "two snapshots are pending");
        a.done();
        a.done();
        assert!(!gate.is_open(), "done twice counts once");
        drop(b);
        assert!(gate.is_open());
        assert!(tokio::time::timeout(Duration::from_secs(1), gate.opened()).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_snapshot_that_never_comes_holds_the_gate_only_so_long() {
        let gate = StartupGate::with_max_wait(0, Duration::from_secs(30));
        let _never = gate.claim();
        assert!(!gate.is_open());
        let started = tokio::time::Instant::now();
        gate.opened().await;
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert!(gate.is_open());
    }
}
