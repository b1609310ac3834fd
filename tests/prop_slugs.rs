//! Property tests of the slugs of docs/mqtt.md: a slug is a single literal topic level of
//! `[a-z0-9-]`, the same name always gives the same slug, and after the collision rule every
//! thing of one kind in a network has its own slug, whatever the order things are listed in.

use casambi2mqtt::mqtt::topics::{assign, slug, slug_or_id, valid_level};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use std::collections::{BTreeMap, BTreeSet};

/// `n` cases, or `PROPTEST_CASES` when set (for a longer run).
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig::with_cases(std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(n))
}

/// Names as users type them, plus the characters that would break a topic.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[A-Za-z0-9 ]{0,12}",
        // Few letters so that collisions are common.
        "[aAbB /+#\\-_.]{0,5}",
        "[/+#\u{0}]{0,4}",
        prop::collection::vec(
            prop::sample::select(vec![
                "Küche", "Ærø", "日本", "🙂", "№", "Spot", "spot", " ", "/", "+", "#", "\0", "-", "5", "1"
            ]),
            0..4
        )
        .prop_map(|p| p.concat()),
    ]
}

fn is_slug_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

proptest! {
    #![proptest_config(cases(4096))]

    #[test]
    fn a_slug_is_one_clean_topic_level(n in name(), id in any::<u32>()) {
        let s = slug(&n);
        prop_assert!(s.chars().all(is_slug_char), "{n:?} -> {s:?}");
        prop_assert!(!s.starts_with('-') && !s.ends_with('-') && !s.contains("--"), "{n:?} -> {s:?}");
        let s = slug_or_id(&n, &id);
        prop_assert!(valid_level(&s), "{n:?} -> {s:?}");
        prop_assert!(!s.contains(['/', '+', '#', '\0']));
        prop_assert!(s.chars().all(is_slug_char), "{n:?} -> {s:?}");
    }

    #[test]
    fn slugs_are_stable(n in name(), id in any::<u32>()) {
        prop_assert_eq!(slug(&n), slug(&n));
        prop_assert_eq!(slug_or_id(&n, &id), slug_or_id(&n.clone(), &id));
        // A slug is its own slug (so a slug used as a name does not drift).
        let s = slug(&n);
        prop_assert_eq!(slug(&s), s);
    }
}

proptest! {
    #![proptest_config(cases(1024))]

    #[test]
    fn slugs_of_a_network_are_distinct_and_order_independent(
        items in prop::collection::btree_map(0u32..60, name(), 0..24),
        seed in any::<u64>(),
    ) {
        let list: Vec<(u32, String)> = items.clone().into_iter().collect();
        let a = assign(list.iter().map(|(k, v)| (*k, v.as_str())), &[]);
        prop_assert_eq!(a.len(), items.len());
        let distinct: BTreeSet<&String> = a.values().collect();
        prop_assert_eq!(distinct.len(), a.len(), "colliding slugs: {:?}", a);
        for (id, s) in &a {
            prop_assert!(valid_level(s) && s.chars().all(is_slug_char), "{id}: {s:?}");
            // A thing keeps its own slug unless it collides; then its slug ends in its id.
            let own = slug_or_id(&items[id], id);
            prop_assert!(*s == own || s.starts_with(&own) && s.ends_with(&format!("-{id}")), "{id} {own:?} -> {s:?}");
        }
        // Same result in any order.
        let mut shuffled = list.clone();
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let b = assign(shuffled.iter().map(|(k, v)| (*k, v.as_str())), &[]);
        prop_assert_eq!(&a, &b);
        // Same input, same output.
        prop_assert_eq!(&a, &assign(list.iter().map(|(k, v)| (*k, v.as_str())), &[]));
    }

    #[test]
    fn network_slugs_are_distinct_and_never_the_reserved_bridge(
        items in prop::collection::btree_map(
            "[0-9a-f]{1,8}",
            prop_oneof![name(), Just("Bridge".to_string()), Just("bridge".to_string())],
            0..12,
        ),
    ) {
        let a: BTreeMap<String, String> = assign(items.clone(), &["bridge"]);
        let distinct: BTreeSet<&String> = a.values().collect();
        prop_assert_eq!(distinct.len(), a.len(), "colliding slugs: {:?}", a);
        prop_assert!(a.values().all(|s| s != "bridge" && valid_level(s)), "{:?}", a);
    }
}
