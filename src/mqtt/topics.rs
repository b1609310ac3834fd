//! The topic layout of docs/mqtt.md and the slugs that name networks, units, groups and scenes in it.
//!
//! A slug is readable and stable: lower-case ASCII letters and digits are kept, every other run
//! of characters becomes one `-`, non-ASCII letters are transliterated first (`Küche` → `kuche`).
//! Slugs of one kind within one network must be distinct: where they collide, the thing with the
//! lowest id keeps its slug and each other one gets `-<id>` appended, so a newcomer never moves an
//! existing thing's topics and the result does not depend on the order things are listed in. A slug never contains `/`, `+`, `#` or NUL, so it is always a single, literal topic
//! level.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

/// The slug of a name: may be empty (a name of punctuation only).
pub fn slug(name: &str) -> String {
    let ascii = deunicode::deunicode(name);
    let mut out = String::with_capacity(ascii.len());
    let mut pending_dash = false;
    for c in ascii.chars() {
        if c.is_ascii_alphanumeric() {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            out.push(c.to_ascii_lowercase());
        } else {
            pending_dash = true;
        }
    }
    out
}

/// The slug of a name, or of the id when the name gives none.
pub fn slug_or_id(name: &str, id: &impl Display) -> String {
    let s = slug(name);
    if s.is_empty() { id_slug(id) } else { s }
}

/// An id made safe as a topic level (ids are numbers or hex, so this rarely changes anything).
fn id_slug(id: &impl Display) -> String {
    let s = slug(&id.to_string());
    if s.is_empty() { "id".into() } else { s }
}

/// Slugs for a set of things of one kind: the slug of each name (`-<id>` appended when it is in
/// `reserved`); where slugs collide, the thing with the lowest id keeps its slug and every other
/// gets `-<id>` appended. A thing added later (ids grow as things are added) therefore never
/// moves an existing one's topics, and the result does not depend on the listing's order.
pub fn assign<K>(items: impl IntoIterator<Item = (K, impl AsRef<str>)>, reserved: &[&str]) -> BTreeMap<K, String>
where
    K: Ord + Clone + Display,
{
    let mut slugs: BTreeMap<K, String> = items
        .into_iter()
        .map(|(id, name)| {
            let base = slug_or_id(name.as_ref(), &id);
            let s = if reserved.contains(&base.as_str()) { format!("{base}-{}", id_slug(&id)) } else { base };
            (id, s)
        })
        .collect();
    // Each round appends an id to every slug that meets one of a lower id. The lowest id never
    // changes, and each other changes only while a lower one still does, so the rounds end.
    loop {
        let mut claimed: BTreeSet<&str> = BTreeSet::new();
        // By ascending id: the first to claim a slug keeps it.
        let losers: Vec<K> =
            slugs.iter().filter(|(_, s)| !claimed.insert(s.as_str())).map(|(id, _)| id.clone()).collect();
        if losers.is_empty() {
            break;
        }
        for id in losers {
            if let Some(s) = slugs.get_mut(&id) {
                s.push('-');
                s.push_str(&id_slug(&id));
            }
        }
    }
    slugs
}

/// The slugs of one kind of thing in one network (units, groups or scenes), by id, kept for
/// the publisher's life: ids in a sorted list, each with the end of its slug in one shared
/// string. A big site has tens of thousands of unit slugs; a `BTreeMap<u32, String>` would give
/// each a map slot and a heap block of its own, here 8 bytes and its characters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slugs {
    /// `(id, end of its slug in text)`, sorted by id; a slug starts where the one before ends.
    ends: Box<[(u32, u32)]>,
    /// Every slug, one after the other.
    text: Box<str>,
}

