//! The store's tests: what each change of an owner publishes and clears, and what a connection
//! resends.

use super::levels::level_index;
use super::prints::PRINT_MASK;
use super::*;
use crate::mqtt::state_text::Leaf;

fn t(pairs: &[(&str, &str)]) -> Topics {
    pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

fn apply(s: &mut Store, ops: &[Op]) {
    for op in ops {
        s.record(op.receipt());
    }
}

/// Whether some owner wants `topic`, asked with an index of its own.
fn is_wanted(s: &Store, topic: &str) -> bool {
    s.is_wanted(&mut StaleCheck::default(), topic)
}

fn publish(topic: &str, payload: &str) -> Op {
    Op::publish(topic.into(), payload.into(), None)
}

fn clear(topic: &str) -> Op {
    Op::Clear { topic: topic.into() }
}

#[test]
fn only_changes_are_published() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let ops = s.set(o.clone(), t(&[("a", "1"), ("b", "2")]));
    assert_eq!(ops, vec![publish("a", "1"), publish("b", "2")]);
    apply(&mut s, &ops);
    assert!(s.set(o.clone(), t(&[("a", "1"), ("b", "2")])).is_empty());
    assert_eq!(s.set(o.clone(), t(&[("a", "1"), ("b", "3")])), vec![publish("b", "3")]);
    assert!(s.wants_exactly(&o, &t(&[("a", "1"), ("b", "3")])));
    assert!(!s.wants_exactly(&o, &t(&[("a", "1"), ("b", "2")])));
    assert_eq!(s.topics_of(&o), vec!["a", "b"]);
    assert_eq!(s.len(), 2);
}

/// The state parts `(leaf, payload)`, leaf `""` for the state topic itself.
fn text(parts: &[(&'static str, &str)]) -> StateText {
    let mut text = StateText::default();
    for (leaf, payload) in parts {
        let leaf = if leaf.is_empty() { Leaf::State } else { Leaf::Below(leaf) };
        text.push(leaf, payload);
    }
    text
}

#[test]
fn a_state_update_touches_only_the_state_and_agrees_with_a_full_set() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let is_state = |t: &str| t == "state";
    let ops = s.set(o.clone(), t(&[("cfg", "x"), ("state", "1"), ("state/a", "on")]));
    apply(&mut s, &ops);
    let ops = s.update_state(&o, &text(&[("", "2"), ("a", "on")]), is_state).unwrap();
    assert_eq!(ops, vec![publish("state", "2")]);
    apply(&mut s, &ops);
    assert!(s.wants_exactly(&o, &t(&[("cfg", "x"), ("state", "2"), ("state/a", "on")])));
    // Nothing changed: nothing to publish, even though the store was told again.
    assert!(s.update_state(&o, &text(&[("", "2"), ("a", "on")]), is_state).unwrap().is_empty());
    // Changed back before it went out (disconnected): wanted again, but nothing to publish,
    // since it is what was published.
    let _unsent = s.update_state(&o, &text(&[("", "3"), ("a", "on")]), is_state).unwrap();
    assert!(s.update_state(&o, &text(&[("", "2"), ("a", "on")]), is_state).unwrap().is_empty());
    // Other names (an attribute appeared), another state topic, a longer list, an unknown
    // owner: the caller sets all.
    assert!(s.update_state(&o, &text(&[("", "2"), ("b", "1")]), is_state).is_none());
    assert!(s.update_state(&o, &text(&[("", "2"), ("a", "on")]), |t| t == "other").is_none());
    assert!(s.update_state(&o, &text(&[("", "1"), ("a", "2"), ("b", "3"), ("c", "4")]), is_state).is_none());
    assert!(s.update_state(&Owner::Unit("n".into(), 2), &text(&[("", "2")]), is_state).is_none());
    assert!(s.wants_exactly(&o, &t(&[("cfg", "x"), ("state", "2"), ("state/a", "on")])));
}

#[test]
fn the_published_text_can_be_checked() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let ops = s.set(o.clone(), t(&[("cfg", "x")]));
    assert!(!s.has_published("cfg", "x"), "not sent yet");
    apply(&mut s, &ops);
    assert!(s.has_published("cfg", "x"));
    assert!(!s.has_published("cfg", "y"));
    assert!(!s.has_published("other", "x"));
}

#[test]
fn renamed_topics_are_published_then_old_ones_cleared() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let ops = s.set(o.clone(), t(&[("cfg", "x"), ("old", "1")]));
    apply(&mut s, &ops);
    let ops = s.set(o.clone(), t(&[("cfg", "y"), ("new", "1")]));
    assert_eq!(ops, vec![publish("cfg", "y"), publish("new", "1"), clear("old")]);
    apply(&mut s, &ops);
    assert!(s.is_stale(&mut StaleCheck::default(), "old"), "neither wanted nor published");
    let ops = s.remove(&o);
    assert_eq!(ops, vec![clear("cfg"), clear("new")]);
    apply(&mut s, &ops);
    assert!(s.is_empty());
}

