//! The `policy:` section: which plugins decide, in what order, with what settings, and the
//! sandbox every plugin call runs in.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::guardrails::GuardrailsConfig;
pub use super::on_error::{FailureKind, OnError, OnErrorAction};
use super::quantity_field::{QuantityString, quantity_bytes};
use super::registry::RegistryConfig;
use super::{ConfigError, Seconds};

/// The names of the plugins embedded in the binary (see `plugins/`).
pub const DEFAULT_SELECTOR: &str = "orca-default-selector";
pub const DEFAULT_MARKET: &str = "orca-default-market";
pub const DEFAULT_TAGGER: &str = "orca-default-tagger";

/// Which plugins decide, in what order, with what settings, and the sandbox every plugin
/// call runs in.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PolicyConfig {
    /// A directory of `.wasm` plugins, watched: a new, replaced or removed file takes effect
    /// without a restart. Plugins there override embedded ones of the same name.
    pub plugins_dir: Option<PathBuf>,
    /// Where compiled plugins are kept between restarts. Default: `$XDG_CACHE_HOME/orca/plugins`
    /// or `$HOME/.cache/orca/plugins`.
    pub compile_cache_dir: Option<PathBuf>,
    /// How long the plugins directory must be quiet before it is rescanned: a copy or a
    /// ConfigMap update is several filesystem events.
    pub reload_debounce: Seconds,
    /// Plugins pulled from OCI registries: `oci://REGISTRY/REPOSITORY:TAG` (the tag is
    /// resolved again every `registry.refreshInterval`, and a new digest is loaded without a
    /// restart) or `oci://REGISTRY/REPOSITORY@sha256:DIGEST` (pinned). A plugin in
    /// `pluginsDir` overrides a pulled one of the same name.
    pub plugins: Vec<String>,
    /// How plugins are pulled from OCI registries, and whose signatures they must carry.
    pub registry: RegistryConfig,
    /// The sandbox of every plugin call: no filesystem, network, environment or arguments,
    /// and these limits.
    pub limits: SandboxLimitsConfig,
    /// Limits of one plugin, by the name it reports, over `limits`: an interpreter (a Python
    /// or JavaScript plugin) needs more memory than a Rust one, and runs faster reused.
    pub plugin_limits: BTreeMap<String, PluginLimitsConfig>,
    /// Plugins asked for instance types, in order.
    pub select_instance: Vec<PluginStep>,
    /// Plugins asked for the market, in order.
    pub choose_market: Vec<PluginStep>,
    /// Plugins asked for tags, in order. Unlike the other hooks, where the first answer
    /// decides, every plugin that answers adds its tags; where two set one key, the one
    /// earlier in the list keeps it (the decision record's `tagConflicts` names the key).
    pub build_tags: Vec<PluginStep>,
    /// The host's limits on every plan, whatever plugin made it.
    pub guardrails: GuardrailsConfig,
    /// A candidate plugin asked beside the chains for every pod, in a sandbox slot of its
    /// own, its answer recorded in the decision and counted in metrics, never launched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<super::ShadowConfig>,
}

/// The bounds of `policy.registry.maxComponentSize`: an interpreter's plugin is 12 to 20 MB.
const MIN_COMPONENT_BYTES: usize = 1 << 10;
const MAX_COMPONENT_BYTES: usize = 2 << 30;

/// One plugin in a hook's chain.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginStep {
    /// The plugin's name, as its `info` reports it (`orca plugin check` prints it).
    pub plugin: String,
    /// Passed to the plugin as JSON text.
    #[serde(default = "empty_settings")]
    pub settings: serde_json::Value,
    /// What each kind of failed answer from this plugin does: fail the pod, or ask the next
    /// plugin of the chain.
    #[serde(default)]
    pub on_error: OnError,
}

/// Limits on every plugin call.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SandboxLimitsConfig {
    /// CPU time per call: what the call's thread spends, so a busy machine's waits do not count.
    /// Its wall time may reach ten times this (at most 10s more); past that the call is
    /// stopped too.
    pub timeout: Seconds,
    /// Linear memory per call, all its memories together (a Kubernetes quantity).
    #[schemars(with = "QuantityString")]
    pub max_memory: String,
    /// Table elements per call, all its tables together.
    pub max_table_elements: u32,
    /// Pods' decisions that run at once. Decisions are CPU-bound and take well under a
    /// millisecond with a Rust plugin, so two keep up with any launch rate EC2 allows; each
    /// one more lets plugins hold another `maxMemory`.
    pub concurrent_calls: u16,
    /// Bytes of stdout and of stderr kept per call (a Kubernetes quantity).
    #[schemars(with = "QuantityString")]
    pub max_output: String,
    /// A new instance per call, or one kept warm between calls.
    pub instances: Instances,
}

