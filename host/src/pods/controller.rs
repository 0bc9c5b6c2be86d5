//! One turn of the pod controller: the provider's instances adopted first, then the node's pods
//! reconciled (kube's `Controller`, fed by the pod watch and by the status sync's instance
//! changes) until shutdown, beside the status sync and the turn's small helpers. Every task it
//! starts ends with it.

use std::sync::Arc;

use futures::channel::mpsc;
use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, controller, watcher};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::error::ReconcileError;
use super::events::PodEvents;
use super::instances::InstanceCache;
use super::node_pods::NodePods;
use super::reconcile::{error_policy, measured_reconcile};
use super::record::PodRecords;
use super::sync::{self, StatusSync};
use super::terminations::TerminationLedger;
use super::writer::ApiPodWriter;
use super::{notice_sink, policy_wait, room_wait};
use crate::config::PodsConfig;
use crate::interruption::NodeSinks;
use crate::metrics::ReconcileMetrics;
use crate::policy::Planner;
use crate::process::health::Health;
use crate::process::turn::{self, ServingTask, TurnEnd};
use crate::provider::PodKey;
use crate::provider::Provider;
use crate::provider::aws::strays::PodPresence;
use crate::replicas::{Tenure, TenureError};
use crate::spend::NamespaceSpend;
use crate::support::{AbortOnDrop, Backoff};
use crate::workload::KubeEnvSource;

/// Everything the pod controller is built from.
pub struct PodControllerDeps {
    pub client: kube::Client,
    pub node_name: String,
    /// The node's zone, when it is bound to one.
    pub node_zone: Option<String>,
    pub provider: Arc<dyn Provider>,
    pub planner: Arc<dyn Planner>,
    /// What launched instances cost an hour, for their decision records.
    pub prices: Arc<crate::cost::LaunchPrices>,
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
    pub pod_writes: Arc<super::events::PodWrites>,
    /// What each namespace's instances cost against its cap, for the whole process.
    pub spend: Arc<NamespaceSpend>,
    /// Whether a pod exists, read from the apiserver: an instance is collected as an orphan,
    /// and a notice dropped for a pod gone, only once a read made then says so.
    pub presence: Arc<dyn PodPresence>,
    /// How long this turn may act for the node: reconciles, the status sync and the notices
    /// of the interruption queue take no step after it ends.
    pub tenure: Tenure,
    /// What the apiserver knows: what the pod status writes leave out.
    pub schema: Arc<crate::cluster::apiserver::ServerSchema>,
}

/// How long shutdown waits for queued Events to go out.
const EVENTS_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// What reaches the controller's per-pod queue besides the pod watch: the status sync's
/// instance changes, and the pods already listed when the turn began.
type Changes = mpsc::UnboundedSender<ObjectRef<Pod>>;

/// Runs the pod controller until `shutdown`. Before the first reconcile it lists the
/// provider's instances once, so pods whose instances already run (a restart) are adopted,
/// never launched twice.
///
/// # Guarantees
/// Answers how it ended: [`TurnEnd::Stopped`] after `shutdown`; the status sync's end when
/// the sync task ended first (a panic, its tenure lapsed); a controller that ended without
/// `shutdown` is [`TurnEnd::Failed`]. Every reconcile runs under the tenure's guard.
pub async fn run(deps: PodControllerDeps, shutdown: CancellationToken) -> TurnEnd {
    let records = Arc::new(PodRecords::default());
    let sync = status_sync(&deps, records.clone());
    let (changed_tx, changed_rx) = mpsc::unbounded();
    if !adopt_instances(&sync, &changed_tx, &deps, &shutdown).await {
        return TurnEnd::Stopped;
    }
    let events = Arc::new(PodEvents::new(
        deps.client.clone(),
        &deps.node_name,
        deps.pod_writes.clone(),
    ));
    let ctx = context(&deps, &sync, &records, &events);
    let store = deps.pods.store();
    let listed_rx = deps.pods.listed();
    // Changes from now on come through the subscription; the pods stored already (all of them
    // when the node was listed before this turn, as on a takeover) are queued once here.
    let (updates, already) = deps.pods.subscribe();
    for pod in already {
        let _ = changed_tx.unbounded_send(ObjectRef::from_obj(&*pod));
    }
    let helpers = helpers(&deps, &records, &store, &changed_tx, &shutdown);
    // The node's notices are handled from here until this turn ends, however it ends.
    let registration = deps.notice_sinks.as_ref().map(|sinks| {
        let sink = notice_sink::PodNoticeSink {
            client: deps.client.clone(),
            store: store.clone(),
            instances: ctx.instances.clone(),
            records: records.clone(),
            events: events.clone(),
            sync_now: sync.sync_now.clone(),
            presence: deps.presence.clone(),
            tenure: deps.tenure.clone(),
        };
        NoticeRegistration::add(sinks.clone(), &deps.node_name, Arc::new(sink))
    });
    let mut sync_task = spawn_sync(sync, &deps.tenure, &store, listed_rx, changed_tx, &shutdown);
    // Aborted if this task is dropped first (its tenure lapsed): it never outlives the turn.
    let _sync_aborted_on_drop = AbortOnDrop(sync_task.abort_handle());
    let reconciles = reconciles(updates, &store, changed_rx, ctx, &deps, &records, &shutdown);
    let end = tokio::select! {
        () = helpers => TurnEnd::Stopped,
        () = reconciles => controller_end(shutdown.is_cancelled(), sync_task.await),
        joined = &mut sync_task => turn::end_of(ServingTask::StatusSync, joined, shutdown.is_cancelled()),
    };
    drop(registration);
    events.drain(EVENTS_DRAIN).await;
    tracing::info!("pod controller stopped; instances left running for the next start");
    end
}

