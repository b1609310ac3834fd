//! Session creation: the credentials sent and the four responses (user session and network
//! session entries). Session ids are [`Secret`]s so they never reach `Debug` output.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Secret, de};

/// Login credentials for session creation (`{"email":…,"password":…}`).
///
/// Network (admin) credentials open network sessions; site (user) credentials open user sessions.
#[derive(Clone, Debug, Serialize)]
pub struct Credentials {
    /// Account e-mail; fine to log.
    pub email: String,
    /// Password; never logged ([`Secret`]).
    pub password: Secret,
}

impl Credentials {
    /// Builds credentials from an e-mail and a password.
    pub fn new(email: impl Into<String>, password: impl Into<Secret>) -> Self {
        Self { email: email.into(), password: password.into() }
    }
}

/// Response of `POST /v1/users/session`: one session id for every network of a site user.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserSession {
    /// The user session id.
    pub session_id: Secret,
    /// Sites of the user, by site id.
    #[serde(deserialize_with = "de::or_default")]
    pub sites: BTreeMap<String, Site>,
    /// Every network the user can access, by network id.
    #[serde(deserialize_with = "de::or_default")]
    pub networks: BTreeMap<String, NetworkSummary>,
}

/// A site in a user session.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct Site {
    /// Site name.
    #[serde(deserialize_with = "de::or_default")]
    pub name: String,
    /// Site address; may be empty.
    #[serde(deserialize_with = "de::or_default")]
    pub address: String,
    /// The user's role (seen: `ADMIN`).
    #[serde(deserialize_with = "de::or_default")]
    pub role: String,
    /// Networks of the site, by network id.
    #[serde(deserialize_with = "de::or_default")]
    pub networks: BTreeMap<String, NetworkSummary>,
}

/// A network as listed in a user session.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkSummary {
    /// Network id.
    #[serde(deserialize_with = "de::or_default")]
    pub id: String,
    /// Network address (12 hex digits).
    #[serde(deserialize_with = "de::or_default")]
    pub address: String,
    /// Network name.
    #[serde(deserialize_with = "de::or_default")]
    pub name: String,
    /// Network type (`OPEN`, `PROTECTED`, `CLOSED`).
    #[serde(rename = "type", deserialize_with = "de::or_default")]
    pub network_type: String,
    /// Network grade (`EVOLUTION`, `CLASSIC`).
    #[serde(deserialize_with = "de::or_default")]
    pub grade: String,
    /// The user's role.
    #[serde(deserialize_with = "de::or_default")]
    pub role: String,
    /// A per-network session id, when a user session carries one (some clients saw it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Secret>,
}

/// One entry of a network session response: a network and its own session id.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkSessionEntry {
    /// Network id.
    #[serde(deserialize_with = "de::or_default")]
    pub id: String,
    /// Network address (12 hex digits).
    #[serde(deserialize_with = "de::or_default")]
    pub address: String,
    /// Former name of `address`, still sent by some servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Network name.
    #[serde(deserialize_with = "de::or_default")]
    pub name: String,
    /// Network type.
    #[serde(rename = "type", deserialize_with = "de::or_default")]
    pub network_type: String,
    /// Network grade.
    #[serde(deserialize_with = "de::or_default")]
    pub grade: String,
    /// The session id for this network.
    pub session_id: Secret,
}

/// Response of the three network session endpoints: entries by network id.
///
/// The documented shape is an object keyed by network id; the session-set shape is "not shown",
/// so a JSON array of entries is accepted as well (keyed by each entry's `id`).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct NetworkSessions(pub BTreeMap<String, NetworkSessionEntry>);

impl<'de> Deserialize<'de> for NetworkSessions {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Shape {
            Map(BTreeMap<String, NetworkSessionEntry>),
            List(Vec<NetworkSessionEntry>),
        }
        Ok(Self(match Shape::deserialize(deserializer)? {
            Shape::Map(mut map) => {
                for (key, entry) in &mut map {
                    if entry.id.is_empty() {
                        entry.id.clone_from(key);
                    }
                }
                map
            }
            Shape::List(list) => list.into_iter().map(|e| (e.id.clone(), e)).collect(),
        }))
    }
}
