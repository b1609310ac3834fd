//! The state payloads of one owner, written into one reused buffer.
//!
//! A change of state (thousands per second on a big site) renders a unit's JSON and its plain
//! attribute values; most of them are unchanged. Writing them all into one buffer that lives as
//! long as the publisher, and naming each part by its leaf instead of by a full topic string,
//! lets [`super::store::Store::update_state`] compare them with what is wanted without building
//! a single topic or payload string; only the few parts that changed are copied out.
//!
//! A leaf below the state topic is named by a `&'static str` of a static table (the unit JSON's
//! [`super::unit_json::UNIT_KEYS`], [`AVAILABILITY`]): the store recognises those by address.

/// Which topic a part is for, relative to the owner's state topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf {
    /// The state topic itself (`<base>/<net>/unit/<unit>`, `<base>/<net>/group/<group>`).
    State,
    /// A topic one level below it (`…/<unit>/brightness`, `…/<unit>/availability`).
    Below(&'static str),
}

/// The rendered state payloads of one owner, in publishing order.
#[derive(Debug, Default)]
pub struct StateText {
    buf: Vec<u8>,
    /// Each part's leaf and the end of its payload in `buf` (it starts where the previous ends).
    parts: Vec<(Leaf, usize)>,
}

impl StateText {
    /// Empties the buffer, keeping its capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.parts.clear();
    }

    /// The buffer to append the next part's payload to.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Ends the part written since the previous one.
    pub fn end_part(&mut self, leaf: Leaf) {
        self.parts.push((leaf, self.buf.len()));
    }

    /// Appends a whole part.
    pub fn push(&mut self, leaf: Leaf, payload: &str) {
        self.buf.extend_from_slice(payload.as_bytes());
        self.end_part(leaf);
    }

    /// How many parts there are.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether there is no part.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The parts in order. Every payload is text (serde_json and `&str`s wrote it); the buffer
    /// is checked once as a whole, and a buffer or part that somehow is not text reads as empty
    /// rather than failing. The iterator clones, so a caller that reads the parts twice checks
    /// the buffer once.
    pub fn parts(&self) -> impl Iterator<Item = (Leaf, &str)> + Clone {
        let all = simdutf8::basic::from_utf8(&self.buf).unwrap_or_default();
        let mut start = 0;
        self.parts.iter().map(move |&(leaf, end)| {
            let text = all.get(start..end).unwrap_or_default();
            start = end;
            (leaf, text)
        })
    }

    /// The parts as full topics below `state_topic`.
    pub fn topics(&self, state_topic: &str) -> Vec<(String, String)> {
        self.parts()
            .map(|(leaf, text)| {
                let topic = match leaf {
                    Leaf::State => state_topic.to_string(),
                    Leaf::Below(key) => [state_topic, key].join("/"),
                };
                (topic, text.to_string())
            })
            .collect()
    }
}

/// The leaf of a unit's availability below its state topic. A `static`, so that every leaf
/// named by it is one string at one address (the store compares a leaf's address before its
/// bytes).
pub static AVAILABILITY: &str = "availability";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_come_back_in_order_with_their_leaves() {
        let mut s = StateText::default();
        s.push(Leaf::State, "{\"a\":1}");
        s.buf().extend_from_slice(b"128");
        s.end_part(Leaf::Below("brightness"));
        s.push(Leaf::Below("availability"), "online");
        let parts: Vec<_> = s.parts().collect();
        assert_eq!(
            parts,
            vec![
                (Leaf::State, "{\"a\":1}"),
                (Leaf::Below("brightness"), "128"),
                (Leaf::Below("availability"), "online")
            ]
        );
        assert_eq!(s.topics("b/n/unit/u")[1], ("b/n/unit/u/brightness".to_string(), "128".to_string()));
        s.clear();
        assert!(s.is_empty());
        assert_eq!(s.parts().count(), 0);
    }
}
