//! The interruption queue consumer's metrics: notices acted on by kind, messages by what became
//! of them, and failed queue calls. A queue that is misrouted (mostly `foreign`), carries events
//! orca cannot read (`unparsed`) or receives another account's or region's events
//! (`other-account`, `other-region`: its policy lets others send) shows here before it shows as
//! pods lost without warning.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::interruption::NoticeKind;

/// What became of one received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageOutcome {
    /// Its notices for instances of a node served here were acted on; deleted unless it also
    /// named instances of this orca that no node served here lists.
    Delivered,
    /// It named only instances that are not this orca's (by their tags, or unknown to EC2):
    /// deleted.
    Foreign,
    /// It named only instances of this orca that no node served here lists (another replica
    /// serves their node, or they are not listed yet): handed on or left for whoever acts on
    /// them.
    Elsewhere,
    /// Not a notice orca reads: deleted.
    Unparsed,
    /// From another AWS account than the one orca's instances live in: deleted, not acted on.
    OtherAccount,
    /// From another region than `provider.region`: deleted, not acted on.
    OtherRegion,
    /// Ours, but not acted on yet (the pod not yet in the cache, a failed status write): left
    /// on the queue to come back after its visibility timeout.
    Retried,
}

impl MessageOutcome {
    pub const ALL: [MessageOutcome; 7] = [
        MessageOutcome::Delivered,
        MessageOutcome::Foreign,
        MessageOutcome::Elsewhere,
        MessageOutcome::Unparsed,
        MessageOutcome::OtherAccount,
        MessageOutcome::OtherRegion,
        MessageOutcome::Retried,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MessageOutcome::Delivered => "delivered",
            MessageOutcome::Foreign => "foreign",
            MessageOutcome::Elsewhere => "elsewhere",
            MessageOutcome::Unparsed => "unparsed",
            MessageOutcome::OtherAccount => "other-account",
            MessageOutcome::OtherRegion => "other-region",
            MessageOutcome::Retried => "retried",
        }
    }
}

/// A queue call that can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueOperation {
    Receive,
    Delete,
    HandOn,
}

impl QueueOperation {
    pub fn as_str(self) -> &'static str {
        match self {
            QueueOperation::Receive => "receive",
            QueueOperation::Delete => "delete",
            QueueOperation::HandOn => "hand_on",
        }
    }
}

impl EncodeLabelValue for NoticeKind {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

impl EncodeLabelValue for MessageOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

impl EncodeLabelValue for QueueOperation {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: NoticeKind,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: MessageOutcome,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: QueueOperation,
}

pub struct InterruptionMetrics {
    interruptions: Family<KindLabels, Counter>,
    messages: Family<OutcomeLabels, Counter>,
    queue_errors: Family<OperationLabels, Counter>,
}

impl InterruptionMetrics {
    pub fn register(registry: &mut Registry) -> InterruptionMetrics {
        let metrics = InterruptionMetrics {
            interruptions: Family::default(),
            messages: Family::default(),
            queue_errors: Family::default(),
        };
        registry.register(
            "orca_interruptions",
            "Interruption notices delivered for this node's instances, by kind",
            metrics.interruptions.clone(),
        );
        registry.register(
            "orca_interruption_messages",
            "Messages received from the interruption queue, by outcome: delivered, foreign \
             (not this orca's instances: deleted), elsewhere (this orca's, not listed here: \
             kept), unparsed, other-account, other-region (deleted), retried",
            metrics.messages.clone(),
        );
        registry.register(
            "orca_interruption_queue_errors",
            "Failed calls to the interruption queue, by operation: receive, delete",
            metrics.queue_errors.clone(),
        );
        // Every series from the start: a rate needs its zero before the first increment.
        for kind in NoticeKind::ALL {
            let _ = metrics.interruptions.get_or_create(&KindLabels { kind });
        }
        for outcome in MessageOutcome::ALL {
            let _ = metrics.messages.get_or_create(&OutcomeLabels { outcome });
        }
        for operation in [QueueOperation::Receive, QueueOperation::Delete] {
            let _ = metrics
                .queue_errors
                .get_or_create(&OperationLabels { operation });
        }
        metrics
    }

    /// A notice was delivered for one of this node's instances.
    pub fn delivered(&self, kind: NoticeKind) {
        self.interruptions.get_or_create(&KindLabels { kind }).inc();
    }

    pub fn message(&self, outcome: MessageOutcome) {
        self.messages
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    pub fn queue_error(&self, operation: QueueOperation) {
        self.queue_errors
            .get_or_create(&OperationLabels { operation })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_is_exported_from_zero_with_its_label_value() {
        let mut registry = Registry::default();
        let metrics = InterruptionMetrics::register(&mut registry);
        metrics.delivered(NoticeKind::SpotInterruption);
        metrics.message(MessageOutcome::Foreign);
        metrics.queue_error(QueueOperation::Receive);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "orca_interruptions_total{kind=\"spot-interruption\"} 1",
            "orca_interruptions_total{kind=\"state-change\"} 0",
            "orca_interruption_messages_total{outcome=\"foreign\"} 1",
            "orca_interruption_messages_total{outcome=\"unparsed\"} 0",
            "orca_interruption_messages_total{outcome=\"other-account\"} 0",
            "orca_interruption_queue_errors_total{operation=\"receive\"} 1",
            "orca_interruption_queue_errors_total{operation=\"delete\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
