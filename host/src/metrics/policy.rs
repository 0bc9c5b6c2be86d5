//! The policy subsystem's metrics: plugin reloads, loaded plugin versions, evaluation latency.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::policy::guardrails::Price;
use crate::policy::pipeline::{EvaluationObserver, hook_name};
use crate::policy::registry::{PluginSet, ReloadEvent};
use crate::policy::reload::ReloadReporter;
use crate::policy::shadow::ShadowRecord;
use crate::policy::wasm::Hook;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `loaded`, `rejected`, `removed`.
    pub result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginInfoLabels {
    pub plugin: String,
    pub version: String,
    pub sha256: String,
    pub source: String,
}

/// `orca_shadow_decisions_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    /// The candidate plugin.
    pub plugin: String,
    /// `agreed`, `differed`, `shadowFailed`, `liveFailed`, `bothFailed`, `timedOut`,
    /// `notLoaded`.
    pub outcome: String,
}

/// `orca_shadow_differences_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowFieldLabels {
    pub plugin: String,
    /// `instanceType`, `candidates`, `market`, `maxPrice`, `fallbackToOnDemand`, `tags`.
    pub field: String,
}

/// `orca_shadow_price_per_hour_usd_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowPriceLabels {
    pub plugin: String,
    /// `candidate`: what the candidate's offering costs an hour; `launched`: what was launched.
    pub side: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvaluationLabels {
    pub plugin: String,
    pub hook: String,
    /// `ok` or `error`.
    pub result: String,
}

/// The policy subsystem's metrics.
pub struct PolicyMetrics {
    pub reloads: Family<ReloadLabels, Counter>,
    pub plugin_info: Family<PluginInfoLabels, Gauge>,
    pub evaluations: Family<EvaluationLabels, Histogram>,
    pub shadow_decisions: Family<ShadowLabels, Counter>,
    pub shadow_differences: Family<ShadowFieldLabels, Counter>,
    pub shadow_prices: Family<ShadowPriceLabels, Counter<f64, AtomicU64>>,
    /// Serializes rebuilding `plugin_info` so two rescans do not interleave.
    info_lock: Mutex<()>,
}

/// Microseconds to a second: plugin calls take tens of microseconds, timeouts hundreds of ms.
fn evaluation_buckets() -> impl Iterator<Item = f64> {
    [
        10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 10e-3, 50e-3, 100e-3, 1.0,
    ]
    .into_iter()
}

impl PolicyMetrics {
    pub fn register(registry: &mut Registry) -> PolicyMetrics {
        let metrics = PolicyMetrics {
            reloads: Family::default(),
            plugin_info: Family::default(),
            evaluations: Family::new_with_constructor(|| Histogram::new(evaluation_buckets())),
            shadow_decisions: Family::default(),
            shadow_differences: Family::default(),
            shadow_prices: Family::default(),
            info_lock: Mutex::new(()),
        };
        registry.register(
            "orca_plugin_reloads",
            "Plugin file loads from the plugins directory, by result",
            metrics.reloads.clone(),
        );
        registry.register(
            "orca_plugin_info",
            "Loaded plugins (value 1), with version and sha256",
            metrics.plugin_info.clone(),
        );
        registry.register(
            "orca_plugin_evaluation_seconds",
            "Time of one plugin hook call, fresh sandbox included",
            metrics.evaluations.clone(),
        );
        registry.register(
            "orca_shadow_decisions",
            "policy.shadow's candidate decisions, by how each compared with the live one",
            metrics.shadow_decisions.clone(),
        );
        registry.register(
            "orca_shadow_differences",
            "Parts of the plan policy.shadow's candidate decided differently, by field",
            metrics.shadow_differences.clone(),
        );
        registry.register(
            "orca_shadow_price_per_hour_usd",
            "Hourly prices summed over the launches policy.shadow's candidate was compared on: \
             what the candidate's offering costs (side=candidate) and what was launched \
             (side=launched), priced alike",
            metrics.shadow_prices.clone(),
        );
        // Every result from the start: a rate of rejections needs its zero before the first.
        for result in ["loaded", "rejected", "removed"] {
            let _ = metrics.reloads.get_or_create(&ReloadLabels {
                result: result.to_owned(),
            });
        }
        metrics
    }
}

impl EvaluationObserver for PolicyMetrics {
    fn observe(&self, plugin: &str, hook: Hook, elapsed: Duration, ok: bool) {
        self.evaluations
            .get_or_create(&EvaluationLabels {
                plugin: plugin.to_owned(),
                hook: hook_name(hook).to_owned(),
                result: if ok { "ok" } else { "error" }.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    fn shadowed(&self, record: &ShadowRecord) {
        self.shadow_decisions
            .get_or_create(&ShadowLabels {
                plugin: record.plugin.clone(),
                outcome: record.outcome.as_str().to_owned(),
            })
            .inc();
        for field in &record.differences {
            self.shadow_differences
                .get_or_create(&ShadowFieldLabels {
                    plugin: record.plugin.clone(),
                    field: field.as_str().to_owned(),
                })
                .inc();
        }
    }

    fn shadow_priced(&self, plugin: &str, candidate: Price, launched: Price) {
        for (side, price) in [("candidate", candidate), ("launched", launched)] {
            self.shadow_prices
                .get_or_create(&ShadowPriceLabels {
                    plugin: plugin.to_owned(),
                    side: side.to_owned(),
                })
                .inc_by(price.usd());
        }
    }
}

impl ReloadReporter for PolicyMetrics {
    fn report(&self, event: &ReloadEvent) {
        let result = match event {
            ReloadEvent::Loaded { .. } => "loaded",
            ReloadEvent::Rejected { .. } => "rejected",
            ReloadEvent::Removed { .. } => "removed",
            ReloadEvent::Shadowed { .. } => return,
        };
        self.reloads
            .get_or_create(&ReloadLabels {
                result: result.to_owned(),
            })
            .inc();
    }

    /// Replaces the info series with the plugins now serving.
    fn rescanned(&self, set: &PluginSet) {
        let _guard = crate::support::errors::lock(&self.info_lock);
        self.plugin_info.clear();
        for plugin in set.iter() {
            let labels = PluginInfoLabels {
                plugin: plugin.plugin.name.clone(),
                version: plugin.plugin.version.clone(),
                sha256: plugin.plugin.sha256.clone(),
                source: plugin.source.to_string(),
            };
            self.plugin_info.get_or_create(&labels).set(1);
        }
    }
}
