//! Publishing a pod's resource usage to CloudWatch (`provider.aws.metrics`): the instance
//! samples its containers and GPUs every interval and sends the figures with
//! `aws cloudwatch put-metric-data`; orca reads them back by the names below.
//!
//! Every interval (on the clock's multiples of it), the bootstrap publishes, to the configured
//! namespace, with the time of the sample:
//!
//! - [`METRIC_CPU`] (`Seconds`; dimensions `PodUID`, `Container`): the CPU time the container
//!   has used since it started, from its cgroup (v2): `cpu.stat`'s `usage_usec`;
//! - [`METRIC_MEMORY`] (`Bytes`; `PodUID`, `Container`): its working set, as the kubelet counts
//!   it: `memory.current` less `memory.stat`'s `inactive_file`, at least 0;
//! - [`METRIC_GPU_UTILIZATION`] (`Percent`): each GPU's utilization (`PodUID`, `Gpu`), and the
//!   mean over the GPUs (`PodUID` alone);
//! - [`METRIC_GPU_MEMORY`] (`Bytes`): each GPU's memory in use (`PodUID`, `Gpu`), and the sum
//!   over the GPUs (`PodUID` alone).
//!
//! Only running containers are sampled (init containers and sidecars included); the GPU
//! figures only where `nvidia-smi` answers. Below 60 s the data are high-resolution ones
//! (`StorageResolution` 1). A publish that fails is reported on cloud-init's output and the
//! next sample is published as usual; the pod never waits on CloudWatch.
//!
//! # Caveats
//! - The instance role needs `cloudwatch:PutMetricData`, which has no resource to restrict:
//!   only the condition key `cloudwatch:namespace` keeps it to the namespace (statement
//!   `PublishThePodsMetrics` of `deploy/iam/workload.json`). Every container of every pod can
//!   use that role, so any of them can publish any figure for any pod in the namespace.
//! - [`METRIC_CPU`] is cumulative, and starts again from 0 when a container restarts: a rate
//!   is the difference between two samples of the same run.
//! - The GPUs are the instance's: with one pod per instance, the pod's.

use crate::config::PodMetricsConfig;

/// The container's cumulative CPU time, in seconds.
pub const METRIC_CPU: &str = "CpuUsageSeconds";
/// The container's working set, in bytes.
pub const METRIC_MEMORY: &str = "MemoryWorkingSetBytes";
/// A GPU's utilization (with [`DIMENSION_GPU`]) or the mean over the pod's GPUs, in percent.
pub const METRIC_GPU_UTILIZATION: &str = "GpuUtilization";
/// A GPU's memory in use (with [`DIMENSION_GPU`]) or the sum over the pod's GPUs, in bytes.
pub const METRIC_GPU_MEMORY: &str = "GpuMemoryUsedBytes";
/// The pod's UID, on every datum.
pub const DIMENSION_POD: &str = "PodUID";
/// The container's name, on [`METRIC_CPU`] and [`METRIC_MEMORY`].
pub const DIMENSION_CONTAINER: &str = "Container";
/// The GPU's index (`nvidia-smi`'s, from 0), on the per-GPU data.
pub const DIMENSION_GPU: &str = "Gpu";

/// Where and how often a pod's instance publishes its usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricPublishing {
    /// The CloudWatch namespace of every datum.
    pub namespace: String,
    /// Seconds between samples: one of CloudWatch's periods (1, 5, 10, 30 or a multiple of 60).
    pub interval_seconds: u32,
    /// The pod's UID, the [`DIMENSION_POD`] of every datum.
    pub pod_uid: String,
}

impl MetricPublishing {
    /// The publishing of the pod `pod_uid` under `config`.
    pub fn of(config: &PodMetricsConfig, pod_uid: &str) -> MetricPublishing {
        MetricPublishing {
            namespace: config.namespace.clone(),
            interval_seconds: config.interval_seconds(),
            pod_uid: pod_uid.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Seconds;

    #[test]
    fn the_publishing_takes_the_namespace_and_interval_from_the_config() {
        let config = PodMetricsConfig {
            namespace: "team-a/pods".to_owned(),
            interval: Seconds::from_secs(10),
            endpoint_url: Some("http://localhost:4566".to_owned()),
        };
        assert_eq!(
            MetricPublishing::of(&config, "u-9"),
            MetricPublishing {
                namespace: "team-a/pods".to_owned(),
                interval_seconds: 10,
                pod_uid: "u-9".to_owned(),
            }
        );
    }
}
