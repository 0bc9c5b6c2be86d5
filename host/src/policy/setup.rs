//! Building the policy stack from configuration: catalogue, sandboxed engine, plugin registry
//! (embedded defaults, then the plugins directory) and the pipeline. Shared by the node and
//! the `orca plugin` commands, so both run plugins exactly the same way.

use std::sync::Arc;

use super::catalogue::{CatalogueError, InstanceCatalogue};
use super::embedded::DEFAULT_PLUGINS;
use super::registry::PluginRegistry;
use super::wasm::{CatalogueQuery, EngineError, LoadError, PluginEngine, SandboxLimits};
use crate::config::PolicyConfig;

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
    Embedded(#[from] LoadError),
}

/// The sandbox limits `policy.limits` describes.
pub fn sandbox_limits(policy: &PolicyConfig) -> SandboxLimits {
    SandboxLimits {
        timeout: policy.limits.timeout.get(),
        max_memory_bytes: policy.max_memory_bytes(),
        max_table_elements: usize::try_from(policy.limits.max_table_elements).unwrap_or(usize::MAX),
        max_output_bytes: policy.max_output_bytes(),
        concurrent_calls: usize::from(policy.limits.concurrent_calls),
        load_timeout: super::wasm::LOAD_TIMEOUT,
    }
}

/// The catalogue and a registry holding the embedded plugins (the directory is scanned by
/// the caller, which decides how rescans are reported).
///
/// # Errors
/// [`PolicySetupError`] naming the part that failed.
pub fn build_registry(
    policy: &PolicyConfig,
    region: &str,
) -> Result<(Arc<InstanceCatalogue>, Arc<PluginRegistry>), PolicySetupError> {
    let catalogue = Arc::new(InstanceCatalogue::bundled(region)?);
    let mut engine = PluginEngine::new(sandbox_limits(policy))?;
    if let Some(dir) = policy.compile_cache_dir() {
        engine = engine.with_compile_cache(&dir);
    }
    let query: Arc<dyn CatalogueQuery> = catalogue.clone();
    let registry = PluginRegistry::new(Arc::new(engine), query, DEFAULT_PLUGINS)?;
    Ok((catalogue, Arc::new(registry)))
}
