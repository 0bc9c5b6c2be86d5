//! The whole orca process: the shared parts (EC2 API, catalogue, policy, kubelet API, metrics,
//! interruption queue) wired once, and a node controller and pod controller per declared node.

use std::sync::Arc;

use futures::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::catalogue_refresh;
use crate::config::{Config, DeclaredNode, ProviderKind, SimulatedConfig};
use crate::health::Health;
use crate::interruption::{
    ConsumerParts, Ec2Owners, NodeSinks, NoticeQueue, Origin, SqsQueue, ThisOrca,
};
use crate::metrics::Metrics;
use crate::node::RegistrationError;
use crate::node::plugin_events::NodePluginEvents;
use crate::node_runtime::{NodeRuntime, ProviderFactory, SharedParts};
use crate::pods::NodePods;
use crate::policy::catalogue::{InstanceCatalogue, any_query};
use crate::policy::guardrails::{Guardrails, Price};
use crate::policy::pipeline::HookChains;
use crate::policy::readiness::PolicyReadiness;
use crate::policy::registry::PluginRegistry;
use crate::policy::reload::{self, ReloadReporter, Reporters};
use crate::policy::setup::{PolicySetupError, build_registry};
use crate::policy::wasm::CatalogueQuery;
use crate::policy::{Pipeline, Planner};
use crate::provider::Provider;
use crate::provider::aws::api::Ec2Api;
use crate::provider::aws::sdk::SdkEc2;
use crate::provider::aws::strays::{ApiPodPresence, StraySweep};
use crate::provider::aws::{AwsProvider, Ec2Calls, Identity, Measured, RateLimited};
use crate::provider::ownership::PLACEHOLDER_NAMES;
use crate::provider::simulated::SimulatedProvider;
use crate::replicas::{NodeSharing, Tenure};
use crate::served_nodes::ServedNodes;
use crate::spend::NamespaceSpend;
use crate::spend::census::{Census, CensusLoop, ServedCensus};
use crate::turn::{self, ServingTask, TurnEnd};

