//! Performs the step [`super::decide`] chose: the only place a reconcile talks to the
//! apiserver or the provider. What each call got lands in the pod's record or the termination
//! ledger, where the next decision reads it.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;

use super::decide::{Notice, StatusWrite, Step};
use super::phase::{FailureReason, WaitingReason};
use super::reconcile::{Context, ReconcileError};
use super::record::{Launch, PodRecord, Retry, RoomWait};
use super::status::{self, status_patch};
use super::view::LaunchRef;
use super::writes::LastWrite;
use crate::policy::decision::LaunchRecord;
use crate::policy::guardrails::{Effect, Guardrail, GuardrailRecord, Price};
use crate::policy::pipeline::REASON_INVALID_ANNOTATION;
use crate::policy::{DECISION_ANNOTATION, DecisionRecord, PlanRetry};
use crate::provider::zones::ZoneConstraint;
use crate::provider::{
    ErrorClass, LaunchFailed, LaunchProgress, Launched, PodKey, ProviderError, Termination,
};
use crate::spend::SpendError;
use crate::workload::{KubeEnvSource, launch_request};

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
        Step::Launch => launch(pod, key, ctx).await,
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
        Step::Write(write) => {
            let StatusWrite { status, notice } = *write;
            let written = write_status(pod, key, status, ctx).await?;
            if written.is_some()
                && let Some(notice) = notice
            {
                publish(pod, notice, ctx).await;
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
            publish(
                pod,
                Notice {
                    warning: true,
                    reason: "TerminationFailed",
                    action: "Terminate",
                    note: format!(
                        "terminating instance {instance_id} failed ({source}); retrying with backoff"
                    ),
                },
                ctx,
            ).await;
            Err(ReconcileError::TerminateFailed {
                pod: key.clone(),
                instance_id: instance_id.to_owned(),
                source,
            })
        }
    }
}

