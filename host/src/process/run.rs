//! Running the process: every node checked, then every loop started under one owner
//! ([`ProcessTasks`]), each node served, and at shutdown every loop joined.

use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::catalogue_refresh;
use super::error::StartError;
use super::loops::ProcessLoop;
use super::node::{NodeRuntime, SharedParts, report_end};
use super::parts::Parts;
use super::pod_usage::UsageLoop;
use super::sharing;
use super::tasks::ProcessTasks;
use super::turn::{self, ServingTask, TurnEnd};
use crate::interruption::{ConsumerParts, Ec2Owners, NodeSinks, Origin, ThisOrca};
use crate::metrics::ServingMetrics;
use crate::node::NodeController;
use crate::node::plugin_events::NodePluginEvents;
use crate::pods::NodePods;
use crate::policy::readiness::PolicyReadiness;
use crate::policy::reload::{self, ReloadReporter, Reporters};
use crate::provider::Provider;
use crate::provider::aws::strays::{ApiPodPresence, StraySweep};
use crate::replicas::{NodeSharing, Tenure};
use crate::spend::census::{Census, CensusLoop, ServedCensus};

/// A node's provider and controller, built before anything runs.
type FirstTurn = (Arc<dyn Provider>, NodeController);

/// Runs until `shutdown` is cancelled, or until a loop fails (then it cancels `shutdown`
/// itself), then waits up to the shutdown grace period for every loop to finish. Pods,
/// instances, the Nodes and their Leases stay: the next start adopts them.
///
/// # Errors
/// [`StartError`] for a node that cannot be served, a listener that cannot bind, a plugin
/// source that cannot start, or a loop that ended by itself.
pub async fn run(parts: Parts, shutdown: CancellationToken) -> Result<(), StartError> {
    let mut tasks = ProcessTasks::new(shutdown.clone());
    let (policy_ready, policy_ready_rx) = watch::channel(true);
    let shared = shared_parts(&parts, policy_ready_rx);
    // Every node's provider and skeleton are checked before anything runs.
    let first_turns = first_turns(&parts, &shared)?;
    serve_metrics(&parts, &mut tasks, &shutdown).await?;
    learn_the_apiserver(&parts, &mut tasks, &shutdown).await;
    name_the_daemonsets(&parts, &mut tasks);
    tasks.spawn(
        ProcessLoop::KubeletApi,
        kubelet_api(&parts, shutdown.clone()),
    );
    watch_instances(&parts, &mut tasks, &shutdown);
    let reporter = plugin_reporter(&parts, &mut tasks, policy_ready, &shutdown);
    watch_plugins(&parts, &mut tasks, reporter, &shutdown)?;
    consume_interruptions(&parts, &mut tasks, &shared, &shutdown);
    let pods = watch_pods(&parts, &mut tasks, &shutdown);
    serve_nodes(&parts, &mut tasks, &shared, first_turns, pods, &shutdown);
    let failure = tasks.until_shutdown().await;
    tasks
        .join(parts.config.pods.shutdown_grace_period.get())
        .await;
    failure.map_or(Ok(()), Err)
}

/// What every node's serving shares; with one consumer for the interruption queue, each
/// notice goes to the node whose instance it names.
fn shared_parts(parts: &Parts, policy_ready: watch::Receiver<bool>) -> SharedParts {
    let notice_sinks = parts.interruptions.as_ref().map(|_| {
        Arc::new(if parts.config.replicas.share_nodes {
            NodeSinks::sharing(parts.nodes.len())
        } else {
            NodeSinks::default()
        })
    });
    SharedParts {
        client: parts.client.clone(),
        pods: parts.config.pods.clone(),
        reconcile_metrics: parts.metrics.reconcile.clone(),
        lease_metrics: parts.metrics.lease.clone(),
        serving_metrics: parts.metrics.serving.clone(),
        health: parts.health.clone(),
        served: parts.served.clone(),
        notice_sinks,
        policy_ready,
        pod_writes: Arc::default(),
        spend: parts.spend.clone(),
        prices: parts.prices.clone(),
        schema: parts.schema.clone(),
    }
}

