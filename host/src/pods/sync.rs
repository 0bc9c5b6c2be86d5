//! The status sync loop: one batched provider listing per period for the whole node, never one
//! call per pod. Pods whose instance changed are sent to the controller; instances with no pod
//! (and extra instances of a pod), past a grace period, are terminated; records of pods that
//! left the store are dropped.
//!
//! # Orphans, and a store that lags
//! The pod store is a watch: it lags the apiserver, by milliseconds normally, by as long as a
//! replica was stopped (SIGSTOP, a frozen VM) when it runs again, by minutes when its watch
//! hung. An instance whose pod the store lacks is terminated only once a read of the
//! apiserver made after the listing, right before the call, finds no pod with its namespace,
//! name and UID. A pod that is gone never comes back (a new pod of that name has another
//! UID), so such an instance is an orphan for whichever replica serves the node, now or later:
//! a termination sent just before this replica's hold ended and landing after is still right.
//! The whole loop runs under the turn's tenure (`replicas::tenure`): it takes no step once
//! the hold has ended.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::channel::mpsc;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio_util::sync::CancellationToken;

use super::instances::InstanceCache;
use super::record::PodRecords;
use super::terminations::TerminationLedger;
use super::view::PodView;
use crate::config::PodsConfig;
use crate::metrics::ReconcileMetrics;
use crate::provider::aws::strays::PodPresence;
use crate::provider::{InstanceStatus, PodKey, Provider};
use crate::spend::NamespaceSpend;
use crate::support::heap::{self, TrimAfterDrain};

/// The least time between two listings a state-change notice asks for.
const NOTIFIED_SYNC_GAP: std::time::Duration = std::time::Duration::from_secs(1);

pub struct StatusSync {
    /// A listing now rather than at the next tick (an instance state-change notice), at most
    /// one a second.
    pub sync_now: Arc<tokio::sync::Notify>,
    pub provider: Arc<dyn Provider>,
    pub instances: Arc<InstanceCache>,
    pub records: Arc<PodRecords>,
    pub ledger: Arc<TerminationLedger>,
    pub config: PodsConfig,
    pub metrics: Arc<ReconcileMetrics>,
    /// The node served, for the log and the metrics.
    pub node: String,
    /// The namespaces' spend: reservations of pods gone from the node are dropped, and
    /// instances collected stop counting.
    pub spend: Arc<NamespaceSpend>,
    /// Whether an orphan's pod is gone, read from the apiserver right before the termination.
    pub presence: Arc<dyn PodPresence>,
}

/// Instances launched before instances carried the cluster's id are claimed (see
/// [`Provider::claim_untagged`]) at every sync of a serving turn's first `launchVisibilityGrace`,
/// then while a sync still claims some: an instance launched by an earlier orca just before
/// it stopped shows up in listings that late.
struct Claiming {
    since: Timestamp,
    done: bool,
    /// The unclaimed instances last reported, so the warning is given once per change.
    reported: Vec<String>,
}

impl StatusSync {
    /// One listing; returns how many instances the provider listed (its whole listing, before
    /// anything is set aside), or `None` when it could not be listed. `named` holds the
    /// instance each pod's status names (see [`named_instances`]); this process's own launches
    /// are added to it. With `present` (the store's pod UIDs, once complete), instances that
    /// are gone or going and whose pod is gone too concern nobody and are not kept: EC2 lists
    /// terminated instances for about an hour, and a busy node would otherwise hold an hour of
    /// them.
    pub async fn sync_once(
        &self,
        changed: &mpsc::UnboundedSender<ObjectRef<Pod>>,
        mut named: HashMap<String, String>,
        present: Option<&HashSet<String>>,
    ) -> Option<usize> {
        match self.provider.statuses().await {
            Ok(mut listing) => {
                let now = Timestamp::now();
                let whole = listing.len();
                // The whole listing: a request for an instance now shutting down is done even
                // when its pod is gone (it is not kept below), rather than waiting out the
                // visibility grace as if EC2 did not list it yet.
                self.ledger
                    .prune(&listing, now, self.config.launch_visibility_grace.get());
                if let Some(present) = present {
                    listing.retain(|instance| {
                        instance.state.needs_termination() || present.contains(&instance.pod.uid)
                    });
                }
                let count = listing.len();
                // After the listing: a launch answered while EC2 listed is named too.
                self.records.answered_launches(&mut named);
                let changed_pods = self.instances.replace(listing, &named);
                // When each pod's instance was last listed: the clock of the second look.
                for instance in self.instances.all() {
                    self.records.update(&instance.pod.uid, |record| {
                        record.last_listed = Some(now);
                    });
                }
                tracing::debug!(
                    instances = count,
                    changed = changed_pods.len(),
                    "synced instance statuses"
                );
                for pod in changed_pods {
                    let _ = changed.unbounded_send(object_ref(&pod));
                }
                Some(whole)
            }
            Err(error) => {
                tracing::warn!(%error, "listing instances failed; keeping the last known statuses");
                None
            }
        }
    }

