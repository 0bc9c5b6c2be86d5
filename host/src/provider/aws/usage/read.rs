//! Reading every running pod's usage back from CloudWatch in as few calls as the API allows:
//! the pods' metrics ([`queries`]) go out [`MAX_QUERIES_PER_CALL`] at a time, each read over
//! the last few periods with the `Maximum` statistic (the newest value of a counter that only
//! grows, and of a gauge sampled once a period), and the answers are put back together per pod
//! and container ([`assemble`]).

use std::collections::HashMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::{
    CloudWatchApi, CloudWatchError, DataRequest, MAX_QUERIES_PER_CALL, MetricQuery, Series,
};
use crate::provider::aws::workload::{
    DIMENSION_CONTAINER, DIMENSION_POD, METRIC_CPU, METRIC_GPU_MEMORY, METRIC_GPU_UTILIZATION,
    METRIC_MEMORY,
};
use crate::provider::{ContainerUsage, GpuUsage, PodUsage, UsageQuery};

/// How many periods back a read looks: a sample that arrived late, or an instance that
/// missed a period, still shows; older figures are stale and left out.
const PERIODS_BACK: i64 = 3;

/// What one query reads for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// The container (index into the pod's `containers`) CPU seconds.
    Cpu(usize),
    /// The container's working set.
    Memory(usize),
    GpuUtilization,
    GpuMemory,
}

/// Where a query's answer goes: the pod (index into the pods asked for) and the figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub pod: usize,
    pub figure: Figure,
}

/// Reads pods' usage from one CloudWatch namespace.
pub struct UsageReader {
    pub api: Arc<dyn CloudWatchApi>,
    pub namespace: String,
    /// The instances' sampling interval, the period every figure is read at.
    pub period_seconds: u32,
}

impl UsageReader {
    /// What each of `pods` used as of `now`; pods without any figure are left out.
    ///
    /// # Errors
    /// The first call that failed: the figures of a partial read would show some pods as
    /// using nothing.
    pub async fn read(
        &self,
        pods: &[UsageQuery],
        now: Timestamp,
    ) -> Result<Vec<PodUsage>, CloudWatchError> {
        let (queries, targets) = queries(pods);
        let (start, end) = window(now, self.period_seconds);
        let mut series = Vec::with_capacity(queries.len());
        for chunk in queries.chunks(MAX_QUERIES_PER_CALL) {
            let request = DataRequest {
                namespace: self.namespace.clone(),
                queries: chunk.to_vec(),
                start,
                end,
                period_seconds: self.period_seconds,
            };
            series.extend(self.api.get_metric_data(&request).await?);
        }
        Ok(assemble(pods, &targets, series))
    }
}

/// Every metric `pods` have, in order, with where each answer goes: per container its CPU
/// seconds and working set, per GPU pod its GPUs' utilisation and memory (the pod's figures,
/// dimension `PodUID` alone). Ids are `q0`, `q1`, … in that order.
pub fn queries(pods: &[UsageQuery]) -> (Vec<MetricQuery>, Vec<Target>) {
    let mut queries = Vec::new();
    let mut targets = Vec::new();
    let mut add = |metric, dimensions, target| {
        queries.push(MetricQuery {
            id: format!("q{}", queries.len()),
            metric,
            dimensions,
        });
        targets.push(target);
    };
    for (pod, query) in pods.iter().enumerate() {
        let uid = &query.pod.uid;
        for (index, container) in query.containers.iter().enumerate() {
            let dimensions = vec![
                (DIMENSION_POD, uid.clone()),
                (DIMENSION_CONTAINER, container.clone()),
            ];
            add(
                METRIC_CPU,
                dimensions.clone(),
                Target {
                    pod,
                    figure: Figure::Cpu(index),
                },
            );
            add(
                METRIC_MEMORY,
                dimensions,
                Target {
                    pod,
                    figure: Figure::Memory(index),
                },
            );
        }
        if query.gpus {
            add(
                METRIC_GPU_UTILIZATION,
                vec![(DIMENSION_POD, uid.clone())],
                Target {
                    pod,
                    figure: Figure::GpuUtilization,
                },
            );
            add(
                METRIC_GPU_MEMORY,
                vec![(DIMENSION_POD, uid.clone())],
                Target {
                    pod,
                    figure: Figure::GpuMemory,
                },
            );
        }
    }
    (queries, targets)
}

/// The window a read covers: from [`PERIODS_BACK`] periods before the current one to the end
/// of the current one, on period boundaries (as CloudWatch aligns them).
pub fn window(now: Timestamp, period_seconds: u32) -> (Timestamp, Timestamp) {
    let period = i64::from(period_seconds.max(1));
    let current = now.as_second().div_euclid(period) * period;
    let at = |seconds: i64| {
        Timestamp::UNIX_EPOCH
            .checked_add(SignedDuration::from_secs(seconds))
            .unwrap_or(now)
    };
    (at(current - PERIODS_BACK * period), at(current + period))
}

/// The answers put back together per pod, in the order asked; a pod with no figure at all
/// is left out, and so is a container with neither CPU nor memory figures.
pub fn assemble(pods: &[UsageQuery], targets: &[Target], series: Vec<Series>) -> Vec<PodUsage> {
    let by_id: HashMap<String, Series> = series.into_iter().map(|s| (s.id.clone(), s)).collect();
    let mut usage: Vec<PodUsage> = pods
        .iter()
        .map(|query| PodUsage {
            pod: query.pod.clone(),
            containers: query
                .containers
                .iter()
                .map(|name| ContainerUsage {
                    name: name.clone(),
                    cpu: Vec::new(),
                    memory: None,
                })
                .collect(),
            gpu: None,
        })
        .collect();
    let mut gpu_memory = vec![None; pods.len()];
    for (index, target) in targets.iter().enumerate() {
        let Some(answer) = by_id.get(&format!("q{index}")) else {
            continue;
        };
        let mut points = answer.points.clone();
        points.sort_by_key(|point| std::cmp::Reverse(point.at));
        let newest = points.first().copied();
        let pod = &mut usage[target.pod];
        match target.figure {
            Figure::Cpu(c) => pod.containers[c].cpu = points.into_iter().take(2).collect(),
            Figure::Memory(c) => pod.containers[c].memory = newest,
            Figure::GpuUtilization => {
                pod.gpu = newest.map(|utilization_percent| GpuUsage {
                    utilization_percent,
                    memory_bytes: None,
                });
            }
            Figure::GpuMemory => gpu_memory[target.pod] = newest,
        }
    }
    for (pod, memory) in usage.iter_mut().zip(gpu_memory) {
        if let Some(gpu) = &mut pod.gpu {
            gpu.memory_bytes = memory;
        }
        pod.containers
            .retain(|c| !c.cpu.is_empty() || c.memory.is_some());
    }
    usage.retain(|pod| !pod.containers.is_empty() || pod.gpu.is_some());
    usage
}

#[cfg(test)]
mod tests;
