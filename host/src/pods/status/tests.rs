use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};

use super::*;
use crate::pods::phase::{FailureReason, PodPhase, WaitingReason};
use crate::provider::plan::Market;
use crate::provider::{PodKey, StateReason, WorkloadExit};

fn instance(state: InstanceState) -> InstanceStatus {
    InstanceStatus {
        pod: PodKey {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
        },
        instance_id: "i-0123".into(),
        instance_type: "m5.large".into(),
        market: Market::Spot,
        state,
        private_ip: Some("10.0.0.7".parse().unwrap()),
        launched_at: Timestamp::from_second(1_000).unwrap(),
        started_at: Some(Timestamp::from_second(1_010).unwrap()),
        state_reason: None,
        workload_exit: None,
        volumes: Vec::new(),
    }
}

fn pod() -> Pod {
    Pod {
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn exited(code: i32) -> InstanceStatus {
    InstanceStatus {
        workload_exit: Some(WorkloadExit {
            exit_code: code,
            finished_at: Timestamp::from_second(1_100).unwrap(),
            containers: Default::default(),
        }),
        ..instance(InstanceState::Terminated)
    }
}

fn outcome_of(instance: &InstanceStatus) -> Outcome {
    outcome(instance, instance.workload_exit.as_ref(), None)
}

#[test]
fn a_warned_pod_ends_spot_interrupted_whatever_exit_code_it_wrote_going_down() {
    let warned = Timestamp::now();
    let mut ended = instance(InstanceState::Terminated);
    ended.state_reason = None;
    let exit = WorkloadExit {
        exit_code: 143,
        finished_at: warned + jiff::SignedDuration::from_secs(100),
        containers: Default::default(),
    };
    let interrupted = outcome(&ended, Some(&exit), Some(warned));
    assert_eq!(interrupted.phase, PodPhase::Failed);
    assert_eq!(interrupted.reason, Some(FailureReason::SpotInterrupted));
    assert!(interrupted.message.unwrap().contains("code 143"));
    let succeeded = WorkloadExit {
        exit_code: 0,
        finished_at: warned + jiff::SignedDuration::from_secs(1),
        containers: Default::default(),
    };
    assert_eq!(
        outcome(&ended, Some(&succeeded), Some(warned)).reason,
        Some(FailureReason::SpotInterrupted),
        "a run that ended after the warning may be partial"
    );
    assert_eq!(
        outcome(&ended, None, Some(warned)).reason,
        Some(FailureReason::SpotInterrupted)
    );
}

#[test]
fn a_workload_that_finished_before_the_warning_keeps_its_own_outcome() {
    let warned = Timestamp::now();
    let mut ended = instance(InstanceState::Terminated);
    ended.state_reason = None;
    let exit = WorkloadExit {
        exit_code: 0,
        finished_at: warned - jiff::SignedDuration::from_secs(5),
        containers: Default::default(),
    };
    let outcome = outcome(&ended, Some(&exit), Some(warned));
    assert_eq!(outcome.phase, PodPhase::Succeeded);
}

#[test]
fn the_spot_warning_is_read_from_the_pods_condition() {
    let mut pod = pod();
    assert_eq!(crate::pods::view::spot_warning(&pod), None);
    let at = Timestamp::now();
    pod.status = Some(PodStatus {
        conditions: Some(vec![PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("SpotInterruption".into()),
            last_transition_time: Some(Time(at)),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    assert_eq!(crate::pods::view::spot_warning(&pod), Some(at));
}

#[test]
fn instance_states_map_to_phases_as_the_design_table_says() {
    assert_eq!(
        outcome_of(&instance(InstanceState::Pending)).phase,
        PodPhase::Pending
    );
    assert_eq!(
        outcome_of(&instance(InstanceState::Running)).phase,
        PodPhase::Running
    );
    assert_eq!(outcome_of(&exited(0)).phase, PodPhase::Succeeded);
    let failed = outcome_of(&exited(2));
    assert_eq!(
        (failed.phase, failed.reason),
        (PodPhase::Failed, Some(FailureReason::InstanceTerminated))
    );
    assert!(failed.message.unwrap().contains("exited with code 2"));
}

#[test]
fn spot_interruption_is_reported_as_such() {
    let interrupted = InstanceStatus {
        state_reason: Some(StateReason {
            code: StateReason::SPOT_INTERRUPTION.into(),
            message: "Spot reclaimed".into(),
        }),
        ..instance(InstanceState::Terminated)
    };
    let outcome = outcome_of(&interrupted);
    assert_eq!(
        (outcome.phase, outcome.reason),
        (PodPhase::Failed, Some(FailureReason::SpotInterrupted))
    );
}

#[test]
fn a_stopped_instance_fails_the_pod_as_stopped() {
    let outcome = outcome_of(&instance(InstanceState::Stopped));
    assert_eq!(
        (outcome.phase, outcome.reason),
        (PodPhase::Failed, Some(FailureReason::InstanceStopped))
    );
}

/// Found by simulation seed 26: the workload completed and tagged exit 0, then someone
/// stopped the instance before the bootstrap's power-off. The pod succeeded.
#[test]
fn an_instance_stopped_after_its_workload_reported_ends_the_pod_by_the_workloads_result() {
    for (code, phase) in [(0, PodPhase::Succeeded), (3, PodPhase::Failed)] {
        let mut stopped = instance(InstanceState::Stopped);
        stopped.workload_exit = Some(WorkloadExit {
            exit_code: code,
            finished_at: Timestamp::from_second(1_100).unwrap(),
            containers: Default::default(),
        });
        let outcome = outcome_of(&stopped);
        assert_eq!(outcome.phase, phase, "exit {code}");
        assert_ne!(outcome.reason, Some(FailureReason::InstanceStopped));
    }
}

#[test]
fn running_status_carries_ips_ready_and_the_instance_in_the_container_id() {
    let status = status_for_instance(&pod(), &instance(InstanceState::Running), None);
    assert_eq!(status.host_ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.7"));
    let ready = status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True");
    let container = &status.container_statuses.as_ref().unwrap()[0];
    assert!(container.ready);
    assert_eq!(
        container.container_id.as_deref(),
        Some("orca://i-0123/main")
    );
    assert!(container.state.as_ref().unwrap().running.is_some());
}

#[test]
fn writing_the_same_status_again_is_not_needed() {
    let mut current = pod();
    let desired = status_for_instance(&current, &instance(InstanceState::Running), None);
    assert!(needs_write(current.status.as_ref(), &desired));
    current.status = Some(desired);
    let again = status_for_instance(&current, &instance(InstanceState::Running), None);
    assert!(
        !needs_write(current.status.as_ref(), &again),
        "a reconcile after our own write must be a no-op"
    );
}

#[test]
fn conditions_owned_by_others_do_not_force_a_write() {
    let mut current = pod();
    let mut written = status_for_instance(&current, &instance(InstanceState::Running), None);
    written.conditions.as_mut().unwrap().push(PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        ..PodCondition::default()
    });
    current.status = Some(written);
    let desired = status_for_instance(&current, &instance(InstanceState::Running), None);
    assert!(!needs_write(current.status.as_ref(), &desired));
}

#[test]
fn a_condition_flipped_by_the_lifecycle_controller_is_restored() {
    let mut current = pod();
    let mut written = status_for_instance(&current, &instance(InstanceState::Running), None);
    let ready = written
        .conditions
        .as_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    ready.status = "False".into();
    current.status = Some(written);
    let desired = status_for_instance(&current, &instance(InstanceState::Running), None);
    assert!(needs_write(current.status.as_ref(), &desired));
}

#[test]
fn failed_status_keeps_addresses_and_names_the_reason() {
    let mut lost = pod();
    lost.status = Some(PodStatus {
        host_ip: Some("10.0.0.9".into()),
        ..PodStatus::default()
    });
    let status = status_failed(&lost, FailureReason::InstanceLost, "gone".into(), None);
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("InstanceLost"));
    assert_eq!(status.host_ip.as_deref(), Some("10.0.0.9"));
}

// Issue 16, defect 9: a strategic merge keeps what the patch omits.
#[test]
fn a_running_status_clears_the_pending_message_reasons_and_waiting_state() {
    let mut current = pod();
    current.status = Some(status_while_launching(
        &current,
        WaitingReason::InstanceLaunching,
        "launching a m5.large spot instance i-0123".into(),
        None,
    ));
    let desired = status_for_instance(&current, &instance(InstanceState::Running), None);
    assert!(needs_write(current.status.as_ref(), &desired));
    let patch = status_patch(current.status.as_ref(), &desired);
    assert_eq!(patch["message"], serde_json::Value::Null, "{patch:#}");
    let ready = patch["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["reason"], serde_json::Value::Null);
    assert_eq!(ready["message"], serde_json::Value::Null);
    let state = &patch["containerStatuses"][0]["state"];
    assert_eq!(state["waiting"], serde_json::Value::Null);
    assert!(state["running"].is_object());
}

#[test]
fn once_stale_fields_are_cleared_no_further_write_is_needed() {
    let mut current = pod();
    let desired = status_for_instance(&current, &instance(InstanceState::Running), None);
    current.status = Some(desired.clone());
    assert!(!needs_write(current.status.as_ref(), &desired));
    // An empty object the apiserver defaults is not a stale field.
    current
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .last_state = Some(Default::default());
    assert!(!needs_write(current.status.as_ref(), &desired));
}

#[test]
fn each_container_reports_its_own_exit_code() {
    let mut two = pod();
    two.spec.as_mut().unwrap().containers.push(Container {
        name: "sidecar".into(),
        image: Some("busybox".into()),
        ..Container::default()
    });
    let exit = WorkloadExit {
        exit_code: 2,
        finished_at: Timestamp::from_second(1_100).unwrap(),
        containers: [("main".to_owned(), 2), ("sidecar".to_owned(), 0)].into(),
    };
    let status = status_for_instance(&two, &instance(InstanceState::Terminated), Some(&exit));
    let codes: Vec<(String, i32)> = status
        .container_statuses
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.state.unwrap().terminated.unwrap().exit_code))
        .collect();
    assert_eq!(codes, [("main".to_owned(), 2), ("sidecar".to_owned(), 0)]);
}