/// Each node's first provider and controller: a node that cannot be served stops startup.
fn first_turns(parts: &Parts, shared: &SharedParts) -> Result<Vec<FirstTurn>, StartError> {
    parts
        .nodes
        .iter()
        .map(|node| {
            let provider = (node.new_provider)()?;
            let controller = node
                .node_controller(&provider, shared)
                .map_err(StartError::NodeFailed)?;
            Ok((provider, controller))
        })
        .collect()
}

/// Reads the apiserver's release and schema before any node writes to it (a failure is
/// logged: the writes then leave out, one at a time, what the server refuses), then keeps
/// them current in a loop.
async fn learn_the_apiserver(
    parts: &Parts,
    tasks: &mut ProcessTasks,
    shutdown: &CancellationToken,
) {
    if let Err(error) = parts.schema.learn().await {
        tracing::warn!(
            error = %crate::support::errors::error_chain(&error),
            "reading the apiserver's release and schema failed; orca writes every field and leaves out those the server refuses"
        );
    }
    tasks.spawn_loop(
        ProcessLoop::ServerSchema,
        parts.schema.clone().run(shutdown.clone()),
    );
}

/// Names, as warnings, the DaemonSets that place a pod on one of the nodes: orca would launch
/// an instance for each (`node::daemonsets`). Beside startup, not in its way: it informs, and
/// a slow list must not hold the nodes back.
fn name_the_daemonsets(parts: &Parts, tasks: &mut ProcessTasks) {
    let nodes: Vec<_> = (parts.nodes.iter())
        .map(|node| crate::node::as_registered(&node.declared.node))
        .collect();
    let client = parts.client.clone();
    tasks.spawn_loop(ProcessLoop::DaemonSetCheck, async move {
        crate::node::daemonsets::name_those_placing_pods(&client, &nodes).await;
    });
}

/// `/metrics`, `/healthz` and `/readyz`, listening before anything else runs.
async fn serve_metrics(
    parts: &Parts,
    tasks: &mut ProcessTasks,
    shutdown: &CancellationToken,
) -> Result<(), StartError> {
    let address =
        std::net::SocketAddr::new(parts.config.metrics.bind_address, parts.config.metrics.port);
    let serving = crate::metrics::server::serve(
        address,
        parts.metrics.registry(),
        parts.health.clone(),
        shutdown.clone(),
    )
    .await
    .map_err(|source| StartError::ListenFailed {
        address,
        field: "metrics.port",
        source,
    })?;
    tasks.adopt(ProcessLoop::MetricsServer, serving);
    Ok(())
}

/// The kubelet API, started in its own loop: with `csr` as the only TLS source it waits for
/// the certificate's approval, which must not hold up the node and pods. If it cannot start
/// at all (bad certificate files, port taken), the loop fails with the reason.
fn kubelet_api(
    parts: &Parts,
    shutdown: CancellationToken,
) -> impl Future<Output = Result<(), StartError>> + Send + 'static {
    let deps = crate::kubelet_api::KubeletApiDeps {
        client: parts.client.clone(),
        config: parts.config.kubelet_api.clone(),
        nodes: parts
            .nodes
            .iter()
            .map(|node| node.declared.node.clone())
            .collect(),
        served: parts.served.clone(),
        metrics: parts.metrics.kubelet_api.clone(),
        usages: parts.usages.clone(),
        schema: parts.schema.clone(),
    };
    let health = parts.health.clone();
    async move {
        let serving = crate::kubelet_api::start(deps, shutdown)
            .await
            .map_err(StartError::KubeletApiFailed)?;
        health.kubelet_api_serving();
        let _ = serving.await;
        Ok(())
    }
}

