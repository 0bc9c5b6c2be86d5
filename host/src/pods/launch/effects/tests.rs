use std::time::Duration;

use super::*;
use crate::policy::PlanFailure;
use crate::provider::plan::Market;
use crate::provider::{Offering, PassedOver, ProviderError};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_000_000 + second).unwrap()
}

const TIMING: RetryTiming = RetryTiming {
    initial_backoff: Duration::from_secs(5),
    max_backoff: Duration::from_secs(300),
    grace: Duration::from_secs(60),
};

fn facts(record: &PodRecord, second: i64) -> Facts<'_> {
    Facts {
        record,
        now: at(second),
        timing: TIMING,
    }
}

fn decision() -> DecisionRecord {
    DecisionRecord::on_demand(&["m5.large", "m6i.large"])
}

/// The zones of a pod that names none, on a node bound to none.
fn unconstrained() -> ZoneConstraint {
    ZoneConstraint::of(&Pod::default())
}

fn offering(instance_type: &str) -> Offering {
    Offering {
        instance_type: instance_type.to_owned(),
        market: Market::OnDemand,
    }
}

fn an_instance(adopted: bool, passed_over: usize) -> Launched {
    Launched {
        instance_id: "i-0abc".to_owned(),
        offering: offering("m6i.large"),
        adopted,
        passed_over: (0..passed_over).map(|_| capacity("m5.large")).collect(),
        chosen_by: None,
        zone: Some("us-east-1a".to_owned()),
    }
}

fn capacity(instance_type: &str) -> PassedOver {
    PassedOver {
        offering: offering(instance_type),
        error: ProviderError::capacity("InsufficientInstanceCapacity", "none left"),
    }
}

fn failed(error: ProviderError, in_doubt: bool, passed_over: usize) -> LaunchFailed {
    LaunchFailed {
        error,
        passed_over: (0..passed_over).map(|_| capacity("m5.large")).collect(),
        in_doubt,
        progress: None,
    }
}

/// What a row checks of the effects: whether the reservation ends, the status (`Pending
/// REASON` / `Failed REASON`), the Events' reasons in order, the record's launch.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    release: bool,
    status: String,
    events: Vec<&'static str>,
    launch: &'static str,
}

fn seen(effects: &Effects) -> Seen {
    Seen {
        release: effects.release,
        status: match &effects.status {
            None => "-".to_owned(),
            Some(StatusChange::Waiting { reason, .. }) => format!("Pending {}", reason.as_str()),
            Some(StatusChange::Failed { reason, .. }) => format!("Failed {}", reason.as_str()),
        },
        events: effects.events.iter().map(|event| event.reason).collect(),
        launch: match &effects.record.launch {
            None => "unchanged",
            Some(Launch::NotSent) => "NotSent",
            Some(Launch::Answered { .. }) => "Answered",
            Some(Launch::InDoubt { .. }) => "InDoubt",
            Some(Launch::EndedUnseen { .. }) => "EndedUnseen",
        },
    }
}

