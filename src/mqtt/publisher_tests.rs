//! The publisher's own rules, apart from the broker (its behaviour on MQTT is in `tests/`).

use super::*;

/// Something stale is rendered as soon as no update waits, and while updates keep coming,
/// once it has waited its delay: never before, never later.
#[test]
fn stale_output_waits_for_the_queue_to_empty_or_for_its_delay() {
    let (tx, rx) = mpsc::channel(4);
    let now = Instant::now();
    let before = |ms| now.checked_sub(Duration::from_millis(ms)).expect("the monotonic clock started over 25 ms ago");
    assert!(!due(None, &rx, GROUP_DELAY), "nothing stale");
    assert!(due(Some(now), &rx, GROUP_DELAY), "no update waits");
    tx.try_send(Update::Problem { network: None, message: "queued".into() }).expect("room");
    assert!(!due(Some(now), &rx, GROUP_DELAY), "an update waits and the delay has not passed");
    assert!(!due(Some(before(5)), &rx, GROUP_DELAY));
    assert!(due(Some(before(25)), &rx, GROUP_DELAY), "waited past the delay");
    assert!(!due(Some(before(25)), &rx, BRIDGE_INFO_DELAY));
}