/// The loops over the cluster's instances: the sweep for instances of undeclared nodes (a
/// renamed node's, terminated once their pods are gone), the census for the namespaces'
/// caps, and the catalogue refresh.
fn watch_instances(parts: &Parts, tasks: &mut ProcessTasks, shutdown: &CancellationToken) {
    if let Some(api) = &parts.ec2 {
        let sweep = StraySweep {
            api: api.clone(),
            pods: Arc::new(ApiPodPresence(parts.client.clone())),
            cluster_id: parts.cluster_id.clone(),
            declared: node_names(&parts.nodes),
            grace: parts.config.pods.orphan_grace_period.get(),
        };
        tasks.spawn_loop(ProcessLoop::StraySweep, sweep.run(shutdown.clone()));
        let refresh = parts.config.provider.aws.catalogue_refresh.get();
        if !refresh.is_zero() {
            tasks.spawn_loop(
                ProcessLoop::CatalogueRefresh,
                catalogue_refresh::run(
                    api.clone(),
                    parts.catalogue.clone(),
                    refresh,
                    shutdown.clone(),
                ),
            );
        }
    }
    if let (Some(_), Some(metrics)) = (&parts.ec2, &parts.config.provider.aws.metrics) {
        let reading = UsageLoop {
            served: parts.served.clone(),
            usages: parts.usages.clone(),
            period: metrics.interval(),
        };
        tasks.spawn_loop(ProcessLoop::PodUsage, reading.run(shutdown.clone()));
    }
    // One listing of the cluster's instances per sync period for the cost loop and the census.
    let listing = parts.ec2.as_ref().map(|api| {
        Arc::new(crate::provider::aws::listing::ClusterListing::new(
            api.clone(),
            parts.cluster_id.clone(),
            parts.config.pods.sync_interval.get(),
        ))
    });
    if let (Some(api), Some(listing)) = (&parts.ec2, &listing) {
        let costs = crate::cost::CostLoop {
            api: api.clone(),
            listing: listing.clone(),
            catalogue: parts.catalogue.clone(),
            client: parts.client.clone(),
            metrics: parts.metrics.cost.clone(),
            period: parts.config.pods.sync_interval.get(),
            ttl: crate::cost::SPOT_HISTORY_TTL,
            served: parts.served.clone(),
            launch_prices: parts.prices.clone(),
        };
        tasks.spawn_loop(ProcessLoop::Cost, costs.run(shutdown.clone()));
    }
    if parts.spend.caps_namespaces() {
        let census: Arc<dyn Census> = match &listing {
            Some(listing) => Arc::new(crate::provider::aws::census::Ec2Census {
                listing: listing.clone(),
            }),
            None => Arc::new(ServedCensus(parts.served.clone())),
        };
        let census = CensusLoop {
            census,
            spend: parts.spend.clone(),
            catalogue: parts.catalogue.clone(),
            period: parts.config.pods.sync_interval.get(),
        };
        tasks.spawn_loop(ProcessLoop::Census, census.run(shutdown.clone()));
    }
}

/// Who hears of plugin loads and refusals: the policy's readiness, the metrics, and each
/// declared node's Events.
fn plugin_reporter(
    parts: &Parts,
    tasks: &mut ProcessTasks,
    ready: watch::Sender<bool>,
    shutdown: &CancellationToken,
) -> Arc<dyn ReloadReporter> {
    let mut reporters: Vec<Arc<dyn ReloadReporter>> = vec![
        Arc::new(PolicyReadiness {
            pipeline: parts.pipeline.clone(),
            health: parts.health.clone(),
            ready,
        }),
        parts.metrics.policy.clone(),
    ];
    for node in &parts.nodes {
        let (events, publishing) =
            NodePluginEvents::start(parts.client.clone(), node.name(), shutdown.clone());
        tasks.spawn_loop(
            ProcessLoop::PluginEvents(node.name().to_owned()),
            publishing,
        );
        reporters.push(Arc::new(events));
    }
    let reporter: Arc<dyn ReloadReporter> = Arc::new(Reporters(reporters));
    reporter.rescanned(&parts.registry.current());
    reporter
}

