//! Timing and counting every EC2 call by operation and result code, for the metrics port.
//! It sits inside the rate limit, so the latency is EC2's (with SDK retries), not the wait
//! for a token.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::api::{
    ApiError, Ec2Api, Ec2Instance, Ec2Volume, Filter, FleetAnswer, FleetRequest, InstanceTypeInfo,
    LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplateVersion, RunRequest, SpotHistoryQuery,
    SpotPriceChange,
};
use crate::metrics::Ec2Metrics;

pub struct Measured<A> {
    inner: A,
    metrics: Arc<Ec2Metrics>,
}

impl<A> Measured<A> {
    pub fn new(inner: A, metrics: Arc<Ec2Metrics>) -> Measured<A> {
        Measured { inner, metrics }
    }

    async fn measure<T>(
        &self,
        operation: &str,
        call: impl Future<Output = Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        let started = Instant::now();
        let result = call.await;
        let code = match &result {
            Ok(_) => "ok",
            Err(error) => error.code.as_str(),
        };
        self.metrics.record(operation, code, started.elapsed());
        result
    }
}

#[async_trait]
impl<A: Ec2Api> Ec2Api for Measured<A> {
    async fn run_instance(&self, request: &RunRequest) -> Result<Ec2Instance, ApiError> {
        self.measure("RunInstances", self.inner.run_instance(request))
            .await
    }

    async fn create_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, ApiError> {
        self.measure(
            "CreateLaunchTemplate",
            self.inner.create_launch_template(spec),
        )
        .await
    }

    async fn describe_launch_template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, ApiError> {
        self.measure(
            "DescribeLaunchTemplateVersions",
            self.inner.describe_launch_template_versions(name),
        )
        .await
    }

    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetAnswer, ApiError> {
        self.measure("CreateFleet", self.inner.create_fleet(request))
            .await
    }

    async fn subnet_zones(
        &self,
        subnet_ids: &[String],
    ) -> Result<HashMap<String, String>, ApiError> {
        self.measure("DescribeSubnets", self.inner.subnet_zones(subnet_ids))
            .await
    }

    async fn describe_instances(&self, filters: &[Filter]) -> Result<Vec<Ec2Instance>, ApiError> {
        self.measure("DescribeInstances", self.inner.describe_instances(filters))
            .await
    }

    async fn describe_volumes(&self, volume_ids: &[String]) -> Result<Vec<Ec2Volume>, ApiError> {
        self.measure("DescribeVolumes", self.inner.describe_volumes(volume_ids))
            .await
    }

    async fn attach_volume(
        &self,
        volume_id: &str,
        instance_id: &str,
        device: &str,
    ) -> Result<(), ApiError> {
        self.measure(
            "AttachVolume",
            self.inner.attach_volume(volume_id, instance_id, device),
        )
        .await
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, ApiError> {
        self.measure(
            "TerminateInstances",
            self.inner.terminate_instances(instance_ids),
        )
        .await
    }

    async fn create_tags(
        &self,
        instance_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        self.measure("CreateTags", self.inner.create_tags(instance_ids, tags))
            .await
    }

    async fn console_output(&self, instance_id: &str) -> Result<Option<String>, ApiError> {
        self.measure("GetConsoleOutput", self.inner.console_output(instance_id))
            .await
    }

    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>, ApiError> {
        self.measure(
            "DescribeInstanceTypes",
            self.inner.describe_instance_types(),
        )
        .await
    }

    async fn spot_prices(&self) -> Result<HashMap<String, f64>, ApiError> {
        self.measure("DescribeSpotPriceHistory", self.inner.spot_prices())
            .await
    }

    async fn spot_price_history(
        &self,
        query: &SpotHistoryQuery,
    ) -> Result<Vec<SpotPriceChange>, ApiError> {
        self.measure(
            "DescribeSpotPriceHistory",
            self.inner.spot_price_history(query),
        )
        .await
    }

    async fn instance_type_zones(&self) -> Result<HashMap<String, Vec<String>>, ApiError> {
        self.measure(
            "DescribeInstanceTypeOfferings",
            self.inner.instance_type_zones(),
        )
        .await
    }

    async fn ping(&self) -> Result<(), ApiError> {
        self.measure("DescribeAvailabilityZones", self.inner.ping())
            .await
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::provider::aws::fake::FakeEc2;

    #[tokio::test]
    async fn calls_are_counted_by_operation_and_code() {
        let mut registry = Registry::default();
        let metrics = Arc::new(Ec2Metrics::register(&mut registry));
        let fake = FakeEc2::default();
        fake.fail_next_call(ApiError::service("RequestLimitExceeded", "slow down"));
        let api = Measured::new(fake, metrics);
        assert!(api.describe_instances(&[]).await.is_err());
        assert!(api.describe_instances(&[]).await.is_ok());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"orca_ec2_calls_total{operation="DescribeInstances",code="RequestLimitExceeded"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"orca_ec2_calls_total{operation="DescribeInstances",code="ok"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"orca_ec2_call_duration_seconds_count{operation="DescribeInstances"} 2"#
            ),
            "{text}"
        );
    }
}