/// What `policy.pluginLimits.<name>` may change of `policy.limits` for one plugin; what it
/// leaves out is `policy.limits`'.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginLimitsConfig {
    /// In place of `policy.limits.timeout`.
    pub timeout: Option<Seconds>,
    /// In place of `policy.limits.maxMemory`.
    #[schemars(with = "Option<QuantityString>")]
    pub max_memory: Option<String>,
    /// In place of `policy.limits.maxTableElements`.
    pub max_table_elements: Option<u32>,
    /// In place of `policy.limits.maxOutput`.
    #[schemars(with = "Option<QuantityString>")]
    pub max_output: Option<String>,
    /// In place of `policy.limits.instances`.
    pub instances: Option<Instances>,
}

/// `fresh`: a new instance per call, so nothing one pod's decision leaves in the plugin's
/// memory reaches the next; `reused`: an instance kept between calls (its globals persist),
/// dropped after any failure, once it holds half of `maxMemory`, and every 10,000 calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Instances {
    /// A new instance per call.
    #[default]
    Fresh,
    /// An instance kept warm between calls.
    Reused,
}

/// One plugin's limits, `policy.limits` with its `pluginLimits` entry over them, as typed
/// values (validated at load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginLimits {
    pub timeout: std::time::Duration,
    pub max_memory_bytes: usize,
    pub max_table_elements: u32,
    pub max_output_bytes: usize,
    pub instances: Instances,
}

impl Default for SandboxLimitsConfig {
    fn default() -> Self {
        SandboxLimitsConfig {
            timeout: Seconds::from_millis(100),
            max_memory: "64Mi".to_owned(),
            max_table_elements: 20_000,
            max_output: "64Ki".to_owned(),
            concurrent_calls: 2,
            instances: Instances::Fresh,
        }
    }
}

fn empty_settings() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

fn step(plugin: &str) -> Vec<PluginStep> {
    vec![PluginStep {
        plugin: plugin.to_owned(),
        settings: empty_settings(),
        on_error: OnError::FAIL,
    }]
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            plugins_dir: None,
            compile_cache_dir: None,
            reload_debounce: Seconds::from_millis(50),
            plugins: Vec::new(),
            registry: RegistryConfig::default(),
            limits: SandboxLimitsConfig::default(),
            plugin_limits: BTreeMap::new(),
            select_instance: step(DEFAULT_SELECTOR),
            choose_market: step(DEFAULT_MARKET),
            build_tags: step(DEFAULT_TAGGER),
            guardrails: GuardrailsConfig::default(),
            shadow: None,
        }
    }
}