    /// Runs until shutdown: sync, then (once the pod store is complete) drop the records of
    /// pods gone from it and collect orphans. `listed` turns true once the pod store holds a
    /// complete listing, so a pod not yet seen is never mistaken for a missing one.
    pub async fn run(
        self,
        store: Store<Pod>,
        listed: tokio::sync::watch::Receiver<bool>,
        changed: mpsc::UnboundedSender<ObjectRef<Pod>>,
        shutdown: CancellationToken,
    ) {
        let mut trim = TrimAfterDrain::default();
        let mut last_listing = 0;
        let mut tick = tokio::time::interval(self.config.sync_interval.get());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_sync = tokio::time::Instant::now();
        let mut claiming = Claiming {
            since: Timestamp::now(),
            done: false,
            reported: Vec::new(),
        };
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
                () = self.sync_now.notified() => {
                    let next = last_sync + NOTIFIED_SYNC_GAP;
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep_until(next) => {}
                    }
                }
            }
            last_sync = tokio::time::Instant::now();
            let named = named_instances(&store);
            if !*listed.borrow() {
                self.sync_once(&changed, named, None).await;
                continue;
            }
            let listing = self
                .sync_once(&changed, named, Some(&pod_uids(&store)))
                .await;
            let synced = listing.is_some();
            last_listing = listing.unwrap_or(last_listing);
            // The store as it is now, not as it was before the listing: a pod that arrived
            // while EC2 answered may already be deciding or launching, and dropping its
            // record would lose its decision (and what its launch got).
            let present = pod_uids(&store);
            let dropped = self.records.retain(&present);
            self.provider.retain_pods(&present);
            self.spend.retain(&self.node, &present);
            if dropped > 0 {
                tracing::debug!(dropped, "dropped the records of pods gone from the store");
            }
            // The provider's whole listing counts too. Instances of gone pods leave the cache
            // at once, but EC2 lists them for about an hour (the simulated provider for its
            // retention), and every pass allocates their listing until they age out. Counted,
            // the settled trim comes after the last of them, not before.
            let held = self.records.len() + self.instances.len() + last_listing;
            if trim.observe(held) {
                tracing::debug!(held, "giving freed memory back to the operating system");
                let released = tokio::task::spawn_blocking(heap::release_freed_memory).await;
                if !matches!(released, Ok(true)) {
                    tracing::debug!("the allocator did not give freed memory back");
                }
            }
            if synced {
                self.collect_orphans(&present).await;
            }
            if !claiming.done {
                self.claim_untagged(&present, &mut claiming).await;
            }
            self.metrics.held(self.records.len(), self.ledger.len());
        }
    }

    /// Terminates instances that hold resources but belong to no pod bound to this node (or
    /// are a pod's second instance), once they are older than the orphan grace period (so a
    /// pod being created right now is never hit). Each is asked once, and again if it is still
    /// listed two sync periods later. An instance whose pod `present` (the store) lacks is
    /// terminated only once the apiserver says its pod is gone (see the module's doc).
    async fn collect_orphans(&self, present: &HashSet<String>) {
        let grace = SignedDuration::try_from(self.config.orphan_grace_period.get())
            .unwrap_or(SignedDuration::MAX);
        let now = Timestamp::now();
        let cutoff = now.saturating_sub(grace).unwrap_or(Timestamp::MIN);
        let extras = self.instances.extras();
        let orphans = self
            .instances
            .all()
            .into_iter()
            .filter(|instance| !present.contains(&instance.pod.uid))
            .chain(extras);
        for instance in orphans {
            if !instance.state.needs_termination() || instance.launched_at > cutoff {
                continue;
            }
            if self.asked_recently(&instance, now) {
                continue;
            }
            if !present.contains(&instance.pod.uid) {
                match self.presence.exists(&instance.pod).await {
                    Ok(false) => {}
                    Ok(true) => {
                        tracing::info!(pod = %instance.pod, instance = %instance.instance_id, "the pod store lags the apiserver: the pod of this instance exists, so it is no orphan");
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(pod = %instance.pod, instance = %instance.instance_id, error = %crate::support::errors::error_chain(&error), "could not read whether the pod of this instance is gone; it is looked at again next sync");
                        continue;
                    }
                }
            }
            tracing::warn!(pod = %instance.pod, instance = %instance.instance_id, "terminating instance whose pod is gone (or that is not its pod's)");
            match self.provider.terminate(&instance.instance_id).await {
                Ok(answer) => {
                    self.ledger.note(&instance.instance_id, answer, now);
                    self.spend.ended(&instance.instance_id, now);
                }
                Err(error) => {
                    tracing::warn!(pod = %instance.pod, instance = %instance.instance_id, %error, "terminating orphaned instance failed; retrying next sync")
                }
            }
        }
    }

    /// One pass of claiming (see [`Claiming`]); the instances claimed show in a later listing.
    async fn claim_untagged(&self, present: &HashSet<String>, claiming: &mut Claiming) {
        match self.provider.claim_untagged(present).await {
            Ok(found) => {
                if !found.claimed.is_empty() {
                    tracing::info!(node = %self.node, instances = ?found.claimed, "claimed instances an earlier orca launched for this node's pods before instances carried the cluster's id (orca.research/cluster-id)");
                    self.sync_now.notify_one();
                }
                if found.unclaimed != claiming.reported && !found.unclaimed.is_empty() {
                    tracing::warn!(node = %self.node, instances = ?found.unclaimed, "instances tagged for this node by an earlier orca, without a cluster id, whose pods are not this node's: another cluster's under the same node.name and node.clusterName, or pods force-deleted while no orca ran. orca never terminates them; check each and terminate those of this cluster by hand");
                }
                self.metrics.unclaimed(&self.node, found.unclaimed.len());
                let grace = SignedDuration::try_from(self.config.launch_visibility_grace.get())
                    .unwrap_or(SignedDuration::MAX);
                let late = Timestamp::now().duration_since(claiming.since) > grace;
                claiming.done = late && found.claimed.is_empty();
                claiming.reported = found.unclaimed;
            }
            Err(error) => {
                tracing::warn!(node = %self.node, %error, "claiming instances launched before instances carried the cluster's id failed; retrying next sync");
            }
        }
    }

    fn asked_recently(&self, instance: &InstanceStatus, now: Timestamp) -> bool {
        let again_after = 2 * self.config.sync_interval.get();
        self.ledger
            .get(&instance.instance_id)
            .is_some_and(|asked| now.duration_since(asked.at).unsigned_abs() < again_after)
    }
}

/// The instance each pod in `store` names in its status (UID → instance id): the pod's own,
/// whatever else EC2 lists tagged for it.
pub(super) fn named_instances(store: &Store<Pod>) -> HashMap<String, String> {
    store
        .state()
        .iter()
        .filter_map(|pod| {
            let view = PodView::of(pod)?;
            Some((view.key.uid, view.launched?.instance_id))
        })
        .collect()
}

/// The UIDs of the pods in `store` now.
fn pod_uids(store: &Store<Pod>) -> HashSet<String> {
    store
        .state()
        .iter()
        .filter_map(|pod| pod.metadata.uid.clone())
        .collect()
}

fn object_ref(pod: &PodKey) -> ObjectRef<Pod> {
    ObjectRef::new(&pod.name).within(&pod.namespace)
}

#[cfg(test)]
mod tests;
