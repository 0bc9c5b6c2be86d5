//! Building the policy stack from configuration: catalogue, sandboxed engine, plugin registry
//! (embedded defaults, then the plugins directory) and the pipeline. Shared by the node and
//! the `orca plugin` commands, so both run plugins exactly the same way.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::catalogue::{CatalogueError, InstanceCatalogue};
use super::embedded::DEFAULT_PLUGINS;
use super::registry::PluginRegistry;
use super::wasm::{
    CachePruning, CatalogueQuery, EngineError, InstanceReuse, LoadError, PluginEngine,
    SandboxLimits,
};
use crate::config::{Instances, PluginLimits, PolicyConfig};

/// Why the policy stack could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PolicySetupError {
    #[error("loading the instance-type catalogue")]
    Catalogue(#[from] CatalogueError),
    #[error("starting the WebAssembly engine")]
    Engine(#[from] EngineError),
    /// Only for bytes that cannot load: one that keeps running out of time is loaded again
    /// in the background instead (see `PluginRegistry::new`).
    #[error("loading an embedded default plugin (a build defect)")]
    Embedded(#[source] LoadError),
    /// The limits are too small for an embedded plugin to start: a configuration to change,
    /// not a defect (the message names the minimum).
    #[error("loading an embedded default plugin under policy.limits")]
    EmbeddedPastLimits(#[source] LoadError),
}

impl From<LoadError> for PolicySetupError {
    fn from(error: LoadError) -> Self {
        match error {
            LoadError::StartPastLimits(_) => PolicySetupError::EmbeddedPastLimits(error),
            error => PolicySetupError::Embedded(error),
        }
    }
}

/// The sandbox limits `policy.limits` describes.
pub fn sandbox_limits(policy: &PolicyConfig) -> SandboxLimits {
    sandbox(policy, policy.default_limits())
}

/// Each `policy.pluginLimits` entry's sandbox limits, by plugin name.
pub fn plugin_sandbox_limits(policy: &PolicyConfig) -> BTreeMap<String, SandboxLimits> {
    policy
        .plugin_limits()
        .into_iter()
        .map(|(name, limits)| (name, sandbox(policy, limits)))
        .collect()
}

fn sandbox(policy: &PolicyConfig, limits: PluginLimits) -> SandboxLimits {
    SandboxLimits {
        timeout: limits.timeout,
        max_memory_bytes: limits.max_memory_bytes,
        max_table_elements: usize::try_from(limits.max_table_elements).unwrap_or(usize::MAX),
        max_output_bytes: limits.max_output_bytes,
        concurrent_calls: usize::from(policy.limits.concurrent_calls),
        shadow_calls: policy.shadow_calls(),
        load_timeout: super::wasm::LOAD_TIMEOUT,
        instances: match limits.instances {
            Instances::Fresh => InstanceReuse::Fresh,
            Instances::Reused => InstanceReuse::Reused,
        },
    }
}

/// The catalogue and a registry holding the embedded plugins (the directory is scanned by
/// the caller, which decides how rescans are reported). It never prunes the compile cache,
/// which it may share with other processes: only the serving orca does
/// ([`build_serving_registry`]).
///
/// # Errors
/// [`PolicySetupError`] naming the part that failed.
pub fn build_registry(
    policy: &PolicyConfig,
    region: &str,
) -> Result<(Arc<InstanceCatalogue>, Arc<PluginRegistry>), PolicySetupError> {
    build(policy, region, 0, CachePruning::Never)
}

/// [`build_registry`] for the serving orca: its rescans also prune the compile cache of the
/// plugins it no longer loads ([`CachePruning::UnloadedEntries`]).
///
/// # Errors
/// [`PolicySetupError`] naming the part that failed.
pub fn build_serving_registry(
    policy: &PolicyConfig,
    region: &str,
) -> Result<(Arc<InstanceCatalogue>, Arc<PluginRegistry>), PolicySetupError> {
    build(policy, region, 0, CachePruning::UnloadedEntries)
}

/// [`build_registry`] for chains that will also ask `extra_plugins` plugins not named in
/// `policy` (`orca plugin eval --plugin`), with `policy.limits`. Read-only for the compile
/// cache's entries, as every `orca plugin` command is: it adds what it compiles, and removes
/// nothing.
///
/// # Errors
/// [`PolicySetupError`] naming the part that failed.
pub fn build_registry_for(
    policy: &PolicyConfig,
    region: &str,
    extra_plugins: usize,
) -> Result<(Arc<InstanceCatalogue>, Arc<PluginRegistry>), PolicySetupError> {
    build(policy, region, extra_plugins, CachePruning::Never)
}

fn build(
    policy: &PolicyConfig,
    region: &str,
    extra_plugins: usize,
    pruning: CachePruning,
) -> Result<(Arc<InstanceCatalogue>, Arc<PluginRegistry>), PolicySetupError> {
    let catalogue = Arc::new(InstanceCatalogue::bundled(region)?);
    let mut engine = PluginEngine::with_plugin_limits(
        sandbox_limits(policy),
        plugin_sandbox_limits(policy),
        policy.reused_chain_plugins() + extra_warm(policy, extra_plugins),
    )?;
    if let Some(dir) = policy.compile_cache_dir() {
        engine = engine.with_compile_cache(&dir, pruning);
    }
    let query: Arc<dyn CatalogueQuery> = catalogue.clone();
    let registry = PluginRegistry::new(Arc::new(engine), query, DEFAULT_PLUGINS)?;
    Ok((catalogue, Arc::new(registry)))
}

/// Warm instances' plugins among `extra` plugins with `policy.limits`.
fn extra_warm(policy: &PolicyConfig, extra: usize) -> usize {
    if policy.limits.instances == Instances::Reused {
        extra
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::wasm::LimitTooSmall;

    #[test]
    fn an_embedded_plugin_past_the_limits_is_a_setting_to_change_not_a_build_defect() {
        let past = LoadError::StartPastLimits(LimitTooSmall::Memory {
            needed_mib: 2,
            allowed_bytes: 1 << 20,
        });
        let defect = LoadError::BadInfo {
            field: "name",
            value: String::new(),
        };
        assert!(matches!(
            PolicySetupError::from(past),
            PolicySetupError::EmbeddedPastLimits(_)
        ));
        assert!(matches!(
            PolicySetupError::from(defect),
            PolicySetupError::Embedded(_)
        ));
    }
}
