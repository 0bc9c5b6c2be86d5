//! The usage of the pods running on the served nodes, read from each node's provider once a
//! period ([`UsageLoop`]) into one store ([`PodUsages`]) that the kubelet API serves
//! (`/metrics/resource`, `/stats/summary`) and orca's `/metrics` shows (the GPU gauges). A
//! scrape never waits on CloudWatch: it reads what the last period read.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio_util::sync::CancellationToken;

use super::served_nodes::ServedNodes;
use crate::provider::{PodKey, PodUsage, UsageQuery};

/// The resource a pod asks GPUs with.
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Each running pod's usage as last read, by pod UID.
#[derive(Debug, Default)]
pub struct PodUsages {
    by_uid: RwLock<HashMap<String, PodUsage>>,
}

impl PodUsages {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, PodUsage>> {
        self.by_uid
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, PodUsage>> {
        self.by_uid
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The pod's usage, if it has figures.
    pub fn of(&self, uid: &str) -> Option<PodUsage> {
        self.read().get(uid).cloned()
    }

    /// Every pod's usage, in no order.
    pub fn all(&self) -> Vec<PodUsage> {
        self.read().values().cloned().collect()
    }

    /// A read of `asked` answered `fresh`: their figures replace what was kept, and a pod
    /// asked for without figures now has none.
    pub fn replace(&self, asked: &[UsageQuery], fresh: Vec<PodUsage>) {
        let mut by_uid = self.write();
        for query in asked {
            by_uid.remove(&query.pod.uid);
        }
        for usage in fresh {
            by_uid.insert(usage.pod.uid.clone(), usage);
        }
    }

    /// Forgets every pod not in `running` (UIDs): stopped, gone, or no longer served here.
    pub fn retain(&self, running: &HashSet<String>) {
        self.write().retain(|uid, _| running.contains(uid));
    }
}

/// What to ask a pod's provider for: a running pod's containers, and whether it has GPUs.
/// `None` for a pod that is not running (nothing to sample) or not stored yet.
pub fn usage_query(pod: &Pod) -> Option<UsageQuery> {
    let running = pod
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        == Some("Running");
    if !running || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let key = PodKey::of(pod)?;
    let spec = pod.spec.as_ref()?;
    let all = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    let mut containers = Vec::new();
    let mut gpus = false;
    for container in all {
        containers.push(container.name.clone());
        gpus |= container.resources.as_ref().is_some_and(|resources| {
            [&resources.limits, &resources.requests]
                .into_iter()
                .flatten()
                .any(|amounts| amounts.get(GPU_RESOURCE).is_some_and(|q| q.0.trim() != "0"))
        });
    }
    Some(UsageQuery {
        pod: key,
        containers,
        gpus,
    })
}

/// Reads every served node's running pods' usage from its provider, once a `period`.
pub struct UsageLoop {
    pub served: Arc<ServedNodes>,
    pub usages: Arc<PodUsages>,
    pub period: Duration,
}

impl UsageLoop {
    pub async fn run(self, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(self.period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => self.read_once().await,
            }
        }
    }

    /// One period: each served node's running pods read from its provider (one node's failed
    /// read keeps that node's last figures), then the pods no longer running forgotten.
    pub async fn read_once(&self) {
        let mut running = HashSet::new();
        for (node, served) in self.served.each() {
            let asked: Vec<UsageQuery> = served
                .pods
                .state()
                .iter()
                .filter_map(|pod| usage_query(pod))
                .collect();
            running.extend(asked.iter().map(|query| query.pod.uid.clone()));
            if asked.is_empty() {
                continue;
            }
            match served.provider.usage(&asked).await {
                Ok(fresh) => {
                    tracing::debug!(
                        %node,
                        pods = asked.len(),
                        with_figures = fresh.len(),
                        "read the pods' usage"
                    );
                    self.usages.replace(&asked, fresh);
                }
                Err(error) => tracing::warn!(
                    %node,
                    pods = asked.len(),
                    error = %error,
                    "reading the pods' usage failed; the last figures are kept"
                ),
            }
        }
        self.usages.retain(&running);
    }
}

#[cfg(test)]
mod tests;
