//! How often a node stopped being served here when nothing asked it to: a hold that ran out
//! (a stalled replica, a hung or failing apiserver), a Lease taken by another replica, or a
//! serving task that panicked or returned. Each is also logged; the counter is what an alert
//! reads.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::process::turn::TurnEnd;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServingEndLabels {
    pub node: String,
    /// [`TurnEnd`]'s label: `hold_lapsed`, `lease_lost`, `<task>_panicked`,
    /// `<task>_returned`.
    pub reason: String,
}

/// `orca_node_serving_ended_total{node, reason}`.
pub struct ServingMetrics {
    ended: Family<ServingEndLabels, Counter>,
}

impl ServingMetrics {
    pub fn register(registry: &mut Registry) -> ServingMetrics {
        let ended = Family::default();
        registry.register(
            "orca_node_serving_ended",
            "Times serving a node here ended when nothing asked it to, by reason: hold_lapsed (the node's Lease was not renewed in time), lease_lost (taken by another replica), or a serving task that panicked or returned",
            ended.clone(),
        );
        ServingMetrics { ended }
    }

    /// Counts one end of serving `node` (a stop asked for is not counted).
    pub fn ended(&self, node: &str, end: TurnEnd) {
        if end == TurnEnd::Stopped {
            return;
        }
        self.ended
            .get_or_create(&ServingEndLabels {
                node: node.to_owned(),
                reason: end.to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;
    use crate::process::turn::{Failure, ServingTask};

    #[test]
    fn ends_are_counted_by_node_and_reason_and_stops_are_not() {
        let mut registry = Registry::default();
        let metrics = ServingMetrics::register(&mut registry);
        metrics.ended("n1", TurnEnd::Stopped);
        metrics.ended("n1", TurnEnd::Lapsed);
        metrics.ended(
            "n1",
            TurnEnd::Failed {
                task: ServingTask::StatusSync,
                how: Failure::Panicked,
            },
        );
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("orca_node_serving_ended_total{node=\"n1\",reason=\"hold_lapsed\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "orca_node_serving_ended_total{node=\"n1\",reason=\"status_sync_panicked\"} 1"
            ),
            "{text}"
        );
        assert!(!text.contains("stopped"), "{text}");
    }
}
