//! The parts of the process, wired once: the policy (catalogue, registry, pipeline and
//! guardrails), the EC2 API, the metrics, each declared node's runtime and the interruption
//! queue. Everything costly is built here, before anything runs.

use std::sync::Arc;

use super::error::StartError;
use super::health::Health;
use super::node::{NodeRuntime, ProviderFactory};
use super::served_nodes::ServedNodes;
use crate::cluster::apiserver::ServerSchema;
use crate::config::{Config, DeclaredNode, ProviderKind, SimulatedConfig};
use crate::interruption::{NoticeQueue, SqsQueue};
use crate::metrics::Metrics;
use crate::policy::catalogue::InstanceCatalogue;
use crate::policy::guardrails::Guardrails;
use crate::policy::pipeline::HookChains;
use crate::policy::registry::PluginRegistry;
use crate::policy::setup::build_serving_registry;
use crate::policy::shadow::ShadowSpec;
use crate::policy::{Pipeline, Planner};
use crate::process::pod_usage::PodUsages;
use crate::provider::Provider;
use crate::provider::aws::api::Ec2Api;
use crate::provider::aws::exec::SsmApi;
use crate::provider::aws::exec::sdk::SdkSsm;
use crate::provider::aws::logs::LogsApi;
use crate::provider::aws::logs::sdk::SdkLogs;
use crate::provider::aws::sdk::SdkEc2;
use crate::provider::aws::usage::CloudWatchApi;
use crate::provider::aws::usage::sdk::SdkCloudWatch;
use crate::provider::aws::{AwsProvider, Ec2Calls, Identity, Measured, RateLimited};
use crate::provider::ownership::PLACEHOLDER_NAMES;
use crate::provider::simulated::SimulatedProvider;
use crate::spend::NamespaceSpend;

/// Everything the process runs with, built once.
pub struct Parts {
    pub config: Config,
    pub client: kube::Client,
    /// Every declared node (`nodes:`, or `node:` alone), in order.
    pub nodes: Vec<Arc<NodeRuntime>>,
    /// The EC2 API when the aws provider runs: the catalogue refresh uses it too.
    pub ec2: Option<Arc<dyn Ec2Api>>,
    pub catalogue: Arc<InstanceCatalogue>,
    /// The policy pipeline every node's planner shares, for its readiness.
    pub pipeline: Arc<Pipeline>,
    pub registry: Arc<PluginRegistry>,
    pub metrics: Metrics,
    /// The nodes served now, for the kubelet API and the metrics.
    pub served: Arc<ServedNodes>,
    /// The served pods' usage as last read, for the kubelet API and the metrics.
    pub usages: Arc<PodUsages>,
    pub health: Arc<Health>,
    /// The interruption queue (`provider.aws.interruptionQueue`), when configured.
    pub interruptions: Option<Interruptions>,
    /// The cluster's id (its `kube-system` namespace's UID) when the aws provider runs.
    pub cluster_id: String,
    /// What each namespace's instances cost against its cap (`policy.guardrails`).
    pub spend: Arc<NamespaceSpend>,
    /// What launched instances cost an hour (the cost loop keeps the spot pools' prices).
    pub prices: Arc<crate::cost::LaunchPrices>,
    /// What orca knows of the apiserver's release and schema (learned in `run`).
    pub schema: Arc<ServerSchema>,
}

/// The interruption queue and the account whose notices count.
pub struct Interruptions {
    pub queue: Arc<dyn NoticeQueue>,
    /// The account this orca's instances live in.
    pub account: String,
}

