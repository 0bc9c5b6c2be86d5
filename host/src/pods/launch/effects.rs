//! What each answer of the Launch step leads to, as a pure function: no I/O here, so every
//! path is a row in a table test (`effects/tests.rs`). The executor (`super`) performs the
//! calls and applies the [`Effects`].
//!
//! | answer | effects |
//! |---|---|
//! | plan: a plugin is not loaded | Pending `PolicyNotReady`; planned again when it loads or at the next backoff |
//! | plan: ran out of time, tries left | Pending `PolicyRetrying`; one more timeout counted |
//! | plan: refused or failed (or out of time, no tries left) | Failed with the plan's reason; a refused decision on record |
//! | reserve: no room in the namespace | Pending `NamespaceBudgetExceeded`, the decision on record with the cap that holds it |
//! | launch: an instance | the record names it; `ProviderCreateSuccess` |
//! | launch: the pod's instance already ended | the record says so; a listing tells how it ended |
//! | launch: transient, or an earlier request still in doubt | Pending `InstanceCreationRetrying`; a request without answer stays in doubt |
//! | launch: refused | Failed `InstanceCreationFailed` (`InvalidAnnotation` for a bad annotation) |
//!
//! Every launch answer records the decision with what the provider made of it, and one
//! `OfferingUnavailable` Warning per offering passed over. A launch whose request was built
//! also tells, as Warnings before the rest, what of the pod's spec the instance does not do as
//! a node would ([`WorkloadWarning`]: `imagePullSecrets`, skipped `envFrom` keys). The
//! reservation against the namespace's cap is released once no instance can exist.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::super::events::PodEvent;
use super::super::phase::{FailureReason, WaitingReason};
use super::super::record::{Launch, PodRecord, Retry, RoomWait};
use super::super::status;
use super::super::view::LaunchRef;
use crate::policy::decision::LaunchRecord;
use crate::policy::guardrails::{Effect, Guardrail, GuardrailRecord, Price};
use crate::policy::{DecisionRecord, PlanError, PlanRetry};
use crate::provider::plan::LaunchPlan;
use crate::provider::zones::ZoneConstraint;
use crate::provider::{ErrorClass, LaunchFailed, LaunchProgress, Launched};
use crate::spend::SpendError;
use crate::workload::WorkloadWarning;

/// What the step knows besides the answer: the pod's record as it stands, and the time.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub record: &'a PodRecord,
    pub now: Timestamp,
    pub timing: RetryTiming,
}

/// The durations the step's retries depend on (from `pods:` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryTiming {
    /// The backoff after the first failure, doubling up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// How long EC2 may take to show an instance whose launch got no answer
    /// (`pods.launchVisibilityGrace`).
    pub grace: Duration,
}

/// What to do after an answer, applied in this order: the reservation, the record, the
/// decision, the Events, the status.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Effects {
    /// No instance can exist for the pod: its reservation against the namespace's cap ends.
    pub release: bool,
    pub record: RecordChange,
    /// A decision for the pod to carry (and announce, unless it is carried or noted already).
    pub decision: Option<DecisionRecord>,
    pub events: Vec<PodEvent>,
    pub status: Option<StatusChange>,
}

/// The fields of the pod's record that change; `None` leaves one as it is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordChange {
    pub launch: Option<Launch>,
    pub retry: Option<Retry>,
    pub progress: Option<LaunchProgress>,
    pub waits_for_policy: Option<bool>,
    pub policy_timeouts: Option<u32>,
    pub waits_for_room: Option<Option<Box<RoomWait>>>,
}

impl RecordChange {
    pub fn apply(self, record: &mut PodRecord) {
        let RecordChange {
            launch,
            retry,
            progress,
            waits_for_policy,
            policy_timeouts,
            waits_for_room,
        } = self;
        if let Some(launch) = launch {
            record.launch = launch;
        }
        if let Some(retry) = retry {
            record.retry = retry;
        }
        if let Some(progress) = progress {
            record.progress = Some(progress);
        }
        if let Some(waits) = waits_for_policy {
            record.waits_for_policy = waits;
        }
        if let Some(timeouts) = policy_timeouts {
            record.policy_timeouts = timeouts;
        }
        if let Some(waits) = waits_for_room {
            record.waits_for_room = waits;
        }
    }
}

