//! `orca plugin check FILE.wasm` (and the loading half of `check oci://…`).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::PluginCommandError;
use crate::config::PolicyConfig;
use crate::policy::catalogue::InstanceCatalogue;
use crate::policy::pipeline::hook_name;
use crate::policy::setup::sandbox_limits;
use crate::policy::wasm::{CatalogueQuery, InterfaceVersion, LoadedPlugin, PluginEngine};

pub fn run(file: &Path) -> Result<(), PluginCommandError> {
    let (plugin, bytes, elapsed) = load(file)?;
    println!("file:       {}", file.display());
    describe(&plugin, &bytes, elapsed);
    Ok(())
}

/// What `check` prints of a loaded plugin.
pub(super) fn describe(plugin: &LoadedPlugin, bytes: &[u8], elapsed: std::time::Duration) {
    let hooks: Vec<&str> = plugin.hooks.iter().map(|h| hook_name(*h)).collect();
    println!(
        "world:      orca:policy/plugin@{} (this orca serves {})",
        plugin.interface,
        InterfaceVersion::supported_list()
    );
    println!(
        "interface:  {}",
        plugin
            .interface_version
            .as_deref()
            .unwrap_or("not declared (built without orca-plugin-sdk)")
    );
    println!("name:       {}", plugin.name);
    println!("version:    {}", plugin.version);
    println!("sha256:     {}", plugin.sha256);
    println!("hooks:      {}", hooks.join(", "));
    println!("size:       {} bytes", bytes.len());
    println!("load time:  {elapsed:.1?} (compile or compile cache, link, info call)");
}

/// Loads `file` as orca would (the default limits, the user's compile cache): the plugin,
/// its bytes and how long the load took.
///
/// # Errors
/// Why orca would refuse it.
pub(super) fn load(
    file: &Path,
) -> Result<(LoadedPlugin, Vec<u8>, std::time::Duration), PluginCommandError> {
    let bytes = std::fs::read(file).map_err(|source| PluginCommandError::Read {
        path: file.to_owned(),
        source,
    })?;
    let (plugin, elapsed) = load_bytes(&bytes, &file.display().to_string())?;
    Ok((plugin, bytes, elapsed))
}

/// Loads `bytes` (named `label` in messages) as orca would: the plugin and how long it took.
///
/// # Errors
/// Why orca would refuse it.
pub(super) fn load_bytes(
    bytes: &[u8],
    label: &str,
) -> Result<(LoadedPlugin, std::time::Duration), PluginCommandError> {
    let policy = PolicyConfig::default();
    let mut engine =
        PluginEngine::new(sandbox_limits(&policy)).map_err(PluginCommandError::Engine)?;
    // The same compile cache as `eval`, `bench` and a node run by this user: checking a plugin
    // compiles it once for all of them.
    if let Some(dir) = policy.compile_cache_dir() {
        engine = engine.with_compile_cache(&dir);
    }
    let catalogue: Arc<dyn CatalogueQuery> =
        Arc::new(InstanceCatalogue::bundled("us-east-1").map_err(PluginCommandError::Catalogue)?);
    let started = Instant::now();
    let plugin = LoadedPlugin::load(&engine, bytes, &catalogue).map_err(|source| {
        PluginCommandError::Refused {
            label: label.to_owned(),
            source,
        }
    })?;
    Ok((plugin, started.elapsed()))
}
