//! `orca plugin …`: what a plugin author runs before shipping a plugin. Every command uses the
//! same engine, limits, catalogue and pipeline as the node, so what passes here loads there.

mod bench;
mod check;
mod eval;

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::cli::{PipelineArgs, PluginCommand};
use crate::config::{DEFAULT_MARKET, DEFAULT_SELECTOR, DEFAULT_TAGGER, OnError, PolicyConfig};
use crate::policy::Pipeline;
use crate::policy::catalogue::InstanceCatalogue;
use crate::policy::pipeline::{ChainStep, HookChains};
use crate::policy::setup::build_registry;
use crate::policy::wasm::Hook;

/// The node and cluster names decisions are made for outside a cluster.
const NODE_NAME: &str = "orca-aws-node";
const CLUSTER_NAME: &str = "kubernetes";

/// Runs a plugin command; the error is printed by `main`.
///
/// # Errors
/// A message saying what failed.
pub fn run(command: PluginCommand) -> Result<(), String> {
    match command {
        PluginCommand::Check { file } => check::run(&file),
        PluginCommand::Eval(args) => eval::run(&args),
        PluginCommand::Bench {
            pipeline,
            iterations,
        } => bench::run(&pipeline, iterations),
    }
}

/// A pipeline of the embedded defaults, with `args.plugin` (if any) answering the hooks it
/// implements with `args.settings`.
fn pipeline(args: &PipelineArgs) -> Result<(Pipeline, Arc<InstanceCatalogue>), String> {
    serde_json::from_str::<serde_json::Value>(&args.settings)
        .map_err(|error| format!("--settings is not JSON: {error}"))?;
    // Compiled plugins go to the user's compile cache, so the next command (and a node run by
    // the same user) loads them in milliseconds; the author is told where.
    let policy = PolicyConfig::default();
    if let Some(dir) = policy.compile_cache_dir() {
        eprintln!("orca: compiled plugins are cached in {}", dir.display());
    }
    let (catalogue, registry) =
        build_registry(&policy, &args.region).map_err(|e| crate::errors::error_chain(&e))?;
    let mut chains = HookChains::single(DEFAULT_SELECTOR, DEFAULT_MARKET, DEFAULT_TAGGER);
    if let Some(file) = &args.plugin {
        let plugin = registry.load_file(file)?;
        let step = || {
            vec![ChainStep {
                plugin: plugin.plugin.name.clone(),
                settings: args.settings.clone(),
                on_error: OnError::Fail,
            }]
        };
        for (hook, chain) in [
            (Hook::SelectInstance, &mut chains.select_instance),
            (Hook::ChooseMarket, &mut chains.choose_market),
            (Hook::BuildTags, &mut chains.build_tags),
        ] {
            if plugin.implements(hook) {
                *chain = step();
            }
        }
    }
    let pipeline = Pipeline::new(registry, chains, NODE_NAME, CLUSTER_NAME)
        .with_node_architecture(&args.architecture);
    Ok((pipeline, catalogue))
}

/// A pod manifest, with what the apiserver would add (uid, namespace) filled in.
fn read_pod(path: &Path) -> Result<Pod, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("reading {}: {error}", path.display()))?;
    let mut pod: Pod = serde_saphyr::from_str(&text)
        .map_err(|error| format!("{} is not a Pod manifest: {error}", path.display()))?;
    let metadata = &mut pod.metadata;
    metadata
        .namespace
        .get_or_insert_with(|| "default".to_owned());
    metadata
        .uid
        .get_or_insert_with(|| "00000000-0000-0000-0000-000000000000".to_owned());
    if metadata.name.is_none() {
        return Err(format!("{}: the pod has no metadata.name", path.display()));
    }
    Ok(pod)
}
