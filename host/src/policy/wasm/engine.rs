//! One wasmtime engine for all plugins: component model, pooling allocator, epoch interruption
//! driven by a ticker thread that stops when the engine is dropped.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::bindings::{v0_1, v0_2, v0_3};
use super::budget::INSTANCES_PER_CALL;
use super::cache::{CachePruning, CompileCache};
use super::limits::{EPOCH_TICK, InstanceReuse, LOAD_CALLS, SandboxLimits};
use super::state::CallState;
use super::warm::WarmPool;

/// Bytes of each memory and table slot kept resident between calls: more than a default
/// plugin touches per decision (about 1.2 MiB of memory), a bounded RSS cost per warm slot.
const KEEP_RESIDENT_BYTES: usize = 2 << 20;

/// Why the engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("configuring wasmtime: {0:#}")]
    ConfigFailed(wasmtime::Error),
    #[error("linking host functions: {0:#}")]
    LinkFailed(wasmtime::Error),
}

pub struct PluginEngine {
    pub(super) engine: Engine,
    pub(super) linker: Linker<CallState>,
    pub(super) limits: SandboxLimits,
    /// Limits of plugins that have their own, by the name they report.
    plugin_limits: BTreeMap<String, SandboxLimits>,
    /// The largest of all of them, field by field: what the pool is sized for and what a
    /// load runs with.
    largest: SandboxLimits,
    /// Instances of reused plugins between their calls.
    pub(super) warm: Arc<WarmPool>,
    cache: Option<CompileCache>,
}

impl PluginEngine {
    /// # Errors
    /// [`EngineError`] when wasmtime rejects the configuration (for example a pooling size the
    /// machine cannot reserve).
    pub fn new(limits: SandboxLimits) -> Result<PluginEngine, EngineError> {
        let warm_plugins = usize::from(limits.instances == InstanceReuse::Reused);
        PluginEngine::with_plugin_limits(limits, BTreeMap::new(), warm_plugins)
    }

