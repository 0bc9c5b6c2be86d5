use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};

use super::*;
use crate::plan::Market;
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
        }),
        ..instance(InstanceState::Terminated)
    }
}

#[test]
fn instance_states_map_to_phases_as_the_design_table_says() {
    assert_eq!(outcome(&instance(InstanceState::Pending)).phase, "Pending");
    assert_eq!(outcome(&instance(InstanceState::Running)).phase, "Running");
    assert_eq!(outcome(&exited(0)).phase, "Succeeded");
    let failed = outcome(&exited(2));
    assert_eq!(
        (failed.phase, failed.reason),
        ("Failed", Some("InstanceTerminated"))
    );
    assert!(failed.message.unwrap().contains("exited with code 2"));
}

#[test]
fn spot_interruption_is_reported_as_such() {
    let interrupted = InstanceStatus {
        state_reason: Some(StateReason {
            code: SPOT_INTERRUPTION_CODE.into(),
            message: "Spot reclaimed".into(),
        }),
        ..instance(InstanceState::Terminated)
    };
    let outcome = outcome(&interrupted);
    assert_eq!(
        (outcome.phase, outcome.reason),
        ("Failed", Some("SpotInterrupted"))
    );
}

#[test]
fn stopped_without_an_exit_code_is_an_unexpected_termination() {
    let outcome = outcome(&instance(InstanceState::Stopped));
    assert_eq!(
        (outcome.phase, outcome.reason),
        ("Failed", Some("InstanceTerminated"))
    );
}

#[test]
fn running_status_carries_ips_ready_and_the_instance_in_the_container_id() {
    let status = status_for_instance(&pod(), &instance(InstanceState::Running));
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
fn the_recorded_instance_is_read_back_from_the_status() {
    let mut running = pod();
    running.status = Some(status_for_instance(
        &running,
        &instance(InstanceState::Running),
    ));
    assert_eq!(recorded_instance_id(&running).as_deref(), Some("i-0123"));
    assert_eq!(recorded_instance_id(&pod()), None);
}

#[test]
fn writing_the_same_status_again_is_not_needed() {
    let mut current = pod();
    let desired = status_for_instance(&current, &instance(InstanceState::Running));
    assert!(needs_write(current.status.as_ref(), &desired));
    current.status = Some(desired);
    let again = status_for_instance(&current, &instance(InstanceState::Running));
    assert!(
        !needs_write(current.status.as_ref(), &again),
        "a reconcile after our own write must be a no-op"
    );
}

#[test]
fn conditions_owned_by_others_do_not_force_a_write() {
    let mut current = pod();
    let mut written = status_for_instance(&current, &instance(InstanceState::Running));
    written.conditions.as_mut().unwrap().push(PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        ..PodCondition::default()
    });
    current.status = Some(written);
    let desired = status_for_instance(&current, &instance(InstanceState::Running));
    assert!(!needs_write(current.status.as_ref(), &desired));
}

#[test]
fn a_condition_flipped_by_the_lifecycle_controller_is_restored() {
    let mut current = pod();
    let mut written = status_for_instance(&current, &instance(InstanceState::Running));
    let ready = written
        .conditions
        .as_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    ready.status = "False".into();
    current.status = Some(written);
    let desired = status_for_instance(&current, &instance(InstanceState::Running));
    assert!(needs_write(current.status.as_ref(), &desired));
}

#[test]
fn failed_status_keeps_addresses_and_names_the_reason() {
    let mut lost = pod();
    lost.status = Some(PodStatus {
        host_ip: Some("10.0.0.9".into()),
        ..PodStatus::default()
    });
    let status = status_failed(&lost, "InstanceLost", "gone".into());
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("InstanceLost"));
    assert_eq!(status.host_ip.as_deref(), Some("10.0.0.9"));
}