/// The status the pod is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusChange {
    /// Pending, saying why and when the next try is.
    Waiting {
        reason: WaitingReason,
        message: String,
    },
    Failed {
        reason: FailureReason,
        message: String,
    },
}

impl StatusChange {
    /// The whole status, for `pod` as it stands.
    pub fn status(self, pod: &Pod) -> PodStatus {
        match self {
            StatusChange::Waiting { reason, message } => {
                status::status_while_launching(pod, reason, message, None)
            }
            StatusChange::Failed { reason, message } => {
                status::status_failed(pod, reason, message, None)
            }
        }
    }
}

/// Plans that may run out of time before a pod fails for it: a plugin that loops on this pod
/// fails it after this many tries, a machine too busy for one try does not.
const POLICY_TIMEOUT_TRIES: u32 = 3;

/// The plan failed.
pub fn plan_failed(error: &PlanError, facts: &Facts) -> Effects {
    let timeouts = facts.record.policy_timeouts;
    let waiting = match error.retry {
        PlanRetry::WhenLoaded => Some(WaitingReason::PolicyNotReady),
        PlanRetry::Transient if timeouts + 1 < POLICY_TIMEOUT_TRIES => {
            Some(WaitingReason::PolicyRetrying)
        }
        PlanRetry::Transient | PlanRetry::No => None,
    };
    let Some(waiting) = waiting else {
        // A plan the guardrails refused is recorded on the pod as a decided one is: what each
        // plugin chose, and each guardrail that refused it.
        let reason = FailureReason::of_plan(error.reason);
        return Effects {
            record: RecordChange {
                waits_for_room: Some(None),
                ..RecordChange::default()
            },
            decision: error.refused.as_deref().cloned(),
            ..fail(reason, reason.as_str(), "Plan", error.message.clone())
        };
    };
    let later = Later {
        waiting,
        event_reason: waiting.as_str(),
        action: "Plan",
        what_failed: format!("the policy cannot decide yet ({})", error.message),
        sooner: None,
    };
    let change = RecordChange {
        waits_for_policy: Some(waiting == WaitingReason::PolicyNotReady),
        policy_timeouts: (waiting == WaitingReason::PolicyRetrying)
            .then(|| timeouts.saturating_add(1)),
        ..RecordChange::default()
    };
    retry_later(later, change, facts)
}

/// The pod's instance would take its namespace past its cap: the pod stays Pending
/// (`NamespaceBudgetExceeded`, naming the cap, the namespace's spend and the pod's price) with
/// its decision on record, and is planned again as soon as enough room frees there (see
/// `room_wait`), or at its next backoff.
pub fn no_room(
    mut decision: DecisionRecord,
    price: Option<Price>,
    error: &SpendError,
    namespace: &str,
    facts: &Facts,
) -> Effects {
    // On record while it waits: the decision, and what holds it.
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
        limit: format!("{} for namespace {namespace}", error.cap().0),
    });
    let later = Later {
        waiting: WaitingReason::NamespaceBudgetExceeded,
        event_reason: WaitingReason::NamespaceBudgetExceeded.as_str(),
        action: "Launch",
        what_failed: error.to_string(),
        sooner: Some("launching as soon as the namespace has room"),
    };
    let since = facts
        .record
        .waits_for_room
        .as_ref()
        .map_or(facts.now, |wait| wait.since);
    let change = RecordChange {
        waits_for_room: Some(price.map(|price| {
            Box::new(RoomWait {
                namespace: namespace.to_owned(),
                price,
                since,
            })
        })),
        ..RecordChange::default()
    };
    Effects {
        decision: Some(decision),
        ..retry_later(later, change, facts)
    }
}

