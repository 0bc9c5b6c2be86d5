//! What `/readyz` reports: orca is ready once its Node is registered, its pod cache has
//! listed, its kubelet API listens, and its policy can decide (every hook's chain reaches a
//! loaded plugin). Each part marks its own step.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::errors::lock;

#[derive(Debug, Default)]
pub struct Health {
    node_registered: AtomicBool,
    pods_listed: AtomicBool,
    kubelet_api_serving: AtomicBool,
    /// Why the policy cannot decide for any pod, as of the last plugin rescan.
    policy_not_ready: Mutex<Option<String>>,
}

impl Health {
    pub fn node_registered(&self) {
        self.node_registered.store(true, Ordering::Release);
    }

    pub fn pods_listed(&self) {
        self.pods_listed.store(true, Ordering::Release);
    }

    pub fn kubelet_api_serving(&self) {
        self.kubelet_api_serving.store(true, Ordering::Release);
    }

    /// Whether the policy can decide: `None` when it can, else why not.
    pub fn policy(&self, not_ready: Option<String>) {
        *lock(&self.policy_not_ready) = not_ready;
    }

    /// The steps not done yet; empty when ready.
    pub fn waiting_for(&self) -> Vec<String> {
        let mut waiting: Vec<String> = [
            (&self.node_registered, "node registration"),
            (&self.pods_listed, "the first pod list"),
            (&self.kubelet_api_serving, "the kubelet API listener"),
        ]
        .into_iter()
        .filter(|(done, _)| !done.load(Ordering::Acquire))
        .map(|(_, step)| step.to_owned())
        .collect();
        if let Some(why) = lock(&self.policy_not_ready).as_ref() {
            waiting.push(format!("a policy that can decide ({why})"));
        }
        waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_step_is_done() {
        let health = Health::default();
        assert_eq!(health.waiting_for().len(), 3);
        health.node_registered();
        health.pods_listed();
        assert_eq!(health.waiting_for(), ["the kubelet API listener"]);
        health.kubelet_api_serving();
        assert!(health.waiting_for().is_empty());
    }

    #[test]
    fn policy_that_cannot_decide_is_not_ready_and_named() {
        let health = Health::default();
        health.node_registered();
        health.pods_listed();
        health.kubelet_api_serving();
        health.policy(Some(
            "plugin team-selector (policy.selectInstance[0]) is not loaded".into(),
        ));
        let waiting = health.waiting_for();
        assert_eq!(waiting.len(), 1);
        assert!(waiting[0].contains("team-selector"), "{waiting:?}");
        health.policy(None);
        assert!(health.waiting_for().is_empty());
    }
}
