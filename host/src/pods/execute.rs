//! Performs the step [`super::decide`] chose: the only place a reconcile talks to the
//! apiserver or the provider. What each call got lands in the pod's record or the termination
//! ledger, where the next decision reads it.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::context::Context;
use super::decide::{StatusWrite, Step};
use super::error::ReconcileError;
use super::events::PodEvent;
use super::record::Retry;
use crate::provider::{InstanceStatus, PodKey, Termination};

/// What a performed step left behind.
pub enum Executed {
    /// Decide again on the same pod.
    Continue,
    /// Decide again on this newer copy of the pod (orca wrote it).
    PodChanged(Box<Pod>),
    /// The pod object is gone: nothing more to decide.
    PodRemoved,
}

/// Performs `step` for `pod`.
///
/// # Errors
/// [`ReconcileError`] naming the call that failed; the caller backs off.
pub async fn execute(
    step: Step,
    pod: &Pod,
    key: &PodKey,
    ctx: &Context,
) -> Result<Executed, ReconcileError> {
    match step {
        // `decide` returns waits to its caller; one here has nothing to do.
        Step::Wait(_) => Ok(Executed::Continue),
        Step::Launch => Ok(changed(ctx.launcher().launch(pod, key).await?)),
        Step::LookUp { instance_id } => {
            let found = ctx
                .provider
                .lookup(key, &instance_id)
                .await
                .map_err(|source| ReconcileError::LookUpFailed {
                    pod: key.clone(),
                    instance_id: instance_id.clone(),
                    source,
                })?;
            let now = Timestamp::now();
            tracing::info!(pod = %key, instance = %instance_id, found = found.is_some(), "looked the unlisted instance up by id");
            ctx.records.update(&key.uid, |record| {
                record.lookup_missed = found.is_none().then_some(now);
                record.looked_up = found.map(Box::new);
                record.retry = Retry::default();
            });
            Ok(Executed::Continue)
        }
        Step::ReadExit { instance } => {
            let exit = ctx
                .provider
                .workload_exit(&instance)
                .await
                .map_err(|source| ReconcileError::ExitReadFailed {
                    pod: key.clone(),
                    instance_id: instance.instance_id.clone(),
                    source,
                })?;
            let now = Timestamp::now();
            ctx.records.update(&key.uid, |record| {
                record.exit = record.exit.read(exit, now);
                record.retry = Retry::default();
            });
            Ok(Executed::Continue)
        }
        Step::Terminate { instance_id } => terminate(pod, key, &instance_id, ctx).await,
        Step::Attach { instance } => attach(pod, key, &instance, ctx).await,
        Step::Write(write) => {
            let StatusWrite { status, event } = *write;
            let output = ctx.output();
            let written = output.write_status(pod, key, status).await?;
            if written.is_some()
                && let Some(event) = event
            {
                output.publish(pod, event).await;
            }
            Ok(changed(written))
        }
        Step::RemovePod => remove(key, ctx).await,
    }
}

async fn terminate(
    pod: &Pod,
    key: &PodKey,
    instance_id: &str,
    ctx: &Context,
) -> Result<Executed, ReconcileError> {
    match ctx.provider.terminate(instance_id).await {
        Ok(answer) => {
            let now = Timestamp::now();
            ctx.ledger.note(instance_id, answer, now);
            // Going, or unknown to EC2: either way it costs the namespace nothing more, and
            // the pod (deleting or finished) launches nothing again.
            ctx.spend.ended(instance_id, now);
            ctx.spend.release(&key.uid);
            ctx.records
                .update(&key.uid, |record| record.retry = Retry::default());
            match answer {
                Termination::Requested => {
                    tracing::info!(pod = %key, instance = instance_id, "instance termination requested")
                }
                Termination::Unknown => {
                    tracing::info!(pod = %key, instance = instance_id, "the provider does not know the instance (yet); asking again later")
                }
            }
            Ok(Executed::Continue)
        }
        Err(source) => {
            let event = PodEvent {
                warning: true,
                reason: "TerminationFailed",
                action: "Terminate",
                note: format!(
                    "terminating instance {instance_id} failed ({source}); retrying with backoff"
                ),
            };
            ctx.output().publish(pod, event).await;
            Err(ReconcileError::TerminateFailed {
                pod: key.clone(),
                instance_id: instance_id.to_owned(),
                source,
            })
        }
    }
}

/// Attaches the volumes the instance waits for; each attached is an Event, a refusal a
/// Warning and a retry with backoff (EBS refuses a volume attached elsewhere until it is
/// detached there).
async fn attach(
    pod: &Pod,
    key: &PodKey,
    instance: &InstanceStatus,
    ctx: &Context,
) -> Result<Executed, ReconcileError> {
    let output = ctx.output();
    match ctx.provider.attach(instance).await {
        Ok(attached) => {
            for volume in &attached {
                tracing::info!(pod = %key, instance = %volume.instance_id, volume = %volume.volume_id, device = %volume.device, "volume attached");
                let event = PodEvent {
                    warning: false,
                    reason: "SuccessfulAttachVolume",
                    action: "Attach",
                    note: format!(
                        "attached volume {} to instance {} at {}",
                        volume.volume_id, volume.instance_id, volume.device
                    ),
                };
                output.publish(pod, event).await;
            }
            ctx.records.update(&key.uid, |record| {
                record
                    .attached
                    .extend(attached.into_iter().map(|volume| volume.volume_id));
                record.retry = Retry::default();
            });
            Ok(Executed::Continue)
        }
        Err(source) => {
            let event = PodEvent {
                warning: true,
                reason: "FailedAttachVolume",
                action: "Attach",
                note: format!(
                    "attaching volumes to instance {} failed ({source}); retrying with backoff",
                    instance.instance_id
                ),
            };
            output.publish(pod, event).await;
            Err(ReconcileError::AttachFailed {
                pod: key.clone(),
                instance_id: instance.instance_id.clone(),
                source,
            })
        }
    }
}

async fn remove(key: &PodKey, ctx: &Context) -> Result<Executed, ReconcileError> {
    match ctx.writer.remove(key).await {
        Ok(()) => {}
        // Already gone, or a different pod now has this name: either way ours is gone.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
        Err(source) => {
            return Err(ReconcileError::PodRemovalFailed {
                pod: key.clone(),
                source,
            });
        }
    }
    ctx.records.update(&key.uid, |record| record.removed = true);
    tracing::info!(pod = %key, "pod removed");
    Ok(Executed::PodRemoved)
}

/// A pod orca wrote is decided on as written, not as the lagging store shows it.
fn changed(written: Option<Pod>) -> Executed {
    match written {
        Some(pod) => Executed::PodChanged(Box::new(pod)),
        None => Executed::Continue,
    }
}
