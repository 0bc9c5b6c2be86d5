//! Whether the policy can decide for any pod: after every plugin rescan (and once at startup),
//! each hook's chain is walked as a decision would walk it, and `/readyz` says which plugin is
//! missing. Pods that meet the missing plugin wait Pending (`PolicyNotReady`) rather than fail.

use std::sync::Arc;

use super::pipeline::Pipeline;
use super::registry::{PluginSet, ReloadEvent};
use super::reload::ReloadReporter;
use crate::process::health::Health;

pub struct PolicyReadiness {
    pub pipeline: Arc<Pipeline>,
    pub health: Arc<Health>,
    /// Whether the policy can decide, for the pod controller: pods waiting for a plugin go on
    /// as soon as this turns true, not at their next backoff.
    pub ready: tokio::sync::watch::Sender<bool>,
}

impl ReloadReporter for PolicyReadiness {
    fn report(&self, _event: &ReloadEvent) {}

    fn rescanned(&self, set: &PluginSet) {
        let not_ready = self.pipeline.not_ready(set);
        if let Some(why) = &not_ready {
            tracing::warn!(%why, "the policy cannot decide for any pod until the plugin loads; pods wait Pending");
        }
        let ready = not_ready.is_none();
        self.health.policy(not_ready);
        self.ready
            .send_if_modified(|was| std::mem::replace(was, ready) != ready);
    }
}
