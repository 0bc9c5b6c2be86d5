//! Pods on this node by phase, and how the pod reconciler fares.

use std::collections::BTreeMap;
use std::time::Duration;

use std::sync::Arc;

use crate::process::served_nodes::ServedNodes;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::scraped::encode_by_label;

const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];

/// Counts the served nodes' pod caches by phase on each scrape, so the figure is never stale
/// and costs nothing between scrapes. A pod without a phase yet is Pending, as the kubelet
/// reports it.
pub(super) struct PodPhases(pub Arc<ServedNodes>);

impl std::fmt::Debug for PodPhases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PodPhases").field(&self.0.names()).finish()
    }
}

impl Collector for PodPhases {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut counts: BTreeMap<String, u64> = PHASES
            .iter()
            .map(|phase| ((*phase).to_owned(), 0))
            .collect();
        for pod in self.0.pods() {
            let phase = pod
                .status
                .as_ref()
                .and_then(|status| status.phase.clone())
                .unwrap_or_else(|| "Pending".to_owned());
            *counts.entry(phase).or_default() += 1;
        }
        encode_by_label(
            &mut encoder,
            "orca_pods",
            "Pods bound to the nodes this process serves, by phase",
            MetricType::Gauge,
            "phase",
            counts,
        )
    }
}

/// The nodes this process serves now, one series per node (value 1): with replicas sharing
/// the nodes, which replica serves which.
pub(super) struct NodesServed(pub Arc<ServedNodes>);

impl std::fmt::Debug for NodesServed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("NodesServed").finish()
    }
}

impl Collector for NodesServed {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let served: BTreeMap<String, u64> =
            self.0.names().into_iter().map(|node| (node, 1)).collect();
        encode_by_label(
            &mut encoder,
            "orca_node_served",
            "1 for each node this process serves now",
            MetricType::Gauge,
            "node",
            served,
        )
    }
}

/// The pods each declared node's watch holds, one series per node, served here or not: a
/// standby replica's figures show its watches synced before it ever takes a node over.
pub(super) struct NodePodsWatched(pub Arc<ServedNodes>);

impl std::fmt::Debug for NodePodsWatched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("NodePodsWatched").finish()
    }
}

impl Collector for NodePodsWatched {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encode_by_label(
            &mut encoder,
            "orca_node_pods_watched",
            "Pods bound to each declared node as this process's watch of them holds, served here or not",
            MetricType::Gauge,
            "node",
            self.0.watched_pods(),
        )
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `ok`, or the failed step (`StatusWriteFailed`, `TerminateFailed`, …).
    pub result: String,
}

/// Reconcile durations by result (the `_count` of an error result is the error count), and
/// how much per-pod and per-instance state the controller holds.
pub struct ReconcileMetrics {
    durations: Family<ReconcileLabels, Histogram>,
    records: Gauge,
    terminations: Gauge,
    unclaimed: Family<NodeLabel, Gauge>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabel {
    pub node: String,
}

impl ReconcileMetrics {
    pub fn register(registry: &mut Registry) -> ReconcileMetrics {
        let durations: Family<ReconcileLabels, Histogram> = Family::new_with_constructor(|| {
            // A reconcile is a cache read (sub-millisecond) up to a launch through the rate
            // limit and retries (tens of seconds).
            Histogram::new([
                0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ])
        });
        registry.register(
            "orca_reconcile_duration_seconds",
            "Time of one pod reconcile, by result (ok or the failed step)",
            durations.clone(),
        );
        let records = Gauge::default();
        registry.register(
            "orca_pod_records",
            "Pods the controller keeps a record for (0 once every pod is gone)",
            records.clone(),
        );
        let terminations = Gauge::default();
        registry.register(
            "orca_termination_requests",
            "Instances whose termination orca asked for and does not yet see going",
            terminations.clone(),
        );
        let unclaimed = Family::<NodeLabel, Gauge>::default();
        registry.register(
            "orca_unclaimed_instances",
            "Live instances tagged for the node by an orca from before instances carried the cluster's id, whose pods are not the node's: never terminated by orca; check them by hand",
            unclaimed.clone(),
        );
        ReconcileMetrics {
            durations,
            records,
            terminations,
            unclaimed,
        }
    }

    /// The controller's state after a sync period.
    pub fn held(&self, records: usize, terminations: usize) {
        self.records.set(i64::try_from(records).unwrap_or(i64::MAX));
        self.terminations
            .set(i64::try_from(terminations).unwrap_or(i64::MAX));
    }

    /// What the node's last claim of untagged instances left alone.
    pub fn unclaimed(&self, node: &str, count: usize) {
        self.unclaimed
            .get_or_create(&NodeLabel {
                node: node.to_owned(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    pub fn observe(&self, result: &str, elapsed: Duration) {
        self.durations
            .get_or_create(&ReconcileLabels {
                result: result.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }
}