impl Parts {
    /// Builds every part from `config`; the aws provider talks to `ec2_override` when given
    /// (a model of EC2 in tests), else to the SDK client.
    ///
    /// # Errors
    /// [`StartError`] naming the part that could not be built.
    pub async fn build(
        config: Config,
        client: kube::Client,
        ec2_override: Option<Arc<dyn Ec2Api>>,
    ) -> Result<Parts, StartError> {
        let (catalogue, registry) = build_serving_registry(&config.policy, &config.provider.region)
            .map_err(StartError::PolicyFailed)?;
        let (guardrails, warnings) = crate::policy::guardrails::catalogue::checked_against(
            &config.policy.guardrails,
            &catalogue,
        )
        .map_err(StartError::GuardrailsFailed)?;
        for warning in warnings {
            tracing::warn!(%warning, "a guardrail glob matches nothing");
        }
        let guardrails = Arc::new(guardrails);
        let spend = Arc::new(NamespaceSpend::new(
            guardrails.clone(),
            config.pods.launch_visibility_grace.get(),
        ));
        let ec2_calls = Arc::new(Ec2Calls::default());
        let served = Arc::new(ServedNodes::default());
        let usages = Arc::new(PodUsages::default());
        let metrics = Metrics::new(
            served.clone(),
            ec2_calls.clone(),
            spend.clone(),
            usages.clone(),
        );
        // Which instances are this cluster's: read before anything can list or launch one.
        let cluster_id = match config.provider.kind {
            ProviderKind::Simulated => String::new(),
            ProviderKind::Aws => read_cluster_id(&client, &config).await?,
        };
        let ec2 = match config.provider.kind {
            ProviderKind::Simulated => None,
            ProviderKind::Aws => Some(ec2_api(&config, &metrics, ec2_calls, ec2_override).await),
        };
        tracing::info!(
            types = catalogue.len(),
            region = catalogue.region(),
            prices_from = catalogue.price_region(),
            sources = catalogue.sources(),
            "instance-type catalogue loaded"
        );
        let pipeline = Arc::new(pipeline(&config, &registry, guardrails, &metrics));
        let clients = SharedClients {
            logs: shipped_logs(&config).await?,
            usage: published_usage(&config).await,
            ssm: exec_ssm(&config).await,
        };
        let nodes = node_runtimes(&config, &pipeline, ec2.as_ref(), &cluster_id, &clients);
        let interruptions = interruptions(&config).await?;
        Ok(Parts {
            schema: Arc::new(ServerSchema::new(client.clone(), metrics.apiserver.clone())),
            spend,
            prices: Arc::new(crate::cost::LaunchPrices::new(catalogue.clone())),
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
            usages,
        })
    }
}

/// The EC2 API the aws provider, the catalogue refresh and the sweeps use: rate-limited and
/// measured, over `ec2_override` or the SDK client.
async fn ec2_api(
    config: &Config,
    metrics: &Metrics,
    ec2_calls: Arc<Ec2Calls>,
    ec2_override: Option<Arc<dyn Ec2Api>>,
) -> Arc<dyn Ec2Api> {
    let aws = &config.provider.aws;
    match ec2_override {
        Some(ec2) => Arc::new(RateLimited::new(
            Measured::new(ec2, metrics.ec2.clone()),
            aws.rate_limit,
        )),
        None => {
            let sdk = SdkEc2::connect(
                &config.provider.region,
                aws.endpoint_url.as_deref(),
                ec2_calls,
            )
            .await;
            Arc::new(RateLimited::new(
                Measured::new(sdk, metrics.ec2.clone()),
                aws.rate_limit,
            ))
        }
    }
}

/// The policy pipeline every node's planner shares.
fn pipeline(
    config: &Config,
    registry: &Arc<PluginRegistry>,
    guardrails: Arc<Guardrails>,
    metrics: &Metrics,
) -> Pipeline {
    let declared = config.declared_nodes();
    Pipeline::new(
        registry.clone(),
        HookChains::from_config(&config.policy),
        &declared[0].node.name,
        &config.node.cluster_name,
    )
    .with_node_architecture(&config.node.architecture)
    .with_guardrails(guardrails)
    .with_observer(metrics.policy.clone())
    .with_shadow(config.policy.shadow.as_ref().map(ShadowSpec::from))
}

/// Each declared node's runtime: its provider factory and its planner.
fn node_runtimes(
    config: &Config,
    pipeline: &Arc<Pipeline>,
    ec2: Option<&Arc<dyn Ec2Api>>,
    cluster_id: &str,
    clients: &SharedClients,
) -> Vec<Arc<NodeRuntime>> {
    let declared = config.declared_nodes();
    let several = declared.len() > 1;
    declared
        .into_iter()
        .map(|declared| {
            let new_provider = match ec2 {
                None => simulated_factory(simulated_settings(config, &declared, several)),
                Some(api) => {
                    aws_factory(config, &declared, api.clone(), cluster_id, clients.clone())
                }
            };
            let planner: Arc<dyn Planner> = Arc::new(Arc::new(pipeline.for_node(
                &declared.node.name,
                &declared.node.architecture,
                declared.zone.as_deref(),
            )));
            Arc::new(NodeRuntime {
                declared,
                planner,
                new_provider,
            })
        })
        .collect()
}

