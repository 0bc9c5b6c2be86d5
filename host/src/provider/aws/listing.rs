//! One listing of the cluster's instances (`Filter::cluster_instances`) shared by the loops
//! that each need it every `pods.syncInterval`: the cost loop and the census for the
//! namespaces' caps. A listing younger than `max_age` is answered again, and a loop asking
//! while a listing is in flight waits for that one, so the two loops together make one
//! paginated `DescribeInstances` per period rather than one each.
//!
//! `max_age` is kept under the sync period, so neither loop ever counts from a listing older
//! than its own period would have given it (a launch in progress is counted by its
//! reservation until a listing shows its instance, so an older listing never frees room).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;

use super::api::{ApiError, Ec2Api, Ec2Instance, Filter};

/// The cluster's instances as one `DescribeInstances` showed them.
#[derive(Debug, Clone)]
pub struct Listed {
    /// When the listing was asked for: every instance it shows live was live then or later.
    pub at: Timestamp,
    pub instances: Arc<Vec<Ec2Instance>>,
}

/// The shared listing.
pub struct ClusterListing {
    api: Arc<dyn Ec2Api>,
    /// The UID of the cluster's `kube-system` namespace: whose instances are listed.
    cluster_id: String,
    max_age: Duration,
    /// The last listing and when it was asked for (by the monotonic clock, for its age);
    /// held across a listing in flight.
    last: tokio::sync::Mutex<Option<(Instant, Listed)>>,
}

impl ClusterListing {
    /// A listing shared by loops that run every `period`: one is reused for up to half of it.
    pub fn new(api: Arc<dyn Ec2Api>, cluster_id: String, period: Duration) -> ClusterListing {
        ClusterListing {
            api,
            cluster_id,
            max_age: period / 2,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// The cluster's instances, from a listing asked for less than `max_age` ago, else a new
    /// one. A failed listing is not kept: the next caller asks again.
    ///
    /// # Errors
    /// The listing failed.
    pub async fn instances(&self) -> Result<Listed, ApiError> {
        let mut last = self.last.lock().await;
        if let Some((asked, listed)) = last.as_ref()
            && asked.elapsed() < self.max_age
        {
            return Ok(listed.clone());
        }
        let asked = Instant::now();
        let at = Timestamp::now();
        let instances = self
            .api
            .describe_instances(&Filter::cluster_instances(&self.cluster_id))
            .await?;
        let listed = Listed {
            at,
            instances: Arc::new(instances),
        };
        *last = Some((asked, listed.clone()));
        Ok(listed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::aws::fake::FakeEc2;

    #[tokio::test]
    async fn loops_asking_within_half_a_period_share_one_listing() {
        let fake = Arc::new(FakeEc2::default());
        let shared = ClusterListing::new(fake.clone(), "c".to_owned(), Duration::from_secs(3600));
        let (a, b) = tokio::join!(shared.instances(), shared.instances());
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.at, b.at, "one listing, one time");
        shared.instances().await.unwrap();
        assert_eq!(fake.count("DescribeInstances"), 1, "{:?}", fake.calls());
        // Past half the period (here: a period of nothing), every ask lists again.
        let fresh = ClusterListing::new(fake.clone(), "c".to_owned(), Duration::ZERO);
        fresh.instances().await.unwrap();
        fresh.instances().await.unwrap();
        assert_eq!(fake.count("DescribeInstances"), 3, "{:?}", fake.calls());
    }
}