async fn remove(key: &PodKey, ctx: &Context) -> Result<Executed, ReconcileError> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(key.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    // A removal is what a deleting burst waits on: Events wait it out (`events.rs`).
    let writing = ctx.events.pod_write();
    let answer = api.delete(&key.name, &params).await;
    drop(writing);
    match answer {
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
    ctx.records.update(&key.uid, |record| record.removed = true);
    tracing::info!(pod = %key, "pod removed");
    Ok(Executed::PodRemoved)
}

/// Plans the pod and launches its instance. The decision goes onto the pod with the status
/// write that follows (the launch's outcome, or the instance's status once listed).
async fn launch(pod: &Pod, key: &PodKey, ctx: &Context) -> Result<Executed, ReconcileError> {
    let decision = match ctx.planner.plan(pod).await {
        Ok(decision) => decision,
        Err(error) => {
            let waiting = match error.retry {
                PlanRetry::WhenLoaded => Some(WaitingReason::PolicyNotReady),
                PlanRetry::Transient if policy_tries_left(key, ctx) => {
                    Some(WaitingReason::PolicyRetrying)
                }
                PlanRetry::Transient | PlanRetry::No => None,
            };
            let written = match waiting {
                Some(waiting) => plan_to_retry(pod, key, waiting, error.message, ctx).await?,
                None => {
                    ctx.records
                        .update(&key.uid, |record| record.waits_for_room = None);
                    // A plan the guardrails refused is recorded on the pod as a decided one
                    // is: what each plugin chose, and each guardrail that refused it.
                    if let Some(refused) = &error.refused {
                        note_decision(pod, key, refused, ctx).await;
                    }
                    let reason = FailureReason::of_policy(error.reason);
                    fail(pod, key, reason, "Plan", error.message, None, ctx).await?
                }
            };
            return Ok(changed(written));
        }
    };
    // Decided: whatever the pod waited for is over (a wake for it would only plan it again).
    ctx.records
        .update(&key.uid, |record| record.waits_for_policy = false);
    // Counted against the namespace's cap before anything is launched, so pods launching at
    // once cannot together pass it.
    let price = Price::of(decision.record.worst_case_price_per_hour);
    if let Err(error) = ctx
        .spend
        .reserve(&key.namespace, &key.uid, &ctx.node_name, price)
    {
        let written = wait_for_room(pod, key, &decision.record, price, error, ctx).await?;
        return Ok(changed(written));
    }
    ctx.records
        .update(&key.uid, |record| record.waits_for_room = None);
    let plan = decision.plan;
    let first = plan
        .candidates
        .first()
        .map(|c| c.instance_type.as_str())
        .unwrap_or("?");
    let what = format!("{first} {} instance", plan.market.market.as_str());
    let zones = ZoneConstraint::of(pod).on_node(ctx.node_zone.as_deref());
    let objects = KubeEnvSource::new(ctx.client.clone());
    let outcome = match launch_request(pod, &plan, zones.clone(), &objects).await {
        Ok(request) => ctx.provider.create(&request).await,
        // A pod that cannot be launched as it is fails, or is retried, as a provider's
        // refusal of it would be.
        Err(error) => Err(LaunchFailed::from(ProviderError::from(error))),
    };
    // The reservation holds while an instance may exist: until a listing shows it (it counts
    // then), or the pod goes.
    let instance_may_exist = match &outcome {
        Ok(_) => true,
        Err(failed) if failed.error.code == "IdempotentInstanceTerminated" => false,
        Err(failed) => failed.in_doubt || in_doubt(key, ctx),
    };
    if !instance_may_exist {
        ctx.spend.release(&key.uid);
    }
    let passed_over = match &outcome {
        Ok(launched) => &launched.passed_over,
        Err(failed) => &failed.passed_over,
    };
    // The decision is announced with what the provider made of it: the offering EC2 chose,
    // how, and why it passed the others over.
    let mut record = decision.record;
    record.launch = Some(LaunchRecord {
        offering: match &outcome {
            Ok(launched) => launched.offering.to_string(),
            Err(_) => String::new(),
        },
        instance_id: match &outcome {
            Ok(launched) => launched.instance_id.clone(),
            Err(_) => String::new(),
        },
        chosen_by: outcome
            .as_ref()
            .ok()
            .and_then(|launched| launched.chosen_by.clone()),
        zone: outcome
            .as_ref()
            .ok()
            .and_then(|launched| launched.zone.clone()),
        pod_zones: {
            if zones.is_constrained() {
                zones.describe()
            } else {
                String::new()
            }
        },
        passed_over: passed_over
            .iter()
            .map(|skipped| format!("{}: {}", skipped.offering, skipped.error))
            .collect(),
    });
    note_decision(pod, key, &record, ctx).await;
    for skipped in passed_over {
        let note = format!(
            "{}: {}; trying the next offering",
            skipped.offering, skipped.error
        );
        publish(
            pod,
            Notice {
                warning: true,
                reason: "OfferingUnavailable",
                action: "Launch",
                note,
            },
            ctx,
        )
        .await;
    }
    let written = match outcome {
        Ok(launched) => {
            launched_instance(pod, key, launched, ctx).await;
            None
        }
        // The pod's instance was launched (an answer lost) and has ended already: the
        // listing tells how, not a failed launch.
        Err(failed) if failed.error.code == "IdempotentInstanceTerminated" => {
            let now = Timestamp::now();
            tracing::info!(pod = %key, error = %failed.error, "the pod's instance ended before any listing showed it");
            ctx.records.update(&key.uid, |record| {
                record.launch = record.launch.ended_unseen(now);
            });
            None
        }
        Err(failed) if failed.error.class == ErrorClass::Transient => {
            launch_to_retry(pod, key, &what, failed, ctx).await?
        }
        // A refusal is only the pod's fate when no earlier request of this pod may have
        // launched an instance after all: while one may, wait (within the grace) for EC2 to
        // list it.
        Err(failed) if in_doubt(key, ctx) => launch_to_retry(pod, key, &what, failed, ctx).await?,
        Err(failed) => launch_refused(pod, key, &what, failed, ctx).await?,
    };
    Ok(changed(written))
}

/// A pod orca wrote is decided on as written, not as the lagging store shows it.
fn changed(written: Option<Pod>) -> Executed {
    match written {
        Some(pod) => Executed::PodChanged(Box::new(pod)),
        None => Executed::Continue,
    }
}

/// Records the launched instance and announces it. The status names it once a listing shows
/// it, or once one has missed it (see `decide`): a pod whose instance runs at once gets one
/// status write, not a Pending one overtaken by Running.
async fn launched_instance(pod: &Pod, key: &PodKey, launched: Launched, ctx: &Context) {
    let launch = LaunchRef {
        instance_id: launched.instance_id.clone(),
        at: Timestamp::now(),
    };
    let what = format!("{} instance {}", launched.offering, launched.instance_id);
    ctx.records.update(&key.uid, |record| {
        record.launch = Launch::Answered {
            launch,
            offering: launched.offering,
        };
        record.retry = Retry::default();
    });
    let note = if launched.adopted {
        format!("adopted the {what} launched earlier for this pod")
    } else {
        format!("launched a {what}")
    };
    publish(
        pod,
        Notice {
            warning: false,
            reason: "ProviderCreateSuccess",
            action: "Launch",
            note,
        },
        ctx,
    )
    .await;
}

/// Whether an earlier launch request of the pod got no answer, within the visibility grace.
fn in_doubt(key: &PodKey, ctx: &Context) -> bool {
    let grace = ctx.config.launch_visibility_grace.get();
    ctx.records
        .get(&key.uid)
        .is_some_and(|record| match record.launch {
            Launch::InDoubt { since } => {
                let elapsed = Timestamp::now().duration_since(since);
                elapsed.is_negative() || elapsed.unsigned_abs() < grace
            }
            _ => false,
        })
}

/// A launch that may work later: the pod stays Pending and the next try backs off. An answer
/// that never came leaves the launch in doubt: the next try re-sends the same ClientToken.
async fn launch_to_retry(
    pod: &Pod,
    key: &PodKey,
    what: &str,
    failed: LaunchFailed,
    ctx: &Context,
) -> Result<Option<Pod>, ReconcileError> {
    let later = Later {
        waiting: WaitingReason::InstanceCreationRetrying,
        event_reason: "ProviderCreateFailed",
        action: "Launch",
        what_failed: format!("launching a {what} failed ({})", failed.error),
        sooner: None,
    };
    retry_later(pod, key, later, ctx, |record, now| {
        if failed.in_doubt {
            record.launch = record.launch.in_doubt(now);
        }
        if failed.progress.is_some() {
            record.progress = failed.progress;
        }
    })
    .await
}

/// A step that may work later, and how the pod says so meanwhile.
struct Later {
    waiting: WaitingReason,
    event_reason: &'static str,
    action: &'static str,
    what_failed: String,
    /// What else than the backoff brings the next try (`launching as soon as …`).
    sooner: Option<&'static str>,
}

/// The pod stays Pending, saying what failed and when the next try is, and the next try backs
/// off; `mark` notes in the pod's record what the next try needs to know.
async fn retry_later(
    pod: &Pod,
    key: &PodKey,
    later: Later,
    ctx: &Context,
    mark: impl FnOnce(&mut PodRecord, Timestamp),
) -> Result<Option<Pod>, ReconcileError> {
    let now = Timestamp::now();
    let (initial, max) = (
        ctx.config.retry_initial_backoff.get(),
        ctx.config.retry_max_backoff.get(),
    );
    let mut retry = Retry::default();
    ctx.records.update(&key.uid, |record| {
        mark(record, now);
        record.retry = record.retry.failed(now, initial, max);
        retry = record.retry;
    });
    let delay = retry.wait(now).unwrap_or(initial);
    let what_failed = later.what_failed;
    let next = humantime::format_duration(std::time::Duration::from_secs(delay.as_secs().max(1)));
    // The Event's words stay the same from try to try, so repeats aggregate into one Event;
    // the status says which try is next.
    let (note, message) = match later.sooner {
        None => (
            format!("{what_failed}; retrying with backoff"),
            format!("{what_failed}; retry {} in {next}", retry.failures),
        ),
        Some(sooner) => (
            format!("{what_failed}; {sooner}"),
            format!("{what_failed}; {sooner} (or at the next try, in {next})"),
        ),
    };
    publish(
        pod,
        Notice {
            warning: true,
            reason: later.event_reason,
            action: later.action,
            note,
        },
        ctx,
    )
    .await;
    let status = status::status_while_launching(pod, later.waiting, message, None);
    write_status(pod, key, status, ctx).await
}

/// Plans that may run out of time before a pod fails for it: a plugin that loops on this pod
/// fails it after this many tries, a machine too busy for one try does not.
const POLICY_TIMEOUT_TRIES: u32 = 3;

/// Whether the pod has tries left after a plan that ran out of time.
fn policy_tries_left(key: &PodKey, ctx: &Context) -> bool {
    let timeouts = ctx.records.get(&key.uid).map_or(0, |r| r.policy_timeouts);
    tries_left_after_timeouts(timeouts)
}

/// Whether a plan that ran out of time, after `earlier` such plans, is tried again.
fn tries_left_after_timeouts(earlier: u32) -> bool {
    earlier + 1 < POLICY_TIMEOUT_TRIES
}

/// A plan that may pass later (a plugin not loaded yet, a call that ran out of time): the pod
/// stays Pending saying why, and is planned again with backoff, or as soon as the plugin loads.
async fn plan_to_retry(
    pod: &Pod,
    key: &PodKey,
    waiting: WaitingReason,
    error: String,
    ctx: &Context,
) -> Result<Option<Pod>, ReconcileError> {
    let later = Later {
        waiting,
        event_reason: waiting.as_str(),
        action: "Plan",
        what_failed: format!("the policy cannot decide yet ({error})"),
        sooner: None,
    };
    retry_later(pod, key, later, ctx, |record, _| {
        record.waits_for_policy = waiting == WaitingReason::PolicyNotReady;
        if waiting == WaitingReason::PolicyRetrying {
            record.policy_timeouts = record.policy_timeouts.saturating_add(1);
        }
    })
    .await
}

/// The pod's instance would take its namespace past its cap: the pod stays Pending
/// (`NamespaceBudgetExceeded`, naming the cap, the namespace's spend and the pod's price) with
/// its decision on record, and is planned again as soon as enough room frees there (see
/// `room_wait`), or at its next backoff.
async fn wait_for_room(
    pod: &Pod,
    key: &PodKey,
    decision: &DecisionRecord,
    price: Option<Price>,
    error: SpendError,
    ctx: &Context,
) -> Result<Option<Pod>, ReconcileError> {
    // On record while it waits: the decision, and what holds it.
    let mut decision = decision.clone();
    decision.guardrails.push(GuardrailRecord {
        guardrail: Guardrail::MaxNamespacePricePerHour,
        effect: Effect::Waits,
        plugin: format!(
            "{} {} (market by {} {})",
            decision.select_instance.plugin,
            decision.select_instance.version,
            decision.choose_market.plugin,
            decision.choose_market.version
        ),
        value: match price {
            Some(price) => format!(
                "{} {}, up to {price}",
                decision.instance_type,
                decision.market.as_str()
            ),
            None => format!(
                "{} {}, at a price the catalogue does not know",
                decision.instance_type,
                decision.market.as_str()
            ),
        },
        limit: format!("{} for namespace {}", error.cap().0, key.namespace),
    });
    note_decision(pod, key, &decision, ctx).await;
    let later = Later {
        waiting: WaitingReason::NamespaceBudgetExceeded,
        event_reason: WaitingReason::NamespaceBudgetExceeded.as_str(),
        action: "Launch",
        what_failed: error.to_string(),
        sooner: Some("launching as soon as the namespace has room"),
    };
    retry_later(pod, key, later, ctx, |record, now| {
        let since = record
            .waits_for_room
            .as_ref()
            .map_or(now, |wait| wait.since);
        record.waits_for_room = price.map(|price| {
            Box::new(RoomWait {
                namespace: key.namespace.clone(),
                price,
                since,
            })
        });
    })
    .await
}

/// A launch that cannot work: the pod fails with what EC2 said.
async fn launch_refused(
    pod: &Pod,
    key: &PodKey,
    what: &str,
    failed: LaunchFailed,
    ctx: &Context,
) -> Result<Option<Pod>, ReconcileError> {
    let error = &failed.error;
    let reason = match error.code.as_str() {
        REASON_INVALID_ANNOTATION => FailureReason::InvalidAnnotation,
        _ => FailureReason::InstanceCreationFailed,
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
    fail(pod, key, reason, "Launch", message, None, ctx).await
}

/// A Warning and a Failed status in the same words.
async fn fail(
    pod: &Pod,
    key: &PodKey,
    reason: FailureReason,
    action: &'static str,
    message: String,
    launched: Option<&LaunchRef>,
    ctx: &Context,
) -> Result<Option<Pod>, ReconcileError> {
    let event_reason = match action {
        "Launch" => "ProviderCreateFailed",
        _ => reason.as_str(),
    };
    publish(
        pod,
        Notice {
            warning: true,
            reason: event_reason,
            action,
            note: message.clone(),
        },
        ctx,
    )
    .await;
    let status = status::status_failed(pod, reason, message, launched);
    write_status(pod, key, status, ctx).await
}

/// Queues the Event; a Warning through the pod's own recorder, so repeats fold (a pod whose
/// record is gone gets a one-off one).
async fn publish(pod: &Pod, notice: Notice, ctx: &Context) {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let recorder = notice
        .warning
        .then(|| ctx.records.recorder(uid, || ctx.events.recorder()))
        .flatten();
    ctx.events
        .publish(
            pod,
            recorder,
            notice.warning,
            notice.reason,
            notice.action,
            notice.note,
        )
        .await;
}

/// Keeps a new decision for the next status write and announces it (`PolicyDecision`); a
/// retried launch with the same decision says nothing again.
async fn note_decision(pod: &Pod, key: &PodKey, record: &DecisionRecord, ctx: &Context) {
    let json = record.to_json();
    let carried = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DECISION_ANNOTATION));
    let noted = ctx
        .records
        .get(&key.uid)
        .is_some_and(|r| r.decision.as_ref() == Some(&json));
    if carried == Some(&json) || noted {
        return;
    }
    ctx.records
        .update(&key.uid, |r| r.decision = Some(json.clone()));
    publish(
        pod,
        Notice {
            warning: false,
            reason: "PolicyDecision",
            action: "Plan",
            note: record.summary(),
        },
        ctx,
    )
    .await;
}

