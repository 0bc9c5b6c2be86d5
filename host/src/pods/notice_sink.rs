//! What EC2's advance warnings do to this node's pods (the [`NoticeSink`] of the interruption
//! queue): a spot interruption warning gives the pod the `DisruptionTarget` condition (reason
//! `SpotInterruption`, the deadline in its message) and a Warning Event at once, two minutes
//! before the instance goes, so the pod's controller can act; once the instance is gone the
//! pod ends Failed `SpotInterrupted` (see `status::outcome`), whatever exit code the workload
//! wrote on the way down. A rebalance recommendation and scheduled maintenance get a condition
//! of their own and an Event; a rebalance also marks the pod `DisruptionTarget` (reason
//! `RebalanceRecommendation`) when its market plugin asked for that (`mark-on-rebalance`, kept
//! in the pod's decision record). An instance state change makes the next listing come at once,
//! so stops and terminations are seen sooner than the sync period.
//!
//! Everything here is idempotent: SQS may deliver a message again (a crash between delivery
//! and delete), and a condition written twice is the same condition; Warnings fold into one
//! Event.
//!
//! # A replica whose hold ended
//! The consumer runs for the whole process, not for a serving turn, so the sink answers for
//! the turn's tenure (`replicas::tenure`): once the hold has ended it owns no instance (the
//! consumer hands the message on to the replica serving the node now) and a delivery under
//! way takes no further step and answers [`Delivery::Again`]. The consumer asks `owns` again
//! right before it deletes a message. A delivery answers [`Delivery::Done`] only for what stays
//! true whoever serves the node next: the pod's condition written, or the pod gone as the
//! apiserver says (not only the store, which lags, most after a replica was stopped). A
//! message deleted late is therefore lost to no one.

use std::sync::Arc;

use async_trait::async_trait;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use tokio::sync::Notify;

use super::events::{PodEvent, PodEvents};
use super::instances::InstanceCache;
use super::record::PodRecords;
use super::view::{DISRUPTION_CONDITION, SPOT_INTERRUPTION_REASON};
use crate::interruption::{Delivery, Notice, NoticeKind, NoticeSink};
use crate::policy::DECISION_ANNOTATION;
use crate::provider::InstanceStatus;
use crate::provider::aws::strays::PodPresence;
use crate::replicas::Tenure;

/// The `DisruptionTarget` reason of a rebalance recommendation, for pods whose market plugin
/// marks on rebalance.
pub const REBALANCE_REASON: &str = "RebalanceRecommendation";
const REBALANCE_CONDITION: &str = "orca.research/RebalanceRecommended";
const MAINTENANCE_CONDITION: &str = "orca.research/ScheduledMaintenance";
/// How long a notice waits for the pod cache's first sync before it is left for later.
const STORE_SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The pod controller's [`NoticeSink`] for one node: acts on EC2's notices about the node's
/// instances for the pods they run, while the turn that added it holds the node.
pub struct PodNoticeSink {
    pub client: kube::Client,
    pub store: Store<Pod>,
    pub instances: Arc<InstanceCache>,
    pub records: Arc<PodRecords>,
    pub events: Arc<PodEvents>,
    /// Wakes the status sync for a listing now.
    pub sync_now: Arc<Notify>,
    /// Whether a pod the store lacks is gone, from the apiserver.
    pub presence: Arc<dyn PodPresence>,
    /// How long the turn that added this sink may act for the node.
    pub tenure: Tenure,
}

impl PodNoticeSink {
    fn instance(&self, instance_id: &str) -> Option<InstanceStatus> {
        self.instances.by_instance_id(instance_id)
    }

    /// The condition and Event a notice gives the pod: (condition type, reason, message).
    fn wording(notice: &Notice, instance: &InstanceStatus) -> (&'static str, &'static str, String) {
        let at = |time: Option<Timestamp>| {
            time.map_or_else(|| "soon".to_owned(), |time| format!("at {time}"))
        };
        let what = format!(
            "instance {} ({}, {})",
            instance.instance_id,
            instance.instance_type,
            instance.market.as_str()
        );
        match notice.kind {
            NoticeKind::SpotInterruption => (
                DISRUPTION_CONDITION,
                SPOT_INTERRUPTION_REASON,
                format!(
                    "EC2 reclaims spot {what} {} ({}): {}",
                    at(notice.deadline),
                    notice.action.as_deref().unwrap_or("terminate"),
                    notice.description
                ),
            ),
            NoticeKind::RebalanceRecommendation => (
                REBALANCE_CONDITION,
                REBALANCE_REASON,
                format!(
                    "EC2 recommends moving off {what}: its spot capacity is at elevated risk \
                     of interruption; {}",
                    notice.description
                ),
            ),
            NoticeKind::ScheduledChange => (
                MAINTENANCE_CONDITION,
                "ScheduledChange",
                format!(
                    "EC2 scheduled maintenance of {what} starting {}: {}",
                    at(notice.deadline),
                    notice.description
                ),
            ),
            NoticeKind::StateChange => (
                "",
                "InstanceStateChange",
                format!(
                    "{what} is {}",
                    notice.state.as_deref().unwrap_or("changing")
                ),
            ),
        }
    }

