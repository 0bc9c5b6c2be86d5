//! What `/readyz` reports: orca is ready once its Node is registered, its pod cache has
//! listed, and its kubelet API listens. Each part marks its own step.

use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Default)]
pub struct Health {
    node_registered: AtomicBool,
    pods_listed: AtomicBool,
    kubelet_api_serving: AtomicBool,
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

    /// The steps not done yet; empty when ready.
    pub fn waiting_for(&self) -> Vec<&'static str> {
        [
            (&self.node_registered, "node registration"),
            (&self.pods_listed, "the first pod list"),
            (&self.kubelet_api_serving, "the kubelet API listener"),
        ]
        .into_iter()
        .filter(|(done, _)| !done.load(Ordering::Acquire))
        .map(|(_, step)| step)
        .collect()
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
}
