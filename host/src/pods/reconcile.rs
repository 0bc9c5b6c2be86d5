//! One reconcile step for one pod: launch, mirror the instance's state, fail, or terminate.
//! kube-runtime's controller guarantees one step at a time per pod and many pods in parallel.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use serde_json::json;

use super::events::PodEvents;
use super::instances::InstanceCache;
use super::status::{self, needs_write, recorded_instance_id};
use super::writes::WriteTracker;
use crate::config::PodsConfig;
use crate::errors::lock;
use crate::metrics::ReconcileMetrics;
use crate::policy::pipeline::REASON_INVALID_ANNOTATION as INVALID_ANNOTATION;
use crate::policy::{DECISION_ANNOTATION, DecisionRecord, Planner};
use crate::provider::{ErrorClass, InstanceStatus, PodKey, Provider, ProviderError};

/// Everything a reconcile step needs.
pub struct Context {
    pub client: kube::Client,
    pub provider: Arc<dyn Provider>,
    pub planner: Arc<dyn Planner>,
    pub instances: Arc<InstanceCache>,
    pub events: PodEvents,
    pub config: PodsConfig,
    /// Transient launch failures so far, per pod UID, for exponential backoff.
    pub launch_failures: Mutex<HashMap<String, u32>>,
    /// Pods whose instance was already asked to terminate (the call is made once).
    pub terminations_sent: Mutex<HashSet<String>>,
    /// Status writes the pod store may not show yet.
    pub writes: WriteTracker,
    pub metrics: Arc<ReconcileMetrics>,
}

/// Why a reconcile step failed; the controller retries it.
// Variants are named after the step that failed (kube-rs style), hence the shared suffix.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("writing the policy decision of pod {pod}")]
    DecisionWriteFailed {
        pod: PodKey,
        #[source]
        source: kube::Error,
    },
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
    #[error("terminating the instance of pod {pod}: {source}")]
    TerminateFailed { pod: PodKey, source: ProviderError },
}

impl ReconcileError {
    /// The failed step, for the reconcile metrics.
    pub fn step(&self) -> &'static str {
        match self {
            ReconcileError::DecisionWriteFailed { .. } => "DecisionWriteFailed",
            ReconcileError::StatusWriteFailed { .. } => "StatusWriteFailed",
            ReconcileError::PodRemovalFailed { .. } => "PodRemovalFailed",
            ReconcileError::TerminateFailed { .. } => "TerminateFailed",
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
    let instance = ctx.instances.get(&key.uid);
    tracing::debug!(pod = %key, instance = ?instance.as_ref().map(|i| (&i.instance_id, i.state)), "reconciling");
    if pod.metadata.deletion_timestamp.is_some() {
        return finalize(&key, instance.as_ref(), &ctx).await;
    }
    let phase = pod
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        // A finished pod's status is final; only an instance still holding resources goes.
        if instance
            .as_ref()
            .is_some_and(|instance| !instance.state.is_finished())
        {
            terminate(&key, &ctx).await?;
        }
        return Ok(Action::await_change());
    }
    match instance {
        Some(instance) => mirror_instance(&pod, &key, &instance, &ctx).await,
        None if ctx
            .instances
            .launched_within(&key.uid, ctx.config.launch_visibility_grace.get()) =>
        {
            // Launched moments ago and not listed yet: EC2 is eventually consistent.
            Ok(Action::requeue(ctx.config.sync_interval.get()))
        }
        None => match recorded_instance_id(&pod) {
            Some(instance_id) => {
                let message =
                    format!("instance {instance_id} of this pod no longer exists at the provider");
                warn_and_record(
                    &pod,
                    &key,
                    &ctx,
                    ("InstanceLost", "Sync"),
                    message,
                    |pod, message| status::status_failed(pod, "InstanceLost", message),
                )
                .await?;
                Ok(Action::await_change())
            }
            None => launch(&pod, &key, &ctx).await,
        },
    }
}

