//! Everything a reconcile step needs, and the parts of it each step works with.

use std::sync::Arc;

use super::decide::Timing;
use super::instances::InstanceCache;
use super::launch::Launcher;
use super::launch::effects::RetryTiming;
use super::record::PodRecords;
use super::terminations::TerminationLedger;
use super::writer::{PodOutput, PodWriter};
use crate::config::PodsConfig;
use crate::metrics::ReconcileMetrics;
use crate::policy::Planner;
use crate::provider::Provider;
use crate::spend::NamespaceSpend;
use crate::workload::EnvSource;

/// Everything a reconcile step needs.
pub struct Context {
    /// Every write to a pod object goes through it.
    pub writer: Arc<dyn PodWriter>,
    /// Where pods' ConfigMaps and Secrets are read from when their instance is launched.
    pub objects: Arc<dyn EnvSource>,
    pub provider: Arc<dyn Provider>,
    pub planner: Arc<dyn Planner>,
    /// What launched instances cost an hour, for their decision records.
    pub prices: Arc<crate::cost::LaunchPrices>,
    pub instances: Arc<InstanceCache>,
    pub records: Arc<PodRecords>,
    pub ledger: Arc<TerminationLedger>,
    pub config: PodsConfig,
    pub metrics: Arc<ReconcileMetrics>,
    /// The node's zone, when it is bound to one (its pods run there).
    pub node_zone: Option<String>,
    /// The node's name, which its pods' reservations in `spend` carry.
    pub node_name: String,
    /// What each namespace's instances cost, against its cap: a launch reserves first.
    pub spend: Arc<NamespaceSpend>,
    /// How long this turn may act for the node: a reconcile takes no step after it ends.
    pub tenure: crate::replicas::Tenure,
}

impl Context {
    /// The Launch step, with this node's parts.
    pub fn launcher(&self) -> Launcher<'_> {
        Launcher {
            planner: self.planner.as_ref(),
            prices: &self.prices,
            provider: self.provider.as_ref(),
            spend: &self.spend,
            records: &self.records,
            writer: self.writer.as_ref(),
            objects: self.objects.as_ref(),
            node_name: &self.node_name,
            node_zone: self.node_zone.as_deref(),
            timing: RetryTiming {
                initial_backoff: self.config.retry_initial_backoff.get(),
                max_backoff: self.config.retry_max_backoff.get(),
                grace: self.config.launch_visibility_grace.get(),
            },
        }
    }

    /// What a step writes a pod with.
    pub fn output(&self) -> PodOutput<'_> {
        PodOutput {
            writer: self.writer.as_ref(),
            records: &self.records,
        }
    }

    pub fn timing(&self) -> Timing {
        Timing {
            sync: self.config.sync_interval.get(),
            grace: self.config.launch_visibility_grace.get(),
        }
    }
}