/// The plugin sources: the embedded plugins' retry (it ends once every one has loaded), the
/// OCI references' refresh, and the plugins directory's watch. Pods whose chains name a
/// plugin not loaded yet wait for it.
fn watch_plugins(
    parts: &Parts,
    tasks: &mut ProcessTasks,
    reporter: Arc<dyn ReloadReporter>,
    shutdown: &CancellationToken,
) -> Result<(), StartError> {
    if let Some(retry) =
        reload::spawn_embedded_retry(parts.registry.clone(), reporter.clone(), shutdown.clone())
    {
        tasks.adopt(ProcessLoop::EmbeddedRetry, retry);
    }
    if !parts.config.policy.plugins.is_empty() {
        let refresh = super::plugin_pulls::spawn_refresh(parts, reporter.clone(), shutdown)?;
        tasks.adopt(ProcessLoop::OciRefresh, refresh);
    }
    if let Some(dir) = &parts.config.policy.plugins_dir {
        // Plugins on disk serve from the first pod on.
        reload::rescan_and_report(&parts.registry, dir, reporter.as_ref());
        let watch = reload::spawn_watcher(
            parts.registry.clone(),
            dir.clone(),
            parts.config.policy.reload_debounce.get(),
            reporter,
            shutdown.clone(),
        )
        .map_err(|source| StartError::PluginWatchFailed {
            dir: dir.display().to_string(),
            source,
        })?;
        tasks.adopt(ProcessLoop::PluginWatch, watch);
    }
    Ok(())
}

/// The interruption queue's consumer, when a queue is configured (aws provider only).
fn consume_interruptions(
    parts: &Parts,
    tasks: &mut ProcessTasks,
    shared: &SharedParts,
    shutdown: &CancellationToken,
) {
    let (Some(interruptions), Some(sinks), Some(api)) =
        (&parts.interruptions, &shared.notice_sinks, &parts.ec2)
    else {
        return;
    };
    let consumer = ConsumerParts {
        queue: interruptions.queue.clone(),
        sink: sinks.clone(),
        owners: Arc::new(Ec2Owners {
            api: api.clone(),
            this: ThisOrca {
                cluster_id: parts.cluster_id.clone(),
                nodes: node_names(&parts.nodes),
                grace: jiff::SignedDuration::try_from(
                    parts.config.pods.launch_visibility_grace.get(),
                )
                .unwrap_or(jiff::SignedDuration::MAX),
            },
        }),
        origin: Origin {
            account: interruptions.account.clone(),
            region: parts.config.provider.region.clone(),
        },
        metrics: parts.metrics.interruption.clone(),
    };
    tasks.spawn_loop(
        ProcessLoop::InterruptionQueue,
        crate::interruption::consume(consumer, shutdown.clone().cancelled_owned()),
    );
}

/// Every declared node's pods, watched from the start, served here or not, so a takeover
/// finds them listed.
fn watch_pods(
    parts: &Parts,
    tasks: &mut ProcessTasks,
    shutdown: &CancellationToken,
) -> Vec<Arc<NodePods>> {
    parts
        .nodes
        .iter()
        .map(|node| {
            let (pods, watching) =
                NodePods::start(parts.client.clone(), node.name(), shutdown.clone());
            tasks.spawn_loop(ProcessLoop::PodWatch(node.name().to_owned()), watching);
            parts.served.watching(node.name(), pods.store());
            pods
        })
        .collect()
}

/// Each node's serving: alone, for as long as the process runs; or, sharing the nodes, in
/// turns while this replica holds the node's Lease.
fn serve_nodes(
    parts: &Parts,
    tasks: &mut ProcessTasks,
    shared: &SharedParts,
    first_turns: Vec<FirstTurn>,
    pods: Vec<Arc<NodePods>>,
    shutdown: &CancellationToken,
) {
    if parts.config.replicas.share_nodes {
        let (sharing, watch) = NodeSharing::start(
            parts.client.clone(),
            &parts.config.replicas,
            shutdown.clone(),
        );
        tasks.adopt(ProcessLoop::LeaseWatch, watch);
        let sharing = Arc::new(sharing);
        for (node, pods) in parts.nodes.iter().zip(pods) {
            let share = sharing::share(
                sharing.clone(),
                node.clone(),
                pods,
                shared.clone(),
                shutdown.clone(),
            );
            let serving = judged(
                ServingTask::LeaseLoop,
                node.name().to_owned(),
                async move {
                    share.await;
                    TurnEnd::Stopped
                },
                shared.serving_metrics.clone(),
                shutdown.clone(),
            );
            tasks.spawn(ProcessLoop::Serving(node.name().to_owned()), serving);
        }
        return;
    }
    for ((node, first), pods) in parts.nodes.iter().zip(first_turns).zip(pods) {
        let serving = serve_alone(node.clone(), first, pods, shared.clone(), shutdown.clone());
        tasks.spawn(ProcessLoop::Serving(node.name().to_owned()), serving);
    }
}