impl Slugs {
    /// The slugs of `items` (id, name) by [`assign`]'s rule, nothing reserved.
    pub fn of<'a>(items: impl IntoIterator<Item = (u32, &'a str)>) -> Slugs {
        assign(items, &[]).into_iter().collect()
    }

    /// The slug of `id`.
    pub fn get(&self, id: &u32) -> Option<&str> {
        let i = self.ends.binary_search_by_key(id, |(k, _)| *k).ok()?;
        Some(self.slug_at(i))
    }

    /// The id whose slug is `slug` (slugs are distinct; a linear search, for commands only).
    pub fn find(&self, slug: &str) -> Option<u32> {
        self.iter().find(|(_, s)| *s == slug).map(|(id, _)| id)
    }

    /// Every `(id, slug)`, by id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        (0..self.ends.len()).map(|i| (self.ends[i].0, self.slug_at(i)))
    }

    /// The slug of the `i`th id: from where the one before ends to its own end.
    fn slug_at(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |before| self.ends[before].1 as usize);
        self.text.get(start..self.ends[i].1 as usize).unwrap_or_default()
    }
}

/// From [`assign`]'s map (sorted by id already). A network's slugs are far below the 4 GiB a
/// `u32` offset reaches; past it, the rest would be left out rather than wrap.
impl FromIterator<(u32, String)> for Slugs {
    fn from_iter<I: IntoIterator<Item = (u32, String)>>(items: I) -> Self {
        let mut pairs: Vec<(u32, String)> = items.into_iter().collect();
        pairs.sort_by_key(|(id, _)| *id);
        pairs.dedup_by_key(|(id, _)| *id);
        let mut text = String::with_capacity(pairs.iter().map(|(_, s)| s.len()).sum());
        let mut ends = Vec::with_capacity(pairs.len());
        for (id, slug) in pairs {
            text.push_str(&slug);
            let Ok(end) = u32::try_from(text.len()) else { break };
            ends.push((id, end));
        }
        Slugs { ends: ends.into_boxed_slice(), text: text.into_boxed_str() }
    }
}

/// Whether `level` can be used as one literal topic level.
pub fn valid_level(level: &str) -> bool {
    !level.is_empty() && !level.contains(['/', '+', '#', '\0'])
}

/// The contract's topic layout under one base topic.
#[derive(Debug, Clone)]
pub struct Layout {
    base: String,
    /// The instance id of a bridge that shares its base topic with others
    /// (`mqtt.instance_topics`): its own topics then lie under `<base>/bridge/<instance>/`.
    instance: Option<String>,
}

impl Layout {
    /// The layout under `base` (`mqtt.base_topic`) of a bridge alone on it.
    pub fn new(base: &str) -> Layout {
        Layout { base: base.to_string(), instance: None }
    }

    /// The layout `settings` ask for: with `mqtt.instance_topics`, the bridge's own topics carry
    /// its `mqtt.client_id` (docs/brokers.md, "Scaling out").
    pub fn of(settings: &super::MqttSettings) -> Layout {
        let instance = settings.instance_topics.then(|| settings.client_id.clone());
        Layout { base: settings.base_topic.clone(), instance }
    }

    /// The instance id, when the bridge's own topics carry one.
    pub fn instance(&self) -> Option<&str> {
        self.instance.as_deref()
    }

    /// `<base>/bridge`, or `<base>/bridge/<instance>`: where the bridge's own topics lie. Network
    /// slugs never take `bridge` ([`assign`]'s reserved names), so every instance's bridge
    /// topics stay out of the networks' way, and `<base>/bridge/#` shows them all.
    fn bridge_prefix(&self) -> String {
        match &self.instance {
            None => format!("{}/bridge", self.base),
            Some(instance) => format!("{}/bridge/{instance}", self.base),
        }
    }

