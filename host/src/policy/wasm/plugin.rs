//! A compiled plugin and calls into it, each in a fresh store from the pre-instantiated
//! component, so no state leaks between pods and a call costs an instantiation, not a compile;
//! or, for a plugin with `instances: reused`, in a warm instance kept between its calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::{PoolConcurrencyLimitError, Store, Trap};
use wasmtime_wasi::WasiCtxBuilder;

use super::bindings::{
    Candidate, Hook, InterfaceVersion, MarketDecision, Pod, PolicyError, Tag, TagContext, v0_1,
    v0_2, v0_3,
};
use super::budget::CallBudget;
use super::clock::{self, OutOfTime, TimeLimit};
use super::engine::PluginEngine;
use super::exception::{CallLeftovers, GuestException};
use super::footprint::{LimitTooSmall, StartFootprint};
use super::limits::{InstanceReuse, SandboxLimits};
use super::log_limit::{Admission, CallLog, LogRate};
use super::output::CallOutput;
use super::source_map::SourceMap;
use super::state::{CallState, CatalogueQuery};
use super::version::{VersionError, check_interface_version};
use super::warm::{CallInstance, Exports, WarmPool};

/// Why bytes could not become a plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Version(VersionError),
    /// What instantiating the plugin creates does not fit its limits: refused before it is
    /// compiled, naming the least that would do.
    #[error("{0}")]
    StartPastLimits(LimitTooSmall),
    #[error("not a WebAssembly component orca can compile: {0:#}")]
    CompileFailed(wasmtime::Error),
    #[error(
        "the component does not implement the orca:policy plugin world ({versions}): {0:#}",
        versions = InterfaceVersion::supported_list()
    )]
    WrongWorld(wasmtime::Error),
    #[error("asking the plugin for its name, version and hooks failed: {0}")]
    InfoFailed(CallError),
    #[error(
        "the plugin's {field} {value:?} is not usable: expected 1 to {MAX_INFO_BYTES} printable \
         ASCII characters without spaces"
    )]
    BadInfo { field: &'static str, value: String },
}

impl LoadError {
    /// Whether loading the same bytes again may succeed: only running out of time can pass
    /// (a busy machine); every other refusal is about the bytes.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LoadError::InfoFailed(
                CallError::Timeout { .. } | CallError::Stalled { .. } | CallError::Busy { .. }
            )
        )
    }
}

/// The longest name or version a plugin may report: both appear in pod messages, Events,
/// metrics labels and the log.
pub const MAX_INFO_BYTES: usize = 63;

/// Checks a name or version from a plugin's `info`.
fn info_field(field: &'static str, value: String) -> Result<String, LoadError> {
    let usable = !value.is_empty()
        && value.len() <= MAX_INFO_BYTES
        && value.bytes().all(|b| b.is_ascii_graphic());
    if usable {
        return Ok(value);
    }
    let mut shown = value;
    if shown.len() > MAX_INFO_BYTES {
        let mut end = MAX_INFO_BYTES;
        while !shown.is_char_boundary(end) {
            end -= 1;
        }
        shown.truncate(end);
        shown.push('…');
    }
    Err(LoadError::BadInfo {
        field,
        value: shown,
    })
}

/// Why a call into a plugin did not return an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// Its thread spent the call's CPU time limit (`policy.limits.timeout`).
    #[error("plugin {plugin} ran past its {timeout:?} time limit and was stopped")]
    Timeout { plugin: String, timeout: Duration },
    /// The call's wall time passed its ceiling first: its thread got little CPU (a machine
    /// whose cores are busy) or it waited (a sleep).
    #[error(
        "plugin {plugin} had not finished after {wall:?} of wall time (its time limit is {timeout:?} of CPU) and was stopped"
    )]
    Stalled {
        plugin: String,
        timeout: Duration,
        wall: Duration,
    },
    #[error("plugin {plugin} failed: {message}")]
    Trapped { plugin: String, message: String },
    #[error("plugin {plugin} could not run: every sandbox slot was taken by other calls")]
    Busy { plugin: String },
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
    /// The interface version whose bindings call it.
    pub interface: InterfaceVersion,
    /// What each of its calls may use (`policy.limits`, or its `policy.pluginLimits` entry).
    pub limits: SandboxLimits,
    pre: Bindings,
    /// The map from its bundled JavaScript to its TypeScript, when its build embedded one.
    source_map: Option<SourceMap>,
    /// This plugin's share of orca's log, across all its calls.
    log_rate: Arc<LogRate>,
    /// This load's key in the engine's pool of warm instances.
    id: u64,
    warm: Arc<WarmPool>,
}

