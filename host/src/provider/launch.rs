//! What a launch is given: the pod resolved into a [`LaunchRequest`]; and what it returns:
//! the offering (instance type × market) that got the instance, and each offering passed over
//! on the way, so the pod's Events tell the whole story.

use std::collections::BTreeMap;
use std::fmt;

use jiff::Timestamp;

use super::zones::ZoneConstraint;
use super::{PodKey, ProviderError, VolumeAttachment};
use crate::provider::plan::{LaunchPlan, Market};
use crate::workload::WorkloadSpec;

/// Everything a provider is given to launch a pod's instance, built once by the Launch step
/// ([`crate::workload::launch_request`]): no provider reads the pod or the apiserver.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchRequest {
    pub pod: PodKey,
    pub plan: LaunchPlan,
    /// What the instance runs: every container, its environment and the pod's volumes, with
    /// the ConfigMaps and Secrets they use read.
    pub workload: WorkloadSpec,
    /// The machine image the pod asks for (its `orca.research/ami` annotation, validated);
    /// `None`: the provider's default.
    pub machine_image: Option<String>,
    /// The zones the pod may run in, its node's zone included.
    pub zones: ZoneConstraint,
    /// When the pod was created: a process younger than the pod may have forgotten requests
    /// made for it.
    pub created: Option<Timestamp>,
    /// The pod's annotations, for what a provider takes from them per pod: settings (the
    /// simulated provider's behaviour), and the [`LaunchProgress`] it left on the pod.
    pub annotations: BTreeMap<String, String>,
}

/// An instance type in a market: the unit capacity is had or not had in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Offering {
    pub instance_type: String,
    pub market: Market,
}

impl fmt::Display for Offering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.instance_type, self.market.as_str())
    }
}

/// An offering that could not be launched, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct PassedOver {
    pub offering: Offering,
    pub error: ProviderError,
}

/// The pod has an instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Launched {
    pub instance_id: String,
    pub offering: Offering,
    /// The instance existed already (an earlier attempt, before a restart).
    pub adopted: bool,
    pub passed_over: Vec<PassedOver>,
    /// How the provider chose among the offerings, when it did not simply take the first
    /// that launched (an EC2 Fleet's allocation strategy, the zone it picked).
    pub chosen_by: Option<String>,
    /// The availability zone the instance runs in, when the provider knows it.
    pub zone: Option<String>,
    /// The volumes it gets attached once it runs, each at its device (none attached yet).
    pub volumes: Vec<VolumeAttachment>,
}

/// The pod has no instance that the provider knows of: the last error decides what happens
/// to it.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchFailed {
    pub error: ProviderError,
    pub passed_over: Vec<PassedOver>,
    /// The last request may have launched an instance whose answer never arrived (the
    /// connection dropped, a timeout, a server error): one may appear later.
    pub in_doubt: bool,
    /// Where the provider stands in the pod's launch now, for the pod to carry.
    pub progress: Option<LaunchProgress>,
}

impl LaunchFailed {
    pub fn new(error: ProviderError) -> LaunchFailed {
        LaunchFailed {
            error,
            passed_over: Vec::new(),
            in_doubt: false,
            progress: None,
        }
    }
}

/// How far a provider got with a pod's launch, kept on the pod as the annotation
/// `annotation` so that a restarted process, or a replica taking the node over, resumes there
/// instead of repeating requests already answered (the aws provider: how many of the pod's
/// fleet tokens EC2 answered with nothing).
///
/// # Guarantees
/// It rides on the status write that follows the failed launch, never in a write of its own;
/// the provider reads it back from the [`LaunchRequest::annotations`] `create` is given. A missing or stale value only
/// costs repeated requests, never a second instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchProgress {
    pub annotation: &'static str,
    pub value: String,
}

impl From<ProviderError> for LaunchFailed {
    fn from(error: ProviderError) -> LaunchFailed {
        LaunchFailed::new(error)
    }
}

/// The offerings a plan allows, in the order to try them: every candidate in the chosen
/// market, then, for spot that may fall back, every candidate on demand.
pub fn offerings(plan: &LaunchPlan) -> Vec<Offering> {
    let in_market = |market| {
        plan.candidates.iter().map(move |c| Offering {
            instance_type: c.instance_type.clone(),
            market,
        })
    };
    let mut all: Vec<Offering> = in_market(plan.market.market).collect();
    if plan.market.market == Market::Spot && plan.market.fallback_to_on_demand {
        all.extend(in_market(Market::OnDemand));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::plan::{InstanceCandidate, MarketDecision};

    fn plan(market: Market, fallback: bool) -> LaunchPlan {
        LaunchPlan {
            candidates: ["m5.large", "m6i.large"]
                .map(|t| InstanceCandidate {
                    instance_type: t.to_owned(),
                    reason: String::new(),
                })
                .to_vec(),
            market: MarketDecision {
                market,
                max_price: None,
                fallback_to_on_demand: fallback,
                reason: String::new(),
                allocation_strategy: None,
                mark_on_rebalance: false,
            },
            tags: Default::default(),
        }
    }

    fn names(plan: &LaunchPlan) -> Vec<String> {
        offerings(plan).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn spot_with_fallback_tries_every_spot_offering_before_on_demand() {
        assert_eq!(
            names(&plan(Market::Spot, true)),
            [
                "m5.large spot",
                "m6i.large spot",
                "m5.large on-demand",
                "m6i.large on-demand"
            ]
        );
    }

    #[test]
    fn without_fallback_only_the_chosen_market_is_tried() {
        assert_eq!(
            names(&plan(Market::Spot, false)),
            ["m5.large spot", "m6i.large spot"]
        );
        assert_eq!(
            names(&plan(Market::OnDemand, true)),
            ["m5.large on-demand", "m6i.large on-demand"]
        );
    }
}
