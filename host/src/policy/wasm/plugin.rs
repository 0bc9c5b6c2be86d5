//! A compiled plugin and calls into it, each in a fresh store from the pre-instantiated
//! component, so no state leaks between pods and a call costs an instantiation, not a compile.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::{Store, StoreLimitsBuilder, Trap};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use super::bindings::{
    Candidate, Hook, MarketDecision, Plugin, PluginPre, Pod, PolicyError, Tag, TagContext,
};
use super::engine::PluginEngine;
use super::state::{CallState, CatalogueQuery};
use super::version::{VersionError, check_interface_version};

/// Why bytes could not become a plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Version(VersionError),
    #[error("not a WebAssembly component orca can compile: {0:#}")]
    CompileFailed(wasmtime::Error),
    #[error("the component does not implement the orca:policy@0.1.0 plugin world: {0:#}")]
    WrongWorld(wasmtime::Error),
    #[error("asking the plugin for its name, version and hooks failed: {0}")]
    InfoFailed(CallError),
}

/// Why a call into a plugin did not return an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("plugin {plugin} ran past its {timeout:?} time limit and was stopped")]
    Timeout { plugin: String, timeout: Duration },
    #[error("plugin {plugin} failed: {message}")]
    Trapped { plugin: String, message: String },
}

/// A plugin ready to be called: compiled, type-checked against the world, described.
pub struct LoadedPlugin {
    pub name: String,
    pub version: String,
    /// Hex sha256 of the component bytes.
    pub sha256: String,
    pub hooks: Vec<Hook>,
    /// The `orca:policy` version the plugin declares it was built against, if it does.
    pub interface_version: Option<String>,
    pre: PluginPre<CallState>,
}

impl LoadedPlugin {
    /// Compiles `bytes`, checks they implement the plugin world, and calls `info`.
    ///
    /// # Errors
    /// [`LoadError`] saying which step refused the bytes.
    pub fn load(
        engine: &PluginEngine,
        bytes: &[u8],
        catalogue: &Arc<dyn CatalogueQuery>,
    ) -> Result<LoadedPlugin, LoadError> {
        let sha256 = sha256_hex(bytes);
        let interface_version = check_interface_version(bytes).map_err(LoadError::Version)?;
        let component = engine
            .compile(bytes, &sha256)
            .map_err(LoadError::CompileFailed)?;
        let instance_pre = engine
            .linker
            .instantiate_pre(&component)
            .map_err(LoadError::WrongWorld)?;
        let pre = PluginPre::new(instance_pre).map_err(LoadError::WrongWorld)?;
        let mut plugin = LoadedPlugin {
            name: format!("sha256:{}", &sha256[..12]),
            version: String::new(),
            sha256,
            hooks: Vec::new(),
            interface_version,
            pre,
        };
        let info = plugin
            .call(engine, catalogue, |bindings, store| {
                bindings.orca_policy_policy().call_info(store)
            })
            .map_err(LoadError::InfoFailed)?;
        plugin.name = info.name;
        plugin.version = info.version;
        plugin.hooks = info.hooks;
        Ok(plugin)
    }

    /// # Errors
    /// [`CallError`] when the plugin traps or runs out of time.
    pub fn select_instance(
        &self,
        engine: &PluginEngine,
        catalogue: &Arc<dyn CatalogueQuery>,
        pod: &Pod,
        settings: &str,
    ) -> Result<Result<Vec<Candidate>, PolicyError>, CallError> {
        self.call(engine, catalogue, |bindings, store| {
            bindings
                .orca_policy_policy()
                .call_select_instance(store, pod, settings)
        })
    }

    /// # Errors
    /// [`CallError`] when the plugin traps or runs out of time.
    pub fn choose_market(
        &self,
        engine: &PluginEngine,
        catalogue: &Arc<dyn CatalogueQuery>,
        pod: &Pod,
        settings: &str,
        candidates: &[Candidate],
    ) -> Result<Result<MarketDecision, PolicyError>, CallError> {
        self.call(engine, catalogue, |bindings, store| {
            bindings
                .orca_policy_policy()
                .call_choose_market(store, pod, settings, candidates)
        })
    }

    /// # Errors
    /// [`CallError`] when the plugin traps or runs out of time.
    pub fn build_tags(
        &self,
        engine: &PluginEngine,
        catalogue: &Arc<dyn CatalogueQuery>,
        pod: &Pod,
        settings: &str,
        context: &TagContext,
    ) -> Result<Result<Vec<Tag>, PolicyError>, CallError> {
        self.call(engine, catalogue, |bindings, store| {
            bindings
                .orca_policy_policy()
                .call_build_tags(store, pod, settings, context)
        })
    }

    /// One call in a fresh store: limits, deadline, stdio captured and forwarded to the log.
    fn call<R>(
        &self,
        engine: &PluginEngine,
        catalogue: &Arc<dyn CatalogueQuery>,
        run: impl FnOnce(&Plugin, &mut Store<CallState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let limits = engine.limits;
        let stdout = MemoryOutputPipe::new(limits.max_output_bytes);
        let stderr = MemoryOutputPipe::new(limits.max_output_bytes);
        // No preopened directories, environment, arguments or network: stdio only.
        let wasi = WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .build();
        let state = CallState {
            plugin: self.name.clone(),
            wasi,
            table: Default::default(),
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.max_memory_bytes)
                .table_elements(limits.max_table_elements)
                .instances(16)
                .trap_on_grow_failure(true)
                .build(),
            catalogue: catalogue.clone(),
        };
        let mut store = Store::new(&engine.engine, state);
        store.limiter(|state| &mut state.limits);
        store.set_epoch_deadline(limits.deadline_ticks());
        let result = self
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| run(&bindings, &mut store));
        forward_output(&self.name, "stdout", &stdout);
        forward_output(&self.name, "stderr", &stderr);
        result.map_err(|error| match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => CallError::Timeout {
                plugin: self.name.clone(),
                timeout: limits.timeout,
            },
            _ => CallError::Trapped {
                plugin: self.name.clone(),
                message: format!("{error:#}"),
            },
        })
    }
}

fn forward_output(plugin: &str, stream: &'static str, pipe: &MemoryOutputPipe) {
    let contents = pipe.contents();
    for line in String::from_utf8_lossy(&contents)
        .lines()
        .filter(|line| !line.trim().is_empty())
    {
        tracing::info!(plugin, stream, "{line}");
    }
}

/// Hex sha256 of plugin bytes, the identity a plugin version is known by.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
