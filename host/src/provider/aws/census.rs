//! The census of this cluster's live instances for the namespaces' caps (see
//! [`crate::spend::census`]): one paginated `DescribeInstances` filtered by `ManagedBy` and
//! the cluster's id, whatever node or replica launched them, in every state EC2 still lists
//! (so an instance shown ended is told from one a stale listing left out).

use std::sync::Arc;

use async_trait::async_trait;

use super::api::Ec2Instance;
use super::classify::provider_error;
use super::listing::ClusterListing;
use crate::provider::ProviderError;
use crate::provider::ownership::{TAG_POD_NAMESPACE, TAG_POD_UID};
use crate::spend::census::{Census, CensusInstance, TAG_SPOT_MAX_PRICE};

/// The cluster's instances in EC2, from the listing the cost loop shares.
pub struct Ec2Census {
    pub listing: Arc<ClusterListing>,
}

#[async_trait]
impl Census for Ec2Census {
    async fn instances(&self) -> Result<Vec<CensusInstance>, ProviderError> {
        let listed = self.listing.instances().await.map_err(provider_error)?;
        Ok(listed
            .instances
            .iter()
            .filter_map(census_instance)
            .collect())
    }
}

/// An instance that names its pod, as the census counts it; one that does not is no pod's
/// and is left to orphan collection.
fn census_instance(instance: &Ec2Instance) -> Option<CensusInstance> {
    Some(CensusInstance {
        live: instance.state.needs_termination(),
        instance_id: instance.instance_id.clone(),
        namespace: instance.tags.get(TAG_POD_NAMESPACE)?.clone(),
        pod_uid: instance.tags.get(TAG_POD_UID)?.clone(),
        instance_type: instance.instance_type.clone(),
        market: instance.market(),
        spot_max_price: instance
            .tags
            .get(TAG_SPOT_MAX_PRICE)
            .and_then(|price| price.parse().ok()),
    })
}
