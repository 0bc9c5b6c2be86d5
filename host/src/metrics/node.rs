//! The node's heartbeat.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    /// `ok` or `error`.
    pub result: String,
}

/// Lease renewals by result: failures that outlast the lease duration make the node NotReady.
pub struct LeaseMetrics {
    renewals: Family<LeaseLabels, Counter>,
}

impl LeaseMetrics {
    pub fn register(registry: &mut Registry) -> LeaseMetrics {
        let renewals = Family::default();
        registry.register(
            "orca_lease_renewals",
            "Node Lease renewals, by result",
            renewals.clone(),
        );
        let metrics = LeaseMetrics { renewals };
        // Both series from the start, so a failure rate has a denominator before any failure.
        metrics.count(true);
        metrics.count(false);
        metrics
    }

    pub fn record(&self, ok: bool) {
        self.count(ok).inc();
    }

    fn count(&self, ok: bool) -> Counter {
        self.renewals
            .get_or_create(&LeaseLabels {
                result: if ok { "ok" } else { "error" }.to_owned(),
            })
            .clone()
    }
}
