//! One reconcile of one pod: observe (the pod, its instance as last listed, its record), decide
//! ([`super::decide`]), execute ([`super::execute`]), and again until there is nothing to do
//! now. kube-runtime's controller guarantees one reconcile at a time per pod and many pods in
//! parallel.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;

use super::decide::{Observation, Step, Timing, decide};
use super::execute::{Executed, execute};
use super::instances::InstanceCache;
use super::launch::Launcher;
use super::launch::effects::RetryTiming;
use super::record::PodRecords;
use super::terminations::TerminationLedger;
use super::view::PodView;
use super::writer::{PodOutput, PodWriter};
use crate::config::PodsConfig;
use crate::metrics::ReconcileMetrics;
use crate::policy::Planner;
use crate::provider::{PodKey, Provider, ProviderError};
use crate::spend::NamespaceSpend;
use crate::workload::EnvSource;

/// Steps one reconcile takes at most before it yields (a launch, its status write and a
/// lookup take three); the pod is requeued if there is more.
const MAX_STEPS: usize = 6;

/// Everything a reconcile step needs.
pub struct Context {
    /// Every write to a pod object goes through it.
    pub writer: Arc<dyn PodWriter>,
    /// Where pods' ConfigMaps and Secrets are read from when their instance is launched.
    pub objects: Arc<dyn EnvSource>,
    pub provider: Arc<dyn Provider>,
    pub planner: Arc<dyn Planner>,
    pub instances: Arc<InstanceCache>,
    pub records: Arc<PodRecords>,
    pub ledger: Arc<TerminationLedger>,
    pub config: PodsConfig,
    pub metrics: Arc<ReconcileMetrics>,
    /// The node's zone, when it is bound to one (its pods run there).
    pub node_zone: Option<String>,
    /// The node's name, which its pods' reservations in `spend` carry.
    pub node_name: String,
    /// What each namespace's instances cost, against its cap: a launch reserves first.
    pub spend: Arc<NamespaceSpend>,
    /// How long this turn may act for the node: a reconcile takes no step after it ends.
    pub tenure: crate::replicas::Tenure,
}

impl Context {
    /// The Launch step, with this node's parts.
    pub fn launcher(&self) -> Launcher<'_> {
        Launcher {
            planner: self.planner.as_ref(),
            provider: self.provider.as_ref(),
            spend: &self.spend,
            records: &self.records,
            writer: self.writer.as_ref(),
            objects: self.objects.as_ref(),
            node_name: &self.node_name,
            node_zone: self.node_zone.as_deref(),
            timing: RetryTiming {
                initial_backoff: self.config.retry_initial_backoff.get(),
                max_backoff: self.config.retry_max_backoff.get(),
                grace: self.config.launch_visibility_grace.get(),
            },
        }
    }

    /// What a step writes a pod with.
    pub fn output(&self) -> PodOutput<'_> {
        PodOutput {
            writer: self.writer.as_ref(),
            records: &self.records,
        }
    }

    pub fn timing(&self) -> Timing {
        Timing {
            sync: self.config.sync_interval.get(),
            grace: self.config.launch_visibility_grace.get(),
        }
    }
}

/// Why a reconcile step failed; the pod is retried with backoff.
// Variants are named after the step that failed (kube-rs style), hence the shared suffix.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("writing status of pod {pod}")]
    StatusWriteFailed {
        pod: PodKey,
        #[source]
        source: kube::Error,
    },
    #[error("removing pod {pod}")]
    PodRemovalFailed {
        pod: PodKey,
        #[source]
        source: kube::Error,
    },
    #[error("terminating instance {instance_id} of pod {pod}: {source}")]
    TerminateFailed {
        pod: PodKey,
        instance_id: String,
        source: ProviderError,
    },
    #[error("looking up instance {instance_id} of pod {pod}: {source}")]
    LookUpFailed {
        pod: PodKey,
        instance_id: String,
        source: ProviderError,
    },
    #[error("reading the exit report of instance {instance_id} of pod {pod}: {source}")]
    ExitReadFailed {
        pod: PodKey,
        instance_id: String,
        source: ProviderError,
    },
    /// The turn's tenure ended mid-reconcile; the replica serving the node next reconciles
    /// the pod.
    #[error("reconciling pod {pod}")]
    HoldEnded {
        pod: PodKey,
        #[source]
        source: crate::replicas::TenureError,
    },
}

