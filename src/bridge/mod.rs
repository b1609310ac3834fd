//! The bridge core: from the cloud to a correct, live, in-memory state of every network, and a
//! stream of typed changes for the MQTT side.
//!
//! - [`state`]: one network's state; merges snapshots and events into minimal changes (no I/O).
//! - [`photos`] and [`photo_fetch`]: a network's gallery, fetched apart from the live work.
//! - [`update`]: the typed stream of changes the consumers (MQTT publisher, `check`) receive.

pub mod caps;
pub mod datapoints;
pub mod fixtures;
pub mod network;
pub mod photo_fetch;
pub mod photos;
mod rest_client;
pub mod runner;
pub mod session_source;
pub mod startup_gate;
pub mod state;
pub mod update;

pub use runner::{Bridge, CloudSettings, CredentialSettings, CredentialState, SiteListing};