/// A fresh simulated provider per turn, with `settings`.
fn simulated_factory(settings: SimulatedConfig) -> ProviderFactory {
    Box::new(move || {
        Ok(Arc::new(
            SimulatedProvider::new(settings.clone())
                .map_err(super::node::ProviderStartError::Simulated)?,
        ) as Arc<dyn Provider>)
    })
}

/// A fresh aws provider per turn, for `declared` (its subnets and identity tags).
fn aws_factory(
    config: &Config,
    declared: &DeclaredNode,
    api: Arc<dyn Ec2Api>,
    cluster_id: &str,
    clients: SharedClients,
) -> ProviderFactory {
    let mut aws = config.provider.aws.clone();
    aws.subnet_ids.clone_from(&declared.subnet_ids);
    let identity = Identity {
        node: declared.node.name.clone(),
        cluster: declared.node.cluster_name.clone(),
        cluster_id: cluster_id.to_owned(),
    };
    let grace = config.pods.launch_visibility_grace.get();
    Box::new(move || {
        let mut provider = AwsProvider::new(api.clone(), identity.clone(), aws.clone())
            .with_visibility_grace(grace);
        if let (Some(api), Some(shipped)) = (&clients.logs, &aws.logs) {
            provider = provider.with_logs(api.clone(), &shipped.group);
        }
        if let (Some(api), Some(metrics)) = (&clients.usage, &aws.metrics) {
            provider = provider.with_usage(api.clone(), metrics);
        }
        if let Some(api) = &clients.ssm {
            provider = provider.with_exec(api.clone());
        }
        Ok(Arc::new(provider) as Arc<dyn Provider>)
    })
}

/// The AWS clients (besides EC2) every node's aws provider shares.
#[derive(Clone, Default)]
struct SharedClients {
    /// With `provider.aws.logs`: containers' output.
    logs: Option<Arc<dyn LogsApi>>,
    /// With `provider.aws.metrics`: the pods' usage.
    usage: Option<Arc<dyn CloudWatchApi>>,
    /// With `provider.aws.exec.enabled`: Systems Manager, for `kubectl exec`.
    ssm: Option<Arc<dyn SsmApi>>,
}

/// CloudWatch, when the aws provider's instances publish the pods' usage there
/// (`provider.aws.metrics`).
async fn published_usage(config: &Config) -> Option<Arc<dyn CloudWatchApi>> {
    let (ProviderKind::Aws, Some(metrics)) = (config.provider.kind, &config.provider.aws.metrics)
    else {
        return None;
    };
    tracing::info!(
        namespace = %metrics.namespace,
        interval = %metrics.interval,
        "the pods' usage is read from CloudWatch"
    );
    Some(Arc::new(
        SdkCloudWatch::connect(&config.provider.region, metrics.endpoint_url.as_deref()).await,
    ))
}

/// Systems Manager, when the aws provider runs `kubectl exec` (`provider.aws.exec`).
async fn exec_ssm(config: &Config) -> Option<Arc<dyn SsmApi>> {
    let exec = &config.provider.aws.exec;
    if config.provider.kind != ProviderKind::Aws || !exec.enabled {
        return None;
    }
    Some(Arc::new(
        SdkSsm::connect(&config.provider.region, exec.endpoint_url.as_deref()).await,
    ))
}

/// CloudWatch Logs, when the aws provider ships containers' output there
/// (`provider.aws.logs`): its group made ready before any pod launches.
async fn shipped_logs(config: &Config) -> Result<Option<Arc<dyn LogsApi>>, StartError> {
    let (ProviderKind::Aws, Some(logs)) = (config.provider.kind, &config.provider.aws.logs) else {
        return Ok(None);
    };
    let api: Arc<dyn LogsApi> =
        Arc::new(SdkLogs::connect(&config.provider.region, logs.endpoint_url.as_deref()).await);
    let ready = crate::provider::aws::logs::group::ensure(api.as_ref(), logs)
        .await
        .map_err(StartError::LogGroupFailed)?;
    tracing::info!(group = %logs.group, ?ready, "containers' output goes to CloudWatch Logs");
    Ok(Some(api))
}

/// The interruption queue, when the aws provider runs with one configured, and the account
/// whose notices count.
async fn interruptions(config: &Config) -> Result<Option<Interruptions>, StartError> {
    let (ProviderKind::Aws, Some(queue)) = (
        config.provider.kind,
        &config.provider.aws.interruption_queue,
    ) else {
        return Ok(None);
    };
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
    Ok(Some(Interruptions { queue, account }))
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