impl PolicyConfig {
    /// The hooks' chains with the field each came from.
    pub fn chains(&self) -> [(&'static str, &[PluginStep]); 3] {
        [
            ("policy.selectInstance", &self.select_instance),
            ("policy.chooseMarket", &self.choose_market),
            ("policy.buildTags", &self.build_tags),
        ]
    }

    /// The compile cache directory: configured, else the user's cache directory.
    pub fn compile_cache_dir(&self) -> Option<PathBuf> {
        if let Some(dir) = &self.compile_cache_dir {
            return Some(dir.clone());
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|home| PathBuf::from(home).join(".cache"))
            })?;
        Some(base.join("orca").join("plugins"))
    }

    /// `limits` as typed values (validated at load, so the parses succeed).
    pub fn default_limits(&self) -> PluginLimits {
        PluginLimits {
            timeout: self.limits.timeout.get(),
            max_memory_bytes: quantity_bytes(&self.limits.max_memory).unwrap_or_default(),
            max_table_elements: self.limits.max_table_elements,
            max_output_bytes: quantity_bytes(&self.limits.max_output).unwrap_or_default(),
            instances: self.limits.instances,
        }
    }

    /// Each `pluginLimits` entry's plugin with its limits: the entry over `limits`.
    pub fn plugin_limits(&self) -> BTreeMap<String, PluginLimits> {
        let defaults = self.default_limits();
        self.plugin_limits
            .iter()
            .map(|(name, entry)| {
                let limits = PluginLimits {
                    timeout: entry.timeout.map_or(defaults.timeout, |t| t.get()),
                    max_memory_bytes: entry
                        .max_memory
                        .as_deref()
                        .and_then(quantity_bytes)
                        .unwrap_or(defaults.max_memory_bytes),
                    max_table_elements: entry
                        .max_table_elements
                        .unwrap_or(defaults.max_table_elements),
                    max_output_bytes: entry
                        .max_output
                        .as_deref()
                        .and_then(quantity_bytes)
                        .unwrap_or(defaults.max_output_bytes),
                    instances: entry.instances.unwrap_or(defaults.instances),
                };
                (name.clone(), limits)
            })
            .collect()
    }

    /// The most memory any one plugin call may hold: `limits.maxMemory` or a larger
    /// `pluginLimits` entry's.
    pub fn largest_max_memory_bytes(&self) -> usize {
        self.plugin_limits()
            .values()
            .map(|l| l.max_memory_bytes)
            .fold(self.default_limits().max_memory_bytes, usize::max)
    }

    /// The plugins the chains name that keep instances warm between calls: each may keep one
    /// per concurrent decision.
    pub fn reused_chain_plugins(&self) -> usize {
        let named: std::collections::BTreeSet<&str> = self
            .chains()
            .into_iter()
            .flat_map(|(_, chain)| chain.iter().map(|step| step.plugin.as_str()))
            .chain(self.shadow.iter().map(|shadow| shadow.plugin.as_str()))
            .collect();
        named
            .into_iter()
            .filter(|name| {
                self.plugin_limits
                    .get(*name)
                    .and_then(|l| l.instances)
                    .unwrap_or(self.limits.instances)
                    == Instances::Reused
            })
            .count()
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        for (field, chain) in self.chains() {
            if chain.is_empty() {
                return Err(ConfigError::invalid(
                    field,
                    "[]",
                    "at least one plugin, such as `- plugin: orca-default-selector`",
                ));
            }
            for (index, step) in chain.iter().enumerate() {
                if step.plugin.trim().is_empty() {
                    return Err(ConfigError::invalid(
                        format!("{field}[{index}].plugin"),
                        &step.plugin,
                        "the name a plugin reports (see `orca plugin check FILE.wasm`)",
                    ));
                }
            }
        }
        if let Some(dir) = &self.plugins_dir
            && !dir.is_dir()
        {
            return Err(ConfigError::invalid(
                "policy.pluginsDir",
                dir.display(),
                "an existing directory of .wasm plugins",
            ));
        }
        for (index, reference) in self.plugins.iter().enumerate() {
            if let Err(error) = crate::policy::oci::PluginReference::parse(reference) {
                return Err(ConfigError::invalid(
                    format!("policy.plugins[{index}]"),
                    reference,
                    &format!(
                        "oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST ({error})"
                    ),
                ));
            }
        }
        for (field, value, example) in [
            (
                "policy.registry.refreshInterval",
                self.registry.refresh_interval,
                "60s",
            ),
            (
                "policy.registry.stallTimeout",
                self.registry.stall_timeout,
                "30s",
            ),
            (
                "policy.registry.pullTimeout",
                self.registry.pull_timeout,
                "5m",
            ),
        ] {
            if value.get().is_zero() {
                return Err(ConfigError::invalid(
                    field,
                    value,
                    &format!("a duration above 0, such as {example}"),
                ));
            }
        }
        match quantity_bytes(&self.registry.max_component_size) {
            Some(bytes) if (MIN_COMPONENT_BYTES..=MAX_COMPONENT_BYTES).contains(&bytes) => {}
            _ => {
                return Err(ConfigError::invalid(
                    "policy.registry.maxComponentSize",
                    &self.registry.max_component_size,
                    &format!(
                        "a byte quantity from {} to {}, such as 256Mi",
                        human(MIN_COMPONENT_BYTES),
                        human(MAX_COMPONENT_BYTES)
                    ),
                ));
            }
        }
        for (field, path) in [
            ("policy.registry.dockerConfig", &self.registry.docker_config),
            ("policy.registry.caFile", &self.registry.ca_file),
        ] {
            if let Some(path) = path
                && !path.is_file()
            {
                return Err(ConfigError::invalid(
                    field,
                    path.display(),
                    "an existing file",
                ));
            }
        }
        // Keys, certificates and globs are read and parsed now, so a bad one stops startup.
        crate::policy::oci::TrustPolicy::from_config(&self.registry)?;
        validate_limits(
            "policy.limits",
            Some(self.limits.timeout),
            Some(&self.limits.max_memory),
            Some(self.limits.max_table_elements),
            Some(&self.limits.max_output),
        )?;
        for (name, entry) in &self.plugin_limits {
            if name.trim().is_empty() {
                return Err(ConfigError::invalid(
                    "policy.pluginLimits",
                    format!("{name:?}"),
                    "plugin names as they report them (see `orca plugin check FILE.wasm`)",
                ));
            }
            validate_limits(
                &format!("policy.pluginLimits.{name}"),
                entry.timeout,
                entry.max_memory.as_deref(),
                entry.max_table_elements,
                entry.max_output.as_deref(),
            )?;
        }
        self.guardrails.validate()?;
        if let Some(shadow) = &self.shadow {
            shadow.validate(|name| {
                self.chains()
                    .iter()
                    .any(|(_, chain)| chain.iter().any(|step| step.plugin == name))
            })?;
        }
        if !(1..=MAX_CONCURRENT_CALLS).contains(&self.limits.concurrent_calls) {
            return Err(ConfigError::invalid(
                "policy.limits.concurrentCalls",
                self.limits.concurrent_calls,
                &format!("a number of calls from 1 to {MAX_CONCURRENT_CALLS}, such as 2"),
            ));
        }
        Ok(())
    }

    /// Instances that may hold memory at once: one per concurrent decision, one for the
    /// plugin load that may run beside them, one for the shadow's decision (`policy.shadow`),
    /// and one per concurrent decision for each reused plugin the chains (or the shadow)
    /// name, kept warm between calls.
    pub fn plugin_instances(&self) -> u64 {
        let calls = u64::from(self.limits.concurrent_calls);
        let warm = calls.saturating_mul(self.reused_chain_plugins() as u64);
        calls + self.shadow_calls() as u64 + LOAD_CALLS + warm
    }

    /// Shadow decisions that run at once: one when `policy.shadow` is set, in a sandbox slot
    /// of its own, so a candidate never takes a live decision's.
    pub fn shadow_calls(&self) -> usize {
        usize::from(self.shadow.is_some())
    }

    /// Linear memory all plugin instances together may hold at once: the largest `maxMemory`
    /// for each of [`Self::plugin_instances`].
    pub fn total_plugin_memory_bytes(&self) -> u64 {
        self.plugin_instances()
            .saturating_mul(self.largest_max_memory_bytes() as u64)
    }

    /// Plugins may hold at most half of the memory this process may use, so a hostile plugin
    /// at its limits cannot get orca killed for memory.
    pub(super) fn check_fits(&self, memory_limit: u64) -> Result<(), ConfigError> {
        let total = self.total_plugin_memory_bytes();
        if total <= memory_limit / 2 {
            return Ok(());
        }
        Err(ConfigError::invalid(
            "policy.limits.concurrentCalls",
            self.limits.concurrent_calls,
            &format!(
                "{} instances (concurrentCalls + 1{}{}) × the largest maxMemory ({}) = {} of plugin \
                 memory at most half of this container's memory limit ({}): fewer concurrent \
                 calls, a smaller maxMemory, or a higher memory limit",
                self.plugin_instances(),
                if self.shadow.is_some() {
                    " + 1 for policy.shadow"
                } else {
                    ""
                },
                if self.reused_chain_plugins() > 0 {
                    ", and as many kept warm for each reused plugin"
                } else {
                    ""
                },
                human(self.largest_max_memory_bytes()),
                human(usize::try_from(total).unwrap_or(usize::MAX)),
                human(usize::try_from(memory_limit).unwrap_or(usize::MAX)),
            ),
        ))
    }
}