#[test]
fn a_topic_not_yet_published_is_not_cleared() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let _unsent = s.set(o.clone(), t(&[("x", "1")]));
    assert!(s.remove(&o).is_empty());
    assert!(s.resync().is_empty());
}

#[test]
fn a_topic_taken_over_by_another_owner_is_not_cleared() {
    let mut s = Store::default();
    let a = Owner::Unit("n".into(), 1);
    let b = Owner::Unit("n".into(), 2);
    let ops = s.set(a.clone(), t(&[("x", "a")]));
    apply(&mut s, &ops);
    let ops = s.set(b.clone(), t(&[("x", "b")]));
    apply(&mut s, &ops);
    assert!(s.remove(&a).is_empty(), "x now belongs to b");
    assert!(is_wanted(&s, "x"));
    assert_eq!(s.remove(&b), vec![clear("x")]);
}

#[test]
fn a_clear_lost_with_the_connection_is_sent_again_on_the_next_one() {
    let mut s = Store::default();
    let a = Owner::Unit("n".into(), 1);
    let ops = s.set(a.clone(), t(&[("old", "1")]));
    apply(&mut s, &ops);
    // Renamed: the clear of the old topic reaches the client, then the connection drops
    // before the broker got it.
    let ops = s.set(a.clone(), t(&[("new", "1")]));
    apply(&mut s, &ops);
    assert_eq!(s.resync(), vec![clear("old")]);
    apply(&mut s, &[clear("old")]);
    // A topic wanted again is published, not cleared.
    let ops = s.set(a.clone(), t(&[("old", "2")]));
    assert_eq!(ops, vec![publish("old", "2"), clear("new")]);
    apply(&mut s, &ops);
    assert_eq!(s.resync(), vec![clear("new")]);
}

#[test]
fn a_topic_state_keeps_its_count_and_its_print_apart() {
    let mut t = TopicState::default();
    t.set_published_print(payload_print("payload"));
    t.set_owner_count(3);
    assert_eq!((t.owner_count(), t.published_print()), (3, payload_print("payload")));
    t.set_published_print(0);
    assert_eq!((t.owner_count(), t.published_print()), (3, 0));
    t.set_owner_count(u64::MAX);
    assert_eq!(t.owner_count(), 65_535, "the count saturates");
    t.set_published_print(u64::MAX);
    assert_eq!((t.owner_count(), t.published_print()), (65_535, PRINT_MASK), "a print never spills into the count");
    t.set_owner_count(0);
    t.set_published_print(0);
    assert_eq!(t.0, 0, "nothing left: pruned");
    assert!((1..=PRINT_MASK).contains(&payload_print("")), "a print is never 0 and fits its bits");
}

#[test]
fn resync_clears_what_was_published_and_is_no_longer_wanted() {
    let mut s = Store::default();
    let a = Owner::Unit("n".into(), 1);
    let ops = s.set(a.clone(), t(&[("x", "1"), ("y", "1")]));
    apply(&mut s, &ops);
    // Disconnected: the removal is not sent.
    let _unsent = s.remove(&a);
    let _unsent = s.set(Owner::Bridge, t(&[("b", "1"), ("y", "2")]));
    assert_eq!(s.resync(), vec![clear("x")]);
    assert!(is_wanted(&s, "b") && is_wanted(&s, "y") && !is_wanted(&s, "x"));
}

#[test]
fn a_short_level_below_another_whole_name_is_not_taken_for_a_state_leaf() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    // `lamp/odd/state` is kept as the level `state` below `lamp/odd`, not below `lamp`.
    let topics = t(&[("lamp", "{}"), ("lamp/odd", "1"), ("lamp/odd/state", "ON")]);
    let ops = s.set(o.clone(), topics.clone());
    apply(&mut s, &ops);
    assert_eq!(s.topics_of(&o), vec!["lamp", "lamp/odd", "lamp/odd/state"]);
    let mut text = StateText::default();
    text.push(Leaf::State, "{}");
    text.push(Leaf::Below("odd"), "1");
    text.push(Leaf::Below("state"), "OFF");
    assert!(s.update_state(&o, &text, |t| t == "lamp").is_none(), "`lamp/state` is not what is kept");
    assert!(s.wants_exactly(&o, &topics));
}

