//! Control from the page: `POST /api/control` (docs/web.md#control).
//!
//! The page sends what an MQTT client would publish on a `…/set` topic (`"TOGGLE"`,
//! `{"brightness":128}`, `{"dim_level":0.4}`), naming the target by network and id instead of by
//! topic. It becomes the same [`Request`] the MQTT side hands the [`CommandDispatcher`], so a
//! command from the page is parsed, checked, refused, coalesced and retried exactly as one from
//! MQTT; a refusal also goes out on `<base>/bridge/error`, with a `web/…` topic.

use crate::commands::{CommandDispatcher, Request, Target};
use serde::Deserialize;
use serde_json::Value;
use tokio::runtime::Handle;

/// What the page names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A unit (`id`; `attr` for a `…/set/<attr>` form).
    Unit,
    /// A group (`id`).
    Group,
    /// A scene (`id`).
    Scene,
    /// The network level (dim level).
    Network,
}

/// The body of `POST /api/control`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlRequest {
    /// Network id.
    pub network: String,
    /// What is commanded.
    pub target: Kind,
    /// Unit, group or scene id.
    #[serde(default)]
    pub id: Option<u32>,
    /// The attribute of a unit's `…/set/<attr>` topic (`state`, `brightness`, `color_temp`, `color`).
    #[serde(default)]
    pub attr: Option<String>,
    /// The MQTT payload: a string is sent as its text (`"TOGGLE"`), anything else as JSON.
    pub payload: Value,
}

/// The longest network id taken (the service's are 32 characters).
pub const MAX_NETWORK_ID: usize = 64;
/// The longest `attr` taken (the longest attribute is `color_temp`).
pub const MAX_ATTR: usize = 32;

impl ControlRequest {
    /// The dispatcher's request; `Err` with the reason when the target is incomplete. The
    /// strings it carries on (into the log, `/healthz`, the page, `<base>/bridge/error`) are
    /// bounded here; a refusal never quotes a long one.
    pub fn into_request(self) -> Result<Request, String> {
        if self.network.len() > MAX_NETWORK_ID {
            return Err(format!("network id of {} bytes; at most {MAX_NETWORK_ID}", self.network.len()));
        }
        if let Some(attr) = self.attr.as_ref().filter(|a| a.len() > MAX_ATTR) {
            return Err(format!("attr of {} bytes; at most {MAX_ATTR}", attr.len()));
        }
        let id = || self.id.ok_or_else(|| format!("{:?} needs an id", self.target));
        let (target, path) = match self.target {
            Kind::Unit => {
                let id = id()?;
                let path = match &self.attr {
                    Some(attr) => format!("unit/{id}/set/{attr}"),
                    None => format!("unit/{id}/set"),
                };
                (Target::Unit { id, attr: self.attr.clone() }, path)
            }
            Kind::Group => (Target::Group(id()?), format!("group/{}/set", id()?)),
            Kind::Scene => (Target::Scene(id()?), format!("scene/{}/set", id()?)),
            Kind::Network => (Target::Network, "set".to_string()),
        };
        let payload = match self.payload {
            Value::String(text) => text.into_bytes(),
            other => other.to_string().into_bytes(),
        };
        Ok(Request { topic: format!("web/{}/{path}", self.network), network: self.network, target, payload })
    }
}

/// Hands page commands to the bridge's dispatcher, on the bridge's runtime (where the MQTT side's
/// commands run too: the dispatcher's per-target workers live there).
#[derive(Debug, Clone)]
pub struct Controller {
    dispatcher: CommandDispatcher,
    runtime: Handle,
}

impl Controller {
    /// A controller for `dispatcher`, whose workers run on `runtime`.
    pub fn new(dispatcher: CommandDispatcher, runtime: Handle) -> Controller {
        Controller { dispatcher, runtime }
    }

    /// Submits one command; `Err` with the dispatcher's reason when it is refused at once.
    pub async fn submit(&self, request: Request) -> Result<(), String> {
        let dispatcher = self.dispatcher.clone();
        match self.runtime.spawn(async move { dispatcher.submit(request) }).await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err("the bridge is stopping".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Request, String> {
        serde_json::from_str::<ControlRequest>(json).map_err(|e| e.to_string())?.into_request()
    }

    #[test]
    fn page_commands_become_the_mqtt_requests() {
        let r = parse(r#"{"network":"n1","target":"unit","id":3,"payload":"TOGGLE"}"#).unwrap();
        assert_eq!(r.target, Target::Unit { id: 3, attr: None });
        assert_eq!(r.payload, b"TOGGLE");
        assert_eq!(r.topic, "web/n1/unit/3/set");
        let r = parse(r#"{"network":"n1","target":"unit","id":3,"attr":"brightness","payload":128}"#).unwrap();
        assert_eq!(r.target, Target::Unit { id: 3, attr: Some("brightness".into()) });
        assert_eq!(r.payload, b"128");
        let r = parse(r#"{"network":"n1","target":"network","payload":{"dim_level":0.5}}"#).unwrap();
        assert_eq!((r.target, r.payload), (Target::Network, br#"{"dim_level":0.5}"#.to_vec()));
        let r = parse(r#"{"network":"n1","target":"scene","id":2,"payload":"ON"}"#).unwrap();
        assert_eq!(r.topic, "web/n1/scene/2/set");
        assert!(parse(r#"{"network":"n1","target":"group","payload":"ON"}"#).is_err(), "no id");
        assert!(parse(r#"{"network":"n1","target":"lamp","id":1,"payload":"ON"}"#).is_err());
    }

    #[test]
    fn long_strings_are_refused_without_being_quoted() {
        let long = "n".repeat(100_000);
        let e = parse(&format!(r#"{{"network":"{long}","target":"unit","id":3,"payload":"ON"}}"#)).unwrap_err();
        assert!(e.len() < 80 && !e.contains("nnnnnnnnnn"), "{e}");
        let e =
            parse(&format!(r#"{{"network":"n1","target":"unit","id":3,"attr":"{long}","payload":1}}"#)).unwrap_err();
        assert!(e.len() < 80 && !e.contains("nnnnnnnnnn"), "{e}");
    }
}
