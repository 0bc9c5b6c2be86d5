//! The `LaunchPlan`: what the policy decided for one pod, and what a provider executes.
//! Policy produces it; providers consume it; neither knows how the other works.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Everything a provider needs to launch one pod's instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchPlan {
    /// Instance types in order of preference; a provider tries the next on a capacity error.
    pub candidates: Vec<InstanceCandidate>,
    pub market: MarketDecision,
    /// Tags (EC2) or labels (simulated) put on the instance.
    pub tags: BTreeMap<String, String>,
}

#[cfg(test)]
impl LaunchPlan {
    /// One on-demand `instance_type`, no fallback, no tags: the plan unit tests launch with.
    pub fn on_demand(instance_type: &str) -> LaunchPlan {
        LaunchPlan {
            candidates: vec![InstanceCandidate {
                instance_type: instance_type.into(),
                reason: "test".into(),
            }],
            market: MarketDecision {
                market: Market::OnDemand,
                max_price: None,
                fallback_to_on_demand: false,
                reason: "test".into(),
                allocation_strategy: None,
                mark_on_rebalance: false,
            },
            tags: BTreeMap::new(),
        }
    }
}

/// One instance type the pod may run on, and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceCandidate {
    pub instance_type: String,
    pub reason: String,
}

/// Spot or on-demand.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Market {
    /// Spare EC2 capacity at a discount, which EC2 may take back with two minutes' warning.
    Spot,
    /// Capacity paid by the second at the list price, never interrupted.
    OnDemand,
}

impl Market {
    pub fn as_str(self) -> &'static str {
        match self {
            Market::Spot => "spot",
            Market::OnDemand => "on-demand",
        }
    }

    /// `spot` or `on-demand`, as `orca.research/launch-type` and the market plugin's settings
    /// spell them.
    pub fn parse(text: &str) -> Option<Market> {
        match text {
            "spot" => Some(Market::Spot),
            "on-demand" => Some(Market::OnDemand),
            _ => None,
        }
    }
}

/// How EC2 Fleet picks the pool (instance type × zone) of one launch among those offered, in
/// EC2's words. Spot takes the first three, on-demand the last two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AllocationStrategy {
    /// Spot: the pools least likely to be interrupted, then the cheapest of those (what AWS
    /// and Karpenter recommend).
    PriceCapacityOptimized,
    /// Spot: the pools least likely to be interrupted, whatever they cost.
    CapacityOptimized,
    /// The cheapest pool, whatever its interruption rate.
    LowestPrice,
    /// On-demand: the selector's order (its first candidate first).
    Prioritized,
}

impl AllocationStrategy {
    pub const ALL: [AllocationStrategy; 4] = [
        AllocationStrategy::PriceCapacityOptimized,
        AllocationStrategy::CapacityOptimized,
        AllocationStrategy::LowestPrice,
        AllocationStrategy::Prioritized,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AllocationStrategy::PriceCapacityOptimized => "price-capacity-optimized",
            AllocationStrategy::CapacityOptimized => "capacity-optimized",
            AllocationStrategy::LowestPrice => "lowest-price",
            AllocationStrategy::Prioritized => "prioritized",
        }
    }

    /// The strategies EC2 Fleet accepts for `market`, for messages: `lowest-price, prioritized`.
    pub fn allowed_names(market: Market) -> String {
        AllocationStrategy::ALL
            .into_iter()
            .filter(|s| s.allowed_for(market))
            .map(AllocationStrategy::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether EC2 Fleet accepts the strategy for `market`.
    pub fn allowed_for(self, market: Market) -> bool {
        match market {
            Market::Spot => self != AllocationStrategy::Prioritized,
            Market::OnDemand => matches!(
                self,
                AllocationStrategy::LowestPrice | AllocationStrategy::Prioritized
            ),
        }
    }
}

impl std::fmt::Display for AllocationStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The market decision for a pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarketDecision {
    pub market: Market,
    /// USD per hour; only for spot.
    pub max_price: Option<f64>,
    /// Whether a spot capacity error may fall back to on-demand.
    pub fallback_to_on_demand: bool,
    pub reason: String,
    /// How EC2 Fleet picks among the candidates for `market`; `None`: the node's configured
    /// strategy. An on-demand fallback always uses the configured on-demand strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_strategy: Option<AllocationStrategy>,
    /// Whether a rebalance recommendation marks the pod `DisruptionTarget` at once.
    #[serde(default)]
    pub mark_on_rebalance: bool,
}