#[test]
fn attribute_topics_have_no_map_entry_and_are_published_when_their_print_changes() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "10")]));
    assert_eq!(ops.len(), 3);
    apply(&mut s, &ops);
    assert_eq!(s.topics.len(), 1, "only the whole name has an entry");
    assert_eq!(s.len(), 3);
    let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "20")]));
    assert_eq!(ops, vec![publish("lamp/brightness", "20")]);
    apply(&mut s, &ops);
    assert!(s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "20")])).is_empty());
    // A new name before them: the attribute topics keep their prints by name.
    let ops = s.set(o.clone(), t(&[("cfg", "x"), ("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "20")]));
    assert_eq!(ops, vec![publish("cfg", "x")]);
}

#[test]
fn an_attribute_topic_an_owner_no_longer_has_is_cleared_under_its_live_state_topic() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/temperature", "3000")]));
    apply(&mut s, &ops);
    // One index, held across the change, as a scan holds it.
    let mut check = StaleCheck::default();
    assert!(!s.is_stale(&mut check, "lamp/temperature"));
    let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON")]));
    assert_eq!(ops, vec![clear("lamp/temperature")]);
    apply(&mut s, &ops);
    assert!(!s.is_stale(&mut check, "lamp") && !s.is_stale(&mut check, "lamp/state"));
    assert!(s.is_stale(&mut check, "lamp/temperature"), "the index follows a name lost");
    assert!(!is_wanted(&s, "lamp/brightness"), "a level nobody has under a wanted name is stale");
    // A level added after the index was built is found: the question builds it again.
    let ops = s.set(o.clone(), t(&[("lamp", "{}"), ("lamp/state", "ON"), ("lamp/brightness", "20")]));
    apply(&mut s, &ops);
    assert!(!s.is_stale(&mut check, "lamp/brightness"), "the index follows the change");
    assert!(s.is_stale(&mut check, "lamp/temperature"));
}

#[test]
fn the_scan_index_keeps_the_levels_of_every_owner_of_a_shared_whole_name() {
    let mut s = Store::default();
    let (a, b) = (Owner::Unit("n".into(), 1), Owner::Unit("n".into(), 2));
    let ops = s.set(a, t(&[("lamp", "{}"), ("lamp/state", "ON")]));
    apply(&mut s, &ops);
    let ops = s.set(b, t(&[("desk", "{}"), ("lamp", "{}"), ("lamp/brightness", "20")]));
    apply(&mut s, &ops);
    assert!(is_wanted(&s, "lamp/state") && is_wanted(&s, "lamp/brightness"), "both owners' levels");
    assert!(!is_wanted(&s, "lamp/dim_level") && !is_wanted(&s, "desk/state"));
    assert!(!is_wanted(&s, "lamp/state/extra") && !is_wanted(&s, "nothing"));
}

#[test]
fn two_owners_swapping_names_keep_every_attribute_topic() {
    let mut s = Store::default();
    let (a, b) = (Owner::Unit("n".into(), 1), Owner::Unit("n".into(), 2));
    let named = |name: &str, v: &str| t(&[(name, "{}"), (&format!("{name}/state"), v)]);
    let ops = s.set(a.clone(), named("lamp", "ON"));
    apply(&mut s, &ops);
    let ops = s.set(b.clone(), named("desk", "OFF"));
    apply(&mut s, &ops);
    // A rename swaps their names, one owner at a time.
    let ops = s.set(a.clone(), named("desk", "ON"));
    // `desk` already holds this text (b published it); its state differs.
    assert_eq!(ops, vec![publish("desk/state", "ON"), clear("lamp"), clear("lamp/state")]);
    apply(&mut s, &ops);
    let ops = s.set(b.clone(), named("lamp", "OFF"));
    assert_eq!(ops, vec![publish("lamp", "{}"), publish("lamp/state", "OFF")], "desk/state is a's now");
    apply(&mut s, &ops);
    assert!(["lamp", "lamp/state", "desk", "desk/state"].iter().all(|t| is_wanted(&s, t)));
}

#[test]
fn attribute_levels_are_kept_short_and_read_back_whole() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let topics = t(&[
        ("ha/device/x/config", "{}"),
        ("b/n/unit/lamp", "{\"state\":\"ON\"}"),
        ("b/n/unit/lamp/state", "ON"),
        ("b/n/unit/lamp/availability", "online"),
        ("b/n/unit/lamp/unknown-level", "1"),
    ]);
    let ops = s.set(o.clone(), topics.clone());
    apply(&mut s, &ops);
    let wants = s.wanted.get(&o).unwrap();
    let levels: Vec<u64> = wants.slots().map(slot_level).collect();
    let level = |name| u64::from(level_index(name).unwrap());
    assert_eq!(levels, vec![WHOLE, WHOLE, level("state"), level("availability"), WHOLE]);
    assert_eq!(wants.names(), "ha/device/x/config\0b/n/unit/lamp\0b/n/unit/lamp/unknown-level\0");
    assert_eq!(wants.slots().nth(2).map(print_of), Some(payload_print("ON")));
    let names = wants.names().len();
    assert_eq!(std::mem::size_of_val(wants), 16, "a record is one pointer to one block");
    assert_eq!(wants.block_len(), 4 + 5 * 8 + names, "a wanted topic stays one word in the block");
    assert_eq!(std::mem::size_of::<(u64, TopicState)>(), 16, "a topic's map entry stays two words");
    assert_eq!(s.topics_of(&o), topics.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>());
    assert!(s.wants_exactly(&o, &topics));
    // The fast path publishes the whole name.
    let mut text = StateText::default();
    text.push(Leaf::State, "{\"state\":\"OFF\"}");
    text.push(Leaf::Below("state"), "OFF");
    text.push(Leaf::Below("availability"), "online");
    // The list's tail is `lamp`, `state`, `availability`, `unknown-level`: not these parts.
    assert!(s.update_state(&o, &text, |t| t == "b/n/unit/lamp").is_none());
    text.push(Leaf::Below("unknown-level"), "1");
    let ops = s.update_state(&o, &text, |t| t == "b/n/unit/lamp").unwrap();
    assert_eq!(ops, vec![publish("b/n/unit/lamp", "{\"state\":\"OFF\"}"), publish("b/n/unit/lamp/state", "OFF")]);
    // A removal clears every whole name.
    apply(&mut s, &ops);
    let ops = s.remove(&o);
    assert_eq!(ops.len(), 5);
    assert!(ops.contains(&clear("b/n/unit/lamp/availability")));
}

#[test]
fn a_whole_name_that_becomes_an_attribute_topic_is_not_cleared() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let ops = s.set(o.clone(), t(&[("lamp/availability", "0"), ("lamp/x/state", "0")]));
    apply(&mut s, &ops);
    // `lamp/x/state` is now the level `state` below `lamp/x`.
    let ops = s.set(o.clone(), t(&[("lamp/x", "0"), ("lamp/x/state", "0")]));
    assert!(!ops.contains(&clear("lamp/x/state")), "{ops:?}");
    apply(&mut s, &ops);
    assert_eq!(s.remove(&o), vec![clear("lamp/x"), clear("lamp/x/state")]);
}

