//! MQTT export with Home Assistant discovery and Node-RED friendly topics.
//!
//! The bridge core sends typed [`Update`]s; [`run`] turns them into the retained topic tree of
//! docs/mqtt.md and the discovery configs of docs/homeassistant.md, and hands messages on the `…/set` topics to
//! the command layer. Modules, one concern each:
//!
//! - [`settings`]: the `mqtt`, `homeassistant` and `output` configuration sections.
//! - [`client`]: the rumqttc connection (MQTT 5 / 3.1.1, TLS, last will, backoff).
//! - [`topics`]: the topic layout and slugs.
//! - [`unit_json`] (with [`crate::bridge::caps`] and [`crate::color`]): the JSON published for a unit.
//! - [`discovery`]: HA payloads, one module per platform.
//! - [`render`]: the wanted retained topics per owner ([`group_cache`]: each group's JSON
//!   half-made between renders); [`state_text`]: an owner's state payloads in one buffer;
//!   [`store`]: wanted vs published, and the operations between them;
//!   [`plan`]: what a change of the mirror publishes (pure).
//! - [`publisher`]: the loop tying it together; [`gc`]: start-up clean-up; [`command_intake`]: the `…/set` topics.

pub mod broker_url;
pub mod client;
pub mod command_intake;
pub mod devices;
pub mod discovery;
pub mod gc;
pub mod group_cache;
pub mod mirror;
pub mod plan;
pub mod publisher;
pub mod render;
pub mod settings;
pub mod state_text;
pub mod store;
pub mod topics;
pub mod unit_data;
pub mod unit_json;

use crate::bridge::update::Update;
use client::{Client, Will};
pub use command_intake::{CommandMessage, ResolvedCommand};
pub use publisher::Tuning;
pub use settings::{Config, DiscoveryMode, HaSettings, MqttSettings, OutputSettings, Protocol, SettingsError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Errors that stop the MQTT layer before it runs.
#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    /// The configuration cannot work.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The client could not be set up.
    #[error(transparent)]
    Client(#[from] client::ClientError),
}

/// What the publisher takes in: the bridge's updates, and a hook that sees each one just before
/// the publisher handles it (the rest of the bridge that follows the state: health, the command
/// layer, the web page). The hook runs on the publisher's task, so it must not block; it spares
/// every update a hop through a task of its own.
pub struct Updates {
    rx: mpsc::Receiver<Update>,
    observer: Option<Observer>,
}

/// A hook that sees every update before it is published.
pub type Observer = Box<dyn FnMut(&Update) + Send>;

impl Updates {
    /// `rx`'s updates, each shown to `observer` first.
    pub fn observed(rx: mpsc::Receiver<Update>, observer: impl FnMut(&Update) + Send + 'static) -> Updates {
        Updates { rx, observer: Some(Box::new(observer)) }
    }
}

impl std::fmt::Debug for Updates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Updates").field("observed", &self.observer.is_some()).finish_non_exhaustive()
    }
}

impl From<mpsc::Receiver<Update>> for Updates {
    fn from(rx: mpsc::Receiver<Update>) -> Updates {
        Updates { rx, observer: None }
    }
}

/// Runs the MQTT side until `shutdown` is cancelled or `updates` ends: connects (retrying with
/// backoff for as long as it takes), publishes everything the updates describe, forwards
/// commands on `commands`, and on the way out publishes `offline` and disconnects cleanly.
///
/// Returns an error only for a configuration that cannot work; connection problems are retried.
pub async fn run(
    config: Config,
    updates: impl Into<Updates>,
    commands: mpsc::Sender<ResolvedCommand>,
    shutdown: CancellationToken,
) -> Result<(), MqttError> {
    run_with(config, Tuning::default(), updates, commands, shutdown).await
}

/// [`run`] with explicit timings (tests use short ones).
pub async fn run_with(
    config: Config,
    tuning: Tuning,
    updates: impl Into<Updates>,
    commands: mpsc::Sender<ResolvedCommand>,
    shutdown: CancellationToken,
) -> Result<(), MqttError> {
    config.validate()?;
    if let Some(warning) = config.mqtt.latency_warning() {
        tracing::warn!("{warning}");
    }
    let layout = topics::Layout::of(&config.mqtt);
    let will = Will { topic: layout.bridge_state(), payload: "offline".into() };
    let (client, events, mut task) =
        Client::start(&config.mqtt, &config.mqtt.client_id, Some(will), config.mqtt.inflight())?;
    // The event loop stops when the last client handle goes: this one keeps it running until it
    // has sent the publisher's last words (`offline`, then DISCONNECT) and ended by itself.
    // Without a connection there is nobody to say them to.
    let last_words = client.clone();
    let publisher = publisher::Publisher::new(config.clone(), client, commands, tuning.clone());
    if !publisher.run(updates.into(), events, shutdown).await {
        drop(last_words);
        task.abort();
        return Ok(());
    }
    if tokio::time::timeout(tuning.shutdown_grace, &mut task).await.is_err() {
        tracing::warn!("the MQTT event loop did not stop in time");
        task.abort();
    }
    drop(last_words);
    Ok(())
}
