//! What each namespace's live instances cost an hour, against its cap
//! (`policy.guardrails`), read from the process's namespace spend at scrape time.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::spend::NamespaceSpend;

/// `orca_namespace_spend_usd_per_hour{namespace}` and `orca_namespace_room_usd_per_hour`, for
/// each namespace with a cap that has instances or launches counted.
pub(super) struct NamespaceSpendGauges(pub Arc<NamespaceSpend>);

impl std::fmt::Debug for NamespaceSpendGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("NamespaceSpendGauges").finish()
    }
}

impl Collector for NamespaceSpendGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if !self.0.caps_namespaces() {
            return Ok(());
        }
        let capped: Vec<(String, f64, f64)> = self
            .0
            .totals()
            .into_iter()
            .filter_map(|(namespace, spend)| {
                let room = self.0.room(&namespace)?;
                Some((namespace, spend.usd(), room.usd()))
            })
            .collect();
        let mut spend = encoder.encode_descriptor(
            "orca_namespace_spend_usd_per_hour",
            "What a capped namespace's live instances and launches in progress cost an hour, as \
             counted against its cap",
            None,
            MetricType::Gauge,
        )?;
        for (namespace, value, _) in &capped {
            let labels = vec![("namespace".to_owned(), namespace.clone())];
            ConstGauge::new(*value).encode(spend.encode_family(&labels)?)?;
        }
        let mut room = encoder.encode_descriptor(
            "orca_namespace_room_usd_per_hour",
            "How much more a capped namespace's instances may cost an hour",
            None,
            MetricType::Gauge,
        )?;
        for (namespace, _, value) in &capped {
            let labels = vec![("namespace".to_owned(), namespace.clone())];
            ConstGauge::new(*value).encode(room.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