    /// For a topic under `<base>/bridge/`: whether it is this bridge's own (`Some(true)`) or
    /// another instance's (`Some(false)`); `None` for any other topic. The layout without an
    /// instance owns the topics one level below `<base>/bridge/`, an instance those below
    /// `<base>/bridge/<instance>/`.
    pub fn owns_bridge_topic(&self, topic: &str) -> Option<bool> {
        let rest = topic.strip_prefix(self.base.as_str())?.strip_prefix("/bridge/")?;
        Some(match (&self.instance, rest.split_once('/')) {
            (None, None) => true,
            (Some(instance), Some((level, leaf))) => level == instance && !leaf.contains('/'),
            _ => false,
        })
    }

    // Topics are joined with `[..].join("/")`, not `format!`: a state change builds one per
    // changed part, and the formatting machinery is a large share of a changed unit's render.

    /// The base topic.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `<base>/bridge/state` (or `<base>/bridge/<instance>/state`): `online`/`offline`, retained,
    /// also the last will.
    pub fn bridge_state(&self) -> String {
        format!("{}/state", self.bridge_prefix())
    }

    /// `<base>/bridge/info`: retained JSON.
    pub fn bridge_info(&self) -> String {
        format!("{}/info", self.bridge_prefix())
    }

    /// `<base>/bridge/request/reload`: a command (any payload) to fetch every network again and
    /// publish everything again.
    pub fn bridge_reload(&self) -> String {
        format!("{}/request/reload", self.bridge_prefix())
    }

    /// `<base>/bridge/error`: non-retained JSON.
    pub fn bridge_error(&self) -> String {
        format!("{}/error", self.bridge_prefix())
    }

    /// `<base>/<net>`: the network JSON.
    pub fn network(&self, net: &str) -> String {
        [self.base.as_str(), net].join("/")
    }

    /// `<base>/<net>/availability`.
    pub fn network_availability(&self, net: &str) -> String {
        [self.base.as_str(), net, "availability"].join("/")
    }

    /// `<base>/<net>/set`: network commands.
    pub fn network_set(&self, net: &str) -> String {
        [self.base.as_str(), net, "set"].join("/")
    }

    /// `<base>/<net>/unit/<unit>`: the unit JSON.
    pub fn unit(&self, net: &str, unit: &str) -> String {
        [self.base.as_str(), net, "unit", unit].join("/")
    }

    /// `<base>/<net>/unit/<unit>/<leaf>` (`availability`, `event`, `set` or an attribute).
    pub fn unit_leaf(&self, net: &str, unit: &str, leaf: &str) -> String {
        [self.base.as_str(), net, "unit", unit, leaf].join("/")
    }

    /// `<base>/<net>/group/<group>`: the group JSON.
    pub fn group(&self, net: &str, group: &str) -> String {
        [self.base.as_str(), net, "group", group].join("/")
    }

    /// Whether `topic` is [`Layout::unit`]`(net, unit)` (without building it).
    pub fn is_unit(&self, topic: &str, net: &str, unit: &str) -> bool {
        self.is_entity(topic, net, "unit", unit)
    }

    /// Whether `topic` is [`Layout::group`]`(net, group)` (without building it).
    pub fn is_group(&self, topic: &str, net: &str, group: &str) -> bool {
        self.is_entity(topic, net, "group", group)
    }

    fn is_entity(&self, topic: &str, net: &str, kind: &str, slug: &str) -> bool {
        let rest = topic.strip_prefix(self.base.as_str()).and_then(|r| r.strip_prefix('/'));
        let rest = rest.and_then(|r| r.strip_prefix(net)).and_then(|r| r.strip_prefix('/'));
        let rest = rest.and_then(|r| r.strip_prefix(kind)).and_then(|r| r.strip_prefix('/'));
        rest == Some(slug)
    }

    /// `<base>/<net>/photo/<photo>`: a photo's PNG file (docs/mqtt.md, "Photos").
    pub fn photo(&self, net: &str, photo: &str) -> String {
        format!("{}/{net}/photo/{photo}", self.base)
    }

    /// `<base>/<net>/scene/<scene>`: `ON`/`OFF`.
    pub fn scene(&self, net: &str, scene: &str) -> String {
        [self.base.as_str(), net, "scene", scene].join("/")
    }