async fn launch(pod: &Pod, key: &PodKey, ctx: &Context) -> Result<Action, ReconcileError> {
    let written;
    let (pod, plan) = match ctx.planner.plan(pod).await {
        Ok(decision) => match record_decision(pod, key, &decision.record, ctx).await? {
            DecisionWrite::Unchanged => (pod, decision.plan),
            // Later writes carry a resourceVersion precondition: use the pod as now stored.
            DecisionWrite::Written(updated) => {
                written = *updated;
                (&written, decision.plan)
            }
            DecisionWrite::PodGone => return Ok(Action::await_change()),
        },
        Err(error) => {
            warn_and_record(
                pod,
                key,
                ctx,
                (error.reason, "Plan"),
                error.message,
                |pod, message| status::status_failed(pod, error.reason, message),
            )
            .await?;
            return Ok(Action::await_change());
        }
    };
    let first = plan
        .candidates
        .first()
        .map(|c| c.instance_type.as_str())
        .unwrap_or("?");
    let what = format!("{first} {} instance", plan.market.market.as_str());
    let outcome = ctx.provider.create(pod, &plan).await;
    let passed_over = match &outcome {
        Ok(launched) => &launched.passed_over,
        Err(failed) => &failed.passed_over,
    };
    for skipped in passed_over {
        ctx.events
            .warning(
                pod,
                "OfferingUnavailable",
                "Launch",
                format!(
                    "{}: {}; trying the next offering",
                    skipped.offering, skipped.error
                ),
            )
            .await;
    }
    match outcome {
        Ok(launched) => {
            ctx.instances.note_launched(&key.uid);
            lock(&ctx.launch_failures).remove(&key.uid);
            let what = format!("{} instance {}", launched.offering, launched.instance_id);
            let message = if launched.adopted {
                format!("adopted the {what} launched earlier for this pod")
            } else {
                format!("launched a {what}")
            };
            ctx.events
                .normal(pod, "ProviderCreateSuccess", "Launch", message)
                .await;
            write_status(
                pod,
                key,
                status::status_while_launching(
                    pod,
                    "InstanceLaunching",
                    format!("launching a {what}"),
                ),
                ctx,
            )
            .await?;
            Ok(Action::requeue(ctx.config.sync_interval.get()))
        }
        Err(failed) if failed.error.class == ErrorClass::Transient => {
            let error = failed.error;
            let failures = {
                let mut all = lock(&ctx.launch_failures);
                let count = all.entry(key.uid.clone()).or_insert(0);
                *count += 1;
                *count
            };
            let delay = backoff(&ctx.config, failures);
            let message = format!(
                "launching a {what} failed ({error}); retry {failures} in {}",
                humantime::format_duration(delay)
            );
            warn_and_record(
                pod,
                key,
                ctx,
                ("ProviderCreateFailed", "Launch"),
                message,
                |pod, message| {
                    status::status_while_launching(pod, "InstanceCreationRetrying", message)
                },
            )
            .await?;
            Ok(Action::requeue(delay))
        }
        Err(failed) => {
            let error = &failed.error;
            let reason = if error.code == INVALID_ANNOTATION {
                INVALID_ANNOTATION
            } else {
                "InstanceCreationFailed"
            };
            let message = if failed.passed_over.len() > 1 {
                let tried: Vec<String> = failed
                    .passed_over
                    .iter()
                    .map(|p| format!("{} ({})", p.offering, p.error.code))
                    .collect();
                format!(
                    "no offering could be launched; tried {}; last error: {error}",
                    tried.join(", ")
                )
            } else {
                format!("launching a {what} failed: {error}")
            };
            warn_and_record(
                pod,
                key,
                ctx,
                ("ProviderCreateFailed", "Launch"),
                message,
                |pod, message| status::status_failed(pod, reason, message),
            )
            .await?;
            Ok(Action::await_change())
        }
    }
}

async fn mirror_instance(
    pod: &Pod,
    key: &PodKey,
    instance: &InstanceStatus,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let desired = status::status_for_instance(pod, instance);
    let before = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    let after = desired.phase.clone().unwrap_or_default();
    let wrote = write_status(pod, key, desired.clone(), ctx).await?;
    if wrote && before != after {
        let message = desired
            .message
            .clone()
            .unwrap_or_else(|| format!("instance {} is {after}", instance.instance_id));
        match after.as_str() {
            "Running" => {
                ctx.events
                    .normal(
                        pod,
                        "InstanceRunning",
                        "Sync",
                        format!(
                            "instance {} is running at {}",
                            instance.instance_id,
                            desired.pod_ip.as_deref().unwrap_or("?")
                        ),
                    )
                    .await
            }
            "Succeeded" => {
                ctx.events
                    .normal(
                        pod,
                        "InstanceSucceeded",
                        "Sync",
                        format!("instance {}: the workload completed", instance.instance_id),
                    )
                    .await
            }
            "Failed" => {
                ctx.events
                    .warning(
                        pod,
                        desired.reason.as_deref().unwrap_or("InstanceTerminated"),
                        "Sync",
                        message,
                    )
                    .await
            }
            _ => {}
        }
    }
    Ok(Action::await_change())
}