/// Why orca could not start, or stopped running before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("starting the simulated provider")]
    SimulatedProviderFailed(#[source] crate::provider::simulated::JournalError),
    #[error("preparing the policy plugins")]
    PolicyFailed(#[source] PolicySetupError),
    #[error("policy.guardrails")]
    GuardrailsFailed(#[source] crate::policy::guardrails::GuardrailError),
    #[error("reading the cluster's identity")]
    ClusterIdFailed(#[source] crate::provider::ownership::ClusterIdError),
    #[error("reading the account whose interruption notices count")]
    AccountFailed(#[source] crate::interruption::AccountError),
    #[error("watching the plugins directory {dir}")]
    PluginWatchFailed {
        dir: String,
        #[source]
        source: notify::Error,
    },
    #[error("policy.registry: {0}")]
    PluginRegistryFailed(String),
    #[error("preparing the node")]
    NodeFailed(#[source] RegistrationError),
    #[error("starting the kubelet API")]
    KubeletApiFailed(#[source] crate::kubelet_api::KubeletApiError),
    #[error("listening on {address} ({field})")]
    ListenFailed {
        address: std::net::SocketAddr,
        field: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "serving node {node} ended by itself ({reason}); exiting so that the process is restarted"
    )]
    ServingEnded { node: String, reason: TurnEnd },
}

/// A configured orca, ready to run.
pub struct Orca {
    config: Config,
    client: kube::Client,
    /// Every declared node (`nodes:`, or `node:` alone), in order.
    nodes: Vec<Arc<NodeRuntime>>,
    /// The EC2 API when the aws provider runs: the catalogue refresh uses it too.
    ec2: Option<Arc<dyn Ec2Api>>,
    catalogue: Arc<InstanceCatalogue>,
    /// The policy pipeline every node's planner shares, for its readiness.
    pipeline: Arc<Pipeline>,
    registry: Arc<PluginRegistry>,
    metrics: Metrics,
    /// The nodes served now, for the kubelet API and the metrics.
    served: Arc<ServedNodes>,
    health: Arc<Health>,
    /// The interruption queue (`provider.aws.interruptionQueue`), when configured.
    interruptions: Option<Interruptions>,
    /// The cluster's id (its `kube-system` namespace's UID) when the aws provider runs.
    cluster_id: String,
    /// What each namespace's instances cost against its cap (`policy.guardrails`).
    spend: Arc<NamespaceSpend>,
}

impl Orca {
    /// # Errors
    /// [`StartError`] naming the part that could not be built.
    pub async fn new(config: Config, client: kube::Client) -> Result<Orca, StartError> {
        Self::build(config, client, None).await
    }

    /// An orca whose aws provider talks to `ec2` instead of the SDK client (a model of EC2 in
    /// tests); everything else is as [`Orca::new`] builds it.
    ///
    /// # Errors
    /// As [`Orca::new`].
    pub async fn with_ec2(
        config: Config,
        client: kube::Client,
        ec2: Arc<dyn Ec2Api>,
    ) -> Result<Orca, StartError> {
        Self::build(config, client, Some(ec2)).await
    }

    /// Reads EC2's advance warnings from `queue` instead of the configured SQS queue (a model
    /// of the queue in tests), taking those from `account` (and `provider.region`) as this
    /// orca's.
    pub fn with_interruption_queue(mut self, queue: Arc<dyn NoticeQueue>, account: &str) -> Orca {
        self.interruptions = Some(Interruptions {
            queue,
            account: account.to_owned(),
        });
        self
    }

    async fn build(
        config: Config,
        client: kube::Client,
        ec2_override: Option<Arc<dyn Ec2Api>>,
    ) -> Result<Orca, StartError> {
        let (catalogue, registry) = build_registry(&config.policy, &config.provider.region)
            .map_err(StartError::PolicyFailed)?;
        let guardrails = Arc::new(guardrails(&config, &catalogue)?);
        let spend = Arc::new(NamespaceSpend::new(
            guardrails.clone(),
            config.pods.launch_visibility_grace.get(),
        ));
        let ec2_calls = Arc::new(Ec2Calls::default());
        let served = Arc::new(ServedNodes::default());
        let metrics = Metrics::new(served.clone(), ec2_calls.clone(), spend.clone());
        // Which instances are this cluster's: read before anything can list or launch one.
        let cluster_id = match config.provider.kind {
            ProviderKind::Simulated => String::new(),
            ProviderKind::Aws => read_cluster_id(&client, &config).await?,
        };
        let ec2: Option<Arc<dyn Ec2Api>> = match config.provider.kind {
            ProviderKind::Simulated => None,
            ProviderKind::Aws => {
                let aws = &config.provider.aws;
                let api: Arc<dyn Ec2Api> = match ec2_override {
                    Some(ec2) => Arc::new(RateLimited::new(
                        Measured::new(ec2, metrics.ec2.clone()),
                        aws.rate_limit,
                    )),
                    None => {
                        let sdk = SdkEc2::connect(
                            &config.provider.region,
                            aws.endpoint_url.as_deref(),
                            ec2_calls.clone(),
                        )
                        .await;
                        Arc::new(RateLimited::new(
                            Measured::new(sdk, metrics.ec2.clone()),
                            aws.rate_limit,
                        ))
                    }
                };
                Some(api)
            }
        };
        tracing::info!(
            types = catalogue.len(),
            region = catalogue.region(),
            prices_from = catalogue.price_region(),
            sources = catalogue.sources(),
            "instance-type catalogue loaded"
        );
        let declared = config.declared_nodes();
        let pipeline = Pipeline::new(
            registry.clone(),
            HookChains::from_config(&config.policy),
            &declared[0].node.name,
            &config.node.cluster_name,
        )
        .with_node_architecture(&config.node.architecture)
        .with_guardrails(guardrails)
        .with_observer(metrics.policy.clone());
        let pipeline = Arc::new(pipeline);
        let several = declared.len() > 1;
        let mut nodes = Vec::with_capacity(declared.len());
        for declared in declared {
            let new_provider: ProviderFactory = match &ec2 {
                None => {
                    let settings = simulated_settings(&config, &declared, several);
                    Box::new(move || {
                        Ok(Arc::new(
                            SimulatedProvider::new(settings.clone())
                                .map_err(StartError::SimulatedProviderFailed)?,
                        ) as Arc<dyn Provider>)
                    })
                }
                Some(api) => {
                    let mut aws = config.provider.aws.clone();
                    aws.subnet_ids.clone_from(&declared.subnet_ids);
                    let api = api.clone();
                    let identity = Identity {
                        node: declared.node.name.clone(),
                        cluster: declared.node.cluster_name.clone(),
                        cluster_id: cluster_id.clone(),
                    };
                    let grace = config.pods.launch_visibility_grace.get();
                    Box::new(move || {
                        Ok(Arc::new(
                            AwsProvider::new(api.clone(), identity.clone(), aws.clone())
                                .with_visibility_grace(grace),
                        ) as Arc<dyn Provider>)
                    })
                }
            };
            let planner: Arc<dyn Planner> = Arc::new(Arc::new(pipeline.for_node(
                &declared.node.name,
                &declared.node.architecture,
                declared.zone.as_deref(),
            )));
            nodes.push(Arc::new(NodeRuntime {
                declared,
                planner,
                new_provider,
            }));
        }
        let interruptions = match (
            config.provider.kind,
            &config.provider.aws.interruption_queue,
        ) {
            (ProviderKind::Aws, Some(queue)) => {
                let account = crate::interruption::caller_account(&config.provider.region)
                    .await
                    .map_err(StartError::AccountFailed)?;
                tracing::info!(%account, queue = %queue.url, "interruption notices are acted on only from this account and provider.region");
                let queue: Arc<dyn NoticeQueue> = Arc::new(
                    SqsQueue::connect(
                        &queue.url,
                        &config.provider.region,
                        queue.endpoint_url.as_deref(),
                    )
                    .await,
                );
                Some(Interruptions { queue, account })
            }
            _ => None,
        };
        Ok(Orca {
            spend,
            cluster_id,
            interruptions,
            config,
            client,
            nodes,
            ec2,
            catalogue,
            pipeline,
            registry,
            metrics,
            health: Arc::new(Health::new(served.clone())),
            served,
        })
    }

    /// Runs until `shutdown` is cancelled, then waits up to the shutdown grace period for the
    /// controllers to finish their current steps. Pods, instances, the Nodes and their Leases
    /// stay: the next start adopts them.
    ///
    /// # Errors
    /// [`StartError::NodeFailed`] for a bad node skeleton.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), StartError> {
        let (policy_ready, policy_ready_rx) = tokio::sync::watch::channel(true);
        // One consumer for the queue: each notice goes to the node whose instance it names.
        let notice_sinks = self.interruptions.as_ref().map(|_| {
            Arc::new(if self.config.replicas.share_nodes {
                NodeSinks::sharing(self.nodes.len())
            } else {
                NodeSinks::default()
            })
        });
        let shared = SharedParts {
            client: self.client.clone(),
            pods: self.config.pods.clone(),
            reconcile_metrics: self.metrics.reconcile.clone(),
            lease_metrics: self.metrics.lease.clone(),
            serving_metrics: self.metrics.serving.clone(),
            health: self.health.clone(),
            served: self.served.clone(),
            notice_sinks: notice_sinks.clone(),
            policy_ready: policy_ready_rx,
            pod_writes: Arc::default(),
            spend: self.spend.clone(),
        };
        // Every node's provider and skeleton are checked before anything runs.
        let mut first_parts = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let provider = (node.new_provider)()?;
            let controller = node
                .node_controller(&provider, &shared)
                .map_err(StartError::NodeFailed)?;
            first_parts.push((provider, controller));
        }
        let metrics_address =
            std::net::SocketAddr::new(self.config.metrics.bind_address, self.config.metrics.port);
        let metrics_task = crate::metrics::server::serve(
            metrics_address,
            self.metrics.registry(),
            self.health.clone(),
            shutdown.clone(),
        )
        .await
        .map_err(|source| StartError::ListenFailed {
            address: metrics_address,
            field: "metrics.port",
            source,
        })?;
        let kubelet_api_task = self.spawn_kubelet_api(&shutdown);
        let refresh = self.config.provider.aws.catalogue_refresh.get();
        // Instances of this cluster under node names no node here declares (a renamed
        // node): terminated once their pods are gone.
        let sweep_task = self.ec2.as_ref().map(|api| {
            let sweep = StraySweep {
                api: api.clone(),
                pods: Arc::new(ApiPodPresence(self.client.clone())),
                cluster_id: self.cluster_id.clone(),
                declared: self
                    .nodes
                    .iter()
                    .map(|node| node.name().to_owned())
                    .collect(),
                grace: self.config.pods.orphan_grace_period.get(),
            };
            tokio::spawn(sweep.run(shutdown.clone()))
        });
        // The cluster's live instances, listed for the namespaces' caps.
        let census_task = self.spend.caps_namespaces().then(|| {
            let census: Arc<dyn Census> = match &self.ec2 {
                Some(api) => Arc::new(crate::provider::aws::census::Ec2Census {
                    api: api.clone(),
                    cluster_id: self.cluster_id.clone(),
                }),
                None => Arc::new(ServedCensus(self.served.clone())),
            };
            let census = CensusLoop {
                census,
                spend: self.spend.clone(),
                catalogue: self.catalogue.clone(),
                period: self.config.pods.sync_interval.get(),
            };
            tokio::spawn(census.run(shutdown.clone()))
        });
        if let Some(api) = &self.ec2
            && !refresh.is_zero()
        {
            catalogue_refresh::spawn(
                api.clone(),
                self.catalogue.clone(),
                refresh,
                shutdown.clone(),
            );
        }
        let mut reporters: Vec<Arc<dyn ReloadReporter>> = vec![
            Arc::new(PolicyReadiness {
                pipeline: self.pipeline.clone(),
                health: self.health.clone(),
                ready: policy_ready,
            }),
            self.metrics.policy.clone(),
        ];
        for node in &self.nodes {
            reporters.push(Arc::new(NodePluginEvents::spawn(
                self.client.clone(),
                &node.declared.node.name,
            )));
        }
        let reporter: Arc<dyn ReloadReporter> = Arc::new(Reporters(reporters));
        reporter.rescanned(&self.registry.current());
        // Detached: it ends by itself once every embedded plugin has loaded, or at shutdown.
        let _ =
            reload::spawn_embedded_retry(self.registry.clone(), reporter.clone(), shutdown.clone());
        if !self.config.policy.plugins.is_empty() {
            let registry = &self.config.policy.registry;
            // Beside the compiled plugins: a restart while the registry is unreachable
            // serves the last verified versions.
            let store = self
                .config
                .policy
                .compile_cache_dir()
                .map(|d| d.join("pulled"));
            let mut puller = crate::policy::oci::Puller::new(
                registry.ca_file.as_deref(),
                registry.docker_config.clone(),
                store.as_deref(),
                crate::policy::oci::PullLimits::of(registry),
            )
            .map_err(|e| StartError::PluginRegistryFailed(e.to_string()))?;
            // Checked when the config was loaded; read again here, where it is used.
            let trust = crate::policy::oci::TrustPolicy::from_config(registry)
                .map_err(|error| StartError::PluginRegistryFailed(error.to_string()))?;
            if !trust.is_empty() {
                let verifier = crate::policy::oci::SignatureVerifier::new(
                    trust,
                    puller.client().clone(),
                    registry.ca_file.as_deref(),
                )
                .map_err(|e| StartError::PluginRegistryFailed(e.to_string()))?;
                puller = puller.with_verifier(verifier);
            }
            let references = self
                .config
                .policy
                .plugins
                .iter()
                .filter_map(|text| crate::policy::oci::PluginReference::parse(text).ok())
                .collect();
            // Detached: it ends at shutdown. Pods whose chains name a plugin not pulled yet
            // wait for it, as for a plugin not yet in the plugins directory.
            drop(crate::policy::oci::spawn_refresh(
                Arc::new(puller),
                self.registry.clone(),
                references,
                crate::policy::oci::RefreshSettings {
                    interval: registry.refresh_interval.get(),
                    pull_timeout: registry.pull_timeout.get(),
                },
                reporter.clone(),
                shutdown.clone(),
            ));
        }
        let watch_task = match &self.config.policy.plugins_dir {
            Some(dir) => {
                // Plugins on disk serve from the first pod on.
                reload::rescan_and_report(&self.registry, dir, reporter.as_ref());
                Some(
                    reload::spawn_watcher(
                        self.registry.clone(),
                        dir.clone(),
                        self.config.policy.reload_debounce.get(),
                        reporter,
                        shutdown.clone(),
                    )
                    .map_err(|source| StartError::PluginWatchFailed {
                        dir: dir.display().to_string(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        if let (Some(interruptions), Some(sinks), Some(api)) =
            (&self.interruptions, &notice_sinks, &self.ec2)
        {
            let parts = ConsumerParts {
                queue: interruptions.queue.clone(),
                sink: sinks.clone(),
                owners: Arc::new(Ec2Owners {
                    api: api.clone(),
                    this: ThisOrca {
                        cluster_id: self.cluster_id.clone(),
                        nodes: self
                            .nodes
                            .iter()
                            .map(|node| node.name().to_owned())
                            .collect(),
                        grace: jiff::SignedDuration::try_from(
                            self.config.pods.launch_visibility_grace.get(),
                        )
                        .unwrap_or(jiff::SignedDuration::MAX),
                    },
                }),
                origin: Origin {
                    account: interruptions.account.clone(),
                    region: self.config.provider.region.clone(),
                },
                metrics: self.metrics.interruption.clone(),
            };
            tokio::spawn(crate::interruption::consume(
                parts,
                shutdown.clone().cancelled_owned(),
            ));
        }
        // Every declared node's pods are watched from the start, served here or not, so a
        // takeover finds them listed.
        let node_pods: Vec<Arc<NodePods>> = self
            .nodes
            .iter()
            .map(|node| {
                let pods = NodePods::start(self.client.clone(), node.name(), shutdown.clone());
                self.served.watching(node.name(), pods.store());
                pods
            })
            .collect();
        // Each node's serving (or, sharing, its Lease loop), by node; each ends only at
        // shutdown, or by itself when something failed.
        let mut tasks: Vec<(String, ServingTask, JoinHandle<TurnEnd>)> = Vec::new();
        let mut lease_watch = None;
        if self.config.replicas.share_nodes {
            let (sharing, watch) =
                NodeSharing::start(self.client.clone(), &self.config.replicas, shutdown.clone());
            lease_watch = Some(watch);
            let sharing = Arc::new(sharing);
            for (node, pods) in self.nodes.iter().zip(node_pods) {
                let share =
                    sharing
                        .clone()
                        .share(node.clone(), pods, shared.clone(), shutdown.clone());
                tasks.push((
                    node.name().to_owned(),
                    ServingTask::LeaseLoop,
                    tokio::spawn(async move {
                        share.await;
                        TurnEnd::Stopped
                    }),
                ));
            }
        } else {
            for ((node, (provider, controller)), pods) in
                self.nodes.iter().zip(first_parts).zip(node_pods)
            {
                let (node, shared, stop) = (node.clone(), shared.clone(), shutdown.clone());
                let name = node.name().to_owned();
                tasks.push((
                    name,
                    ServingTask::Turn,
                    tokio::spawn(async move {
                        node.serve(
                            provider,
                            controller,
                            pods,
                            &shared,
                            stop,
                            Tenure::unlimited(),
                        )
                        .await
                    }),
                ));
            }
        }
        // A node whose serving ended by itself ends the process (non-zero: it is restarted),
        // rather than stay registered with nothing serving it.
        let mut running: futures::stream::FuturesUnordered<_> = tasks
            .into_iter()
            .map(|(node, task, handle)| async move { (node, task, handle.await) })
            .collect();
        let failed = tokio::select! {
            () = shutdown.cancelled() => None,
            Some((node, task, joined)) = running.next() => {
                let end = turn::end_of(task, joined.map(Ok), shutdown.is_cancelled());
                (end != TurnEnd::Stopped).then_some((node, end))
            }
        };
        if let Some((node, end)) = &failed {
            crate::node_runtime::report_end(&self.metrics.serving, node, *end);
            tracing::error!(%node, reason = %end, "serving a node ended by itself; shutting down to be restarted");
            shutdown.cancel();
        }
        let grace = self.config.pods.shutdown_grace_period.get();
        // A kubelet API that could not start ended the run: report why, as a startup error.
        if kubelet_api_task.is_finished()
            && let Ok(Err(error)) = kubelet_api_task.await
        {
            return Err(StartError::KubeletApiFailed(error));
        }
        let drained = tokio::time::timeout(grace, async {
            while let Some((node, task, joined)) = running.next().await {
                let end = turn::end_of(task, joined.map(Ok), true);
                if end != TurnEnd::Stopped {
                    crate::node_runtime::report_end(&self.metrics.serving, &node, end);
                }
            }
            if let Some(watch) = lease_watch
                && let Err(error) = watch.await
            {
                tracing::error!(%error, "the watch on the node Leases ended abnormally");
            }
            if let Some(watch_task) = watch_task {
                let _ = watch_task.await;
            }
            if let Some(sweep_task) = sweep_task
                && let Err(error) = sweep_task.await
            {
                tracing::error!(%error, "the sweep for instances of undeclared nodes ended abnormally");
            }
            if let Some(census_task) = census_task
                && let Err(error) = census_task.await
            {
                tracing::error!(%error, "listing the cluster's instances for the namespaces' caps ended abnormally");
            }
            let _ = metrics_task.await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                ?grace,
                "shutdown grace period elapsed with work in flight; exiting anyway"
            );
        }
        match failed {
            Some((node, reason)) => Err(StartError::ServingEnded { node, reason }),
            None => Ok(()),
        }
    }
}

/// The interruption queue and the account whose notices count.
struct Interruptions {
    queue: Arc<dyn NoticeQueue>,
    /// The account this orca's instances live in.
    account: String,
}

/// `policy.guardrails`, checked against the catalogue: a guardrail no type can satisfy stops
/// startup; an allow or deny glob that matches no type is logged.
fn guardrails(config: &Config, catalogue: &InstanceCatalogue) -> Result<Guardrails, StartError> {
    let guardrails = Guardrails::from_config(&config.policy.guardrails);
    let types: Vec<(String, Option<Price>)> = catalogue
        .query(&any_query())
        .into_iter()
        .map(|t| (t.name, Price::of(t.on_demand_price)))
        .collect();
    for warning in guardrails
        .check_catalogue(&types)
        .map_err(StartError::GuardrailsFailed)?
    {
        tracing::warn!(%warning, "a guardrail glob matches nothing");
    }
    Ok(guardrails)
}

/// The cluster's identity, with a word on names left at the shipped placeholders.
async fn read_cluster_id(client: &kube::Client, config: &Config) -> Result<String, StartError> {
    let cluster_id = crate::provider::ownership::read_cluster_id(client)
        .await
        .map_err(StartError::ClusterIdFailed)?;
    tracing::info!(%cluster_id, cluster = %config.node.cluster_name, "this cluster's instances are tagged and listed by orca.research/cluster-id, the UID of its kube-system namespace");
    let mut placeholders: Vec<String> = config
        .declared_nodes()
        .iter()
        .filter(|declared| PLACEHOLDER_NAMES.contains(&declared.node.name.as_str()))
        .map(|declared| format!("node.name {:?}", declared.node.name))
        .collect();
    if PLACEHOLDER_NAMES.contains(&config.node.cluster_name.as_str()) {
        placeholders.push(format!("node.clusterName {:?}", config.node.cluster_name));
    }
    if !placeholders.is_empty() {
        tracing::warn!(
            placeholders = %placeholders.join(", "),
            %cluster_id,
            "left at the shipped placeholder: instances are still told apart from other clusters' by the cluster's id, but the tags orca.research/node and orca.research/cluster (and EC2's console and bill) will not say which cluster and node an instance serves; set node.clusterName (and node.name) to names of your own"
        );
    }
    Ok(cluster_id)
}

/// The simulated provider's settings for one node. Several nodes keep separate journals
/// (`<stateFile>-<node>`), since each node adopts only its own instances.
fn simulated_settings(config: &Config, node: &DeclaredNode, several: bool) -> SimulatedConfig {
    let mut settings = config.provider.simulated.clone();
    if several && let Some(file) = &settings.state_file {
        let mut name = file.file_name().unwrap_or_default().to_os_string();
        name.push(format!("-{}", node.node.name));
        settings.state_file = Some(file.with_file_name(name));
    }
    settings
}

impl Orca {
    /// Starts the kubelet API in its own task: with `csr` as the only TLS source it waits for
    /// the certificate's approval, which must not hold up the node and pods. If it cannot
    /// start at all (bad certificate files, port taken), orca shuts down with the reason.
    fn spawn_kubelet_api(
        &self,
        shutdown: &CancellationToken,
    ) -> tokio::task::JoinHandle<Result<(), crate::kubelet_api::KubeletApiError>> {
        let deps = crate::kubelet_api::KubeletApiDeps {
            client: self.client.clone(),
            config: self.config.kubelet_api.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|node| node.declared.node.clone())
                .collect(),
            served: self.served.clone(),
            metrics: self.metrics.kubelet_api.clone(),
        };
        let health = self.health.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            match crate::kubelet_api::start(deps, shutdown.clone()).await {
                Ok(serving) => {
                    health.kubelet_api_serving();
                    let _ = serving.await;
                    Ok(())
                }
                Err(error) => {
                    tracing::error!(error = %crate::errors::error_chain(&error), "kubelet API failed to start; shutting down");
                    shutdown.cancel();
                    Err(error)
                }
            }
        })
    }
}

/// Cancels the returned token on the first SIGTERM or SIGINT.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; shutting down"),
            () = terminate => tracing::info!("SIGTERM received; shutting down"),
        }
        cancel.cancel();
    });
    token
}
