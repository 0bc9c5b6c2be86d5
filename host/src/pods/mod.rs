//! Pods bound to orca's node: watched with a field selector, reconciled one step at a time per
//! pod and many pods in parallel, their status mirrored from the provider's instances.

mod context;
mod decide;
mod error;
pub(crate) mod events;
mod execute;
mod instances;
mod launch;
mod node_pods;
mod notice_sink;
mod phase;
mod policy_wait;
mod reconcile;
mod record;
mod room_wait;
mod status;
mod stored;
mod sync;
mod terminations;
mod view;
mod writer;
mod writes;

use std::sync::Arc;

use futures::channel::mpsc;
use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, controller, watcher};
use tokio_util::sync::CancellationToken;

pub use node_pods::NodePods;
pub use phase::{FailureReason, PodPhase};
pub use status::outcome;
pub use stored::is_service_account_token;
pub use view::{CONTAINER_ID_SCHEME, LAUNCHED_CONDITION};
use writer::ApiPodWriter;

use crate::config::PodsConfig;
use crate::health::Health;
use crate::metrics::ReconcileMetrics;
use crate::policy::Planner;
use crate::provider::aws::strays::PodPresence;
use crate::provider::{PodKey, Provider};
use crate::replicas::Tenure;
use crate::spend::NamespaceSpend;
use crate::support::Backoff;
use crate::turn::{self, ServingTask, TurnEnd};
use crate::workload::KubeEnvSource;
use context::Context;
use events::PodEvents;
use instances::InstanceCache;
use reconcile::{error_policy, measured_reconcile};
use record::PodRecords;
use sync::StatusSync;
use terminations::TerminationLedger;

/// How long shutdown waits for queued Events to go out.
const EVENTS_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Everything the pod controller is built from.
pub struct PodControllerDeps {
    pub client: kube::Client,
    pub node_name: String,
    /// The node's zone, when it is bound to one.
    pub node_zone: Option<String>,
    pub provider: Arc<dyn Provider>,
    pub planner: Arc<dyn Planner>,
    pub config: PodsConfig,
    pub metrics: Arc<ReconcileMetrics>,
    pub health: Arc<Health>,
    /// The node's pods, watched for the life of the process; others (the kubelet API,
    /// metrics) read its store too.
    pub pods: Arc<NodePods>,
    /// Whether the policy can decide (`policy::readiness`): when it turns true, pods waiting
    /// for a plugin are planned again at once.
    pub policy_ready: tokio::sync::watch::Receiver<bool>,
    /// Where the interruption queue's consumer looks for the node that owns an instance,
    /// when a queue is configured: this node's notices are handled from the moment it
    /// serves until it stops.
    pub notice_sinks: Option<Arc<crate::interruption::NodeSinks>>,
    /// Every node's pod writes in this process, which every node's Events wait out.
    pub pod_writes: Arc<events::PodWrites>,
    /// What each namespace's instances cost against its cap, for the whole process.
    pub spend: Arc<NamespaceSpend>,
    /// Whether a pod exists, read from the apiserver: an instance is collected as an orphan,
    /// and a notice dropped for a pod gone, only once a read made then says so.
    pub presence: Arc<dyn PodPresence>,
    /// How long this turn may act for the node: reconciles, the status sync and the notices
    /// of the interruption queue take no step after it ends.
    pub tenure: Tenure,
}