/// The pod is being deleted: terminate its instance, then remove the pod object once the
/// instance is shutting down or gone.
async fn finalize(
    key: &PodKey,
    instance: Option<&InstanceStatus>,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let launching = ctx
        .instances
        .launched_within(&key.uid, ctx.config.launch_visibility_grace.get());
    let gone_or_going = match instance {
        Some(instance) => instance.state.is_finished(),
        None => !launching,
    };
    if !gone_or_going || launching {
        terminate(key, ctx).await?;
    }
    if !gone_or_going {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(key.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&key.name, &params).await {
        Ok(_) => {}
        // Already gone, or a different pod now has this name: either way ours is gone.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
        Err(source) => {
            return Err(ReconcileError::PodRemovalFailed {
                pod: key.clone(),
                source,
            });
        }
    }
    lock(&ctx.terminations_sent).remove(&key.uid);
    ctx.writes.forget(&key.uid);
    lock(&ctx.launch_failures).remove(&key.uid);
    ctx.instances.forget_launch(&key.uid);
    tracing::info!(pod = %key, "pod removed");
    Ok(Action::await_change())
}

async fn terminate(key: &PodKey, ctx: &Context) -> Result<(), ReconcileError> {
    if lock(&ctx.terminations_sent).contains(&key.uid) {
        return Ok(());
    }
    ctx.provider
        .delete(key)
        .await
        .map_err(|source| ReconcileError::TerminateFailed {
            pod: key.clone(),
            source,
        })?;
    lock(&ctx.terminations_sent).insert(key.uid.clone());
    tracing::info!(pod = %key, "instance termination requested");
    Ok(())
}

/// Tells the user what went wrong in the same words twice: a Warning Event (reason, action)
/// and the pod's status built by `status` from the message.
async fn warn_and_record(
    pod: &Pod,
    key: &PodKey,
    ctx: &Context,
    (reason, action): (&str, &str),
    message: String,
    status: impl FnOnce(&Pod, String) -> PodStatus,
) -> Result<(), ReconcileError> {
    ctx.events
        .warning(pod, reason, action, message.clone())
        .await;
    write_status(pod, key, status(pod, message), ctx)
        .await
        .map(|_| ())
}

/// Writes `desired` over the pod's status if anything would change. The resourceVersion
/// precondition turns a concurrent write into a 409 (retried on fresh data), so newer data
/// is never overwritten. Returns whether a write happened.
enum DecisionWrite {
    /// The pod already carries this decision (a retried launch).
    Unchanged,
    Written(Box<Pod>),
    PodGone,
}

/// Writes the decision annotation (and a `PolicyDecision` Event) unless the pod already
/// carries this exact decision.
async fn record_decision(
    pod: &Pod,
    key: &PodKey,
    record: &DecisionRecord,
    ctx: &Context,
) -> Result<DecisionWrite, ReconcileError> {
    let json = record.to_json();
    let current = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DECISION_ANNOTATION));
    if current == Some(&json) {
        return Ok(DecisionWrite::Unchanged);
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let patch = json!({ "metadata": { "annotations": { DECISION_ANNOTATION: json } } });
    let updated = match api
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(updated) => updated,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(DecisionWrite::PodGone),
        Err(source) => {
            return Err(ReconcileError::DecisionWriteFailed {
                pod: key.clone(),
                source,
            });
        }
    };
    ctx.events
        .normal(pod, "PolicyDecision", "Plan", record.summary())
        .await;
    Ok(DecisionWrite::Written(Box::new(updated)))
}

async fn write_status(
    pod: &Pod,
    key: &PodKey,
    desired: PodStatus,
    ctx: &Context,
) -> Result<bool, ReconcileError> {
    let read_version = pod.metadata.resource_version.clone().unwrap_or_default();
    if ctx
        .writes
        .already_written(&key.uid, &read_version, &desired)
        || !needs_write(pod.status.as_ref(), &desired)
    {
        return Ok(false);
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let patch = json!({
        "metadata": { "resourceVersion": pod.metadata.resource_version },
        "status": desired,
    });
    api.patch_status(
        &key.name,
        &PatchParams::default(),
        &Patch::Strategic(&patch),
    )
    .await
    .map_err(|source| ReconcileError::StatusWriteFailed {
        pod: key.clone(),
        source,
    })?;
    ctx.writes.record(&key.uid, read_version, &desired);
    Ok(true)
}

/// Doubling from the initial to the maximum backoff.
fn backoff(config: &PodsConfig, failures: u32) -> Duration {
    let initial = config.retry_initial_backoff.get();
    let doubled = initial.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(30)));
    doubled.min(config.retry_max_backoff.get())
}

/// What the controller does after a failed step.
pub fn error_policy(pod: Arc<Pod>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    if error.is_conflict() {
        return Action::requeue(Duration::from_millis(200));
    }
    tracing::warn!(pod = pod.metadata.name.as_deref().unwrap_or_default(), error = %crate::errors::error_chain(error), "reconcile failed; retrying");
    Action::requeue(ctx.config.retry_initial_backoff.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Seconds;

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

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let config = PodsConfig {
            retry_initial_backoff: Seconds::from_secs(1),
            retry_max_backoff: Seconds::from_secs(10),
            ..PodsConfig::default()
        };
        let delays: Vec<u64> = (1..=6).map(|n| backoff(&config, n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
        assert_eq!(backoff(&config, u32::MAX).as_secs(), 10);
    }
}
