//! Pods on this node by phase and reason, and how the pod reconciler fares.

use std::collections::BTreeMap;
use std::time::Duration;

use std::sync::Arc;

use crate::process::served_nodes::ServedNodes;
use k8s_openapi::api::core::v1::Pod;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::scraped::encode_by_label;

const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];

/// Counts the served nodes' pod caches by phase and reason on each scrape, so the figure is
/// never stale and costs nothing between scrapes.
pub(super) struct PodPhases(pub Arc<ServedNodes>);

impl std::fmt::Debug for PodPhases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PodPhases").field(&self.0.names()).finish()
    }
}

/// Why a pod is in its phase, as its status says: `status.reason` (why it Failed), else the
/// reason of its Ready condition while that is not True (why it is Pending: orca's waiting
/// reasons, `InstanceLaunching`, `PolicyNotReady`, ...; `PodCompleted`); empty for a Running
/// pod and for one orca has not written yet.
fn reason(pod: &Pod) -> String {
    let Some(status) = pod.status.as_ref() else {
        return String::new();
    };
    if let Some(reason) = status.reason.as_ref().filter(|r| !r.is_empty()) {
        return reason.clone();
    }
    status
        .conditions
        .iter()
        .flatten()
        .find(|condition| condition.type_ == "Ready" && condition.status != "True")
        .and_then(|condition| condition.reason.clone())
        .unwrap_or_default()
}

/// Pods by (phase, reason). A pod without a phase yet is Pending, as the kubelet reports it.
/// Each phase no pod is in has a zero series (reason empty), so a rate or an alert has its
/// zero before the first pod.
fn by_phase_and_reason<'a>(pods: impl Iterator<Item = &'a Pod>) -> BTreeMap<(String, String), u64> {
    let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
    for pod in pods {
        let phase = pod
            .status
            .as_ref()
            .and_then(|status| status.phase.clone())
            .unwrap_or_else(|| "Pending".to_owned());
        *counts.entry((phase, reason(pod))).or_default() += 1;
    }
    for phase in PHASES {
        if !counts.keys().any(|(counted, _)| counted == phase) {
            counts.insert((phase.to_owned(), String::new()), 0);
        }
    }
    counts
}

impl Collector for PodPhases {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let pods = self.0.pods();
        let counts = by_phase_and_reason(pods.iter().map(|pod| pod.as_ref()));
        let mut metric = encoder.encode_descriptor(
            "orca_pods",
            "Pods bound to the nodes this process serves, by phase and reason (status.reason, \
             else the Ready condition's reason while the pod is not ready)",
            None,
            MetricType::Gauge,
        )?;
        for ((phase, reason), count) in counts {
            let labels = vec![("phase".to_owned(), phase), ("reason".to_owned(), reason)];
            ConstGauge::new(i64::try_from(count).unwrap_or(i64::MAX))
                .encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

    use super::*;

    fn pod(phase: Option<&str>, reason: Option<&str>, ready: Option<(&str, &str)>) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: phase.map(str::to_owned),
                reason: reason.map(str::to_owned),
                conditions: ready.map(|(status, reason)| {
                    vec![PodCondition {
                        type_: "Ready".to_owned(),
                        status: status.to_owned(),
                        reason: Some(reason.to_owned()),
                        ..PodCondition::default()
                    }]
                }),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn pods_are_counted_by_phase_and_the_reason_their_status_gives() {
        let pods = [
            pod(Some("Pending"), None, Some(("False", "InstanceLaunching"))),
            pod(Some("Pending"), None, Some(("False", "InstanceLaunching"))),
            pod(Some("Pending"), None, Some(("False", "PolicyNotReady"))),
            pod(Some("Running"), None, Some(("True", "ignored while ready"))),
            pod(
                Some("Failed"),
                Some("SpotInterrupted"),
                Some(("False", "PodFailed")),
            ),
            Pod::default(),
        ];
        let counts = by_phase_and_reason(pods.iter());
        let count = |phase: &str, reason: &str| counts.get(&(phase.to_owned(), reason.to_owned()));
        assert_eq!(count("Pending", "InstanceLaunching"), Some(&2));
        assert_eq!(count("Pending", "PolicyNotReady"), Some(&1));
        // Not written by orca yet: Pending, no reason.
        assert_eq!(count("Pending", ""), Some(&1));
        assert_eq!(count("Running", ""), Some(&1));
        // status.reason wins over the condition's.
        assert_eq!(count("Failed", "SpotInterrupted"), Some(&1));
        assert_eq!(count("Failed", "PodFailed"), None);
        // Phases without pods have their zero; phases with pods get no extra zero series.
        assert_eq!(count("Succeeded", ""), Some(&0));
        assert_eq!(count("Unknown", ""), Some(&0));
        assert_eq!(count("Failed", ""), None);
        assert_eq!(counts.len(), 7, "{counts:?}");
    }
}
