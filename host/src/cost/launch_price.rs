//! The price per hour of what was launched, for the decision record and its `PolicyDecision`
//! Event: on demand, the catalogue's price; spot, the price of the pool launched into (its type
//! in its zone) as the cost loop last read it from `DescribeSpotPriceHistory`, else the
//! catalogue's spot price for the type (also from `DescribeSpotPriceHistory`, the lowest across
//! zones), else the on-demand price. Read from memory only: a launch never waits on a price.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::pools::SpotPool;
use super::record::PriceSource;
use crate::policy::catalogue::InstanceCatalogue;
use crate::policy::guardrails::Price;
use crate::provider::plan::Market;
use crate::support::errors::lock;

/// The prices a launch is recorded at.
pub struct LaunchPrices {
    catalogue: Arc<InstanceCatalogue>,
    /// Each pool's price now, as the cost loop last read it.
    pools: Mutex<HashMap<SpotPool, Price>>,
}

impl LaunchPrices {
    pub fn new(catalogue: Arc<InstanceCatalogue>) -> LaunchPrices {
        LaunchPrices {
            catalogue,
            pools: Mutex::new(HashMap::new()),
        }
    }

    /// The pools' prices now, replacing those known.
    pub fn set_pools(&self, pools: HashMap<SpotPool, Price>) {
        *lock(&self.pools) = pools;
    }

    /// The price per hour of an instance of `instance_type` in `market` and `zone`, and where
    /// it came from; `None` when nothing prices it.
    pub fn at_launch(
        &self,
        instance_type: &str,
        market: Market,
        zone: Option<&str>,
    ) -> Option<(Price, PriceSource)> {
        let listed = self.catalogue.get(instance_type);
        let on_demand = listed.as_ref().and_then(|t| Price::of(t.on_demand_price));
        match market {
            Market::OnDemand => on_demand.map(|price| (price, PriceSource::OnDemandCatalogue)),
            Market::Spot => {
                let pool = zone.and_then(|zone| {
                    lock(&self.pools)
                        .get(&SpotPool {
                            instance_type: instance_type.to_owned(),
                            zone: zone.to_owned(),
                        })
                        .copied()
                });
                pool.map(|price| (price, PriceSource::SpotPriceHistory))
                    .or_else(|| {
                        let spot = listed.as_ref().and_then(|t| Price::of(t.spot_price))?;
                        Some((spot, PriceSource::SpotCatalogue))
                    })
                    .or_else(|| on_demand.map(|price| (price, PriceSource::SpotAtOnDemand)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_is_priced_by_its_pool_else_the_catalogue_and_says_which() {
        let catalogue = Arc::new(InstanceCatalogue::bundled("us-east-1").unwrap());
        let on_demand = Price::of(catalogue.get("m5.large").unwrap().on_demand_price).unwrap();
        let prices = LaunchPrices::new(catalogue.clone());
        let zone = Some("us-east-1a");
        assert_eq!(
            prices.at_launch("m5.large", Market::OnDemand, zone),
            Some((on_demand, PriceSource::OnDemandCatalogue))
        );
        assert_eq!(
            prices.at_launch("m5.large", Market::Spot, zone),
            Some((on_demand, PriceSource::SpotAtOnDemand)),
            "no spot price known at all"
        );
        catalogue.set_spot_prices(&[("m5.large".to_owned(), 0.031)].into());
        assert_eq!(
            prices.at_launch("m5.large", Market::Spot, zone),
            Some((Price::from_usd(0.031).unwrap(), PriceSource::SpotCatalogue))
        );
        let pool = SpotPool {
            instance_type: "m5.large".to_owned(),
            zone: "us-east-1a".to_owned(),
        };
        prices.set_pools([(pool, Price::from_usd(0.037).unwrap())].into());
        assert_eq!(
            prices.at_launch("m5.large", Market::Spot, zone),
            Some((
                Price::from_usd(0.037).unwrap(),
                PriceSource::SpotPriceHistory
            ))
        );
        assert_eq!(
            prices.at_launch("m5.large", Market::Spot, Some("us-east-1b")),
            Some((Price::from_usd(0.031).unwrap(), PriceSource::SpotCatalogue)),
            "another pool"
        );
        assert_eq!(
            prices.at_launch("x9.nonesuch", Market::OnDemand, zone),
            None
        );
    }
}