    /// An engine whose plugins named in `plugin_limits` get those limits instead of `limits`
    /// (`concurrent_calls` is `limits`' for all), keeping instances warm for up to
    /// `warm_plugins` reused plugins.
    ///
    /// # Errors
    /// As [`PluginEngine::new`].
    pub fn with_plugin_limits(
        limits: SandboxLimits,
        plugin_limits: BTreeMap<String, SandboxLimits>,
        warm_plugins: usize,
    ) -> Result<PluginEngine, EngineError> {
        let largest = largest(&limits, &plugin_limits);
        // Idle instances of reused plugins: one per concurrent decision for each, so a burst
        // finds every decision's instance warm. A chain of reused plugins must not evict its
        // own instances from one hook to the next.
        let warm = limits.concurrent_calls.saturating_mul(warm_plugins);
        // Room for every call that may run at once, each with all the instances it may create,
        // and for the idle warm ones: a call never waits for, or fails on, a slot taken by
        // another.
        let calls =
            u32::try_from(limits.concurrent_calls + limits.shadow_calls + LOAD_CALLS + warm)
                .unwrap_or(u32::MAX);
        let per_call = u32::try_from(INSTANCES_PER_CALL).unwrap_or(u32::MAX);
        let slots = calls.saturating_mul(per_call);
        let mut pooling = PoolingAllocationConfig::default();
        pooling
            .total_component_instances(calls)
            .total_core_instances(slots)
            .total_memories(slots)
            .total_tables(slots)
            .max_memory_size(largest.max_memory_bytes)
            .table_elements(largest.max_table_elements)
            // A fresh instance per call reuses a warm slot: resetting the pages the last call
            // touched with memset (found by PAGEMAP_SCAN where the kernel has it) is far
            // cheaper than madvise followed by a page fault per page on the next call.
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES)
            .pagemap_scan(Enabled::Auto);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
        let engine = Engine::new(&config).map_err(EngineError::ConfigFailed)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(EngineError::LinkFailed)?;
        // Every served interface version's host functions, side by side: each is its own
        // versioned interface name (`orca:policy/host@0.1.0`, `@0.2.0`, `@0.3.0`).
        v0_3::Plugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)
            .map_err(EngineError::LinkFailed)?;
        v0_2::Plugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)
            .map_err(EngineError::LinkFailed)?;
        v0_1::Plugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)
            .map_err(EngineError::LinkFailed)?;
        start_epoch_ticker(&engine, EPOCH_TICK);
        Ok(PluginEngine {
            engine,
            linker,
            limits,
            plugin_limits,
            largest,
            warm: Arc::new(WarmPool::new(warm)),
            cache: None,
        })
    }

    /// The limits of the plugin that reports `name`.
    pub fn limits_for(&self, name: &str) -> SandboxLimits {
        self.plugin_limits.get(name).copied().unwrap_or(self.limits)
    }

    /// The limits of a plugin's load (its `info` call), before its name is known: the largest
    /// any plugin may have, with the load timeout.
    pub(super) fn load_limits(&self) -> SandboxLimits {
        self.largest.for_load()
    }

    /// Keeps compiled plugins in `dir` (created if missing) so restarts do not recompile;
    /// `pruning` says whether [`PluginEngine::prune_compile_cache`] removes anything.
    #[must_use]
    pub fn with_compile_cache(mut self, dir: &Path, pruning: CachePruning) -> PluginEngine {
        self.cache = CompileCache::open(dir, &self.engine, pruning);
        self
    }

    /// Where the compiled code of the component with this sha256 is cached, if it is.
    pub fn cached_compilation(&self, sha256: &str) -> Option<PathBuf> {
        self.cache.as_ref()?.entry_path(sha256)
    }

    /// The compiled component for `bytes`: from the cache when it has it, else compiled (and
    /// then cached).
    pub(super) fn compile(&self, bytes: &[u8], sha256: &str) -> wasmtime::Result<Component> {
        if let Some(component) = self
            .cache
            .as_ref()
            .and_then(|c| c.get(&self.engine, sha256))
        {
            return Ok(component);
        }
        let component = Component::new(&self.engine, bytes)?;
        if let Some(cache) = &self.cache {
            cache.put(sha256, &component);
        }
        Ok(component)
    }

    /// Removes compiled plugins of components not in `keep` (the sha256s loaded now) once
    /// they have gone unused for a while, if this engine's cache prunes ([`CachePruning`]).
    pub fn prune_compile_cache(&self, keep: &HashSet<&str>) {
        if let Some(cache) = &self.cache {
            let removed = cache.prune(keep, SystemTime::now());
            if removed > 0 {
                tracing::info!(
                    removed,
                    "removed compiled plugins no longer loaded from the compile cache"
                );
            }
        }
    }

    pub fn limits(&self) -> SandboxLimits {
        self.limits
    }

    /// Instances of reused plugins idle between calls.
    pub fn warm_instances(&self) -> usize {
        self.warm.idle()
    }
}

/// `limits` with each bound raised to the largest any plugin has; new instances per call.
fn largest(
    limits: &SandboxLimits,
    plugin_limits: &BTreeMap<String, SandboxLimits>,
) -> SandboxLimits {
    let every = || std::iter::once(limits).chain(plugin_limits.values());
    SandboxLimits {
        timeout: every().map(|l| l.timeout).max().unwrap_or(limits.timeout),
        max_memory_bytes: every().map(|l| l.max_memory_bytes).max().unwrap_or(0),
        max_table_elements: every().map(|l| l.max_table_elements).max().unwrap_or(0),
        instances: InstanceReuse::Fresh,
        ..*limits
    }
}

fn start_epoch_ticker(engine: &Engine, tick: Duration) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("orca-wasm-epoch".to_owned())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(tick);
            }
        })
        .expect("spawning the epoch ticker thread");
}