/// The status sync of this turn: lists the provider's instances, mirrors them into pod
/// statuses and collects orphans.
fn status_sync(deps: &PodControllerDeps, records: Arc<PodRecords>) -> StatusSync {
    StatusSync {
        sync_now: Arc::new(tokio::sync::Notify::new()),
        provider: deps.provider.clone(),
        instances: Arc::new(InstanceCache::default()),
        records,
        ledger: Arc::new(TerminationLedger::default()),
        config: deps.config.clone(),
        metrics: deps.metrics.clone(),
        node: deps.node_name.clone(),
        spend: deps.spend.clone(),
        presence: deps.presence.clone(),
    }
}

/// Lists the provider's instances until a listing succeeds (the pods already listed, on a
/// takeover, name their instances for the first choice too), then, under a namespace cap,
/// waits for the cluster's instances to be counted once: a restart would otherwise launch a
/// burst into a full namespace. `false` when `shutdown` came first.
async fn adopt_instances(
    sync: &StatusSync,
    changed_tx: &Changes,
    deps: &PodControllerDeps,
    shutdown: &CancellationToken,
) -> bool {
    let mut delays = Backoff::new(
        std::time::Duration::from_millis(200),
        deps.config.retry_max_backoff.get(),
    )
    .delays();
    while sync
        .sync_once(changed_tx, sync::named_instances(&deps.pods.store()), None)
        .await
        .is_none()
    {
        let delay = delays.next_delay();
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = tokio::time::sleep(delay) => {}
        }
    }
    tracing::info!(
        instances = sync.instances.all().len(),
        "adopted the provider's instances"
    );
    if deps.spend.caps_namespaces() {
        let mut freed = deps.spend.freed();
        while !deps.spend.is_listed() {
            tokio::select! {
                () = shutdown.cancelled() => return false,
                changed = freed.changed() => if changed.is_err() { return false },
            }
        }
    }
    true
}

/// What every reconcile of this turn works with.
fn context(
    deps: &PodControllerDeps,
    sync: &StatusSync,
    records: &Arc<PodRecords>,
    events: &Arc<PodEvents>,
) -> Arc<Context> {
    let writer = Arc::new(ApiPodWriter {
        client: deps.client.clone(),
        events: events.clone(),
        records: records.clone(),
        schema: deps.schema.clone(),
    });
    Arc::new(Context {
        writer,
        objects: Arc::new(KubeEnvSource::new(deps.client.clone())),
        provider: deps.provider.clone(),
        planner: deps.planner.clone(),
        prices: deps.prices.clone(),
        instances: sync.instances.clone(),
        records: records.clone(),
        ledger: sync.ledger.clone(),
        config: deps.config.clone(),
        metrics: deps.metrics.clone(),
        node_zone: deps.node_zone.clone(),
        node_name: deps.node_name.clone(),
        spend: deps.spend.clone(),
        tenure: deps.tenure.clone(),
    })
}

