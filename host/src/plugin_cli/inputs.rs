//! What `eval`, `bench` and `test` read: the pipeline their arguments (or a test case)
//! describe, built as the node builds it, and the pod they ask about.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::PluginCommandError;
use crate::config::{
    Config, DEFAULT_MARKET, DEFAULT_SELECTOR, DEFAULT_TAGGER, Instances, OnError, PolicyConfig,
    ShadowConfig,
};
use crate::policy::Pipeline;
use crate::policy::catalogue::InstanceCatalogue;
use crate::policy::pipeline::{ChainStep, HookChains};
use crate::policy::registry::PluginRegistry;
use crate::policy::reload::{self, Reporters};
use crate::policy::setup::build_registry_for;
use crate::policy::shadow::ShadowSpec;
use crate::policy::wasm::Hook;
use crate::process::cli::PipelineArgs;

/// The node and cluster names decisions are made for outside a cluster.
pub(super) const NODE_NAME: &str = "orca-aws-node";
pub(super) const CLUSTER_NAME: &str = "kubernetes";
const DEFAULT_REGION: &str = "us-east-1";
const DEFAULT_ARCHITECTURE: &str = "amd64";

/// What a pipeline is built from: `eval`'s and `bench`'s flags, or a test case's plugin,
/// settings and config.
#[derive(Debug, Clone, Copy)]
pub struct PipelineSpec<'a> {
    /// A plugin component asked first (without `config`), or loaded beside the config's
    /// plugins so its chains can name it (with `config`).
    pub plugin: Option<&'a Path>,
    pub config: Option<&'a Path>,
    /// The plugin's settings as JSON (without `config`).
    pub settings: &'a str,
    pub region: Option<&'a str>,
    pub architecture: Option<&'a str>,
    /// `fresh` or `reused` (without `config`).
    pub instances: Option<&'a str>,
    /// A quantity (without `config`).
    pub max_memory: Option<&'a str>,
    /// The candidate to shadow the chains with, over the config's `policy.shadow`.
    pub shadow: Option<ShadowArgs<'a>>,
}

/// `--shadow`, `--shadow-replaces`, `--shadow-settings`.
#[derive(Debug, Clone, Copy)]
pub struct ShadowArgs<'a> {
    /// A component file, or the name of a plugin the config loads.
    pub plugin: &'a str,
    pub replaces: Option<&'a str>,
    /// JSON.
    pub settings: &'a str,
}

impl ShadowArgs<'_> {
    /// `policy.shadow` as these flags give it, naming `plugin` (the candidate's reported name).
    fn config(&self, plugin: &str) -> Result<ShadowConfig, PluginCommandError> {
        let settings = serde_json::from_str::<serde_json::Value>(self.settings)
            .map_err(PluginCommandError::ShadowSettingsNotJson)?;
        Ok(ShadowConfig {
            plugin: plugin.to_owned(),
            replaces: self.replaces.map(str::to_owned),
            settings,
            on_error: OnError::default(),
            budget: crate::config::Seconds::from_millis(500),
        })
    }

    /// Whether `plugin` names a component file rather than a loaded plugin.
    fn is_file(&self) -> bool {
        let path = Path::new(self.plugin);
        path.extension().is_some_and(|ext| ext == "wasm") || path.is_file()
    }
}

impl PipelineArgs {
    pub(super) fn spec(&self) -> PipelineSpec<'_> {
        PipelineSpec {
            plugin: self.plugin.as_deref(),
            config: self.config.as_deref(),
            settings: &self.settings,
            region: self.region.as_deref(),
            architecture: self.architecture.as_deref(),
            instances: self.instances.as_deref(),
            max_memory: self.max_memory.as_deref(),
            shadow: self.shadow.as_deref().map(|plugin| ShadowArgs {
                plugin,
                replaces: self.shadow_replaces.as_deref(),
                settings: &self.shadow_settings,
            }),
        }
    }
}

/// The pipeline `spec` describes: a config.yaml's chains (`config`), or the embedded
/// defaults with `spec.plugin` (if any) asked first, with `spec.settings`, for the hooks it
/// implements.
pub(super) fn pipeline(
    spec: &PipelineSpec,
) -> Result<(Pipeline, Arc<InstanceCatalogue>), PluginCommandError> {
    match spec.config {
        Some(path) => configured_pipeline(spec, path),
        None => plugin_pipeline(spec),
    }
}

