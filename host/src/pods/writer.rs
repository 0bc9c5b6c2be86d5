//! The one way the pod controller changes pod objects. Status patches, removals and Events go
//! through a [`PodWriter`]: the apiserver's ([`ApiPodWriter`]) in the process, a fake that
//! keeps what it was given in the steps' unit tests. [`PodOutput`] is what a step writes with:
//! it skips writes that change nothing, carries the policy's decision and the provider's
//! progress on the next status write, and keeps the pod's record in step with what was written.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;

use super::error::ReconcileError;
use super::events::{PodEvent, PodEvents};
use super::record::PodRecords;
use super::status::{self, status_patch};
use super::writes::LastWrite;
use crate::cluster::apiserver::{ServerSchema, Written};
use crate::policy::{DECISION_ANNOTATION, DecisionRecord};
use crate::provider::{LaunchProgress, PodKey};

/// Writes to pod objects.
#[async_trait]
pub trait PodWriter: Send + Sync + 'static {
    /// Applies `patch` (a strategic merge patch carrying a resourceVersion precondition) to
    /// the pod's status subresource; answers the pod as written.
    async fn patch_status(
        &self,
        key: &PodKey,
        patch: &serde_json::Value,
    ) -> Result<Pod, kube::Error>;
    /// Removes the pod object at once (no grace), if it is still the pod of `key.uid`.
    async fn remove(&self, key: &PodKey) -> Result<(), kube::Error>;
    /// Queues an Event about `pod`; a Warning folds into the pod's earlier ones.
    async fn publish(&self, pod: &Pod, event: PodEvent);
}

/// The apiserver's pods.
pub struct ApiPodWriter {
    pub client: kube::Client,
    pub events: Arc<PodEvents>,
    /// Where each pod's Event recorder is kept, so its repeated Warnings fold into one.
    pub records: Arc<PodRecords>,
    /// What the apiserver knows: a field it lacks is left out of the patch.
    pub schema: Arc<ServerSchema>,
}

#[async_trait]
impl PodWriter for ApiPodWriter {
    async fn patch_status(
        &self,
        key: &PodKey,
        patch: &serde_json::Value,
    ) -> Result<Pod, kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        // Events wait while pod writes are in flight (`events.rs`).
        let _writing = self.events.pod_write();
        let (api, name) = (&api, key.name.as_str());
        self.schema
            .write(Written::Pod, patch.clone(), |patch| async move {
                api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
            })
            .await
    }

    async fn remove(&self, key: &PodKey) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(key.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        // A removal is what a deleting burst waits on: Events wait it out (`events.rs`).
        let _writing = self.events.pod_write();
        api.delete(&key.name, &params).await.map(drop)
    }

    /// A Warning goes through the pod's own recorder, so repeats fold (a pod whose record is
    /// gone gets a one-off one).
    async fn publish(&self, pod: &Pod, event: PodEvent) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let recorder = event
            .warning
            .then(|| self.records.recorder(uid, || self.events.recorder()))
            .flatten();
        self.events.publish(pod, recorder, event).await;
    }
}

/// What a step writes one pod with.
#[derive(Clone, Copy)]
pub struct PodOutput<'a> {
    pub writer: &'a dyn PodWriter,
    pub records: &'a PodRecords,
}

impl PodOutput<'_> {
    /// Queues an Event about `pod`.
    pub async fn publish(&self, pod: &Pod, event: PodEvent) {
        self.writer.publish(pod, event).await;
    }

    /// Keeps a new decision for the next status write and announces it (`PolicyDecision`); a
    /// retried launch with the same decision says nothing again.
    pub async fn note_decision(&self, pod: &Pod, key: &PodKey, record: &DecisionRecord) {
        let json = record.to_json();
        let carried = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DECISION_ANNOTATION));
        let noted = self
            .records
            .get(&key.uid)
            .is_some_and(|r| r.decision.as_ref() == Some(&json));
        if carried == Some(&json) || noted {
            return;
        }
        self.records
            .update(&key.uid, |r| r.decision = Some(json.clone()));
        let event = PodEvent {
            warning: false,
            reason: "PolicyDecision",
            action: "Plan",
            note: record.summary(),
        };
        self.publish(pod, event).await;
    }

    /// Writes `desired` over the pod's status if anything would change, with the policy's
    /// decision if the pod does not carry it yet; answers the pod as written. The
    /// resourceVersion precondition turns a concurrent write into a 409 (retried on fresh
    /// data), so newer data is never overwritten; the patch clears what `desired` leaves out.
    ///
    /// # Errors
    /// [`ReconcileError::StatusWriteFailed`] with the apiserver's answer.
    pub async fn write_status(
        &self,
        pod: &Pod,
        key: &PodKey,
        desired: PodStatus,
    ) -> Result<Option<Pod>, ReconcileError> {
        let record = self.records.get(&key.uid);
        let decision = record
            .as_ref()
            .and_then(|record| record.unwritten_decision(pod))
            .map(str::to_owned);
        let progress = record
            .as_ref()
            .and_then(|record| record.unwritten_progress(pod))
            .cloned();
        if decision.is_none()
            && progress.is_none()
            && !status::needs_write(pod.status.as_ref(), &desired)
        {
            return Ok(None);
        }
        let read_version = pod.metadata.resource_version.clone().unwrap_or_default();
        let metadata = status_metadata(&read_version, decision.as_deref(), progress.as_ref());
        let patch = json!({
            "metadata": metadata,
            "status": status_patch(pod.status.as_ref(), &desired),
        });
        let mut written = self
            .writer
            .patch_status(key, &patch)
            .await
            .map_err(|source| ReconcileError::StatusWriteFailed {
                pod: key.clone(),
                source,
            })?;
        // Kept as the store keeps pods (`stored::trim`).
        super::stored::trim(&mut written);
        let last = LastWrite::new(read_version, written.clone());
        self.records.update(&key.uid, |record| {
            record.write = Some(last);
            if decision.is_some() {
                record.decision = None;
            }
            if progress.is_some() {
                record.progress = None;
            }
        });
        Ok(Some(written))
    }
}

/// The metadata of a status write: the version it read (the precondition) and what rides
/// along, since pods/status takes metadata changes too: the decision, the provider's progress.
fn status_metadata(
    read_version: &str,
    decision: Option<&str>,
    progress: Option<&LaunchProgress>,
) -> serde_json::Value {
    let mut metadata = json!({ "resourceVersion": read_version });
    if let Some(decision) = decision {
        metadata["annotations"][DECISION_ANNOTATION] = json!(decision);
    }
    if let Some(progress) = progress {
        metadata["annotations"][progress.annotation] = json!(progress.value);
    }
    metadata
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decision_and_the_providers_progress_ride_on_a_status_write() {
        let progress = LaunchProgress {
            annotation: "orca.research/fleet-tokens-spent",
            value: "2".to_owned(),
        };
        assert_eq!(
            status_metadata("41", Some("{}"), Some(&progress)),
            json!({
                "resourceVersion": "41",
                "annotations": {
                    DECISION_ANNOTATION: "{}",
                    "orca.research/fleet-tokens-spent": "2",
                },
            })
        );
        assert_eq!(
            status_metadata("41", None, None),
            json!({ "resourceVersion": "41" })
        );
    }
}
