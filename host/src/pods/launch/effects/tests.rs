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
        volumes: Vec::new(),
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

/// A record whose launch has been in doubt since `second`.
fn in_doubt_since(second: i64) -> PodRecord {
    PodRecord {
        launch: Launch::InDoubt { since: at(second) },
        ..PodRecord::default()
    }
}

fn throttled() -> ProviderError {
    ProviderError::transient("RequestLimitExceeded", "slow down")
}

fn unauthorized() -> ProviderError {
    ProviderError::permanent("UnauthorizedOperation", "no")
}

/// One launch answer and what it leads to: (name, the answer, the record it met, its effects).
type AnswerRow<'a> = (&'a str, Result<Launched, LaunchFailed>, &'a PodRecord, Seen);

/// Checks each row's effects at second 100 of the `m5.large` on-demand plan, and that the
/// decision carried records the launch.
fn assert_launch_answers(cases: Vec<AnswerRow>) {
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
fn an_instance_launched_or_adopted_answers_the_launch() {
    let fresh = PodRecord::default();
    let doubt_10s_ago = in_doubt_since(90);
    assert_launch_answers(vec![
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
    ]);
}

#[test]
fn an_instance_that_already_ended_ends_the_reservation_and_is_left_unseen() {
    let fresh = PodRecord::default();
    assert_launch_answers(vec![(
        "the pod's instance already ended",
        Err(failed(
            ProviderError::already_ended("IdempotentInstanceTerminated", "gone"),
            false,
            0,
        )),
        &fresh,
        row(true, "-", &[], "EndedUnseen"),
    )]);
}

#[test]
fn a_launch_that_may_yet_succeed_is_retried() {
    let fresh = PodRecord::default();
    let doubt_10s_ago = in_doubt_since(90);
    assert_launch_answers(vec![
        (
            "throttled",
            Err(failed(throttled(), false, 0)),
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
            Err(failed(throttled(), true, 0)),
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
            Err(failed(unauthorized(), false, 0)),
            &doubt_10s_ago,
            row(
                false,
                "Pending InstanceCreationRetrying",
                &["ProviderCreateFailed"],
                "unchanged",
            ),
        ),
    ]);
}

#[test]
fn a_launch_refused_with_no_launch_in_doubt_fails_the_pod() {
    let fresh = PodRecord::default();
    let doubt_past_grace = in_doubt_since(0);
    assert_launch_answers(vec![
        (
            "refused once the doubt is past the grace",
            Err(failed(unauthorized(), false, 0)),
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
            Err(failed(unauthorized(), false, 0)),
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
            Err(failed(
                ProviderError::invalid_annotation("bad ami"),
                false,
                0,
            )),
            &fresh,
            row(
                true,
                "Failed InvalidAnnotation",
                &["ProviderCreateFailed"],
                "unchanged",
            ),
        ),
    ]);
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

fn plan_error(reason: PlanFailure, retry: PlanRetry) -> PlanError {
    PlanError {
        reason,
        message: "m".to_owned(),
        retry,
        refused: None,
    }
}

/// One plan failure and what it leads to: (name, the error, the policy time-outs before it, the
/// status, whether the record waits for the policy, the record's time-outs).
type PlanFailureRow = (
    &'static str,
    PlanError,
    u32,
    &'static str,
    Option<bool>,
    Option<u32>,
);

/// Checks each row's effects at second 100: its status and the record's policy waits, one
/// Warning, nothing released; a retry backs off, a failure says its reason and waits for
/// nothing.
fn assert_plan_failures(cases: Vec<PlanFailureRow>) {
    for (name, error, earlier, status, waits_for_policy, timeouts) in cases {
        let record = PodRecord {
            policy_timeouts: earlier,
            ..PodRecord::default()
        };
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
fn a_policy_not_loaded_or_timing_out_twice_is_retried() {
    assert_plan_failures(vec![
        (
            "a plugin is not loaded",
            plan_error(PlanFailure::PolicyError, PlanRetry::WhenLoaded),
            0,
            "Pending PolicyNotReady",
            Some(true),
            None,
        ),
        (
            "the first time out",
            plan_error(PlanFailure::PolicyError, PlanRetry::Transient),
            0,
            "Pending PolicyRetrying",
            Some(false),
            Some(1),
        ),
        (
            "the second time out",
            plan_error(PlanFailure::PolicyError, PlanRetry::Transient),
            1,
            "Pending PolicyRetrying",
            Some(false),
            Some(2),
        ),
    ]);
}

#[test]
fn a_third_time_out_or_a_plan_refused_for_good_fails_the_pod() {
    assert_plan_failures(vec![
        (
            "the third time out fails the pod",
            plan_error(PlanFailure::PolicyError, PlanRetry::Transient),
            2,
            "Failed PolicyError",
            None,
            None,
        ),
        (
            "a plugin's error",
            plan_error(PlanFailure::PolicyError, PlanRetry::No),
            0,
            "Failed PolicyError",
            None,
            None,
        ),
        (
            "an invalid annotation",
            plan_error(PlanFailure::InvalidAnnotation, PlanRetry::No),
            0,
            "Failed InvalidAnnotation",
            None,
            None,
        ),
        (
            "the guardrails left nothing",
            plan_error(PlanFailure::GuardrailViolation, PlanRetry::No),
            0,
            "Failed GuardrailViolation",
            None,
            None,
        ),
    ]);
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

#[test]
fn the_decision_says_where_each_volume_of_the_launched_instance_goes() {
    let mut instance = an_instance(false, 0);
    instance.volumes = vec![crate::provider::VolumeAttachment {
        volume_id: "vol-0123456789abcdef0".to_owned(),
        device: "/dev/sdf".to_owned(),
        attached: false,
    }];
    let effects = launched(
        &Ok(instance),
        decision(),
        &LaunchPlan::on_demand("m5.large"),
        &unconstrained(),
        &facts(&PodRecord::default(), 100),
    );
    let launch = effects.decision.and_then(|d| d.launch).expect("recorded");
    assert_eq!(launch.instance_id, "i-0abc");
    assert_eq!(launch.volumes, ["vol-0123456789abcdef0 at /dev/sdf"]);
    let json = serde_json::to_value(&launch).unwrap();
    assert_eq!(json["volumes"][0], "vol-0123456789abcdef0 at /dev/sdf");
    // Without volumes the record says nothing of them.
    let effects = launched(
        &Ok(an_instance(false, 0)),
        decision(),
        &LaunchPlan::on_demand("m5.large"),
        &unconstrained(),
        &facts(&PodRecord::default(), 100),
    );
    let launch = effects.decision.and_then(|d| d.launch).expect("recorded");
    assert!(
        serde_json::to_value(&launch)
            .unwrap()
            .get("volumes")
            .is_none()
    );
}

#[test]
fn what_the_instance_does_not_do_of_the_spec_is_told_first_as_warnings() {
    let record = PodRecord::default();
    let warnings = [
        WorkloadWarning::PullSecretsUnused,
        WorkloadWarning::InvalidEnvNames {
            container: "trainer".into(),
            keys: vec!["bad key".into()],
        },
    ];
    for (name, outcome) in [
        ("launched", Ok(an_instance(false, 1))),
        (
            "retried",
            Err(failed(
                ProviderError::transient("RequestLimitExceeded", "slow down"),
                false,
                1,
            )),
        ),
    ] {
        let mut effects = launched(
            &outcome,
            decision(),
            &LaunchPlan::on_demand("m5.large"),
            &unconstrained(),
            &facts(&record, 100),
        );
        let before = effects.events.clone();
        warn(&mut effects, &warnings);
        let reasons: Vec<_> = effects.events.iter().map(|event| event.reason).collect();
        assert_eq!(
            reasons[..2],
            ["ImagePullSecretsUnused", "InvalidEnvironmentVariableNames"],
            "{name}"
        );
        assert!(
            effects.events[..2].iter().all(|event| event.warning),
            "{name}"
        );
        assert!(
            effects.events[..2]
                .iter()
                .all(|event| event.action == "Launch"),
            "{name}"
        );
        assert_eq!(
            effects.events[1].note,
            "container \"trainer\": envFrom keys [bad key] were skipped since they are not \
             valid environment variable names",
            "{name}"
        );
        assert_eq!(
            effects.events[2..],
            before[..],
            "{name}: the launch's own follow"
        );
    }
    // No warnings, no Events added.
    let mut effects = Effects::default();
    warn(&mut effects, &[]);
    assert!(effects.events.is_empty());
}
