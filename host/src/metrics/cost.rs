//! What pods' instances cost (`crate::cost`): dollars accrued and saved against on demand,
//! counted by namespace, instance type and market, and what the live ones cost an hour now.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::cost::Series;
use crate::policy::guardrails::Price;
use crate::support::errors::lock;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CostLabels {
    pub namespace: String,
    pub instance_type: String,
    /// `spot` or `on-demand`.
    pub market: String,
}

impl CostLabels {
    fn of(series: &Series) -> CostLabels {
        CostLabels {
            namespace: series.namespace.clone(),
            instance_type: series.instance_type.clone(),
            market: series.market.as_str().to_owned(),
        }
    }
}

/// The counters, and the live spend as the last turn saw it.
pub struct CostMetrics {
    accrued: Family<CostLabels, Counter<f64, AtomicU64>>,
    saved: Family<CostLabels, Counter<f64, AtomicU64>>,
    live: std::sync::Arc<LiveSpend>,
}

/// `orca_live_spend_usd_per_hour`, replaced whole each turn so series of instances gone go.
#[derive(Debug, Default)]
struct LiveSpend(Mutex<BTreeMap<Series, Price>>);

impl CostMetrics {
    pub fn register(registry: &mut Registry) -> CostMetrics {
        let accrued = Family::default();
        let saved = Family::default();
        let live = std::sync::Arc::new(LiveSpend::default());
        registry.register(
            "orca_cost_usd",
            "Dollars pods' instances cost, accrued while this process runs, by namespace, \
             instance type and market",
            accrued.clone(),
        );
        registry.register(
            "orca_spot_savings_usd",
            "Dollars spot instances cost less than the same hours on demand would have",
            saved.clone(),
        );
        registry.register_collector(Box::new(LiveSpendGauge(live.clone())));
        CostMetrics {
            accrued,
            saved,
            live,
        }
    }

    /// Adds what one turn accrued and saved.
    pub fn accrue(&self, series: &Series, dollars: f64, saved: f64) {
        let labels = CostLabels::of(series);
        if dollars > 0.0 {
            self.accrued.get_or_create(&labels).inc_by(dollars);
        }
        if saved > 0.0 {
            self.saved.get_or_create(&labels).inc_by(saved);
        }
    }

    /// What the live instances cost an hour now.
    pub fn set_live(&self, live: BTreeMap<Series, Price>) {
        *lock(&self.live.0) = live;
    }
}

#[derive(Debug)]
struct LiveSpendGauge(std::sync::Arc<LiveSpend>);

impl Collector for LiveSpendGauge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let live = lock(&(self.0).0).clone();
        let mut family = encoder.encode_descriptor(
            "orca_live_spend_usd_per_hour",
            "What pods' live instances cost an hour now (spot at its pool's current price), by \
             namespace, instance type and market",
            None,
            MetricType::Gauge,
        )?;
        for (series, price) in &live {
            let labels = CostLabels::of(series);
            ConstGauge::new(price.usd()).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