/// Keys of loads in the pool of warm instances: a reload of the same bytes is a new plugin.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Drop for LoadedPlugin {
    fn drop(&mut self) {
        self.warm.forget(self.id);
    }
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
        let declared = check_interface_version(bytes).map_err(LoadError::Version)?;
        // Before the compile, which could only end in the pool's refusal (or the budget's at
        // the `info` call) when the largest limits are too small.
        let footprint = StartFootprint::of(bytes);
        if let Some(footprint) = &footprint {
            footprint
                .fits(&engine.load_limits())
                .map_err(LoadError::StartPastLimits)?;
        }
        let component = engine
            .compile(bytes, &sha256)
            .map_err(LoadError::CompileFailed)?;
        let pre = Bindings::link(engine, &component, declared.as_ref().map(|(_, v)| *v))
            .map_err(LoadError::WrongWorld)?;
        // Only for telling its errors: a map orca cannot read leaves its lines unmapped.
        let source_map = SourceMap::embedded_in(bytes).unwrap_or_else(|error| {
            tracing::warn!(sha256 = %sha256, "the plugin's source map is not used: {error}");
            None
        });
        let mut plugin = LoadedPlugin {
            name: format!("sha256:{}", &sha256[..12]),
            version: String::new(),
            sha256,
            hooks: Vec::new(),
            interface_version: declared.map(|(text, _)| text),
            interface: pre.version(),
            limits: engine.load_limits(),
            pre,
            source_map,
            log_rate: Arc::new(LogRate::new(Instant::now())),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            warm: engine.warm.clone(),
        };
        let info = plugin
            .call(engine, catalogue, |store, exports| match exports {
                Exports::V0_3(p) => p.orca_policy_policy().call_info(store),
                Exports::V0_2(p) => p.orca_policy_policy().call_info(store).map(v0_2::info_up),
                Exports::V0_1(p) => p
                    .orca_policy_policy()
                    .call_info(store)
                    .map(|info| v0_2::info_up(v0_1::info_up(info))),
            })
            .map_err(LoadError::InfoFailed)?;
        plugin.name = info_field("name", info.name)?;
        plugin.version = info_field("version", info.version)?;
        plugin.hooks = info.hooks;
        plugin.limits = engine.limits_for(&plugin.name);
        // Its own limits, known now that it has named itself: each of its calls would fail.
        if let Some(footprint) = &footprint {
            footprint
                .fits(&plugin.limits)
                .map_err(LoadError::StartPastLimits)?;
        }
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
        self.call(engine, catalogue, |store, exports| match exports {
            Exports::V0_3(p) => p
                .orca_policy_policy()
                .call_select_instance(store, pod, settings),
            Exports::V0_2(p) => p
                .orca_policy_policy()
                .call_select_instance(store, &v0_2::pod(pod), settings)
                .map(v0_2::candidates_up),
            Exports::V0_1(p) => p
                .orca_policy_policy()
                .call_select_instance(store, &v0_1::pod(&v0_2::pod(pod)), settings)
                .map(|answer| v0_2::candidates_up(v0_1::candidates_up(answer))),
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
        self.call(engine, catalogue, |store, exports| match exports {
            Exports::V0_3(p) => p
                .orca_policy_policy()
                .call_choose_market(store, pod, settings, candidates),
            Exports::V0_2(p) => p
                .orca_policy_policy()
                .call_choose_market(
                    store,
                    &v0_2::pod(pod),
                    settings,
                    &v0_2::candidates_down(candidates),
                )
                .map(v0_2::market_up),
            Exports::V0_1(p) => p
                .orca_policy_policy()
                .call_choose_market(
                    store,
                    &v0_1::pod(&v0_2::pod(pod)),
                    settings,
                    &v0_1::candidates_down(&v0_2::candidates_down(candidates)),
                )
                .map(|answer| v0_2::market_up(v0_1::market_up(answer))),
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
        self.call(engine, catalogue, |store, exports| match exports {
            Exports::V0_3(p) => p
                .orca_policy_policy()
                .call_build_tags(store, pod, settings, context),
            Exports::V0_2(p) => p
                .orca_policy_policy()
                .call_build_tags(
                    store,
                    &v0_2::pod(pod),
                    settings,
                    &v0_2::tag_context(context),
                )
                .map(v0_2::tags_up),
            Exports::V0_1(p) => p
                .orca_policy_policy()
                .call_build_tags(
                    store,
                    &v0_1::pod(&v0_2::pod(pod)),
                    settings,
                    &v0_1::tag_context(&v0_2::tag_context(context)),
                )
                .map(|answer| v0_2::tags_up(v0_1::tags_up(answer))),
        })
    }

    /// One call within the plugin's limits: in a fresh instance, or in its warm one when it is
    /// reused (and one is idle); stdio captured and forwarded to the log. A reused instance
    /// goes back to the pool only after a call that returned, and while it has room.
    fn call<R>(
        &self,
        engine: &PluginEngine,
        catalogue: &Arc<dyn CatalogueQuery>,
        run: impl FnOnce(&mut Store<CallState>, &Exports) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let limits = self.limits;
        let reused = limits.instances == InstanceReuse::Reused;
        let warm = if reused {
            self.warm.take(self.id)
        } else {
            None
        };
        let mut instance = match warm {
            Some(instance) => instance,
            None => self.instantiate(limits, engine, catalogue)?,
        };
        // Each call has its own deadline and log budget, in a new store or a reused one.
        clock::arm(&mut instance.store, &limits);
        let state = instance.store.data_mut();
        state.log = CallLog::new(limits.max_output_bytes);
        state.error_logged = None;
        instance.calls += 1;
        let result = run(&mut instance.store, &instance.exports);
        let stderr = self.forward_output(&mut instance);
        let answer = result.map_err(|error| {
            self.call_error(
                limits,
                error,
                &stderr,
                instance.store.data().error_logged.as_deref(),
            )
        })?;
        if reused && instance.may_serve_again(&limits) {
            self.warm.put(self.id, instance);
        }
        Ok(answer)
    }

    /// A new store with the plugin instantiated in it. What the instantiation wrote before
    /// failing is forwarded to the log.
    fn instantiate(
        &self,
        limits: SandboxLimits,
        engine: &PluginEngine,
        catalogue: &Arc<dyn CatalogueQuery>,
    ) -> Result<CallInstance, CallError> {
        let stdout = CallOutput::new(limits.max_output_bytes);
        let stderr = CallOutput::new(limits.max_output_bytes);
        // No preopened directories, environment, arguments or network: stdio only.
        let wasi = WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .build();
        let state = CallState {
            plugin: self.name.clone(),
            wasi,
            table: Default::default(),
            budget: CallBudget::new(limits.max_memory_bytes, limits.max_table_elements),
            log: CallLog::new(limits.max_output_bytes),
            log_rate: self.log_rate.clone(),
            log_dropped: 0,
            error_logged: None,
            catalogue: catalogue.clone(),
        };
        let mut store = Store::new(&engine.engine, state);
        store.limiter(|state| &mut state.budget);
        // Start functions run within the call's time limit too.
        clock::arm(&mut store, &limits);
        match self.pre.instantiate(&mut store) {
            Ok(exports) => Ok(CallInstance {
                store,
                exports,
                stdout,
                stderr,
                calls: 0,
            }),
            Err(error) => {
                forward_output(&self.name, "stdout", &stdout.take(), &self.log_rate);
                let stderr = stderr.take();
                forward_output(&self.name, "stderr", &stderr, &self.log_rate);
                let logged = store.data().error_logged.as_deref();
                Err(self.call_error(limits, error, &stderr, logged))
            }
        }
    }

    /// Forwards what the call wrote to the log; answers its stderr, which a failed call's
    /// error is read from.
    fn forward_output(&self, instance: &mut CallInstance) -> bytes::Bytes {
        let dropped = std::mem::take(&mut instance.store.data_mut().log_dropped);
        self.log_rate.count_dropped(dropped);
        forward_output(
            &self.name,
            "stdout",
            &instance.stdout.take(),
            &self.log_rate,
        );
        let stderr = instance.stderr.take();
        forward_output(&self.name, "stderr", &stderr, &self.log_rate);
        stderr
    }

    /// The error of a call that failed with `error`, after writing `stderr` and logging
    /// `error_logged` (its last error-level message): a plugin's trap is told by the exception
    /// its language raised when the runtime told of one (the wasm backtrace then goes to the
    /// debug log), else by wasmtime's account of the trap.
    fn call_error(
        &self,
        limits: SandboxLimits,
        error: wasmtime::Error,
        stderr: &[u8],
        error_logged: Option<&str>,
    ) -> CallError {
        let plugin = self.name.clone();
        let timeout = limits.timeout;
        match (
            error.downcast_ref::<OutOfTime>(),
            error.downcast_ref::<Trap>(),
        ) {
            (Some(OutOfTime(TimeLimit::Wall(wall))), _) => CallError::Stalled {
                plugin,
                timeout,
                wall: *wall,
            },
            // Every store is armed (clock::arm): its deadlines end in OutOfTime, never in
            // wasmtime's own Trap::Interrupt.
            (Some(OutOfTime(TimeLimit::Cpu)), _) => CallError::Timeout { plugin, timeout },
            _ if error.is::<PoolConcurrencyLimitError>() => CallError::Busy { plugin },
            (None, trap) => {
                let exception = trap
                    .is_some_and(|trap| GuestException::may_explain(*trap))
                    .then(|| {
                        GuestException::told_by(CallLeftovers {
                            stderr,
                            error_logged,
                            source_map: self.source_map.as_ref(),
                        })
                    })
                    .flatten();
                let message = match exception {
                    Some(exception) => {
                        tracing::debug!(plugin = %self.name, "the call trapped: {error:#}");
                        exception.to_string()
                    }
                    None => format!("{error:#}"),
                };
                CallError::Trapped { plugin, message }
            }
        }
    }
}

/// A plugin's pre-instantiated component, typed by the interface version that calls it.
enum Bindings {
    V0_1(v0_1::PluginPre<CallState>),
    V0_2(v0_2::PluginPre<CallState>),
    V0_3(v0_3::PluginPre<CallState>),
}

impl Bindings {
    /// The bindings for the declared version, or for a component that declares none (built
    /// without the SDK) the newest world it implements.
    fn link(
        engine: &PluginEngine,
        component: &wasmtime::component::Component,
        declared: Option<InterfaceVersion>,
    ) -> wasmtime::Result<Bindings> {
        let link = |version: InterfaceVersion| -> wasmtime::Result<Bindings> {
            let instance_pre = engine.linker.instantiate_pre(component)?;
            Ok(match version {
                InterfaceVersion::V0_1 => Bindings::V0_1(v0_1::PluginPre::new(instance_pre)?),
                InterfaceVersion::V0_2 => Bindings::V0_2(v0_2::PluginPre::new(instance_pre)?),
                InterfaceVersion::V0_3 => Bindings::V0_3(v0_3::PluginPre::new(instance_pre)?),
            })
        };
        match declared {
            Some(version) => link(version),
            None => {
                let newest = match link(InterfaceVersion::NEWEST) {
                    Ok(bindings) => return Ok(bindings),
                    Err(error) => error,
                };
                // Older worlds, newest first; the newest world's type-check error is the
                // useful one to report when none fits.
                InterfaceVersion::ALL
                    .iter()
                    .rev()
                    .skip(1)
                    .find_map(|&older| link(older).ok())
                    .ok_or(newest)
            }
        }
    }

    fn version(&self) -> InterfaceVersion {
        match self {
            Bindings::V0_1(_) => InterfaceVersion::V0_1,
            Bindings::V0_2(_) => InterfaceVersion::V0_2,
            Bindings::V0_3(_) => InterfaceVersion::V0_3,
        }
    }

    fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Exports> {
        Ok(match self {
            Bindings::V0_1(pre) => Exports::V0_1(pre.instantiate(store)?),
            Bindings::V0_2(pre) => Exports::V0_2(pre.instantiate(store)?),
            Bindings::V0_3(pre) => Exports::V0_3(pre.instantiate(store)?),
        })
    }
}

/// What the call wrote to a stream (bounded per call), one log record per line, within the
/// plugin's share of orca's log.
fn forward_output(plugin: &str, stream: &'static str, contents: &[u8], rate: &LogRate) {
    for line in String::from_utf8_lossy(contents)
        .lines()
        .filter(|line| !line.trim().is_empty())
    {
        if let Admission::Write { dropped_before } = rate.admit(Instant::now()) {
            tracing::info!(plugin, stream, dropped_before, "{line}");
        }
    }
}

/// Hex sha256 of plugin bytes, the identity a plugin version is known by.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_and_versions_are_short_printable_words() {
        assert_eq!(
            info_field("name", "orca-default-selector".into()).unwrap(),
            "orca-default-selector"
        );
        assert_eq!(
            info_field("version", "0.1.0+build.7".into()).unwrap(),
            "0.1.0+build.7"
        );
        for bad in ["", "two words", "tab\there", "naïve"] {
            assert!(info_field("name", bad.into()).is_err(), "{bad:?}");
        }
        let Err(LoadError::BadInfo { value, .. }) = info_field("name", "n".repeat(1 << 20)) else {
            panic!("a megabyte name was accepted");
        };
        assert_eq!(value.len(), MAX_INFO_BYTES + '…'.len_utf8());
    }
}
