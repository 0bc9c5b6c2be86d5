//! The census: this cluster's instances, every node's and every replica's, listed every
//! `pods.syncInterval` while some namespace has a cap, priced from the catalogue and handed to
//! [`NamespaceSpend::observe`]. With the aws provider it is one `DescribeInstances` filtered by
//! `ManagedBy` and the cluster's id (see `provider::aws::census`), so instances another
//! replica launched count too; with the simulated provider, the instances of the nodes this
//! process serves.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use super::{Listed, NamespaceSpend};
use crate::policy::catalogue::any_query;
use crate::policy::guardrails::Price;
use crate::policy::wasm::{CatalogueQuery, InstanceQuery};
use crate::process::served_nodes::ServedNodes;
use crate::provider::ProviderError;
use crate::provider::plan::Market;

/// Set by orca on an instance launched from a spot plan with a max price (USD per hour): what
/// the instance may cost at most, read back by the census. Plugins cannot set it (the
/// `orca.research/` prefix is orca's).
pub const TAG_SPOT_MAX_PRICE: &str = "orca.research/spot-max-price";

/// One instance as a census lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct CensusInstance {
    /// Pending, running, stopping or stopped: it counts. Others are listed too, so an
    /// instance shown ended is told from one a stale listing left out.
    pub live: bool,
    pub instance_id: String,
    pub namespace: String,
    pub pod_uid: String,
    pub instance_type: String,
    pub market: Market,
    /// The spot max price it was launched with, when it carries one.
    pub spot_max_price: Option<f64>,
}

impl CensusInstance {
    /// What the instance counts: on demand, its type's on-demand price; spot, its max price,
    /// else its type's on-demand price (EC2's default max price). `None`: no price known.
    pub fn price(&self, on_demand: Option<Price>) -> Option<Price> {
        match (self.market, Price::of(self.spot_max_price)) {
            (Market::Spot, Some(max_price)) => Some(max_price),
            _ => on_demand,
        }
    }
}

/// Lists this cluster's live instances.
#[async_trait]
pub trait Census: Send + Sync + 'static {
    /// Every instance of this cluster that names its pod, in any state EC2 still lists.
    ///
    /// # Errors
    /// The listing failed; the spend keeps the last one.
    async fn instances(&self) -> Result<Vec<CensusInstance>, ProviderError>;
}

/// The instances of the nodes this process serves, from their providers' listings: the
/// census of the simulated provider, whose instances no other process can see. Spot counts at
/// the on-demand price (its listings carry no max price).
pub struct ServedCensus(pub Arc<ServedNodes>);

#[async_trait]
impl Census for ServedCensus {
    async fn instances(&self) -> Result<Vec<CensusInstance>, ProviderError> {
        let providers = self.0.providers();
        if providers.is_empty() {
            // Not a listing of nothing: no node is served yet, so nothing was listed.
            return Err(ProviderError::transient(
                "NoNodeServed",
                "no node is served yet, so no instances are listed",
            ));
        }
        let mut listed = Vec::new();
        for provider in providers {
            for status in provider.statuses().await? {
                listed.push(CensusInstance {
                    live: status.state.needs_termination(),
                    instance_id: status.instance_id,
                    namespace: status.pod.namespace,
                    pod_uid: status.pod.uid,
                    instance_type: status.instance_type,
                    market: status.market,
                    spot_max_price: None,
                });
            }
        }
        Ok(listed)
    }
}

/// Lists and prices the cluster's instances into the spend, every `period`.
pub struct CensusLoop {
    pub census: Arc<dyn Census>,
    pub spend: Arc<NamespaceSpend>,
    pub catalogue: Arc<dyn CatalogueQuery>,
    pub period: Duration,
}

impl CensusLoop {
    /// Counts every `period` until `shutdown`; a failed listing is logged and the last one
    /// kept (pods keep waiting on it rather than launch on a guess).
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.period.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut unpriced_reported = BTreeSet::new();
        // The failure last logged: a failure is logged when it starts or changes, not every
        // period it lasts.
        let mut failing: Option<String> = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.count_once().await {
                Ok(unpriced) => {
                    if failing.take().is_some() {
                        tracing::info!(
                            "listing the cluster's instances for the namespaces' caps works again"
                        );
                    }
                    let new: Vec<&String> = unpriced.difference(&unpriced_reported).collect();
                    if !new.is_empty() {
                        tracing::warn!(types = ?new, "live instances of types the catalogue has no on-demand price for count nothing against their namespace's cap");
                    }
                    unpriced_reported = unpriced;
                }
                Err(error) => {
                    let text = error.to_string();
                    if failing.as_deref() != Some(text.as_str()) {
                        tracing::warn!(error = %text, "listing the cluster's instances for the namespaces' caps failed; keeping the last listing, retrying every sync period");
                        failing = Some(text);
                    }
                }
            }
        }
    }

    /// One listing into the spend; answers the instance types it could not price.
    ///
    /// # Errors
    /// The census failed.
    pub async fn count_once(&self) -> Result<BTreeSet<String>, ProviderError> {
        let listed = self.census.instances().await?;
        let names: BTreeSet<String> = listed.iter().map(|i| i.instance_type.clone()).collect();
        let prices: HashMap<String, Option<Price>> = self
            .catalogue
            .query(&InstanceQuery {
                names: names.into_iter().collect(),
                ..any_query()
            })
            .into_iter()
            .map(|t| (t.name, Price::of(t.on_demand_price)))
            .collect();
        let mut unpriced = BTreeSet::new();
        let priced = listed
            .into_iter()
            .map(|instance| {
                let on_demand = prices.get(&instance.instance_type).copied().flatten();
                let price = instance.price(on_demand).unwrap_or_else(|| {
                    if instance.live {
                        unpriced.insert(instance.instance_type.clone());
                    }
                    Price::ZERO
                });
                Listed {
                    instance_id: instance.instance_id,
                    namespace: instance.namespace,
                    pod_uid: instance.pod_uid,
                    price,
                    live: instance.live,
                }
            })
            .collect();
        self.spend.observe(priced, Timestamp::now());
        Ok(unpriced)
    }
}
