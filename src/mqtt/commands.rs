//! The command intake: messages on the contract's `…/set` topics, handed on as they are.
//!
//! Parsing and validating commands belongs to the command layer; this module only decides what
//! may pass. A command that arrives with the retain flag is a replay of a stray retained message
//! (someone published a `/set` with retain): acting on it would switch lights at every
//! reconnect, so it is logged, cleared from the broker, and dropped. Empty payloads (including
//! the clearing itself coming back) are never commands.

use super::client::Message;
use super::topics::Layout;

/// A command as received: its topic and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandMessage {
    /// The `…/set` topic it arrived on.
    pub topic: String,
    /// The payload bytes (JSON or a plain value).
    pub payload: Vec<u8>,
}

/// What to do with a message on a command topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intake {
    /// Hand it to the command layer.
    Forward(CommandMessage),
    /// A retained command: log it and clear it from the broker.
    Retained,
    /// An empty payload: ignore.
    Empty,
    /// Not a command topic.
    NotCommand,
}

/// Sorts a received message.
pub fn classify(layout: &Layout, msg: &Message) -> Intake {
    if !layout.is_command(&msg.topic) {
        return Intake::NotCommand;
    }
    if msg.payload.is_empty() {
        return Intake::Empty;
    }
    if msg.retain {
        return Intake::Retained;
    }
    Intake::Forward(CommandMessage { topic: msg.topic.clone(), payload: msg.payload.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(topic: &str, payload: &str, retain: bool) -> Message {
        Message { topic: topic.into(), payload: payload.as_bytes().to_vec(), retain }
    }

    #[test]
    fn sorting() {
        let l = Layout::new("casambi");
        assert!(matches!(classify(&l, &msg("casambi/home/unit/lamp/set", "ON", false)), Intake::Forward(_)));
        assert_eq!(classify(&l, &msg("casambi/home/unit/lamp/set", "ON", true)), Intake::Retained);
        assert_eq!(classify(&l, &msg("casambi/home/unit/lamp/set", "", false)), Intake::Empty);
        assert_eq!(classify(&l, &msg("homeassistant/status", "online", false)), Intake::NotCommand);
    }
}
