//! Strays: live instances of this cluster (its `orca.research/cluster-id`) tagged for a node
//! this process does not declare. A node renamed in `config.yaml` leaves its instances under
//! the old name, where no node's listing finds them; and another orca in the same cluster
//! launches under its own node names. The pod controllers collect orphans of their own nodes
//! only, so a process-wide sweep looks at the rest: a stray whose pod is gone from the cluster
//! (no pod with its namespace, name and UID) and that is older than `pods.orphanGracePeriod`
//! is terminated. A stray whose pod exists is left alone, whoever serves it: after a rename,
//! no instance of the cluster runs without its pod.
//!
//! # Guarantees
//! - Only instances carrying this cluster's id are ever looked at: another cluster's, and
//!   instances launched before instances carried the id, are never terminated here.
//! - A pod's presence is read from the apiserver right before the decision, never from a
//!   cache: a replica that stalled and woke up cannot act on a stale view.
//! - An instance without the pod tags that name its pod is left alone: what cannot be told
//!   from a pod's is not orca's to end.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use tokio_util::sync::CancellationToken;

use super::api::{Ec2Api, Ec2Instance, Filter};
use super::{LIVE_STATES, MAX_TERMINATE, terminate_batch};
use crate::provider::PodKey;
use crate::provider::ownership::{TAG_NODE, TAG_POD_NAME, TAG_POD_NAMESPACE, TAG_POD_UID};
use crate::support::errors::error_chain;

/// Whether a pod still exists in the cluster.
#[async_trait]
pub trait PodPresence: Send + Sync + 'static {
    /// True when a pod with `pod`'s namespace, name and UID exists now.
    ///
    /// # Errors
    /// The apiserver could not tell; the stray is looked at again next sweep.
    async fn exists(&self, pod: &PodKey) -> Result<bool, kube::Error>;
}

/// Reads pods from the apiserver: a list of one name (orca's ClusterRole lists pods; it does
/// not get them).
pub struct ApiPodPresence(pub kube::Client);

#[async_trait]
impl PodPresence for ApiPodPresence {
    async fn exists(&self, pod: &PodKey) -> Result<bool, kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.0.clone(), &pod.namespace);
        let params = ListParams::default().fields(&format!("metadata.name={}", pod.name));
        let listed = api.list(&params).await?;
        Ok(listed
            .items
            .iter()
            .any(|found| found.metadata.uid.as_deref() == Some(pod.uid.as_str())))
    }
}

/// One stray: an instance, and the pod its tags name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stray {
    pub instance_id: String,
    pub node: String,
    pub pod: PodKey,
}

/// The strays among `listed` (this cluster's live instances) that are old enough to be
/// collected: tagged for a node not in `declared`, launched before `cutoff`, naming their pod.
pub fn strays(listed: &[Ec2Instance], declared: &HashSet<String>, cutoff: Timestamp) -> Vec<Stray> {
    listed
        .iter()
        .filter(|instance| instance.state.needs_termination() && instance.launch_time <= cutoff)
        .filter_map(|instance| {
            let node = instance.tags.get(TAG_NODE)?;
            if declared.contains(node) {
                return None;
            }
            Some(Stray {
                instance_id: instance.instance_id.clone(),
                node: node.clone(),
                pod: PodKey {
                    namespace: instance.tags.get(TAG_POD_NAMESPACE)?.clone(),
                    name: instance.tags.get(TAG_POD_NAME)?.clone(),
                    uid: instance.tags.get(TAG_POD_UID)?.clone(),
                },
            })
        })
        .collect()
}

/// The sweep's settings and parts.
pub struct StraySweep {
    pub api: Arc<dyn Ec2Api>,
    pub pods: Arc<dyn PodPresence>,
    pub cluster_id: String,
    /// Every node this process declares, served here or by another replica.
    pub declared: HashSet<String>,
    /// `pods.orphanGracePeriod`: the sweep's period, and the least age of a stray it ends.
    pub grace: Duration,
}

impl StraySweep {
    /// Sweeps every grace period until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.grace.max(Duration::from_secs(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(error) = self.sweep_once().await {
                tracing::warn!(%error, "sweeping for instances of nodes no longer declared failed; retrying next period");
            }
        }
    }

    /// One sweep; answers the instances whose termination EC2 accepted.
    ///
    /// # Errors
    /// Listing the cluster's instances failed.
    pub async fn sweep_once(&self) -> Result<Vec<String>, super::api::ApiError> {
        let [managed, cluster] = Filter::cluster_instances(&self.cluster_id);
        let filters = [
            managed,
            cluster,
            Filter::new("instance-state-name", LIVE_STATES.map(str::to_owned)),
        ];
        let listed = self.api.describe_instances(&filters).await?;
        let grace = jiff::SignedDuration::try_from(self.grace).unwrap_or(jiff::SignedDuration::MAX);
        let cutoff = Timestamp::now()
            .checked_sub(grace)
            .unwrap_or(Timestamp::MIN);
        let mut gone = Vec::new();
        for stray in strays(&listed, &self.declared, cutoff) {
            match self.pods.exists(&stray.pod).await {
                Ok(true) => {}
                Ok(false) => gone.push(stray),
                Err(error) => {
                    tracing::debug!(pod = %stray.pod, error = %error_chain(&error), "cannot tell whether a stray's pod exists; looking again next sweep");
                }
            }
        }
        let mut terminated = Vec::new();
        for batch in gone.chunks(MAX_TERMINATE) {
            let ids: Vec<String> = batch.iter().map(|s| s.instance_id.clone()).collect();
            let answers = terminate_batch(self.api.as_ref(), ids).await?;
            for stray in batch {
                match answers.get(&stray.instance_id) {
                    Some(Ok(crate::provider::Termination::Requested)) => {
                        tracing::warn!(instance = %stray.instance_id, node = %stray.node, pod = %stray.pod, "terminated an instance of this cluster whose pod is gone, tagged for a node this process does not declare (renamed, or another orca's)");
                        terminated.push(stray.instance_id.clone());
                    }
                    Some(Ok(crate::provider::Termination::Unknown)) => {}
                    Some(Err(error)) => {
                        tracing::warn!(instance = %stray.instance_id, node = %stray.node, pod = %stray.pod, %error, "terminating a stray instance whose pod is gone failed; retrying next sweep");
                    }
                    None => {}
                }
            }
        }
        Ok(terminated)
    }
}

#[cfg(test)]
mod tests;
