//! A client-side rate limit in front of EC2: token buckets below the account's request
//! buckets, one for mutating calls and one for describes, so a burst of a thousand pods waits
//! briefly here instead of tripping `RequestLimitExceeded` for everyone.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;

use async_trait::async_trait;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use super::api::{
    ApiError, Ec2Api, Ec2Instance, Ec2Volume, Filter, FleetAnswer, FleetRequest, InstanceTypeInfo,
    LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplateVersion, RunRequest, SpotHistoryQuery,
    SpotPriceChange,
};
use crate::config::RateLimitConfig;

pub struct RateLimited<A> {
    inner: A,
    mutating: DefaultDirectRateLimiter,
    describe: DefaultDirectRateLimiter,
}

impl<A> RateLimited<A> {
    pub fn new(inner: A, limits: RateLimitConfig) -> RateLimited<A> {
        let bucket = |per_second: u32, burst: u32| {
            let per_second = NonZeroU32::new(per_second).unwrap_or(NonZeroU32::MIN);
            let burst = NonZeroU32::new(burst).unwrap_or(per_second);
            RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst))
        };
        RateLimited {
            inner,
            mutating: bucket(limits.mutating_per_second, limits.mutating_burst),
            describe: bucket(limits.describe_per_second, limits.describe_burst),
        }
    }
}

#[async_trait]
impl<A: Ec2Api> Ec2Api for RateLimited<A> {
    async fn run_instance(&self, request: &RunRequest) -> Result<Ec2Instance, ApiError> {
        self.mutating.until_ready().await;
        self.inner.run_instance(request).await
    }

    async fn create_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, ApiError> {
        self.mutating.until_ready().await;
        self.inner.create_launch_template(spec).await
    }

    async fn describe_launch_template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, ApiError> {
        self.describe.until_ready().await;
        self.inner.describe_launch_template_versions(name).await
    }

    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetAnswer, ApiError> {
        self.mutating.until_ready().await;
        self.inner.create_fleet(request).await
    }

    async fn subnet_zones(
        &self,
        subnet_ids: &[String],
    ) -> Result<HashMap<String, String>, ApiError> {
        self.describe.until_ready().await;
        self.inner.subnet_zones(subnet_ids).await
    }

    async fn describe_instances(&self, filters: &[Filter]) -> Result<Vec<Ec2Instance>, ApiError> {
        self.describe.until_ready().await;
        self.inner.describe_instances(filters).await
    }

    async fn describe_volumes(&self, volume_ids: &[String]) -> Result<Vec<Ec2Volume>, ApiError> {
        self.describe.until_ready().await;
        self.inner.describe_volumes(volume_ids).await
    }

    async fn attach_volume(
        &self,
        volume_id: &str,
        instance_id: &str,
        device: &str,
    ) -> Result<(), ApiError> {
        self.mutating.until_ready().await;
        self.inner
            .attach_volume(volume_id, instance_id, device)
            .await
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, ApiError> {
        self.mutating.until_ready().await;
        self.inner.terminate_instances(instance_ids).await
    }

    async fn create_tags(
        &self,
        instance_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        self.mutating.until_ready().await;
        self.inner.create_tags(instance_ids, tags).await
    }

    async fn console_output(&self, instance_id: &str) -> Result<Option<String>, ApiError> {
        self.describe.until_ready().await;
        self.inner.console_output(instance_id).await
    }

    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>, ApiError> {
        self.describe.until_ready().await;
        self.inner.describe_instance_types().await
    }

    async fn spot_prices(&self) -> Result<HashMap<String, f64>, ApiError> {
        self.describe.until_ready().await;
        self.inner.spot_prices().await
    }

    async fn spot_price_history(
        &self,
        query: &SpotHistoryQuery,
    ) -> Result<Vec<SpotPriceChange>, ApiError> {
        self.describe.until_ready().await;
        self.inner.spot_price_history(query).await
    }

    async fn instance_type_zones(&self) -> Result<HashMap<String, Vec<String>>, ApiError> {
        self.describe.until_ready().await;
        self.inner.instance_type_zones().await
    }

    async fn ping(&self) -> Result<(), ApiError> {
        self.describe.until_ready().await;
        self.inner.ping().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::provider::aws::fake::FakeEc2;

    #[tokio::test]
    async fn a_burst_beyond_the_bucket_waits_instead_of_reaching_ec2() {
        let limited = Arc::new(RateLimited::new(
            FakeEc2::default(),
            RateLimitConfig {
                mutating_per_second: 1,
                mutating_burst: 5,
                describe_per_second: 1,
                describe_burst: 3,
            },
        ));
        let calls = (0..10).map(|_| {
            let limited = limited.clone();
            tokio::spawn(async move { limited.terminate_instances(&[]).await })
        });
        let all = futures::future::join_all(calls);
        // Within a fifth of a second only the burst gets through; the rest wait their turn.
        let _ = tokio::time::timeout(Duration::from_millis(200), all).await;
        assert_eq!(limited.inner.count("TerminateInstances"), 5);
        // Describes have their own bucket.
        for _ in 0..3 {
            limited.ping().await.unwrap();
        }
        assert_eq!(limited.inner.count("DescribeAvailabilityZones"), 3);
    }
}