    /// Gives the pod the condition; false when the write failed (the notice is to come back).
    async fn mark(
        &self,
        pod: &Pod,
        condition: &str,
        reason: &str,
        message: &str,
        at: Timestamp,
    ) -> bool {
        let (Some(namespace), Some(name)) = (&pod.metadata.namespace, &pod.metadata.name) else {
            return true;
        };
        let already = pod
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions.iter().any(|c| {
                    c.type_ == condition
                        && c.status == "True"
                        && c.reason.as_deref() == Some(reason)
                })
            });
        if already {
            return true;
        }
        // Conditions merge by type: orca's own status writes leave this one alone.
        let patch = json!({ "status": { "conditions": [ {
            "type": condition,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastTransitionTime": Time(at),
        } ] } });
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => true,
            // Gone since: nothing left to mark.
            Err(kube::Error::Api(status)) if status.code == 404 => true,
            Err(error) => {
                tracing::warn!(pod = %format!("{namespace}/{name}"), %error, condition, "writing the condition failed; the message comes back after its visibility timeout");
                false
            }
        }
    }

    /// The pod `instance` runs for, as the cache has it; `Err(Delivery::Again)` when the cache
    /// may not have it yet (a restart: the instance listing can come before the pod watch has
    /// synced; a store that lags the apiserver), `Err(Delivery::Done)` when the pod is gone as
    /// the apiserver says.
    async fn pod_of(&self, instance: &InstanceStatus) -> Result<Arc<Pod>, Delivery> {
        let reference = ObjectRef::new(&instance.pod.name).within(&instance.pod.namespace);
        let synced = tokio::time::timeout(STORE_SYNC_WAIT, self.store.wait_until_ready())
            .await
            .is_ok_and(|ready| ready.is_ok());
        match self.store.get(&reference) {
            Some(pod) if pod.metadata.uid.as_deref() == Some(instance.pod.uid.as_str()) => {
                return Ok(pod);
            }
            // Another pod of the same name: the instance's pod is gone, if the store is right.
            Some(_) => {}
            None if synced => {}
            None => return Err(Delivery::Again),
        }
        match self.presence.exists(&instance.pod).await {
            Ok(false) => Err(Delivery::Done),
            Ok(true) => {
                tracing::info!(pod = %instance.pod, "the pod store lags the apiserver: the notice's pod exists; the message comes back after its visibility timeout");
                Err(Delivery::Again)
            }
            Err(error) => {
                tracing::warn!(pod = %instance.pod, error = %crate::support::errors::error_chain(&error), "could not read whether the notice's pod is gone; the message comes back after its visibility timeout");
                Err(Delivery::Again)
            }
        }
    }

    /// [`NoticeSink::deliver`] while the tenure lasts.
    async fn deliver_held(&self, notice: Notice) -> Delivery {
        // Owned a moment ago; gone from the listing since: nothing to act on.
        let Some(instance) = self.instance(&notice.instance_id) else {
            return Delivery::Done;
        };
        if notice.kind == NoticeKind::StateChange {
            tracing::debug!(instance = %notice.instance_id, state = ?notice.state, "instance state changed; listing now");
            self.sync_now.notify_one();
            return Delivery::Done;
        }
        let pod = match self.pod_of(&instance).await {
            Ok(pod) => pod,
            Err(delivery) => return delivery,
        };
        let (condition, reason, mut message) = Self::wording(&notice, &instance);
        tracing::warn!(pod = %instance.pod, instance = %instance.instance_id, kind = %notice.kind, "{message}");
        let mut marked = self
            .mark(&pod, condition, reason, &message, notice.time)
            .await;
        if notice.kind == NoticeKind::RebalanceRecommendation && marks_on_rebalance(&pod) {
            message.push_str(
                "; the pod's market plugin marks it DisruptionTarget on rebalance, so its \
                 controller can replace it before an interruption",
            );
            marked &= self
                .mark(
                    &pod,
                    DISRUPTION_CONDITION,
                    REBALANCE_REASON,
                    &message,
                    notice.time,
                )
                .await;
        }
        if !marked {
            return Delivery::Again;
        }
        let recorder = self
            .records
            .recorder(&instance.pod.uid, || self.events.recorder());
        let event = PodEvent {
            warning: true,
            reason,
            action: "Interruption",
            note: message,
        };
        self.events.publish(&pod, recorder, event).await;
        Delivery::Done
    }
}

#[async_trait]
impl NoticeSink for PodNoticeSink {
    /// The instance is in the node's listing, and the turn's hold lasts.
    async fn owns(&self, instance_id: &str) -> bool {
        self.tenure.holds() && self.instance(instance_id).is_some()
    }

    /// Acts on the notice while the turn's hold lasts; [`Delivery::Again`] once it has ended
    /// (the replica serving the node now gets the message).
    async fn deliver(&self, notice: Notice) -> Delivery {
        self.tenure
            .guard(self.deliver_held(notice))
            .await
            .unwrap_or(Delivery::Again)
    }
}