/// Small helpers of the turn, run in its task (a panic in one ends the turn): readiness once
/// the pods are listed, and pods waiting for a plugin or for room under a cap queued again
/// when the wait is over. Once done (at shutdown at the latest) they wait for the controller.
fn helpers(
    deps: &PodControllerDeps,
    records: &Arc<PodRecords>,
    store: &Store<Pod>,
    changed_tx: &Changes,
    shutdown: &CancellationToken,
) -> impl Future<Output = ()> + use<> {
    futures::future::join3(
        mark_listed(
            deps.pods.listed(),
            deps.health.clone(),
            deps.node_name.clone(),
            shutdown.clone(),
        ),
        policy_wait::wake_on_ready(
            deps.policy_ready.clone(),
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
    .then(|_| std::future::pending::<()>())
}

/// The status sync's loop, in its own task, under the turn's tenure.
fn spawn_sync(
    sync: StatusSync,
    tenure: &Tenure,
    store: &Store<Pod>,
    listed: tokio::sync::watch::Receiver<bool>,
    changed_tx: Changes,
    shutdown: &CancellationToken,
) -> JoinHandle<Result<TurnEnd, TenureError>> {
    let tenure = tenure.clone();
    let sync = sync.run(store.clone(), listed, changed_tx, shutdown.clone());
    tokio::spawn(async move {
        tenure
            .guard(async move {
                sync.await;
                TurnEnd::Stopped
            })
            .await
    })
}

/// The reconciles of the node's pods until `shutdown`: pod changes from the watch (orca's own
/// writes filtered out) and instance changes from the sync loop, into one per-pod queue.
fn reconciles(
    updates: mpsc::UnboundedReceiver<Pod>,
    store: &Store<Pod>,
    changed_rx: mpsc::UnboundedReceiver<ObjectRef<Pod>>,
    ctx: Arc<Context>,
    deps: &PodControllerDeps,
    records: &Arc<PodRecords>,
    shutdown: &CancellationToken,
) -> impl Future<Output = ()> + use<> {
    let pod_events = updates
        .map(Ok::<Pod, watcher::Error>)
        // orca's own writes come back through the watch. The reconcile that wrote went on
        // with the pod as written, so an echo would only reconcile for nothing.
        .try_filter({
            let records = records.clone();
            move |pod| std::future::ready(!records.take_echo(pod))
        });
    Controller::for_stream(pod_events, store.clone())
        .with_config(
            controller::Config::default().concurrency(deps.config.max_concurrent_reconciles),
        )
        // Instance changes arrive from the sync loop, not from the pod watch: `reconcile_on`
        // (kube's unstable-runtime feature) feeds them into the same per-pod queue.
        .reconcile_on(changed_rx)
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(
            |pod, ctx| {
                let tenure = ctx.tenure.clone();
                async move {
                    let key = PodKey::of(&pod);
                    match (tenure.guard(measured_reconcile(pod, ctx)).await, key) {
                        (Ok(result), _) => result,
                        (Err(source), Some(pod)) => Err(ReconcileError::HoldEnded { pod, source }),
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
                tracing::debug!(error = %crate::support::errors::error_chain(&error), "pod controller");
            }
        })
}

/// How the turn ended when the controller's stream ended: at shutdown it stopped (and so did
/// the sync task); without shutdown it failed. The sync task's own failure comes first.
fn controller_end(
    stopping: bool,
    sync: Result<Result<TurnEnd, TenureError>, tokio::task::JoinError>,
) -> TurnEnd {
    let sync = turn::end_of(ServingTask::StatusSync, sync, true);
    let controller = if stopping {
        TurnEnd::Stopped
    } else {
        TurnEnd::Failed {
            task: ServingTask::PodController,
            how: turn::Failure::Returned,
        }
    };
    turn::first_cause(controller, sync)
}

/// A node's sink on the interruption queue's consumer, removed when dropped: however the
/// turn ends (a panic, a lapsed tenure dropping its future), notices for its instances stop
/// coming here.
struct NoticeRegistration {
    sinks: Arc<NodeSinks>,
    node: String,
}

impl NoticeRegistration {
    fn add(
        sinks: Arc<NodeSinks>,
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
