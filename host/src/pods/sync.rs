//! The status sync loop: one batched provider listing per period for the whole node, never one
//! call per pod. Pods whose instance changed are sent to the controller; instances with no pod
//! (past a grace period) are terminated.

use std::collections::HashSet;
use std::sync::Arc;

use futures::channel::mpsc;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio_util::sync::CancellationToken;

use super::instances::InstanceCache;
use crate::config::PodsConfig;
use crate::provider::{PodKey, Provider};

pub struct StatusSync {
    pub provider: Arc<dyn Provider>,
    pub instances: Arc<InstanceCache>,
    pub config: PodsConfig,
}

impl StatusSync {
    /// One listing; returns false when the provider could not be listed.
    pub async fn sync_once(&self, changed: &mpsc::UnboundedSender<ObjectRef<Pod>>) -> bool {
        match self.provider.statuses().await {
            Ok(listing) => {
                let count = listing.len();
                let changed_pods = self.instances.replace(listing);
                tracing::debug!(
                    instances = count,
                    changed = changed_pods.len(),
                    "synced instance statuses"
                );
                for pod in changed_pods {
                    let _ = changed.unbounded_send(object_ref(&pod));
                }
                true
            }
            Err(error) => {
                tracing::warn!(%error, "listing instances failed; keeping the last known statuses");
                false
            }
        }
    }

    /// Runs until shutdown: sync, then collect orphans once the pod store is complete.
    /// `listed` turns true once the pod store holds a complete listing; orphans are only
    /// collected after that, so a pod not yet seen is never mistaken for a missing one.
    pub async fn run(
        self,
        store: Store<Pod>,
        listed: tokio::sync::watch::Receiver<bool>,
        changed: mpsc::UnboundedSender<ObjectRef<Pod>>,
        shutdown: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(self.config.sync_interval.get());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if self.sync_once(&changed).await && *listed.borrow() {
                self.collect_orphans(&store).await;
            }
        }
    }

    /// Terminates live instances whose pod is not bound to this node any more, once they are
    /// older than the orphan grace period (so a pod being created right now is never hit).
    async fn collect_orphans(&self, store: &Store<Pod>) {
        let known: HashSet<String> = store
            .state()
            .iter()
            .filter_map(|pod| pod.metadata.uid.clone())
            .collect();
        let grace = SignedDuration::try_from(self.config.orphan_grace_period.get())
            .unwrap_or(SignedDuration::MAX);
        let cutoff = Timestamp::now()
            .saturating_sub(grace)
            .unwrap_or(Timestamp::MIN);
        for instance in self.instances.all() {
            if known.contains(&instance.pod.uid)
                || instance.state.is_finished()
                || instance.launched_at > cutoff
            {
                continue;
            }
            tracing::warn!(pod = %instance.pod, instance = %instance.instance_id, "terminating instance whose pod is gone");
            if let Err(error) = self.provider.delete(&instance.pod).await {
                tracing::warn!(pod = %instance.pod, %error, "terminating orphaned instance failed; retrying next sync");
            }
        }
    }
}

fn object_ref(pod: &PodKey) -> ObjectRef<Pod> {
    ObjectRef::new(&pod.name).within(&pod.namespace)
}
