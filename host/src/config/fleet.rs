//! `provider.aws.launchApi` and `provider.aws.fleet`: how instances are launched — one EC2
//! Fleet per launch (every candidate type in every subnet, EC2 picks) or the older walk of
//! one `RunInstances` per offering.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::provider::plan::{AllocationStrategy, Market};

/// The EC2 API a launch goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LaunchApi {
    /// One `CreateFleet` (type `instant`) per market: EC2 chooses among every candidate type
    /// in every subnet at once and answers why it passed the others over.
    Fleet,
    /// One `RunInstances` per offering, in the selector's order, until one launches.
    RunInstances,
}

/// The allocation strategies of fleet launches, per market.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct FleetConfig {
    /// How a spot fleet picks its pool: price-capacity-optimized (default),
    /// capacity-optimized or lowest-price.
    pub spot_allocation_strategy: AllocationStrategy,
    /// How an on-demand fleet picks its pool: prioritized (default: the selector's order) or
    /// lowest-price.
    pub on_demand_allocation_strategy: AllocationStrategy,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            spot_allocation_strategy: AllocationStrategy::PriceCapacityOptimized,
            on_demand_allocation_strategy: AllocationStrategy::Prioritized,
        }
    }
}

impl FleetConfig {
    /// The strategy for a fleet in `market`.
    pub fn strategy_for(&self, market: Market) -> AllocationStrategy {
        match market {
            Market::Spot => self.spot_allocation_strategy,
            Market::OnDemand => self.on_demand_allocation_strategy,
        }
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (field, market, strategy) in [
            (
                "provider.aws.fleet.spotAllocationStrategy",
                Market::Spot,
                self.spot_allocation_strategy,
            ),
            (
                "provider.aws.fleet.onDemandAllocationStrategy",
                Market::OnDemand,
                self.on_demand_allocation_strategy,
            ),
        ] {
            if !strategy.allowed_for(market) {
                return Err(ConfigError::invalid(
                    field,
                    strategy.as_str(),
                    &format!(
                        "one of {} (EC2 Fleet does not take {strategy} for {} capacity)",
                        AllocationStrategy::allowed_names(market),
                        market.as_str()
                    ),
                ));
            }
        }
        Ok(())
    }
}