/// The provider answered the launch. `zones` are the pod's zones on its node.
pub fn launched(
    outcome: &Result<Launched, LaunchFailed>,
    decision: DecisionRecord,
    plan: &LaunchPlan,
    zones: &ZoneConstraint,
    facts: &Facts,
) -> Effects {
    let passed_over = match outcome {
        Ok(launched) => &launched.passed_over,
        Err(failed) => &failed.passed_over,
    };
    let offerings_passed_over = passed_over.iter().map(|skipped| PodEvent {
        warning: true,
        reason: "OfferingUnavailable",
        action: "Launch",
        note: format!(
            "{}: {}; trying the next offering",
            skipped.offering, skipped.error
        ),
    });
    let mut effects = match outcome {
        Ok(launched) => instance(launched, facts),
        Err(failed) => match failure(failed, facts) {
            LaunchFailure::EndedUnseen => Effects {
                release: true,
                record: RecordChange {
                    launch: Some(facts.record.launch.ended_unseen(facts.now)),
                    ..RecordChange::default()
                },
                ..Effects::default()
            },
            LaunchFailure::Retry => launch_to_retry(plan, failed, facts),
            LaunchFailure::Refused(reason) => Effects {
                release: !failed.in_doubt,
                ..fail(
                    reason,
                    "ProviderCreateFailed",
                    "Launch",
                    refusal(plan, failed),
                )
            },
        },
    };
    effects.events.splice(0..0, offerings_passed_over);
    effects.decision = Some(decision_with_launch(decision, outcome, zones));
    effects
}

/// The Warning Events of a launch's `warnings`, in their order, ahead of the launch's own.
pub fn warn(effects: &mut Effects, warnings: &[WorkloadWarning]) {
    let told = warnings.iter().map(|warning| PodEvent {
        warning: true,
        reason: warning.reason(),
        action: "Launch",
        note: warning.to_string(),
    });
    effects.events.splice(0..0, told);
}

/// What a failed launch means for the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LaunchFailure {
    /// The pod's instance was launched (an answer lost) and has ended already: the listing
    /// tells how, not a failed launch.
    EndedUnseen,
    /// It may work later.
    Retry,
    /// It cannot work: the pod fails.
    Refused(FailureReason),
}

fn failure(failed: &LaunchFailed, facts: &Facts) -> LaunchFailure {
    match failed.error.class {
        ErrorClass::AlreadyEnded => LaunchFailure::EndedUnseen,
        ErrorClass::Transient => LaunchFailure::Retry,
        // A refusal is only the pod's fate when no earlier request of this pod may have
        // launched an instance after all: while one may, wait (within the grace) for EC2 to
        // list it.
        _ if in_doubt(facts) => LaunchFailure::Retry,
        ErrorClass::InvalidAnnotation => LaunchFailure::Refused(FailureReason::InvalidAnnotation),
        ErrorClass::Capacity | ErrorClass::Permanent => {
            LaunchFailure::Refused(FailureReason::InstanceCreationFailed)
        }
    }
}

/// Whether an earlier launch request of the pod got no answer, within the visibility grace.
fn in_doubt(facts: &Facts) -> bool {
    match facts.record.launch {
        Launch::InDoubt { since } => {
            let elapsed = facts.now.duration_since(since);
            elapsed.is_negative() || elapsed.unsigned_abs() < facts.timing.grace
        }
        _ => false,
    }
}

/// Records the launched instance and announces it. The status names it once a listing shows
/// it, or once one has missed it (see `decide`): a pod whose instance runs at once gets one
/// status write, not a Pending one overtaken by Running.
fn instance(launched: &Launched, facts: &Facts) -> Effects {
    let what = format!("{} instance {}", launched.offering, launched.instance_id);
    let note = if launched.adopted {
        format!("adopted the {what} launched earlier for this pod")
    } else {
        format!("launched a {what}")
    };
    Effects {
        record: RecordChange {
            launch: Some(Launch::Answered {
                launch: LaunchRef {
                    instance_id: launched.instance_id.clone(),
                    at: facts.now,
                },
                offering: launched.offering.clone(),
            }),
            retry: Some(Retry::default()),
            ..RecordChange::default()
        },
        events: vec![PodEvent {
            warning: false,
            reason: "ProviderCreateSuccess",
            action: "Launch",
            note,
        }],
        ..Effects::default()
    }
}