impl ReconcileError {
    /// The failed step, for the reconcile metrics.
    pub fn step(&self) -> &'static str {
        match self {
            ReconcileError::StatusWriteFailed { .. } => "StatusWriteFailed",
            ReconcileError::PodRemovalFailed { .. } => "PodRemovalFailed",
            ReconcileError::TerminateFailed { .. } => "TerminateFailed",
            ReconcileError::LookUpFailed { .. } => "LookUpFailed",
            ReconcileError::ExitReadFailed { .. } => "ExitReadFailed",
            ReconcileError::HoldEnded { .. } => "HoldEnded",
        }
    }

    fn pod(&self) -> &PodKey {
        match self {
            ReconcileError::StatusWriteFailed { pod, .. }
            | ReconcileError::PodRemovalFailed { pod, .. }
            | ReconcileError::TerminateFailed { pod, .. }
            | ReconcileError::LookUpFailed { pod, .. }
            | ReconcileError::ExitReadFailed { pod, .. }
            | ReconcileError::HoldEnded { pod, .. } => pod,
        }
    }

    /// A 409 means someone wrote the pod after we read it: retry at once on fresh data.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ReconcileError::StatusWriteFailed { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}

/// [`reconcile`], timed into the reconcile metrics by result.
pub async fn measured_reconcile(
    pod: Arc<Pod>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let started = std::time::Instant::now();
    let result = reconcile(pod, ctx.clone()).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(error) => error.step(),
    };
    ctx.metrics.observe(outcome, started.elapsed());
    result
}

pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let Some(key) = PodKey::of(&pod) else {
        return Ok(Action::await_change());
    };
    let record = ctx.records.get_or_create(&key.uid);
    // While the store lags our last write, the pod as written is the newer truth.
    let pod = match record.write.as_ref().map(|write| write.newer_than(&pod)) {
        Some(Some(written)) => written,
        Some(None) => {
            ctx.records.update(&key.uid, |record| record.write = None);
            pod
        }
        None => pod,
    };
    let listed = ctx.instances.get(&key.uid);
    if listed.is_some() {
        // The listing supersedes a second look.
        ctx.records.update(&key.uid, |record| {
            record.looked_up = None;
            record.lookup_missed = None;
        });
    }
    let mut pod = pod;
    for _ in 0..MAX_STEPS {
        let Some(view) = PodView::of(&pod) else {
            return Ok(Action::await_change());
        };
        // The pod left the store while this reconcile ran.
        let Some(record) = ctx.records.get(&key.uid) else {
            return Ok(Action::await_change());
        };
        let mut observation = Observation {
            pod: &view,
            listed: listed.as_ref(),
            record: &record,
            asked: None,
            now: Timestamp::now(),
            timing: ctx.timing(),
        };
        observation.asked = observation
            .instance_id()
            .and_then(|instance_id| ctx.ledger.get(instance_id));
        let step = decide(&observation);
        tracing::debug!(pod = %key, ?step, "decided");
        if let Step::Wait(after) = step {
            return Ok(after.map_or_else(Action::await_change, Action::requeue));
        }
        match execute(step, &pod, &view.key, &ctx).await {
            Ok(Executed::Continue) => {}
            Ok(Executed::PodChanged(updated)) => pod = Arc::new(*updated),
            Ok(Executed::PodRemoved) => return Ok(Action::await_change()),
            Err(error) => {
                if !error.is_conflict() {
                    let (initial, max) = (
                        ctx.config.retry_initial_backoff.get(),
                        ctx.config.retry_max_backoff.get(),
                    );
                    let now = Timestamp::now();
                    ctx.records.update(&key.uid, |record| {
                        record.retry = record.retry.failed(now, initial, max);
                    });
                }
                return Err(error);
            }
        }
    }
    Ok(Action::requeue(ctx.config.sync_interval.get()))
}

/// What the controller does after a failed step: at once for a conflict (fresh data will
/// differ), else when the pod's backoff says.
pub fn error_policy(_pod: Arc<Pod>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    if error.is_conflict() {
        return Action::requeue(Duration::from_millis(200));
    }
    if let ReconcileError::HoldEnded { pod, .. } = error {
        // The turn is ending: whoever serves the node next takes the pod up.
        tracing::debug!(%pod, "reconcile stopped: this replica's hold on the node ended");
        return Action::await_change();
    }
    let pod = error.pod();
    let retry = ctx
        .records
        .get(&pod.uid)
        .map(|record| record.retry)
        .unwrap_or_default();
    let delay = retry
        .wait(Timestamp::now())
        .unwrap_or_else(|| ctx.config.retry_initial_backoff.get());
    tracing::warn!(%pod, error = %crate::errors::error_chain(error), failures = retry.failures, ?delay, "reconcile failed; retrying with backoff");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("conflict", "Conflict")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn only_a_status_write_conflict_is_retried_at_once() {
        let pod = PodKey {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
        };
        let conflict = ReconcileError::StatusWriteFailed {
            pod: pod.clone(),
            source: api_error(409),
        };
        assert!(conflict.is_conflict());
        let other = ReconcileError::StatusWriteFailed {
            pod,
            source: api_error(500),
        };
        assert!(!other.is_conflict());
    }
}
