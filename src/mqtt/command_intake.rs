//! The command intake: messages on the contract's `…/set` topics, handed on as they are.
//!
//! Parsing and validating commands belongs to the command layer; this module only decides what
//! may pass. A command that arrives with the retain flag is a replay of a stray retained message
//! (someone published a `/set` with retain): acting on it would switch lights at every
//! reconnect, so it is logged, cleared from the broker, and dropped. Empty payloads (including
//! the clearing itself coming back) are never commands.

use super::client::Message;
use super::mirror::NetMirror;
use super::topics::{Layout, Slugs};
use crate::commands::Target as CommandTarget;
use std::collections::BTreeMap;

/// A command as received: its topic and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandMessage {
    /// The `…/set` topic it arrived on.
    pub topic: String,
    /// The payload bytes (JSON or a plain value).
    pub payload: Vec<u8>,
}

/// A command resolved to its network and target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedCommand {
    /// The message as received.
    pub message: CommandMessage,
    /// Network id.
    pub network: String,
    /// What the topic names (resolved with the publisher's own slug tables, so a command reaches
    /// exactly the thing whose topics it sits under).
    pub target: CommandTarget,
}

/// Resolves a command topic against the networks the publisher knows; `None` when it names
/// nothing that exists (a stale topic of a renamed unit, a typo).
pub fn resolve(layout: &Layout, nets: &BTreeMap<String, NetMirror>, topic: &str) -> Option<(String, CommandTarget)> {
    if topic == layout.bridge_reload() {
        return Some((String::new(), CommandTarget::Reload));
    }
    let rest = topic.strip_prefix(layout.base())?.strip_prefix('/')?;
    let levels: Vec<&str> = rest.split('/').collect();
    let first = *levels.first()?;
    let net = nets.values().find(|m| m.slug == first)?;
    let find = |slugs: &Slugs, slug: &str| slugs.find(slug);
    let target = match levels.as_slice() {
        [_, "set"] => CommandTarget::Network,
        [_, "unit", unit, "set"] => CommandTarget::Unit { id: find(&net.unit_slugs, unit)?, attr: None },
        [_, "unit", unit, "set", attr] => {
            CommandTarget::Unit { id: find(&net.unit_slugs, unit)?, attr: Some((*attr).to_string()) }
        }
        [_, "group", group, "set"] => CommandTarget::Group(find(&net.group_slugs, group)?),
        [_, "scene", scene, "set"] => CommandTarget::Scene(find(&net.scene_slugs, scene)?),
        _ => return None,
    };
    Some((net.view.status.id.clone(), target))
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
