//! One registered wire and the state of its life on the current socket.

use super::WireEvent;
use crate::cloud::model::{Secret, WireStatusKind};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Where a wire is in its life on the current socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum WireState {
    /// Registered, no open asked for on the current socket (no socket yet, or it was lost).
    Closed,
    /// `openWire` was sent with this `ref`; the `wireStatus` answering it is awaited.
    Opening {
        /// The `ref` of the open.
        ref_: String,
        /// When the open went out; the first ping is due a ping interval after it.
        sent_at: Instant,
    },
    /// The service opened the wire.
    Open {
        /// When a message last went out on the wire; the service closes wires idle for too long.
        last_sent: Instant,
        /// The last message sent was an app ping. An error `wireStatus` naming the wire then
        /// answers the ping: the service no longer knows the wire, so it is reopened. (Pongs do
        /// not name their wire, so they cannot clear it; a control message sent later does.)
        ping_outstanding: bool,
    },
    /// The service refused the open; the wire waits for a new registration (a new session).
    Refused,
}

/// One registered wire.
pub(super) struct Wire {
    pub(super) network: String,
    pub(super) session: Secret,
    pub(super) events: mpsc::Sender<WireEvent>,
    pub(super) state: WireState,
}

impl Wire {
    pub(super) fn new(network: String, session: Secret, events: mpsc::Sender<WireEvent>) -> Wire {
        Wire { network, session, events, state: WireState::Closed }
    }

    pub(super) fn is_open(&self) -> bool {
        matches!(self.state, WireState::Open { .. })
    }

    pub(super) fn is_refused(&self) -> bool {
        matches!(self.state, WireState::Refused)
    }

    pub(super) fn is_opening(&self) -> bool {
        matches!(self.state, WireState::Opening { .. })
    }

    /// Whether this wire's open was sent with `ref_`.
    pub(super) fn awaits(&self, ref_: Option<&str>) -> bool {
        matches!((&self.state, ref_), (WireState::Opening { ref_: mine, .. }, Some(theirs)) if mine == theirs)
    }

    /// Whether an app ping is due: the wire is open and nothing went out on it for `interval`.
    pub(super) fn ping_due(&self, interval: Duration) -> bool {
        matches!(self.state, WireState::Open { last_sent, .. } if last_sent.elapsed() >= interval)
    }

    /// Whether an error `wireStatus` naming this wire answers a ping: the wire is lost.
    pub(super) fn ping_outstanding(&self) -> bool {
        matches!(self.state, WireState::Open { ping_outstanding: true, .. })
    }

    /// The open went out with `ref_`.
    pub(super) fn opening(&mut self, ref_: String) {
        self.state = WireState::Opening { ref_, sent_at: Instant::now() };
    }

    /// A message went out on the open wire; `ping` says whether it was an app ping.
    pub(super) fn sent(&mut self, ping: bool) {
        if self.is_open() {
            self.state = WireState::Open { last_sent: Instant::now(), ping_outstanding: ping };
        }
    }

    /// The service answered the open: the wire is open, or refused.
    pub(super) fn answered(&mut self, status: WireStatusKind) -> WireEvent {
        let sent_at = match self.state {
            WireState::Opening { sent_at, .. } => sent_at,
            _ => Instant::now(),
        };
        if status.is_success() {
            self.state = WireState::Open { last_sent: sent_at, ping_outstanding: false };
            WireEvent::Opened
        } else {
            self.state = WireState::Refused;
            WireEvent::Refused(status)
        }
    }

    /// The socket is gone, or the service dropped the wire: it is closed until reopened. `true`
    /// when the network is to hear of it (a refused wire stays refused and silent).
    pub(super) fn down(&mut self) -> bool {
        if self.is_refused() {
            return false;
        }
        self.state = WireState::Closed;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire() -> Wire {
        let (events, _) = mpsc::channel(1);
        Wire::new("n".into(), Secret::new("s".to_string()), events)
    }

    #[test]
    fn an_open_is_matched_by_its_ref_only() {
        let mut w = wire();
        assert!(!w.awaits(None) && !w.awaits(Some("r1")));
        w.opening("r1".into());
        assert!(w.is_opening() && w.awaits(Some("r1")));
        assert!(!w.awaits(Some("r2")) && !w.awaits(None));
    }

    #[test]
    fn an_answer_opens_or_refuses_and_a_refused_wire_stays_silent_when_the_socket_goes() {
        let mut w = wire();
        w.opening("r".into());
        assert!(matches!(w.answered(WireStatusKind::OpenWireSucceed), WireEvent::Opened));
        assert!(w.is_open() && !w.ping_outstanding());
        assert!(w.down());
        assert_eq!(w.state, WireState::Closed);
        w.opening("r".into());
        assert!(matches!(w.answered(WireStatusKind::InvalidSession), WireEvent::Refused(_)));
        assert!(w.is_refused());
        assert!(!w.down(), "a refused wire hears nothing of a socket loss");
        assert!(w.is_refused());
    }

    #[test]
    fn a_ping_is_outstanding_until_another_message_goes_out() {
        let mut w = wire();
        w.sent(true);
        assert_eq!(w.state, WireState::Closed, "nothing goes out on a closed wire");
        w.opening("r".into());
        w.answered(WireStatusKind::OpenWireSucceed);
        assert!(w.ping_due(Duration::ZERO) && !w.ping_due(Duration::from_secs(60)));
        w.sent(true);
        assert!(w.ping_outstanding());
        w.sent(false);
        assert!(w.is_open() && !w.ping_outstanding());
    }
}
