//! The default policy written in Rust: the instance type from `orca.research/instance-type`
//! (or the configured default), the market from `orca.research/launch-type` and
//! `orca.research/max-spot-price`, and orca's ownership tags.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use super::{PlanError, Planner, PodAnnotations};
use crate::plan::{InstanceCandidate, LaunchPlan, Market, MarketDecision};
use crate::provider::PodKey;

/// Tag keys orca uses to find its instances again; the provider filters on them.
pub const TAG_MANAGED_BY: &str = "ManagedBy";
pub const TAG_NODE: &str = "orca.research/node";
pub const TAG_POD_NAMESPACE: &str = "orca.research/pod-namespace";
pub const TAG_POD_NAME: &str = "orca.research/pod-name";
pub const TAG_POD_UID: &str = "orca.research/pod-uid";

/// The native planner.
pub struct NativePlanner {
    node_name: String,
    default_instance_type: String,
    default_market: Market,
}

impl NativePlanner {
    pub fn new(
        node_name: &str,
        default_instance_type: &str,
        default_market: Market,
    ) -> NativePlanner {
        NativePlanner {
            node_name: node_name.to_owned(),
            default_instance_type: default_instance_type.to_owned(),
            default_market,
        }
    }
}

#[async_trait]
impl Planner for NativePlanner {
    async fn plan(&self, pod: &Pod) -> Result<LaunchPlan, PlanError> {
        let key = PodKey::of(pod).ok_or_else(|| PlanError {
            reason: "PolicyError",
            message: "pod has no name or uid".to_owned(),
        })?;
        let annotations = PodAnnotations::parse(pod)?;
        let candidate = match annotations.instance_type {
            Some(instance_type) => InstanceCandidate {
                instance_type,
                reason: "from annotation orca.research/instance-type".to_owned(),
            },
            None => InstanceCandidate {
                instance_type: self.default_instance_type.clone(),
                reason: "the configured default instance type".to_owned(),
            },
        };
        let market = match annotations.launch_type {
            Some(market) => MarketDecision {
                market,
                max_price: annotations.max_spot_price,
                fallback_to_on_demand: false,
                reason: "from annotation orca.research/launch-type".to_owned(),
            },
            None => MarketDecision {
                market: if annotations.max_spot_price.is_some() {
                    Market::Spot
                } else {
                    self.default_market
                },
                max_price: annotations.max_spot_price,
                fallback_to_on_demand: false,
                reason: "the configured default market".to_owned(),
            },
        };
        let tags: BTreeMap<String, String> = [
            (TAG_MANAGED_BY, "ORCA".to_owned()),
            (TAG_NODE, self.node_name.clone()),
            (TAG_POD_NAMESPACE, key.namespace.clone()),
            (TAG_POD_NAME, key.name.clone()),
            (TAG_POD_UID, key.uid.clone()),
            ("Name", format!("{}/{}", key.namespace, key.name)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Ok(LaunchPlan {
            candidates: vec![candidate],
            market,
            tags,
        })
    }
}