fn plugin_pipeline(
    spec: &PipelineSpec,
) -> Result<(Pipeline, Arc<InstanceCatalogue>), PluginCommandError> {
    serde_json::from_str::<serde_json::Value>(spec.settings)
        .map_err(PluginCommandError::SettingsNotJson)?;
    let mut policy = PolicyConfig::default();
    if spec.instances == Some("reused") {
        policy.limits.instances = Instances::Reused;
    }
    if let Some(max_memory) = spec.max_memory {
        policy.limits.max_memory = max_memory.to_owned();
        policy.validate().map_err(PluginCommandError::MaxMemory)?;
    }
    let region = spec.region.unwrap_or(DEFAULT_REGION);
    // A slot of its own for the candidate, as a node would have.
    if let Some(shadow) = &spec.shadow {
        policy.shadow = Some(shadow.config(shadow.plugin)?);
    }
    let extra = usize::from(spec.plugin.is_some()) + usize::from(spec.shadow.is_some());
    let (catalogue, registry) = registry(&policy, region, extra)?;
    let mut chains = HookChains::single(DEFAULT_SELECTOR, DEFAULT_MARKET, DEFAULT_TAGGER);
    if let Some(file) = spec.plugin {
        let plugin = registry.load_file(file)?;
        // The plugin first, the default after it: what a declined pod falls through to in a
        // typical deployment. Every failure of the plugin fails the pod, so it shows.
        let step = ChainStep {
            plugin: plugin.plugin.name.clone(),
            settings: spec.settings.to_owned(),
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
    let shadow = match &spec.shadow {
        Some(shadow) => Some(shadow_spec(shadow, &registry, &chains)?),
        None => None,
    };
    let architecture = spec.architecture.unwrap_or(DEFAULT_ARCHITECTURE);
    let pipeline = Pipeline::new(registry, chains, NODE_NAME, CLUSTER_NAME)
        .with_node_architecture(architecture)
        .with_shadow(shadow);
    Ok((pipeline, catalogue))
}

/// The policy a node with this config.yaml would run: its chains, limits, plugins directory
/// (scanned once, each refused file reported) and guardrails, for its node and region; with
/// `spec.plugin` loaded after the directory, so the chains can name it (it overrides a file
/// of the same name there).
fn configured_pipeline(
    spec: &PipelineSpec,
    path: &Path,
) -> Result<(Pipeline, Arc<InstanceCatalogue>), PluginCommandError> {
    let mut config = Config::load(path)?;
    let region = spec.region.unwrap_or(&config.provider.region).to_owned();
    if let Some(shadow) = &spec.shadow {
        config.policy.shadow = Some(shadow.config(shadow.plugin)?);
    }
    let extra = usize::from(spec.plugin.is_some()) + usize::from(spec.shadow.is_some());
    let (catalogue, registry) = registry(&config.policy, &region, extra)?;
    if let Some(dir) = &config.policy.plugins_dir {
        // Logged as a node logs a rescan (plugin loaded, rejected, shadowed); no one else
        // needs to hear of it.
        reload::rescan_and_report(&registry, dir, &Reporters(Vec::new()));
    }
    if let Some(file) = spec.plugin {
        registry.load_file(file)?;
    }
    let architecture = spec.architecture.unwrap_or(&config.node.architecture);
    let (guardrails, warnings) = crate::policy::guardrails::catalogue::checked_against(
        &config.policy.guardrails,
        &catalogue,
    )
    .map_err(PluginCommandError::Guardrails)?;
    for warning in warnings {
        eprintln!("orca: {warning}");
    }
    let chains = HookChains::from_config(&config.policy);
    let shadow = match &spec.shadow {
        Some(shadow) => Some(shadow_spec(shadow, &registry, &chains)?),
        None => config.policy.shadow.as_ref().map(ShadowSpec::from),
    };
    let pipeline = Pipeline::new(
        registry,
        chains,
        &config.node.name,
        &config.node.cluster_name,
    )
    .with_node_architecture(architecture)
    .with_guardrails(Arc::new(guardrails));
    let pipeline = pipeline.with_shadow(shadow);
    Ok((pipeline, catalogue))
}

/// The candidate `--shadow` names: a component file, loaded into `registry`, or a plugin
/// loaded already; `--shadow-replaces` must name a plugin of `chains`.
fn shadow_spec(
    shadow: &ShadowArgs,
    registry: &PluginRegistry,
    chains: &HookChains,
) -> Result<ShadowSpec, PluginCommandError> {
    let name = if shadow.is_file() {
        registry
            .load_file(Path::new(shadow.plugin))?
            .plugin
            .name
            .clone()
    } else if registry.current().get(shadow.plugin).is_some() {
        shadow.plugin.to_owned()
    } else {
        return Err(PluginCommandError::ShadowNotLoaded(
            shadow.plugin.to_owned(),
        ));
    };
    if let Some(replaced) = shadow.replaces {
        let named = [
            &chains.select_instance,
            &chains.choose_market,
            &chains.build_tags,
        ]
        .iter()
        .any(|chain| chain.iter().any(|step| step.plugin == replaced));
        if !named {
            return Err(PluginCommandError::ShadowReplacesNothing(
                replaced.to_owned(),
            ));
        }
    }
    Ok(ShadowSpec::from(&shadow.config(&name)?))
}

/// The catalogue and registry (embedded defaults loaded) for `policy`. Compiled plugins go
/// to the user's compile cache, so the next command (and a node run by the same user) loads
/// them in milliseconds; the author is told where.
fn registry(
    policy: &PolicyConfig,
    region: &str,
    extra_plugins: usize,
) -> Result<(Arc<InstanceCatalogue>, Arc<PluginRegistry>), PluginCommandError> {
    // Once per process: `test` builds a pipeline per config and settings.
    static TOLD: std::sync::Once = std::sync::Once::new();
    if let Some(dir) = policy.compile_cache_dir() {
        TOLD.call_once(|| eprintln!("orca: compiled plugins are cached in {}", dir.display()));
    }
    build_registry_for(policy, region, extra_plugins).map_err(PluginCommandError::Policy)
}

/// A pod manifest, with what the apiserver would add (uid, namespace) filled in.
pub(super) fn read_pod(path: &Path) -> Result<Pod, PluginCommandError> {
    let text = std::fs::read_to_string(path).map_err(|source| PluginCommandError::Read {
        path: path.to_owned(),
        source,
    })?;
    let pod: Pod = serde_saphyr::from_str(&text).map_err(|source| PluginCommandError::NotAPod {
        path: path.to_owned(),
        source: Box::new(source),
    })?;
    as_admitted(pod, path)
}

/// `pod` (read from `path`) as the apiserver would admit it: uid and namespace filled in,
/// requests defaulted from limits.
pub(super) fn as_admitted(mut pod: Pod, path: &Path) -> Result<Pod, PluginCommandError> {
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