#[test]
fn an_attribute_topic_that_becomes_a_whole_name_is_cleared_when_it_goes() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let ops = s.set(o.clone(), t(&[("lamp", "0"), ("lamp/brightness", "0")]));
    apply(&mut s, &ops);
    // Disconnected: `lamp/brightness` becomes a whole name, then goes.
    let _unsent = s.set(o.clone(), t(&[("lamp/brightness", "0"), ("lamp/state", "0")]));
    let _unsent = s.set(o.clone(), t(&[("other", "0")]));
    assert_eq!(s.resync(), vec![clear("lamp"), clear("lamp/brightness")]);
}

#[test]
fn a_topic_wanted_again_before_its_clear_went_out_is_cleared_when_it_goes_again() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let ops = s.set(o.clone(), t(&[("lamp", "0"), ("lamp/state", "0")]));
    apply(&mut s, &ops);
    // Disconnected: gone, back as a whole name, gone again.
    let _unsent = s.remove(&o);
    let _unsent = s.set(o.clone(), t(&[("lamp/state", "0")]));
    let _unsent = s.remove(&o);
    assert_eq!(s.resync(), vec![clear("lamp"), clear("lamp/state")]);
}

#[test]
fn a_render_with_the_same_topics_keeps_the_owner_s_record_in_its_blocks() {
    let mut s = Store::default();
    let o = Owner::Unit("n".into(), 1);
    let blocks = |s: &Store| s.wanted.get(&o).map(OwnerTopics::block_address);
    let ops = s.set(o.clone(), t(&[("a", "1"), ("a/brightness", "2")]));
    apply(&mut s, &ops);
    let first = blocks(&s);
    assert!(first.is_some());
    assert_eq!(s.set(o.clone(), t(&[("a", "1"), ("a/brightness", "3")])), vec![publish("a/brightness", "3")]);
    assert_eq!(blocks(&s), first, "the new prints are written where the old ones were");
    assert!(s.wants_exactly(&o, &t(&[("a", "1"), ("a/brightness", "3")])));
    let ops = s.set(o.clone(), t(&[("a", "1"), ("a/brightness", "3"), ("b", "4")]));
    assert_eq!(ops, vec![publish("b", "4")]);
    assert!(s.wants_exactly(&o, &t(&[("a", "1"), ("a/brightness", "3"), ("b", "4")])));
}