    /// Subscription filters for every `…/set` topic of the contract and the bridge's reload
    /// request.
    pub fn command_filters(&self) -> Vec<String> {
        let b = &self.base;
        vec![
            format!("{b}/+/set"),
            format!("{b}/+/unit/+/set"),
            format!("{b}/+/unit/+/set/+"),
            format!("{b}/+/group/+/set"),
            format!("{b}/+/scene/+/set"),
            self.bridge_reload(),
        ]
    }

    /// Whether `topic` is one of the command topics of the contract under this base.
    pub fn is_command(&self, topic: &str) -> bool {
        let Some(rest) = topic.strip_prefix(&self.base).and_then(|r| r.strip_prefix('/')) else {
            return false;
        };
        if topic == self.bridge_reload() {
            return true;
        }
        let levels: Vec<&str> = rest.split('/').collect();
        matches!(
            levels.as_slice(),
            [_, "set"]
                | [_, "unit", _, "set"]
                | [_, "unit", _, "set", _]
                | [_, "group", _, "set"]
                | [_, "scene", _, "set"]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_contract() {
        assert_eq!(slug("Kitchen ceiling"), "kitchen-ceiling");
        assert_eq!(slug("Küche Spots"), "kuche-spots");
        assert_eq!(slug("  --Living / room + #1 -- "), "living-room-1");
        assert_eq!(slug("a\0b"), "a-b");
        assert_eq!(slug("Ærø"), "aero");
        assert_eq!(slug("!!!"), "");
        assert_eq!(slug_or_id("!!!", &17), "17");
        assert_eq!(slug_or_id("", &"ABC"), "abc");
    }

    #[test]
    fn entity_topics_are_recognised_without_building_them() {
        let l = Layout::new("casambi");
        assert!(l.is_unit(&l.unit("home", "lamp"), "home", "lamp"));
        assert!(l.is_group(&l.group("home", "hall"), "home", "hall"));
        for other in [
            l.unit("home", "lamp-1"),
            l.unit_leaf("home", "lamp", "state"),
            l.group("home", "lamp"),
            l.unit("hom", "lamp"),
        ] {
            assert!(!l.is_unit(&other, "home", "lamp"), "{other}");
        }
        assert!(!Layout::new("casamb").is_unit(&l.unit("home", "lamp"), "home", "lamp"));
    }

    #[test]
    fn slugs_never_break_a_topic_level() {
        for name in ["a/b", "+", "#", "x\0y", "日本語", "🙂", "/+#\0", "Spot № 5"] {
            let s = slug_or_id(name, &9);
            assert!(valid_level(&s), "{name:?} -> {s:?}");
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{s}");
            assert!(!s.starts_with('-') && !s.ends_with('-'), "{s}");
        }
    }

    #[test]
    fn collisions_leave_the_lowest_id_its_slug_whatever_the_order() {
        let a = assign([(3u32, "Spot"), (1, "spot"), (2, "Lamp")], &[]);
        let b = assign([(2u32, "Lamp"), (1, "spot"), (3, "Spot")], &[]);
        assert_eq!(a, b);
        assert_eq!(a[&1], "spot");
        assert_eq!(a[&3], "spot-3");
        assert_eq!(a[&2], "lamp");
    }

    #[test]
    fn a_newcomer_never_moves_an_existing_slug() {
        let before = assign([(5u32, "Kitchen"), (7, "Kitchen")], &[]);
        // A third "Kitchen", and a name that reads like a suffixed slug, come later.
        let after = assign([(5u32, "Kitchen"), (7, "Kitchen"), (9, "Kitchen"), (12, "Kitchen 7")], &[]);
        for (id, slug) in &before {
            assert_eq!(&after[id], slug, "{id} moved");
        }
        assert_eq!(after[&9], "kitchen-9");
        assert_eq!(after[&12], "kitchen-7-12");
        let all: BTreeSet<_> = after.values().collect();
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn a_suffixed_slug_meeting_a_lower_id_is_suffixed_again() {
        let s = assign([(3u32, "Kitchen 7"), (5, "Kitchen"), (7, "Kitchen")], &[]);
        assert_eq!(s[&3], "kitchen-7");
        assert_eq!(s[&5], "kitchen");
        assert_eq!(s[&7], "kitchen-7-7");
    }

    #[test]
    fn empty_slugs_become_the_id_and_still_collide_safely() {
        let s = assign([(5u32, "?"), (7, "5")], &[]);
        assert_eq!(s[&5], "5");
        assert_eq!(s[&7], "5-7");
    }

    #[test]
    fn slugs_are_found_by_id_and_by_text() {
        let slugs = Slugs::of([(30u32, "Spot"), (4, "Lamp"), (12, "spot"), (7, "")]);
        assert_eq!(slugs.get(&4), Some("lamp"));
        assert_eq!(slugs.get(&7), Some("7"));
        assert_eq!(slugs.get(&12), Some("spot"));
        assert_eq!(slugs.get(&30), Some("spot-30"));
        assert_eq!(slugs.get(&5), None);
        assert_eq!(slugs.find("spot-30"), Some(30));
        assert_eq!(slugs.find("spot-12"), None);
        let all: Vec<(u32, &str)> = slugs.iter().collect();
        assert_eq!(all, [(4, "lamp"), (7, "7"), (12, "spot"), (30, "spot-30")]);
        assert_eq!(Slugs::default().get(&1), None);
    }

    #[test]
    fn bridge_is_reserved_for_networks() {
        let s = assign([("abc1".to_string(), "Bridge"), ("ff".to_string(), "Home")], &["bridge"]);
        assert_eq!(s["abc1"], "bridge-abc1");
        assert_eq!(s["ff"], "home");
    }

    #[test]
    fn instances_own_their_bridge_topics_and_no_other() {
        let alone = Layout::new("casambi");
        let mut settings = crate::mqtt::MqttSettings { client_id: "east".into(), ..Default::default() };
        assert_eq!(Layout::of(&settings).bridge_state(), "casambi/bridge/state", "off unless asked for");
        settings.instance_topics = true;
        let east = Layout::of(&settings);
        assert_eq!(east.bridge_state(), "casambi/bridge/east/state");
        assert_eq!(east.bridge_info(), "casambi/bridge/east/info");
        assert_eq!(east.bridge_error(), "casambi/bridge/east/error");
        assert_eq!(alone.bridge_info(), "casambi/bridge/info");
        assert_eq!(east.unit("home", "lamp"), alone.unit("home", "lamp"), "only the bridge's own topics move");
        for (topic, alone_owns, east_owns) in [
            ("casambi/bridge/state", Some(true), Some(false)),
            ("casambi/bridge/east/state", Some(false), Some(true)),
            ("casambi/bridge/west/info", Some(false), Some(false)),
            ("casambi/bridge/east/x/y", Some(false), Some(false)),
            ("casambi/home/unit/lamp", None, None),
            ("other/bridge/state", None, None),
        ] {
            assert_eq!(alone.owns_bridge_topic(topic), alone_owns, "{topic}");
            assert_eq!(east.owns_bridge_topic(topic), east_owns, "{topic}");
        }
    }

    #[test]
    fn command_topics_are_recognised() {
        let l = Layout::new("casambi");
        assert!(l.is_command("casambi/home/set"));
        assert!(l.is_command("casambi/home/unit/lamp/set"));
        assert!(l.is_command("casambi/home/unit/lamp/set/brightness"));
        assert!(l.is_command("casambi/home/group/kitchen/set"));
        assert!(l.is_command("casambi/home/scene/evening/set"));
        assert!(!l.is_command("casambi/home/unit/lamp"));
        assert!(!l.is_command("other/home/set"));
    }
}