fn row(release: bool, status: &str, events: &[&'static str], launch: &'static str) -> Seen {
    Seen {
        release,
        status: status.to_owned(),
        events: events.to_vec(),
        launch,
    }
}

#[test]
fn each_launch_answer_has_its_effects() {
    let fresh = PodRecord::default();
    let in_doubt_since = |second| PodRecord {
        launch: Launch::InDoubt { since: at(second) },
        ..PodRecord::default()
    };
    let doubt_10s_ago = in_doubt_since(90);
    let doubt_past_grace = in_doubt_since(0);
    let transient = || ProviderError::transient("RequestLimitExceeded", "slow down");
    let permanent = || ProviderError::permanent("UnauthorizedOperation", "no");
    let ended = || ProviderError::already_ended("IdempotentInstanceTerminated", "gone");
    let annotation = || ProviderError::invalid_annotation("bad ami");
    let cases: Vec<(&str, Result<Launched, LaunchFailed>, &PodRecord, Seen)> = vec![
        (
            "an instance",
            Ok(an_instance(false, 0)),
            &fresh,
            row(false, "-", &["ProviderCreateSuccess"], "Answered"),
        ),
        (
            "an instance after two offerings were passed over",
            Ok(an_instance(false, 2)),
            &fresh,
            row(
                false,
                "-",
                &[
                    "OfferingUnavailable",
                    "OfferingUnavailable",
                    "ProviderCreateSuccess",
                ],
                "Answered",
            ),
        ),
        (
            "the instance an earlier request launched",
            Ok(an_instance(true, 0)),
            &doubt_10s_ago,
            row(false, "-", &["ProviderCreateSuccess"], "Answered"),
        ),
        (
            "the pod's instance already ended",
            Err(failed(ended(), false, 0)),
            &fresh,
            row(true, "-", &[], "EndedUnseen"),
        ),
        (
            "throttled",
            Err(failed(transient(), false, 0)),
            &fresh,
            row(
                true,
                "Pending InstanceCreationRetrying",
                &["ProviderCreateFailed"],
                "unchanged",
            ),
        ),
        (
            "no answer: the instance may exist",
            Err(failed(transient(), true, 0)),
            &fresh,
            row(
                false,
                "Pending InstanceCreationRetrying",
                &["ProviderCreateFailed"],
                "InDoubt",
            ),
        ),
        (
            "refused while an earlier request is in doubt",
            Err(failed(permanent(), false, 0)),
            &doubt_10s_ago,
            row(
                false,
                "Pending InstanceCreationRetrying",
                &["ProviderCreateFailed"],
                "unchanged",
            ),
        ),
        (
            "refused once the doubt is past the grace",
            Err(failed(permanent(), false, 0)),
            &doubt_past_grace,
            row(
                true,
                "Failed InstanceCreationFailed",
                &["ProviderCreateFailed"],
                "unchanged",
            ),
        ),
        (
            "refused",
            Err(failed(permanent(), false, 0)),
            &fresh,
            row(
                true,
                "Failed InstanceCreationFailed",
                &["ProviderCreateFailed"],
                "unchanged",
            ),
        ),
        (
            "no offering had capacity",
            Err(failed(
                ProviderError::capacity("InsufficientInstanceCapacity", "none"),
                false,
                2,
            )),
            &fresh,
            row(
                true,
                "Failed InstanceCreationFailed",
                &[
                    "OfferingUnavailable",
                    "OfferingUnavailable",
                    "ProviderCreateFailed",
                ],
                "unchanged",
            ),
        ),
        (
            "an annotation the provider reads is invalid",
            Err(failed(annotation(), false, 0)),
            &fresh,
            row(
                true,
                "Failed InvalidAnnotation",
                &["ProviderCreateFailed"],
                "unchanged",
            ),
        ),
    ];
    let plan = LaunchPlan::on_demand("m5.large");
    for (name, outcome, record, expected) in cases {
        let effects = launched(
            &outcome,
            decision(),
            &plan,
            &unconstrained(),
            &facts(record, 100),
        );
        assert_eq!(seen(&effects), expected, "{name}");
        let launch = effects.decision.and_then(|d| d.launch);
        assert!(launch.is_some(), "{name}: the decision records the launch");
    }
}

#[test]
fn a_launch_retried_says_which_try_is_next_and_when() {
    let record = PodRecord {
        retry: Retry {
            failures: 2,
            due: None,
        },
        ..PodRecord::default()
    };
    let outcome = Err(failed(
        ProviderError::transient("RequestLimitExceeded", "slow down"),
        false,
        0,
    ));
    let effects = launched(
        &outcome,
        decision(),
        &LaunchPlan::on_demand("m5.large"),
        &unconstrained(),
        &facts(&record, 100),
    );
    assert_eq!(
        effects.status,
        Some(StatusChange::Waiting {
            reason: WaitingReason::InstanceCreationRetrying,
            message: "launching a m5.large on-demand instance failed \
                      (RequestLimitExceeded: slow down); retry 3 in 20s"
                .to_owned(),
        })
    );
    assert_eq!(
        effects.events[0].note,
        "launching a m5.large on-demand instance failed (RequestLimitExceeded: slow down); \
         retrying with backoff",
        "the Event's words stay the same from try to try"
    );
    assert_eq!(effects.record.retry.map(|r| r.failures), Some(3));
}

#[test]
fn a_refusal_after_several_offerings_names_each_with_its_code() {
    let outcome = Err(failed(
        ProviderError::capacity("InsufficientInstanceCapacity", "none"),
        false,
        2,
    ));
    let effects = launched(
        &outcome,
        decision(),
        &LaunchPlan::on_demand("m5.large"),
        &unconstrained(),
        &facts(&PodRecord::default(), 100),
    );
    let Some(StatusChange::Failed { message, .. }) = effects.status else {
        panic!("a refusal fails the pod");
    };
    assert_eq!(
        message,
        "no offering could be launched; tried m5.large on-demand (InsufficientInstanceCapacity), \
         m5.large on-demand (InsufficientInstanceCapacity); last error: \
         InsufficientInstanceCapacity: none"
    );
}

#[test]
fn each_plan_failure_has_its_effects() {
    let timed_out = |earlier| PodRecord {
        policy_timeouts: earlier,
        ..PodRecord::default()
    };
    let error = |reason, retry| PlanError {
        reason,
        message: "m".to_owned(),
        retry,
        refused: None,
    };
    let cases = [
        (
            "a plugin is not loaded",
            error(PlanFailure::PolicyError, PlanRetry::WhenLoaded),
            0,
            "Pending PolicyNotReady",
            Some(true),
            None,
        ),
        (
            "the first time out",
            error(PlanFailure::PolicyError, PlanRetry::Transient),
            0,
            "Pending PolicyRetrying",
            Some(false),
            Some(1),
        ),
        (
            "the second time out",
            error(PlanFailure::PolicyError, PlanRetry::Transient),
            1,
            "Pending PolicyRetrying",
            Some(false),
            Some(2),
        ),
        (
            "the third time out fails the pod",
            error(PlanFailure::PolicyError, PlanRetry::Transient),
            2,
            "Failed PolicyError",
            None,
            None,
        ),
        (
            "a plugin's error",
            error(PlanFailure::PolicyError, PlanRetry::No),
            0,
            "Failed PolicyError",
            None,
            None,
        ),
        (
            "an invalid annotation",
            error(PlanFailure::InvalidAnnotation, PlanRetry::No),
            0,
            "Failed InvalidAnnotation",
            None,
            None,
        ),
        (
            "the guardrails left nothing",
            error(PlanFailure::GuardrailViolation, PlanRetry::No),
            0,
            "Failed GuardrailViolation",
            None,
            None,
        ),
    ];
    for (name, error, earlier, status, waits_for_policy, timeouts) in cases {
        let record = timed_out(earlier);
        let effects = plan_failed(&error, &facts(&record, 100));
        let seen = seen(&effects);
        assert_eq!(seen.status, status, "{name}");
        assert_eq!(seen.events.len(), 1, "{name}: one Warning");
        assert!(!seen.release, "{name}: nothing was reserved");
        assert_eq!(effects.record.waits_for_policy, waits_for_policy, "{name}");
        assert_eq!(effects.record.policy_timeouts, timeouts, "{name}");
        let failed = status.starts_with("Failed");
        assert_eq!(
            effects.record.retry.is_some(),
            !failed,
            "{name}: a retry backs off"
        );
        if failed {
            assert_eq!(seen.events, [&status["Failed ".len()..]], "{name}");
            assert_eq!(
                effects.record.waits_for_room,
                Some(None),
                "{name}: a failed pod waits for nothing"
            );
        }
    }
}

#[test]
fn a_plan_the_guardrails_refused_is_recorded_on_the_pod() {
    let error = PlanError {
        reason: PlanFailure::GuardrailViolation,
        message: "m".to_owned(),
        retry: PlanRetry::No,
        refused: Some(Box::new(decision())),
    };
    let effects = plan_failed(&error, &facts(&PodRecord::default(), 100));
    assert_eq!(effects.decision, Some(decision()));
}

#[test]
fn a_pod_without_room_waits_with_the_cap_on_record_and_keeps_its_place_in_line() {
    let price = Price::from_usd(0.5).unwrap();
    let cap = Price::from_usd(1.0).unwrap();
    let error = SpendError::OverCap {
        namespace: "team".to_owned(),
        field: "maxNamespacePricePerHour".to_owned(),
        cap,
        spend: Price::from_usd(0.75).unwrap(),
        price,
        after: Price::from_usd(1.25).unwrap(),
    };
    let waiting_since = PodRecord {
        waits_for_room: Some(Box::new(RoomWait {
            namespace: "team".to_owned(),
            price,
            since: at(3),
        })),
        ..PodRecord::default()
    };
    for (name, record, since) in [
        ("the first try", PodRecord::default(), at(100)),
        ("a later try", waiting_since, at(3)),
    ] {
        let effects = no_room(
            decision(),
            Some(price),
            &error,
            "team",
            &facts(&record, 100),
        );
        let seen = seen(&effects);
        assert_eq!(seen.status, "Pending NamespaceBudgetExceeded", "{name}");
        assert_eq!(seen.events, ["NamespaceBudgetExceeded"], "{name}");
        assert!(!seen.release, "{name}: nothing was reserved");
        let wait = effects.record.waits_for_room.flatten().expect(name);
        assert_eq!(wait.since, since, "{name}");
        let guardrail = effects
            .decision
            .and_then(|d| d.guardrails.last().cloned())
            .expect(name);
        assert_eq!(guardrail.effect, Effect::Waits, "{name}");
        assert!(guardrail.limit.contains("for namespace team"), "{name}");
    }
    let unpriced = no_room(
        decision(),
        None,
        &error,
        "team",
        &facts(&PodRecord::default(), 100),
    );
    assert_eq!(
        unpriced.record.waits_for_room,
        Some(None),
        "an unpriced pod waits for its backoff only"
    );
}

#[test]
fn a_record_change_leaves_what_it_does_not_name() {
    let mut record = PodRecord {
        policy_timeouts: 2,
        waits_for_policy: true,
        ..PodRecord::default()
    };
    RecordChange {
        retry: Some(Retry {
            failures: 1,
            due: Some(at(5)),
        }),
        ..RecordChange::default()
    }
    .apply(&mut record);
    assert_eq!(record.policy_timeouts, 2);
    assert!(record.waits_for_policy);
    assert_eq!(record.retry.failures, 1);
}