/// Whether the market plugin that decided the pod asked for `DisruptionTarget` on a rebalance
/// recommendation, as the pod's decision record says (so a restart keeps the plugin's word).
pub fn marks_on_rebalance(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(DECISION_ANNOTATION))
        .and_then(|record| serde_json::from_str::<serde_json::Value>(record).ok())
        .and_then(|record| record.get("markOnRebalance")?.as_bool())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {

    use serde_json::json;

    use super::*;
    use crate::policy::DecisionRecord;
    use crate::provider::plan::Market;

    fn decided(mark_on_rebalance: bool) -> Pod {
        let mut record = DecisionRecord::on_demand(&["m5.large"]);
        record.market = Market::Spot;
        record.mark_on_rebalance = mark_on_rebalance;
        serde_json::from_value(json!({ "metadata": {
            "name": "p",
            "annotations": { DECISION_ANNOTATION: record.to_json() },
        } }))
        .unwrap()
    }

    /// `pod`'s instance launched by a simulated provider, in a cache filled from its listing:
    /// the cache, and the instance's id.
    async fn a_listed_instance(pod: &Pod) -> (Arc<InstanceCache>, String) {
        use crate::config::{Seconds, SimulatedConfig};
        use crate::provider::Provider;
        use crate::provider::simulated::SimulatedProvider;

        let provider = SimulatedProvider::new(SimulatedConfig {
            boot_delay: Seconds::from_millis(0),
            ..SimulatedConfig::default()
        })
        .unwrap();
        let launched = provider
            .create(&crate::workload::testing::bare_request(
                pod,
                &crate::provider::plan::LaunchPlan::on_demand("m5.large"),
            ))
            .await
            .unwrap();
        let instances = Arc::new(InstanceCache::default());
        instances.replace(
            provider.statuses().await.unwrap(),
            &std::collections::HashMap::new(),
        );
        (instances, launched.instance_id)
    }

    /// A sink for `pod`, synced in its store, whose apiserver says every pod exists.
    fn a_sink(
        client: kube::Client,
        pod: Pod,
        instances: Arc<InstanceCache>,
        tenure: Tenure,
    ) -> PodNoticeSink {
        let (store, mut writer) = kube::runtime::reflector::store();
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(pod));
        writer.apply_watcher_event(&kube::runtime::watcher::Event::InitDone);
        struct Present;
        #[async_trait]
        impl PodPresence for Present {
            async fn exists(&self, _pod: &crate::provider::PodKey) -> Result<bool, kube::Error> {
                Ok(true)
            }
        }
        PodNoticeSink {
            client: client.clone(),
            store,
            instances,
            records: Arc::new(PodRecords::default()),
            events: Arc::new(PodEvents::new(
                client,
                "node",
                Arc::new(crate::pods::events::PodWrites::new()),
            )),
            sync_now: Arc::new(Notify::new()),
            presence: Arc::new(Present),
            tenure,
        }
    }

    /// Issue 39, case 2: a replica stopped past its hold ran again with its sink still
    /// registered and its instance cache as old as the stop, and acted on (then deleted) the
    /// spot warnings of the replica serving the node now. The sink answers for the turn's
    /// tenure: once it has ended the sink owns nothing and acts on nothing.
    #[tokio::test]
    async fn a_sink_whose_hold_ended_owns_nothing_and_acts_on_nothing() {
        use std::sync::atomic::Ordering;

        use crate::replicas::{BootInstant, TenureGrant};

        let (client, requests) = crate::support::testing::counting_apiserver(500);
        let pod: Pod = serde_json::from_value(json!({ "metadata": {
            "namespace": "ns", "name": "p", "uid": "uid-p",
        } }))
        .unwrap();
        let (instances, instance_id) = a_listed_instance(&pod).await;
        let grant = TenureGrant::new();
        grant.extend_to(Some(
            BootInstant::now().saturating_add(std::time::Duration::from_secs(600)),
        ));
        let sink = a_sink(client, pod, instances, grant.tenure());
        assert!(sink.owns(&instance_id).await, "held: owned");

        // The hold ends (the replica stalled past it, or lost the Lease).
        grant.extend_to(None);
        assert!(!sink.owns(&instance_id).await);
        let warning = Notice {
            kind: NoticeKind::SpotInterruption,
            instance_id: instance_id.clone(),
            time: Timestamp::now(),
            deadline: None,
            state: None,
            action: None,
            description: String::new(),
        };
        assert_eq!(sink.deliver(warning).await, Delivery::Again);
        assert_eq!(requests.load(Ordering::SeqCst), 0, "nothing written");
    }

    #[test]
    fn the_decision_record_says_whether_a_rebalance_marks_the_pod() {
        assert!(marks_on_rebalance(&decided(true)));
        assert!(!marks_on_rebalance(&decided(false)));
        let undecided: Pod =
            serde_json::from_value(json!({ "metadata": { "name": "p" } })).unwrap();
        assert!(!marks_on_rebalance(&undecided));
        let garbled: Pod = serde_json::from_value(json!({ "metadata": {
            "name": "p", "annotations": { DECISION_ANNOTATION: "{not json" },
        } }))
        .unwrap();
        assert!(!marks_on_rebalance(&garbled));
    }
}
