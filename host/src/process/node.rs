//! One declared node as this process serves it: its Node (registration, heartbeat, status)
//! and its pod controller, started together and stopped together. Serving may start and stop
//! more than once in a process's life when replicas share the nodes; everything costly (the
//! plugins, the catalogue, the EC2 client) lives outside and stays warm.

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::apiserver::ServerSchema;
use crate::config::{DeclaredNode, PodsConfig};
use crate::interruption::NodeSinks;
use crate::metrics::{LeaseMetrics, ReconcileMetrics, ServingMetrics};
use crate::node::{NodeController, NodeDeps, RegistrationError};
use crate::pods::events::PodWrites;
use crate::pods::{self, NodePods, PodControllerDeps};
use crate::policy::Planner;
use crate::process::health::Health;
use crate::process::served_nodes::{ServedNode, ServedNodes};
use crate::process::turn::{self, ServingTask, TurnEnd};
use crate::provider::Provider;
use crate::provider::aws::strays::ApiPodPresence;
use crate::replicas::Tenure;

/// Builds a node's provider (identity tags, subnets, zone).
pub type ProviderFactory =
    Box<dyn Fn() -> Result<Arc<dyn Provider>, ProviderStartError> + Send + Sync>;

/// Why a node's provider could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ProviderStartError {
    #[error("starting the simulated provider")]
    Simulated(#[source] crate::provider::simulated::JournalError),
}

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
    pub serving_metrics: Arc<ServingMetrics>,
    pub health: Arc<Health>,
    pub served: Arc<ServedNodes>,
    pub notice_sinks: Option<Arc<NodeSinks>>,
    pub policy_ready: tokio::sync::watch::Receiver<bool>,
    /// The process's pod writes, which Events on every node give way to.
    pub pod_writes: Arc<PodWrites>,
    /// What each namespace's instances cost against its cap, for every node.
    pub spend: Arc<crate::spend::NamespaceSpend>,
    /// What launched instances cost an hour, for their decision records.
    pub prices: Arc<crate::cost::LaunchPrices>,
    /// What the apiserver knows: what the Node, Lease and pod status writes leave out.
    pub schema: Arc<ServerSchema>,
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
            NodeDeps {
                provider: provider.clone(),
                lease_metrics: shared.lease_metrics.clone(),
                health: shared.health.clone(),
                schema: shared.schema.clone(),
            },
        )
    }

    /// Serves the node until `stop`, or until its tenure ends: registers it (or adopts it,
    /// writing this process's address), keeps its heartbeat, and runs its pod controller on
    /// `pods` (the node's pod watch, which outlives the turn), which adopts the node's
    /// instances before its first reconcile. The Node, its pods and instances stay for
    /// whoever serves it next.
    ///
    /// # Guarantees
    /// - Every task of the turn runs under [`Tenure::guard`]: none takes a step once the
    ///   tenure has ended.
    /// - Returns once every task of the turn has stopped, with why the turn ended: when one
    ///   task ends by itself (a panic, a loop that returned) the others are stopped, and the
    ///   answer is [`TurnEnd::Failed`] naming it. The caller ends the hold or the process:
    ///   a node whose serving died must not stay "served".
    pub async fn serve(
        &self,
        provider: Arc<dyn Provider>,
        controller: NodeController,
        pods: Arc<NodePods>,
        shared: &SharedParts,
        stop: CancellationToken,
        tenure: Tenure,
    ) -> TurnEnd {
        let name = self.name().to_owned();
        shared.served.serve(
            &name,
            ServedNode {
                pods: pods.store(),
                provider: provider.clone(),
            },
        );
        // Served now, so readiness waits for the node's own steps (registered, pods listed)
        // in place of its Lease, which this replica holds (with replicas sharing the nodes).
        shared.health.lease_settled(&name);
        let turn = stop.child_token();
        let mut node_task = tokio::spawn({
            let (tenure, turn) = (tenure.clone(), turn.clone());
            async move {
                tenure
                    .guard(async move {
                        controller.run(turn).await;
                        TurnEnd::Stopped
                    })
                    .await
            }
        });
        let deps = PodControllerDeps {
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
            presence: Arc::new(ApiPodPresence(shared.client.clone())),
            spend: shared.spend.clone(),
            prices: shared.prices.clone(),
            tenure: tenure.clone(),
            schema: shared.schema.clone(),
        };
        let mut pods_task = tokio::spawn({
            let turn = turn.clone();
            async move { tenure.guard(pods::run(deps, turn)).await }
        });
        let (first, other, other_task) = tokio::select! {
            joined = &mut node_task => (
                turn::end_of(ServingTask::NodeController, joined, turn.is_cancelled()),
                pods_task,
                ServingTask::PodController,
            ),
            joined = &mut pods_task => (
                turn::end_of(ServingTask::PodController, joined, turn.is_cancelled()),
                node_task,
                ServingTask::NodeController,
            ),
        };
        turn.cancel();
        let then = stopped(other, other_task, shared.pods.shutdown_grace_period.get()).await;
        shared.served.stop_serving(&name);
        shared.health.forget_steps(&name);
        turn::first_cause(first, then)
    }
}

/// Waits for a task of a turn that was asked to stop, at most `grace` (then it is aborted).
async fn stopped(
    mut task: JoinHandle<Result<TurnEnd, crate::replicas::TenureError>>,
    which: ServingTask,
    grace: std::time::Duration,
) -> TurnEnd {
    match tokio::time::timeout(grace, &mut task).await {
        Ok(joined) => turn::end_of(which, joined, true),
        Err(_) => {
            tracing::warn!(
                task = which.as_str(),
                ?grace,
                "a serving task did not stop within the shutdown grace period; aborted"
            );
            task.abort();
            TurnEnd::Stopped
        }
    }
}

/// Logs and counts a turn of serving `node` that ended when nothing asked it to.
pub fn report_end(metrics: &ServingMetrics, node: &str, end: TurnEnd) {
    match end {
        TurnEnd::Stopped => return,
        TurnEnd::Lapsed => {
            tracing::warn!(%node, reason = %end, "stopped serving the node: its hold ran out before a renewal of its Lease got through (this replica stalled, or the apiserver did not answer in time)")
        }
        TurnEnd::Lost => {
            tracing::warn!(%node, reason = %end, "stopped serving the node: its Lease was taken by another replica, or a write of it refused")
        }
        TurnEnd::Failed { .. } => {
            tracing::error!(%node, reason = %end, "serving the node ended: one of its tasks ended by itself (a panic is printed above); the node's other tasks were stopped")
        }
    }
    metrics.ended(node, end);
}