/// Checks the limit fields present, reported under `prefix` (`policy.limits`,
/// `policy.pluginLimits.NAME`).
fn validate_limits(
    prefix: &str,
    timeout: Option<Seconds>,
    max_memory: Option<&str>,
    max_table_elements: Option<u32>,
    max_output: Option<&str>,
) -> Result<(), ConfigError> {
    if let Some(timeout) = timeout {
        let value = timeout.get();
        if value.is_zero() || value > std::time::Duration::from_secs(10) {
            return Err(ConfigError::invalid(
                format!("{prefix}.timeout"),
                timeout,
                "a duration above 0 and at most 10s, such as 100ms",
            ));
        }
    }
    for (field, value, min, max) in [
        ("maxMemory", max_memory, 1 << 20, 4 << 30),
        ("maxOutput", max_output, 0, 16 << 20),
    ] {
        let Some(value) = value else { continue };
        match quantity_bytes(value) {
            Some(bytes) if (min..=max).contains(&bytes) => {}
            _ => {
                return Err(ConfigError::invalid(
                    format!("{prefix}.{field}"),
                    value,
                    &format!(
                        "a byte quantity from {} to {}, such as 64Mi",
                        human(min),
                        human(max)
                    ),
                ));
            }
        }
    }
    if max_table_elements == Some(0) {
        return Err(ConfigError::invalid(
            format!("{prefix}.maxTableElements"),
            0,
            "a positive number of table elements, such as 20000",
        ));
    }
    Ok(())
}

/// The most pods' decisions that may run at once.
const MAX_CONCURRENT_CALLS: u16 = 64;
/// Plugin calls besides pods' decisions that may run at once (a load, on the reload thread).
const LOAD_CALLS: u64 = 1;

fn human(bytes: usize) -> String {
    match bytes {
        0 => "0".to_owned(),
        b if b >= 1 << 30 => format!("{}Gi", b >> 30),
        b if b >= 1 << 20 => format!("{}Mi", b >> 20),
        b if b >= 1 << 10 => format!("{}Ki", b >> 10),
        b => format!("{b}"),
    }
}
