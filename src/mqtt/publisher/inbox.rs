//! Messages from the broker: commands on `…/set` topics, Home Assistant's birth message, and the
//! retained topics of an earlier run found by the start-up scan.

use super::*;

impl Publisher {
    pub(super) async fn on_message(&mut self, msg: Message) {
        if self.config.homeassistant.enabled && msg.topic == self.config.homeassistant.status_topic {
            // A retained birth arrives with every subscription; the connection's own resync
            // already covers it.
            if msg.payload == b"online" && !msg.retain {
                let (lo, hi) =
                    (self.tuning.birth_delay_min, self.tuning.birth_delay_max.max(self.tuning.birth_delay_min));
                let delay = rand::rng().random_range(lo..=hi);
                tracing::debug!(?delay, "Home Assistant came online");
                self.birth_at = Some(Instant::now() + delay);
            }
            return;
        }
        match intake::classify(&self.renderer.layout, &msg) {
            Intake::Forward(message) => match intake::resolve(&self.renderer.layout, &self.nets, &message.topic) {
                Some((network, target)) => {
                    if target == crate::commands::Target::Reload {
                        // Everything is published again at once, as after Home Assistant's
                        // birth; what the networks' new fetch changes follows as it arrives.
                        self.birth_at = Some(Instant::now());
                    }
                    let (command, reason) = match self.commands.try_send(ResolvedCommand { message, network, target }) {
                        Ok(()) => return,
                        Err(mpsc::error::TrySendError::Full(c)) => (c, "too many commands waiting; command dropped"),
                        Err(mpsc::error::TrySendError::Closed(c)) => (c, "the bridge is stopping; command dropped"),
                    };
                    // The reload names no network.
                    let network = Some(command.network.as_str()).filter(|n| !n.is_empty());
                    self.refuse(&msg.topic, network, reason).await;
                }
                None => {
                    self.refuse(&msg.topic, None, "no network, unit, group or scene has this command topic").await;
                }
            },
            Intake::Retained => {
                tracing::warn!(topic = %msg.topic, "ignoring a retained command (a replay); clearing it from the broker");
                if self.connected {
                    let _ = self.client.publish(msg.topic.as_str(), "", true).await;
                }
            }
            Intake::Empty | Intake::NotCommand => {}
        }
    }

    /// Judges a retained message a scan found: it is cleared when its network has loaded and
    /// nothing wants it; a message of a network that has not loaded is let go (its scope noted,
    /// so that the network is scanned again once it loads).
    pub(super) async fn judge_scanned(&mut self, msg: Message) {
        let prefix = self.config.homeassistant.enabled.then_some(self.config.homeassistant.discovery_prefix.as_str());
        let Some(scope) = gc::scope_of(&msg, &self.renderer.layout, prefix) else { return };
        let decidable =
            scope == Scope::Bridge || self.scopes.get_or_insert_with(|| gc::loaded_scopes(&self.nets)).contains(&scope);
        if !decidable {
            self.sweeper.undecided(scope);
            return;
        }
        let check = self.stale_check.get_or_insert_with(StaleCheck::default);
        if !self.store.is_stale(check, &msg.topic) {
            return;
        }
        if !self.connected {
            self.sweeper.retry();
            return;
        }
        tracing::debug!(topic = %msg.topic, "clearing stale retained topic");
        let qos = self.qos_of(Batch::Snapshot);
        if self.client.publish_at(msg.topic, "", true, qos).await.is_ok() {
            self.sweeper.cleared();
        }
    }
}
