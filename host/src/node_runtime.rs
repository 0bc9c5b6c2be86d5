//! One declared node as this process serves it: its Node (registration, heartbeat, status)
//! and its pod controller, started together and stopped together. Serving may start and stop
//! more than once in a process's life when replicas share the nodes; everything costly (the
//! plugins, the catalogue, the EC2 client) lives outside and stays warm.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{DeclaredNode, PodsConfig};
use crate::health::Health;
use crate::interruption::NodeSinks;
use crate::metrics::{LeaseMetrics, ReconcileMetrics};
use crate::node::{NodeController, RegistrationError};
use crate::pods::events::PodWrites;
use crate::pods::{self, NodePods, PodControllerDeps};
use crate::policy::Planner;
use crate::provider::Provider;
use crate::served_nodes::{ServedNode, ServedNodes};

/// Builds a node's provider (identity tags, subnets, zone).
pub type ProviderFactory =
    Box<dyn Fn() -> Result<Arc<dyn Provider>, crate::orca::StartError> + Send + Sync>;

/// What differs between nodes: its configuration, its provider and its planner (the shared
/// pipeline deciding for this node).
pub struct NodeRuntime {
    pub declared: DeclaredNode,
    pub planner: Arc<dyn Planner>,
    /// Each time the node starts being served it gets a fresh provider: what a provider
    /// remembers (the fleet tokens it used, that pods created after it started are its own)
    /// holds only while it alone serves the node, so a replica taking the node over must not
    /// reuse what it remembered from an earlier turn.
    pub new_provider: ProviderFactory,
}

/// What every node's serving shares.
#[derive(Clone)]
pub struct SharedParts {
    pub client: kube::Client,
    pub pods: PodsConfig,
    pub reconcile_metrics: Arc<ReconcileMetrics>,
    pub lease_metrics: Arc<LeaseMetrics>,
    pub health: Arc<Health>,
    pub served: Arc<ServedNodes>,
    pub notice_sinks: Option<Arc<NodeSinks>>,
    pub policy_ready: tokio::sync::watch::Receiver<bool>,
    /// The process's pod writes, which Events on every node give way to.
    pub pod_writes: Arc<PodWrites>,
    /// What each namespace's instances cost against its cap, for every node.
    pub spend: Arc<crate::spend::NamespaceSpend>,
}

impl NodeRuntime {
    pub fn name(&self) -> &str {
        &self.declared.node.name
    }

    /// The node controller, built to check the node's skeleton before anything runs.
    ///
    /// # Errors
    /// [`RegistrationError`] for a skeleton that cannot be read or used.
    pub fn node_controller(
        &self,
        provider: &Arc<dyn Provider>,
        shared: &SharedParts,
    ) -> Result<NodeController, RegistrationError> {
        NodeController::new(
            shared.client.clone(),
            self.declared.node.clone(),
            provider.clone(),
            shared.lease_metrics.clone(),
            shared.health.clone(),
        )
    }

    /// Serves the node until `stop`: registers it (or adopts it, writing this process's
    /// address), keeps its heartbeat, and runs its pod controller on `pods` (the node's pod
    /// watch, which outlives the turn), which adopts the node's instances before its first
    /// reconcile. Returns once both have stopped; the Node, its pods and instances stay for
    /// whoever serves it next.
    pub async fn serve(
        &self,
        provider: Arc<dyn Provider>,
        controller: NodeController,
        pods: Arc<NodePods>,
        shared: &SharedParts,
        stop: CancellationToken,
    ) {
        let name = self.name().to_owned();
        shared.health.serve(&name);
        shared.served.serve(
            &name,
            ServedNode {
                pods: pods.store(),
                provider: provider.clone(),
            },
        );
        let node_task = tokio::spawn(controller.run(stop.clone()));
        let pods_task = tokio::spawn(pods::run(
            PodControllerDeps {
                client: shared.client.clone(),
                node_name: name.clone(),
                node_zone: self.declared.zone.clone(),
                provider,
                planner: self.planner.clone(),
                config: shared.pods.clone(),
                metrics: shared.reconcile_metrics.clone(),
                health: shared.health.clone(),
                pods,
                policy_ready: shared.policy_ready.clone(),
                notice_sinks: shared.notice_sinks.clone(),
                pod_writes: shared.pod_writes.clone(),
                spend: shared.spend.clone(),
            },
            stop,
        ));
        let _ = node_task.await;
        let _ = pods_task.await;
        shared.served.stop_serving(&name);
        shared.health.stop_serving(&name);
    }
}
