//! What `/readyz` reports: orca is ready once each node it serves is registered and its pod
//! cache has listed, its kubelet API listens, and its policy can decide (every hook's chain
//! reaches a loaded plugin). Each part marks its own step.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::errors::lock;

/// A served node's steps.
#[derive(Debug, Default, Clone, Copy)]
struct NodeSteps {
    registered: bool,
    listed: bool,
}

#[derive(Debug, Default)]
pub struct Health {
    /// The nodes served, by name, with their steps.
    nodes: Mutex<BTreeMap<String, NodeSteps>>,
    /// With replicas sharing the nodes: the nodes whose Lease this replica has not yet seen
    /// taken (by it, or by a live other replica).
    leases_unsettled: Mutex<std::collections::BTreeSet<String>>,
    kubelet_api_serving: AtomicBool,
    /// Why the policy cannot decide for any pod, as of the last plugin rescan.
    policy_not_ready: Mutex<Option<String>>,
}

impl Health {
    /// Readiness waits for `node`'s steps too, from now until [`Health::stop_serving`].
    pub fn serve(&self, node: &str) {
        lock(&self.nodes).entry(node.to_owned()).or_default();
    }

    pub fn stop_serving(&self, node: &str) {
        lock(&self.nodes).remove(node);
    }

    pub fn node_registered(&self, node: &str) {
        if let Some(steps) = lock(&self.nodes).get_mut(node) {
            steps.registered = true;
        }
    }

    pub fn pods_listed(&self, node: &str) {
        if let Some(steps) = lock(&self.nodes).get_mut(node) {
            steps.listed = true;
        }
    }

    /// Readiness waits until `node`'s Lease is settled ([`Health::lease_settled`]).
    pub fn awaiting_lease(&self, node: &str) {
        lock(&self.leases_unsettled).insert(node.to_owned());
    }

    /// `node`'s Lease is held: by this replica (which now serves it) or by a live other one.
    pub fn lease_settled(&self, node: &str) {
        lock(&self.leases_unsettled).remove(node);
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
        let mut waiting = Vec::new();
        {
            let nodes = lock(&self.nodes);
            // One node reads as before; several are named.
            let of = |node: &str| {
                if nodes.len() > 1 {
                    format!(" of {node}")
                } else {
                    String::new()
                }
            };
            for (node, steps) in nodes.iter() {
                if !steps.registered {
                    waiting.push(format!("node registration{}", of(node)));
                }
            }
            for (node, steps) in nodes.iter() {
                if !steps.listed {
                    waiting.push(format!("the first pod list{}", of(node)));
                }
            }
        }
        for node in lock(&self.leases_unsettled).iter() {
            waiting.push(format!("the Lease of {node} to be held"));
        }
        if !self.kubelet_api_serving.load(Ordering::Acquire) {
            waiting.push("the kubelet API listener".to_owned());
        }
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
        health.serve("orca");
        assert_eq!(health.waiting_for().len(), 3);
        health.node_registered("orca");
        health.pods_listed("orca");
        assert_eq!(health.waiting_for(), ["the kubelet API listener"]);
        health.kubelet_api_serving();
        assert!(health.waiting_for().is_empty());
    }

    #[test]
    fn every_served_node_must_be_registered_and_listed() {
        let health = Health::default();
        health.kubelet_api_serving();
        health.serve("orca-a");
        health.serve("orca-b");
        health.node_registered("orca-a");
        health.pods_listed("orca-a");
        health.pods_listed("orca-b");
        assert_eq!(health.waiting_for(), ["node registration of orca-b"]);
        health.stop_serving("orca-b");
        assert!(health.waiting_for().is_empty());
        health.node_registered("orca-b");
        assert!(
            health.waiting_for().is_empty(),
            "a node not served is not waited for"
        );
    }

    #[test]
    fn a_shared_node_is_waited_for_until_its_lease_is_held() {
        let health = Health::default();
        health.kubelet_api_serving();
        health.awaiting_lease("orca-a");
        assert_eq!(health.waiting_for(), ["the Lease of orca-a to be held"]);
        health.serve("orca-a");
        health.lease_settled("orca-a");
        assert_eq!(health.waiting_for().len(), 2, "now its own steps");
    }

    #[test]
    fn policy_that_cannot_decide_is_not_ready_and_named() {
        let health = Health::default();
        health.serve("orca");
        health.node_registered("orca");
        health.pods_listed("orca");
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
