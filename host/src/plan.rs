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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Market {
    Spot,
    OnDemand,
}

impl Market {
    pub fn as_str(self) -> &'static str {
        match self {
            Market::Spot => "spot",
            Market::OnDemand => "on-demand",
        }
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
}