/// Runs the pod controller until `shutdown`. Before the first reconcile it lists the
/// provider's instances once, so pods whose instances already run (a restart) are adopted,
/// never launched twice.
///
/// # Guarantees
/// Answers how it ended: [`TurnEnd::Stopped`] after `shutdown`; the status sync's end when
/// the sync task ended first (a panic, its tenure lapsed); a controller that ended without
/// `shutdown` is [`TurnEnd::Failed`]. Every reconcile runs under the tenure's guard.
pub async fn run(deps: PodControllerDeps, shutdown: CancellationToken) -> TurnEnd {
    let instances = Arc::new(InstanceCache::default());
    let records = Arc::new(PodRecords::default());
    let ledger = Arc::new(TerminationLedger::default());
    let sync_now = Arc::new(tokio::sync::Notify::new());
    let sync = StatusSync {
        sync_now: sync_now.clone(),
        provider: deps.provider.clone(),
        instances: instances.clone(),
        records: records.clone(),
        ledger: ledger.clone(),
        config: deps.config.clone(),
        metrics: deps.metrics.clone(),
        node: deps.node_name.clone(),
        spend: deps.spend.clone(),
        presence: deps.presence.clone(),
    };
    let (changed_tx, changed_rx) = mpsc::unbounded();
    let mut delays = Backoff::new(
        std::time::Duration::from_millis(200),
        deps.config.retry_max_backoff.get(),
    )
    .delays();
    // The pods already listed (a takeover) name their instances for the first choice too.
    while sync
        .sync_once(&changed_tx, sync::named_instances(&deps.pods.store()), None)
        .await
        .is_none()
    {
        let delay = delays.next_delay();
        tokio::select! {
            () = shutdown.cancelled() => return TurnEnd::Stopped,
            () = tokio::time::sleep(delay) => {}
        }
    }
    tracing::info!(
        instances = instances.all().len(),
        "adopted the provider's instances"
    );
    // A launch under a namespace's cap counts the cluster's instances: none before they
    // were listed once (a restart would otherwise launch a burst into a full namespace).
    if deps.spend.caps_namespaces() {
        let mut freed = deps.spend.freed();
        while !deps.spend.is_listed() {
            tokio::select! {
                () = shutdown.cancelled() => return TurnEnd::Stopped,
                changed = freed.changed() => if changed.is_err() { return TurnEnd::Stopped },
            }
        }
    }

    let events = Arc::new(PodEvents::new(
        deps.client.clone(),
        &deps.node_name,
        deps.pod_writes.clone(),
    ));
    let writer = Arc::new(ApiPodWriter {
        client: deps.client.clone(),
        events: events.clone(),
        records: records.clone(),
    });
    let ctx = Arc::new(Context {
        writer,
        objects: Arc::new(KubeEnvSource::new(deps.client.clone())),
        provider: deps.provider,
        planner: deps.planner,
        instances,
        records: records.clone(),
        ledger,
        config: deps.config.clone(),
        metrics: deps.metrics,
        node_zone: deps.node_zone.clone(),
        node_name: deps.node_name.clone(),
        spend: deps.spend.clone(),
        tenure: deps.tenure.clone(),
    });
    let store = deps.pods.store();
    let listed_rx = deps.pods.listed();
    // Changes from now on come through the subscription; the pods stored already (all of them
    // when the node was listed before this turn, as on a takeover) are queued once here.
    let (updates, already) = deps.pods.subscribe();
    for pod in already {
        let _ = changed_tx.unbounded_send(ObjectRef::from_obj(&*pod));
    }
    // Small helpers of the turn, run in this task (a panic in one ends the turn); once done
    // (at shutdown at the latest) they wait for the controller.
    let helpers = futures::future::join3(
        mark_listed(
            listed_rx.clone(),
            deps.health.clone(),
            deps.node_name.clone(),
            shutdown.clone(),
        ),
        policy_wait::wake_on_ready(
            deps.policy_ready,
            records.clone(),
            store.clone(),
            changed_tx.clone(),
            shutdown.clone(),
        ),
        room_wait::wake_on_room(
            deps.spend.clone(),
            records.clone(),
            store.clone(),
            changed_tx.clone(),
            shutdown.clone(),
        ),
    )
    .then(|_| std::future::pending::<()>());
    let pod_events = updates
        .map(Ok::<Pod, watcher::Error>)
        // orca's own writes come back through the watch. The reconcile that wrote went on
        // with the pod as written, so an echo would only reconcile for nothing.
        .try_filter({
            let records = records.clone();
            move |pod| std::future::ready(!records.take_echo(pod))
        });
    let controller = Controller::for_stream(pod_events, store.clone()).with_config(
        controller::Config::default().concurrency(deps.config.max_concurrent_reconciles),
    );
    // The node's notices are handled from here until this turn ends, however it ends.
    let registration = deps.notice_sinks.as_ref().map(|sinks| {
        let sink = notice_sink::PodNoticeSink {
            client: deps.client.clone(),
            store: store.clone(),
            instances: ctx.instances.clone(),
            records: records.clone(),
            events: events.clone(),
            sync_now,
            presence: deps.presence.clone(),
            tenure: deps.tenure.clone(),
        };
        NoticeRegistration::add(sinks.clone(), &deps.node_name, Arc::new(sink))
    });
    let mut sync_task = tokio::spawn({
        let tenure = deps.tenure.clone();
        let sync = sync.run(store, listed_rx, changed_tx, shutdown.clone());
        async move {
            tenure
                .guard(async move {
                    sync.await;
                    TurnEnd::Stopped
                })
                .await
        }
    });
    // Aborted if this task is dropped first (its tenure lapsed): it never outlives the turn.
    let _sync_aborted_on_drop = AbortOnDrop(sync_task.abort_handle());
    // Instance changes arrive from the sync loop, not from the pod watch: `reconcile_on`
    // (kube's unstable-runtime feature) feeds them into the same per-pod queue.
    let reconciles = controller
        .reconcile_on(changed_rx)
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(
            |pod, ctx| {
                let tenure = ctx.tenure.clone();
                async move {
                    let key = PodKey::of(&pod);
                    match (tenure.guard(measured_reconcile(pod, ctx)).await, key) {
                        (Ok(result), _) => result,
                        (Err(source), Some(pod)) => {
                            Err(error::ReconcileError::HoldEnded { pod, source })
                        }
                        (Err(_), None) => Ok(kube::runtime::controller::Action::await_change()),
                    }
                }
            },
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            // Reconcile errors are logged by the reconciler; a pod deleted while queued is
            // routine. (The pod watch's own failures are logged by `NodePods`.)
            if let Err(error) = result {
                tracing::debug!(error = %crate::errors::error_chain(&error), "pod controller");
            }
        });
    let end = tokio::select! {
        () = helpers => TurnEnd::Stopped,
        () = reconciles => {
            let stopping = shutdown.is_cancelled();
            // The controller ends at shutdown; the sync task then too.
            let sync = turn::end_of(ServingTask::StatusSync, sync_task.await, true);
            let controller = if stopping {
                TurnEnd::Stopped
            } else {
                TurnEnd::Failed { task: ServingTask::PodController, how: turn::Failure::Returned }
            };
            turn::first_cause(controller, sync)
        }
        joined = &mut sync_task => turn::end_of(ServingTask::StatusSync, joined, shutdown.is_cancelled()),
    };
    drop(registration);
    events.drain(EVENTS_DRAIN).await;
    tracing::info!("pod controller stopped; instances left running for the next start");
    end
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A node's sink on the interruption queue's consumer, removed when dropped: however the
/// turn ends (a panic, a lapsed tenure dropping its future), notices for its instances stop
/// coming here.
struct NoticeRegistration {
    sinks: Arc<crate::interruption::NodeSinks>,
    node: String,
}

impl NoticeRegistration {
    fn add(
        sinks: Arc<crate::interruption::NodeSinks>,
        node: &str,
        sink: Arc<notice_sink::PodNoticeSink>,
    ) -> NoticeRegistration {
        sinks.add(node, sink);
        NoticeRegistration {
            sinks,
            node: node.to_owned(),
        }
    }
}

impl Drop for NoticeRegistration {
    fn drop(&mut self) {
        self.sinks.remove(&self.node);
    }
}

/// Readiness waits for the node's pods to be listed (at once when they were already).
async fn mark_listed(
    mut listed: tokio::sync::watch::Receiver<bool>,
    health: Arc<Health>,
    node: String,
    shutdown: CancellationToken,
) {
    tokio::select! {
        () = shutdown.cancelled() => {}
        listed = listed.wait_for(|listed| *listed) => {
            if listed.is_ok() {
                health.pods_listed(&node);
            }
        }
    }
}
