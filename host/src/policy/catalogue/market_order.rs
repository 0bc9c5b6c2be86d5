//! Catalogue queries ordered by the market the pod asks for: a plugin's
//! `query-instance-types` answers cheapest on-demand first, unless the pod asks for spot
//! (`orca.research/launch-type: spot`), when it answers cheapest spot price first. The WIT
//! stays as it is: the host knows the pod it decides for.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::policy::wasm::{CatalogueQuery, InstanceQuery, InstanceType};
use crate::provider::plan::Market;

/// The annotation by which a pod asks for a market (`spot` or `on-demand`), read by orca's
/// default market plugin too.
pub const LAUNCH_TYPE_ANNOTATION: &str = "orca.research/launch-type";

/// A spot max price, which implies spot.
pub const MAX_SPOT_PRICE_ANNOTATION: &str = "orca.research/max-spot-price";

/// The market `pod` asks for: its `orca.research/launch-type` if orca knows the word, else
/// spot when it sets a spot max price.
pub fn asked_market(pod: &Pod) -> Option<Market> {
    let annotations = pod.metadata.annotations.as_ref()?;
    match annotations.get(LAUNCH_TYPE_ANNOTATION).map(|a| a.trim()) {
        Some("spot") => Some(Market::Spot),
        Some("on-demand") => Some(Market::OnDemand),
        _ => annotations
            .contains_key(MAX_SPOT_PRICE_ANNOTATION)
            .then_some(Market::Spot),
    }
}

/// A catalogue whose queries order by `market`'s price.
pub struct InMarket {
    inner: Arc<dyn CatalogueQuery>,
    market: Market,
}

impl CatalogueQuery for InMarket {
    fn query(&self, query: &InstanceQuery) -> Vec<InstanceType> {
        self.inner.query_in(query, self.market)
    }

    fn query_in(&self, query: &InstanceQuery, market: Market) -> Vec<InstanceType> {
        self.inner.query_in(query, market)
    }
}

/// `catalogue`, its queries ordered by `market` when one is asked (on demand: as it is).
pub fn in_market(
    catalogue: &Arc<dyn CatalogueQuery>,
    market: Option<Market>,
) -> Arc<dyn CatalogueQuery> {
    match market {
        Some(Market::Spot) => Arc::new(InMarket {
            inner: catalogue.clone(),
            market: Market::Spot,
        }),
        Some(Market::OnDemand) | None => catalogue.clone(),
    }
}