/// Serves `node` for the life of the process.
fn serve_alone(
    node: Arc<NodeRuntime>,
    (provider, controller): FirstTurn,
    pods: Arc<NodePods>,
    shared: SharedParts,
    shutdown: CancellationToken,
) -> impl Future<Output = Result<(), StartError>> + Send + 'static {
    let name = node.name().to_owned();
    let serving = {
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        async move {
            node.serve(
                provider,
                controller,
                pods,
                &shared,
                shutdown,
                Tenure::unlimited(),
            )
            .await
        }
    };
    judged(
        ServingTask::Turn,
        name,
        serving,
        shared.serving_metrics.clone(),
        shutdown,
    )
}

/// A node's serving (`task`: a turn, or the Lease loop that runs turns), judged as it ends:
/// one that ended by itself (a panic, a return while nothing asked it to stop, a failed
/// turn) is counted and fails the loop, so the process ends (non-zero: it is restarted)
/// rather than stay registered with nothing serving the node.
async fn judged(
    task: ServingTask,
    node: String,
    serving: impl Future<Output = TurnEnd> + Send + 'static,
    metrics: Arc<ServingMetrics>,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    let end = match std::panic::AssertUnwindSafe(serving).catch_unwind().await {
        Ok(end) => turn::end_of(task, Ok(Ok(end)), shutdown.is_cancelled()),
        Err(_) => TurnEnd::Failed {
            task,
            how: turn::Failure::Panicked,
        },
    };
    if end == TurnEnd::Stopped {
        return Ok(());
    }
    report_end(&metrics, &node, end);
    Err(StartError::ServingEnded { node, reason: end })
}

/// The declared nodes' names.
fn node_names<C: FromIterator<String>>(nodes: &[Arc<NodeRuntime>]) -> C {
    nodes.iter().map(|node| node.name().to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::turn::Failure;

    /// A serving, as the table holds it.
    type Serving = std::pin::Pin<Box<dyn Future<Output = TurnEnd> + Send>>;

    /// What `judged` answered, as a word for the table.
    fn said(answer: Result<(), StartError>) -> String {
        match answer {
            Ok(()) => "ok".to_owned(),
            Err(StartError::ServingEnded { node, reason }) => format!("{node}: {reason}"),
            Err(other) => format!("{other}"),
        }
    }

    #[tokio::test]
    async fn a_nodes_serving_that_ends_by_itself_fails_and_one_asked_to_stop_does_not() {
        let metrics = Arc::new(ServingMetrics::register(
            &mut prometheus_client::registry::Registry::default(),
        ));
        let lapsed = || async { TurnEnd::Lapsed };
        let stopped = || async { TurnEnd::Stopped };
        let cases: Vec<(ServingTask, bool, Serving, &str)> = vec![
            (ServingTask::Turn, true, Box::pin(stopped()), "ok"),
            (
                ServingTask::Turn,
                false,
                Box::pin(stopped()),
                "gpu: turn_returned",
            ),
            (
                ServingTask::LeaseLoop,
                false,
                Box::pin(stopped()),
                "gpu: lease_loop_returned",
            ),
            (
                ServingTask::Turn,
                false,
                Box::pin(lapsed()),
                "gpu: hold_lapsed",
            ),
            (
                ServingTask::Turn,
                true,
                Box::pin(lapsed()),
                "gpu: hold_lapsed",
            ),
            (
                ServingTask::LeaseLoop,
                false,
                Box::pin(async { panic!("a lease loop bug") }),
                "gpu: lease_loop_panicked",
            ),
            (
                ServingTask::Turn,
                true,
                Box::pin(async {
                    TurnEnd::Failed {
                        task: ServingTask::PodController,
                        how: Failure::Panicked,
                    }
                }),
                "gpu: pod_controller_panicked",
            ),
        ];
        for (task, stopping, serving, expected) in cases {
            let shutdown = CancellationToken::new();
            if stopping {
                shutdown.cancel();
            }
            let answer = judged(task, "gpu".to_owned(), serving, metrics.clone(), shutdown).await;
            assert_eq!(said(answer), expected, "{task:?} stopping={stopping}");
        }
    }
}
