//! What `eval` and `bench` read: the pipeline their arguments describe, built as the node
//! builds it, and the pod they ask about.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::PluginCommandError;
use crate::config::{
    Config, DEFAULT_MARKET, DEFAULT_SELECTOR, DEFAULT_TAGGER, Instances, OnError, PolicyConfig,
};
use crate::policy::Pipeline;
use crate::policy::catalogue::InstanceCatalogue;
use crate::policy::pipeline::{ChainStep, HookChains};
use crate::policy::registry::PluginRegistry;
use crate::policy::reload::{self, Reporters};
use crate::policy::setup::build_registry_for;
use crate::policy::wasm::Hook;
use crate::process::cli::PipelineArgs;

/// The node and cluster names decisions are made for outside a cluster.
pub(super) const NODE_NAME: &str = "orca-aws-node";
pub(super) const CLUSTER_NAME: &str = "kubernetes";
const DEFAULT_REGION: &str = "us-east-1";
const DEFAULT_ARCHITECTURE: &str = "amd64";

/// The pipeline `args` describe: a config.yaml's chains (`--config`), or the embedded
/// defaults with `args.plugin` (if any) asked first, with `args.settings`, for the hooks it
/// implements.
pub(super) fn pipeline(
    args: &PipelineArgs,
) -> Result<(Pipeline, Arc<InstanceCatalogue>), PluginCommandError> {
    match &args.config {
        Some(path) => configured_pipeline(args, path),
        None => plugin_pipeline(args),
    }
}

fn plugin_pipeline(
    args: &PipelineArgs,
) -> Result<(Pipeline, Arc<InstanceCatalogue>), PluginCommandError> {
    serde_json::from_str::<serde_json::Value>(&args.settings)
        .map_err(PluginCommandError::SettingsNotJson)?;
    let mut policy = PolicyConfig::default();
    if args.instances.as_deref() == Some("reused") {
        policy.limits.instances = Instances::Reused;
    }
    if let Some(max_memory) = &args.max_memory {
        policy.limits.max_memory = max_memory.clone();
        policy.validate().map_err(PluginCommandError::MaxMemory)?;
    }
    let region = args.region.as_deref().unwrap_or(DEFAULT_REGION);
    let (catalogue, registry) = registry(&policy, region, usize::from(args.plugin.is_some()))?;
    let mut chains = HookChains::single(DEFAULT_SELECTOR, DEFAULT_MARKET, DEFAULT_TAGGER);
    if let Some(file) = &args.plugin {
        let plugin = registry.load_file(file)?;
        // The plugin first, the default after it: what a declined pod falls through to in a
        // typical deployment. Every failure of the plugin fails the pod, so it shows.
        let step = ChainStep {
            plugin: plugin.plugin.name.clone(),
            settings: args.settings.clone(),
            on_error: OnError::FAIL,
        };
        for (hook, chain) in [
            (Hook::SelectInstance, &mut chains.select_instance),
            (Hook::ChooseMarket, &mut chains.choose_market),
            (Hook::BuildTags, &mut chains.build_tags),
        ] {
            if plugin.implements(hook) && plugin.plugin.name != chain[0].plugin {
                chain.insert(0, step.clone());
            }
        }
    }
    let architecture = args.architecture.as_deref().unwrap_or(DEFAULT_ARCHITECTURE);
    let pipeline = Pipeline::new(registry, chains, NODE_NAME, CLUSTER_NAME)
        .with_node_architecture(architecture);
    Ok((pipeline, catalogue))
}

/// The policy a node with this config.yaml would run: its chains, limits, plugins directory
/// (scanned once, each refused file reported) and guardrails, for its node and region.
fn configured_pipeline(
    args: &PipelineArgs,
    path: &Path,
) -> Result<(Pipeline, Arc<InstanceCatalogue>), PluginCommandError> {
    let config = Config::load(path)?;
    let region = args.region.as_deref().unwrap_or(&config.provider.region);
    let (catalogue, registry) = registry(&config.policy, region, 0)?;
    if let Some(dir) = &config.policy.plugins_dir {
        // Logged as a node logs a rescan (plugin loaded, rejected, shadowed); no one else
        // needs to hear of it.
        reload::rescan_and_report(&registry, dir, &Reporters(Vec::new()));
    }
    let architecture = args
        .architecture
        .as_deref()
        .unwrap_or(&config.node.architecture);
    let (guardrails, warnings) = crate::policy::guardrails::catalogue::checked_against(
        &config.policy.guardrails,
        &catalogue,
    )
    .map_err(PluginCommandError::Guardrails)?;
    for warning in warnings {
        eprintln!("orca: {warning}");
    }
    let pipeline = Pipeline::new(
        registry,
        HookChains::from_config(&config.policy),
        &config.node.name,
        &config.node.cluster_name,
    )
    .with_node_architecture(architecture)
    .with_guardrails(Arc::new(guardrails));
    Ok((pipeline, catalogue))
}

/// The catalogue and registry (embedded defaults loaded) for `policy`. Compiled plugins go
/// to the user's compile cache, so the next command (and a node run by the same user) loads
/// them in milliseconds; the author is told where.
fn registry(
    policy: &PolicyConfig,
    region: &str,
    extra_plugins: usize,
) -> Result<(Arc<InstanceCatalogue>, Arc<PluginRegistry>), PluginCommandError> {
    if let Some(dir) = policy.compile_cache_dir() {
        eprintln!("orca: compiled plugins are cached in {}", dir.display());
    }
    build_registry_for(policy, region, extra_plugins).map_err(PluginCommandError::Policy)
}

/// A pod manifest, with what the apiserver would add (uid, namespace) filled in.
pub(super) fn read_pod(path: &Path) -> Result<Pod, PluginCommandError> {
    let text = std::fs::read_to_string(path).map_err(|source| PluginCommandError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut pod: Pod =
        serde_saphyr::from_str(&text).map_err(|source| PluginCommandError::NotAPod {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
    let metadata = &mut pod.metadata;
    metadata
        .namespace
        .get_or_insert_with(|| "default".to_owned());
    metadata
        .uid
        .get_or_insert_with(|| "00000000-0000-0000-0000-000000000000".to_owned());
    if metadata.name.is_none() {
        return Err(PluginCommandError::UnnamedPod {
            path: path.to_owned(),
        });
    }
    default_requests_from_limits(&mut pod);
    Ok(pod)
}

/// What the apiserver does to every pod it admits: a container's limits stand in for the
/// requests it leaves out. A manifest read from a file has not been through it, and without
/// this a pod with only `limits: {nvidia.com/gpu: 8}` would be shown to plugins asking for no
/// GPU, unlike on the node.
fn default_requests_from_limits(pod: &mut Pod) {
    let Some(spec) = &mut pod.spec else {
        return;
    };
    let init = spec.init_containers.iter_mut().flatten();
    for container in spec.containers.iter_mut().chain(init) {
        let Some(resources) = &mut container.resources else {
            continue;
        };
        let Some(limits) = &resources.limits else {
            continue;
        };
        let requests = resources.requests.get_or_insert_with(Default::default);
        for (resource, quantity) in limits {
            requests
                .entry(resource.clone())
                .or_insert_with(|| quantity.clone());
        }
    }
}