/// Writes `desired` over the pod's status if anything would change, with the policy's
/// decision if the pod does not carry it yet; answers the pod as written. The
/// resourceVersion precondition turns a concurrent write into a 409 (retried on fresh data),
/// so newer data is never overwritten; the patch clears what `desired` leaves out.
async fn write_status(
    pod: &Pod,
    key: &PodKey,
    desired: PodStatus,
    ctx: &Context,
) -> Result<Option<Pod>, ReconcileError> {
    let record = ctx.records.get(&key.uid);
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
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let patch = json!({
        "metadata": metadata,
        "status": status_patch(pod.status.as_ref(), &desired),
    });
    // Events wait while pod writes are in flight (`events.rs`).
    let _writing = ctx.events.pod_write();
    let mut written = api
        .patch_status(
            &key.name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .map_err(|source| ReconcileError::StatusWriteFailed {
            pod: key.clone(),
            source,
        })?;
    // Kept as the store keeps pods (`stored::trim`).
    super::stored::trim(&mut written);
    let last = LastWrite::new(read_version, written.clone());
    ctx.records.update(&key.uid, |record| {
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

    #[test]
    fn a_pod_is_planned_three_times_before_timeouts_fail_it() {
        assert!(tries_left_after_timeouts(0));
        assert!(tries_left_after_timeouts(1));
        assert!(!tries_left_after_timeouts(2));
    }
}