/// A launch that may work later: the pod stays Pending and the next try backs off. An answer
/// that never came leaves the launch in doubt: the next try re-sends the same ClientToken.
/// The reservation holds while an instance may exist.
fn launch_to_retry(plan: &LaunchPlan, failed: &LaunchFailed, facts: &Facts) -> Effects {
    let later = Later {
        waiting: WaitingReason::InstanceCreationRetrying,
        event_reason: "ProviderCreateFailed",
        action: "Launch",
        what_failed: format!("launching a {} failed ({})", what(plan), failed.error),
        sooner: None,
    };
    let change = RecordChange {
        launch: failed
            .in_doubt
            .then(|| facts.record.launch.in_doubt(facts.now)),
        progress: failed.progress.clone(),
        ..RecordChange::default()
    };
    Effects {
        release: !(failed.in_doubt || in_doubt(facts)),
        ..retry_later(later, change, facts)
    }
}

/// What a refused launch tells the pod.
fn refusal(plan: &LaunchPlan, failed: &LaunchFailed) -> String {
    let error = &failed.error;
    if failed.passed_over.len() > 1 {
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
        format!("launching a {} failed: {error}", what(plan))
    }
}

/// The plan's first offering, as a launch's messages name it.
fn what(plan: &LaunchPlan) -> String {
    let first = plan
        .candidates
        .first()
        .map_or("?", |c| c.instance_type.as_str());
    format!("{first} {} instance", plan.market.market.as_str())
}

/// The decision, announced with what the provider made of it: the offering EC2 chose, how,
/// and why it passed the others over.
fn decision_with_launch(
    mut decision: DecisionRecord,
    outcome: &Result<Launched, LaunchFailed>,
    zones: &ZoneConstraint,
) -> DecisionRecord {
    let (launched, passed_over) = match outcome {
        Ok(launched) => (Some(launched), &launched.passed_over),
        Err(failed) => (None, &failed.passed_over),
    };
    decision.launch = Some(LaunchRecord {
        offering: launched.map_or_else(String::new, |l| l.offering.to_string()),
        instance_id: launched.map_or_else(String::new, |l| l.instance_id.clone()),
        chosen_by: launched.and_then(|l| l.chosen_by.clone()),
        zone: launched.and_then(|l| l.zone.clone()),
        pod_zones: if zones.is_constrained() {
            zones.describe()
        } else {
            String::new()
        },
        passed_over: passed_over
            .iter()
            .map(|skipped| format!("{}: {}", skipped.offering, skipped.error))
            .collect(),
        volumes: launched.map_or_else(Vec::new, |l| {
            (l.volumes.iter())
                .map(|volume| format!("{} at {}", volume.volume_id, volume.device))
                .collect()
        }),
        price_per_hour: None,
        price_source: None,
    });
    decision
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
/// off; `change` notes in the pod's record what the next try needs to know.
fn retry_later(later: Later, change: RecordChange, facts: &Facts) -> Effects {
    let RetryTiming {
        initial_backoff,
        max_backoff,
        ..
    } = facts.timing;
    let retry = facts
        .record
        .retry
        .failed(facts.now, initial_backoff, max_backoff);
    let delay = retry.wait(facts.now).unwrap_or(initial_backoff);
    let next = humantime::format_duration(Duration::from_secs(delay.as_secs().max(1)));
    let what_failed = later.what_failed;
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
    Effects {
        record: RecordChange {
            retry: Some(retry),
            ..change
        },
        events: vec![PodEvent {
            warning: true,
            reason: later.event_reason,
            action: later.action,
            note,
        }],
        status: Some(StatusChange::Waiting {
            reason: later.waiting,
            message,
        }),
        ..Effects::default()
    }
}

/// A Warning and a Failed status in the same words.
fn fail(
    reason: FailureReason,
    event_reason: &'static str,
    action: &'static str,
    message: String,
) -> Effects {
    Effects {
        events: vec![PodEvent {
            warning: true,
            reason: event_reason,
            action,
            note: message.clone(),
        }],
        status: Some(StatusChange::Failed { reason, message }),
        ..Effects::default()
    }
}

#[cfg(test)]
mod tests;
