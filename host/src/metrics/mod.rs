//! orca's Prometheus metrics. One registry for the process, served on the metrics port; each
//! part of orca records into the families it owns and is handed only those.

mod apiserver;
mod cost;
mod ec2;
mod interruption;
mod kubelet_api;
mod node;
mod pod_gpus;
mod pods;
mod policy;
mod scraped;
pub mod server;
mod serving;
mod spend;

use std::sync::Arc;

use prometheus_client::registry::Registry;

pub use apiserver::ApiserverMetrics;
pub use cost::{CostLabels, CostMetrics};
pub use ec2::{Ec2CallLabels, Ec2Metrics};
pub use interruption::{InterruptionMetrics, MessageOutcome, QueueOperation};
pub use kubelet_api::{ConnectionClose, KubeletApiMetrics};
pub use node::LeaseMetrics;
pub use pods::ReconcileMetrics;
pub use policy::{EvaluationLabels, PluginInfoLabels, PolicyMetrics, ReloadLabels};
pub use serving::ServingMetrics;

use crate::process::pod_usage::PodUsages;
use crate::process::served_nodes::ServedNodes;
use crate::provider::aws::Ec2Calls;
use crate::spend::NamespaceSpend;

/// Every family orca records, registered once at startup.
pub struct Metrics {
    pub policy: Arc<PolicyMetrics>,
    pub reconcile: Arc<ReconcileMetrics>,
    pub ec2: Arc<Ec2Metrics>,
    pub lease: Arc<LeaseMetrics>,
    pub interruption: Arc<InterruptionMetrics>,
    pub serving: Arc<ServingMetrics>,
    pub kubelet_api: Arc<KubeletApiMetrics>,
    pub cost: Arc<CostMetrics>,
    pub apiserver: Arc<ApiserverMetrics>,
    registry: Arc<Registry>,
}

impl Metrics {
    /// Registers all families. `served` holds the served nodes' pod caches (pods by phase are
    /// counted from them at scrape time); `requests` the SDK interceptor's per-operation HTTP
    /// counts; `spend` what each capped namespace's instances cost.
    pub fn new(
        served: Arc<ServedNodes>,
        requests: Arc<Ec2Calls>,
        spend: Arc<NamespaceSpend>,
        usages: Arc<PodUsages>,
    ) -> Metrics {
        let mut registry = Registry::default();
        let policy = Arc::new(PolicyMetrics::register(&mut registry));
        let reconcile = Arc::new(ReconcileMetrics::register(&mut registry));
        let ec2 = Arc::new(Ec2Metrics::register(&mut registry));
        let lease = Arc::new(LeaseMetrics::register(&mut registry));
        let interruption = Arc::new(InterruptionMetrics::register(&mut registry));
        let serving = Arc::new(ServingMetrics::register(&mut registry));
        let kubelet_api = Arc::new(KubeletApiMetrics::register(&mut registry));
        let cost = Arc::new(CostMetrics::register(&mut registry));
        let apiserver = Arc::new(ApiserverMetrics::register(&mut registry));
        registry.register_collector(Box::new(pods::PodPhases(served.clone())));
        registry.register_collector(Box::new(pods::NodePodsWatched(served.clone())));
        registry.register_collector(Box::new(pods::NodesServed(served)));
        registry.register_collector(Box::new(ec2::Ec2Requests(requests)));
        registry.register_collector(Box::new(spend::NamespaceSpendGauges(spend)));
        registry.register_collector(Box::new(pod_gpus::PodGpus(usages)));
        Metrics {
            policy,
            reconcile,
            ec2,
            lease,
            interruption,
            serving,
            kubelet_api,
            cost,
            apiserver,
            registry: Arc::new(registry),
        }
    }

    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }
}
