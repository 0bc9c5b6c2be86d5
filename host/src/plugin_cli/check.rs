//! `orca plugin check FILE.wasm` (and the loading half of `check oci://…`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::PluginCommandError;
use crate::config::PolicyConfig;
use crate::policy::catalogue::InstanceCatalogue;
use crate::policy::pipeline::hook_name;
use crate::policy::setup::sandbox_limits;
use crate::policy::wasm::{
    CachePruning, CatalogueQuery, InterfaceVersion, LoadedPlugin, PluginEngine,
};

pub fn run(file: &Path) -> Result<(), PluginCommandError> {
    let (checked, bytes) = load(file)?;
    println!("file:       {}", file.display());
    describe(&checked, &bytes);
    Ok(())
}

/// A plugin as `check` loaded it.
pub(super) struct Checked {
    pub plugin: LoadedPlugin,
    /// How long the load took.
    pub elapsed: Duration,
    /// The compile cache's file of its compiled code, if it is there.
    pub compiled: Option<PathBuf>,
}

/// What `check` prints of a loaded plugin.
pub(super) fn describe(checked: &Checked, bytes: &[u8]) {
    let plugin = &checked.plugin;
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
    println!(
        "load time:  {:.1?} (compile or compile cache, link, info call)",
        checked.elapsed
    );
    match &checked.compiled {
        Some(path) => println!("compiled:   {}", path.display()),
        None => println!(
            "compiled:   not cached (no usable compile cache: policy.compileCacheDir, else \
             $XDG_CACHE_HOME/orca/plugins or $HOME/.cache/orca/plugins; a warning above says why)"
        ),
    }
}

/// Loads `file` as orca would (the default limits, the user's compile cache): the plugin and
/// its bytes.
///
/// # Errors
/// Why orca would refuse it.
pub(super) fn load(file: &Path) -> Result<(Checked, Vec<u8>), PluginCommandError> {
    let bytes = std::fs::read(file).map_err(|source| PluginCommandError::Read {
        path: file.to_owned(),
        source,
    })?;
    let checked = load_bytes(&bytes, &file.display().to_string())?;
    Ok((checked, bytes))
}

/// Loads `bytes` (named `label` in messages) as orca would.
///
/// # Errors
/// Why orca would refuse it.
pub(super) fn load_bytes(bytes: &[u8], label: &str) -> Result<Checked, PluginCommandError> {
    let policy = PolicyConfig::default();
    let mut engine =
        PluginEngine::new(sandbox_limits(&policy)).map_err(PluginCommandError::Engine)?;
    // The same compile cache as `eval`, `bench` and a node run by this user: checking a plugin
    // compiles it once for all of them. It adds its compilation and removes nothing.
    if let Some(dir) = policy.compile_cache_dir() {
        engine = engine.with_compile_cache(&dir, CachePruning::Never);
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
    let elapsed = started.elapsed();
    let compiled = engine.cached_compilation(&plugin.sha256);
    Ok(Checked {
        plugin,
        elapsed,
        compiled,
    })
}
