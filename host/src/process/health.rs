//! What `/readyz` reports: orca is ready once each node it serves is registered and its pod
//! cache has listed, its kubelet API listens, and its policy can decide (every hook's chain
//! reaches a loaded plugin). Each part marks its own step; which nodes are served is
//! [`ServedNodes`]'s to say.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::process::served_nodes::ServedNodes;
use crate::support::errors::lock;

/// A served node's steps.
#[derive(Debug, Default, Clone, Copy)]
struct NodeSteps {
    registered: bool,
    listed: bool,
}

pub struct Health {
    /// The nodes served: readiness waits for each one's steps.
    served: Arc<ServedNodes>,
    /// The steps done so far by the nodes served, by name.
    steps: Mutex<BTreeMap<String, NodeSteps>>,
    /// With replicas sharing the nodes: the nodes whose Lease this replica has not yet seen
    /// taken (by it, or by a live other replica).
    leases_unsettled: Mutex<std::collections::BTreeSet<String>>,
    kubelet_api_serving: AtomicBool,
    /// Why the policy cannot decide for any pod, as of the last plugin rescan.
    policy_not_ready: Mutex<Option<String>>,
}

impl Health {
    /// Readiness waits for the steps of each node `served` serves, whenever it serves it.
    pub fn new(served: Arc<ServedNodes>) -> Health {
        Health {
            served,
            steps: Mutex::default(),
            leases_unsettled: Mutex::default(),
            kubelet_api_serving: AtomicBool::new(false),
            policy_not_ready: Mutex::default(),
        }
    }

    /// Forgets `node`'s steps once it is no longer served: serving it again waits for them
    /// again.
    pub fn forget_steps(&self, node: &str) {
        lock(&self.steps).remove(node);
    }

    pub fn node_registered(&self, node: &str) {
        self.step_done(node, |steps| steps.registered = true);
    }

    pub fn pods_listed(&self, node: &str) {
        self.step_done(node, |steps| steps.listed = true);
    }

    /// Marks a step of `node`, if it is served (a step of a node no longer served is late).
    fn step_done(&self, node: &str, mark: impl FnOnce(&mut NodeSteps)) {
        if self.served.serves(node) {
            mark(lock(&self.steps).entry(node.to_owned()).or_default());
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
            let nodes = self.served.names();
            let steps = lock(&self.steps);
            let steps_of = |node: &String| steps.get(node).copied().unwrap_or_default();
            // One node reads as before; several are named.
            let of = |node: &str| {
                if nodes.len() > 1 {
                    format!(" of {node}")
                } else {
                    String::new()
                }
            };
            for node in &nodes {
                if !steps_of(node).registered {
                    waiting.push(format!("node registration{}", of(node)));
                }
            }
            for node in &nodes {
                if !steps_of(node).listed {
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
        let health = Health::new(ServedNodes::serving(&["orca"]));
        assert_eq!(health.waiting_for().len(), 3);
        health.node_registered("orca");
        health.pods_listed("orca");
        assert_eq!(health.waiting_for(), ["the kubelet API listener"]);
        health.kubelet_api_serving();
        assert!(health.waiting_for().is_empty());
    }

    #[test]
    fn every_served_node_must_be_registered_and_listed() {
        let served = ServedNodes::serving(&["orca-a", "orca-b"]);
        let health = Health::new(served.clone());
        health.kubelet_api_serving();
        health.node_registered("orca-a");
        health.pods_listed("orca-a");
        health.pods_listed("orca-b");
        assert_eq!(health.waiting_for(), ["node registration of orca-b"]);
        served.stop_serving("orca-b");
        health.forget_steps("orca-b");
        assert!(health.waiting_for().is_empty());
        health.node_registered("orca-b");
        assert!(
            health.waiting_for().is_empty(),
            "a node not served is not waited for"
        );
        served.serve_empty("orca-b");
        assert_eq!(
            health.waiting_for(),
            [
                "node registration of orca-b",
                "the first pod list of orca-b"
            ],
            "served again, it is waited for again: nothing carries over from its last turn"
        );
    }

    #[test]
    fn a_shared_node_is_waited_for_until_its_lease_is_held() {
        let served = Arc::new(ServedNodes::default());
        let health = Health::new(served.clone());
        health.kubelet_api_serving();
        health.awaiting_lease("orca-a");
        assert_eq!(health.waiting_for(), ["the Lease of orca-a to be held"]);
        served.serve_empty("orca-a");
        health.lease_settled("orca-a");
        assert_eq!(health.waiting_for().len(), 2, "now its own steps");
    }

    #[test]
    fn policy_that_cannot_decide_is_not_ready_and_named() {
        let health = Health::new(ServedNodes::serving(&["orca"]));
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
