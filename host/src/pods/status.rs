//! Instance → pod status, as pure functions (the lifecycle table in [`super::decide`] and
//! `docs/src/concepts/architecture.md`). [`patch`] writes a status so that nothing stale
//! survives the merge.

mod patch;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::phase::{FailureReason, PodPhase, WaitingReason};
use super::view::{LAUNCHED_CONDITION, LaunchRef};
use crate::provider::{InstanceState, InstanceStatus, WorkloadExit};

pub use patch::{needs_write, status_patch};

use super::view::CONTAINER_ID_SCHEME;

/// The pod's phase and why, derived from its instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub phase: PodPhase,
    pub reason: Option<FailureReason>,
    pub message: Option<String>,
}

/// Phase, reason and message for a pod whose instance is `instance` and whose workload
/// reported `exit` (if it has ended and reported). `warned`: when EC2 warned that it reclaims
/// the pod's spot instance (the pod's `DisruptionTarget` condition).
pub fn outcome(
    instance: &InstanceStatus,
    exit: Option<&WorkloadExit>,
    warned: Option<Timestamp>,
) -> Outcome {
    match instance.state {
        InstanceState::Pending => Outcome {
            phase: PodPhase::Pending,
            reason: None,
            message: Some(describe(instance, "is booting")),
        },
        InstanceState::Running if instance.volumes_to_attach().next().is_some() => {
            let waiting: Vec<String> = instance
                .volumes_to_attach()
                .map(|volume| format!("{} at {}", volume.volume_id, volume.device))
                .collect();
            Outcome {
                phase: PodPhase::Pending,
                reason: None,
                message: Some(describe(
                    instance,
                    &format!(
                        "is running; its workload waits for volumes to attach: {}",
                        waiting.join(", ")
                    ),
                )),
            }
        }
        InstanceState::Running => Outcome {
            phase: PodPhase::Running,
            reason: None,
            message: None,
        },
        InstanceState::Stopping | InstanceState::Stopped if exit.is_none() => failed(
            instance,
            FailureReason::InstanceStopped,
            &format!(
                "was stopped{}; its workload cannot go on, so orca terminates it",
                state_reason(instance)
            ),
        ),
        // A stopped instance whose workload had reported its exit was stopped after the
        // workload ended (between the bootstrap's report and its power-off): the workload's
        // own result is the pod's, as for an instance that shut down.
        InstanceState::Stopping
        | InstanceState::Stopped
        | InstanceState::ShuttingDown
        | InstanceState::Terminated => ended_outcome(instance, exit, warned),
    }
}

/// The outcome of an instance that is going or gone: interrupted by EC2, or the workload's
/// own result.
fn ended_outcome(
    instance: &InstanceStatus,
    exit: Option<&WorkloadExit>,
    warned: Option<Timestamp>,
) -> Outcome {
    let state_reason = state_reason(instance);
    // An interruption explains the exit code too (the bootstrap sees SIGTERM): report
    // the interruption, so a Job retries the work instead of trusting a partial run.
    // A warned pod was interrupted unless its workload had finished before the warning.
    let reclaimed = instance
        .state_reason
        .as_ref()
        .is_some_and(|reason| reason.is_spot_interruption());
    let warned_in_time = warned.is_some_and(|at| exit.is_none_or(|exit| exit.finished_at >= at));
    if reclaimed || warned_in_time {
        let exited = exit
            .map(|exit| format!("; the workload exited with code {}", exit.exit_code))
            .unwrap_or_default();
        return failed(
            instance,
            FailureReason::SpotInterrupted,
            &format!("was interrupted by EC2{state_reason}{exited}"),
        );
    }
    match exit {
        Some(exit) if exit.exit_code == 0 => Outcome {
            phase: PodPhase::Succeeded,
            reason: None,
            message: None,
        },
        Some(exit) => failed(
            instance,
            FailureReason::InstanceTerminated,
            &format!("finished: the workload exited with code {}", exit.exit_code),
        ),
        None => failed(
            instance,
            FailureReason::InstanceTerminated,
            &format!("ended before its workload reported an exit code{state_reason}"),
        ),
    }
}

/// The instance named in an outcome's message, then `what` happened to it.
fn describe(instance: &InstanceStatus, what: &str) -> String {
    format!(
        "instance {} ({}, {}) {what}",
        instance.instance_id,
        instance.instance_type,
        instance.market.as_str()
    )
}

/// A Failed outcome for `reason`, its message saying `what` happened to the instance.
fn failed(instance: &InstanceStatus, reason: FailureReason, what: &str) -> Outcome {
    Outcome {
        phase: PodPhase::Failed,
        reason: Some(reason),
        message: Some(describe(instance, what)),
    }
}

/// EC2's reason for the instance's state, as ` (reason)`, or nothing.
fn state_reason(instance: &InstanceStatus) -> String {
    instance
        .state_reason
        .as_ref()
        .map(|reason| format!(" ({reason})"))
        .unwrap_or_default()
}

/// The full status for `pod` on `instance`, keeping transition times and the start time the
/// pod already has when nothing changed.
pub fn status_for_instance(
    pod: &Pod,
    instance: &InstanceStatus,
    exit: Option<&WorkloadExit>,
) -> PodStatus {
    let outcome = outcome(instance, exit, super::view::spot_warning(pod));
    let current = pod.status.clone().unwrap_or_default();
    let ip = instance.private_ip.map(|ip| ip.to_string());
    let running = outcome.phase == PodPhase::Running;
    let terminal = outcome.phase.is_final();
    let ready_reason = match outcome.phase {
        PodPhase::Pending => Some(WaitingReason::InstancePending.as_str()),
        PodPhase::Succeeded => Some("PodCompleted"),
        PodPhase::Failed => Some("PodFailed"),
        PodPhase::Running => None,
    };
    let launched = LaunchRef {
        instance_id: instance.instance_id.clone(),
        at: instance.launched_at,
    };
    let conditions = vec![
        condition(&current, "PodScheduled", true, None, None),
        condition(&current, "Initialized", true, None, None),
        condition(&current, "ContainersReady", running, ready_reason, None),
        condition(
            &current,
            "Ready",
            running,
            ready_reason,
            outcome.message.as_deref(),
        ),
        launched_condition(&launched),
    ];
    let container_statuses = containers(pod)
        .iter()
        .map(|container| {
            let state = container_state(instance, &outcome, exit, &container.name);
            container_status(
                container,
                state,
                running,
                instance_container_id(&instance.instance_id, &container.name),
            )
        })
        .collect();
    // Init containers ran to completion before the workload started on the instance.
    let done = instance.started_at.is_some() || terminal;
    let init_container_statuses = init_container_statuses(pod, &instance.instance_id, done);
    PodStatus {
        phase: Some(outcome.phase.as_str().to_owned()),
        reason: outcome.reason.map(|reason| reason.as_str().to_owned()),
        message: outcome.message,
        conditions: Some(conditions),
        container_statuses: Some(container_statuses),
        init_container_statuses,
        host_ip: ip.clone(),
        host_ips: ip.clone().map(|ip| vec![HostIP { ip }]),
        pod_ip: ip.clone(),
        pod_ips: ip.map(|ip| vec![PodIP { ip }]),
        start_time: current.start_time.or(Some(Time(instance.launched_at))),
        qos_class: current.qos_class,
        ..PodStatus::default()
    }
}

/// The init containers' statuses on `instance_id`: completed once `done`, else initializing.
fn init_container_statuses(
    pod: &Pod,
    instance_id: &str,
    done: bool,
) -> Option<Vec<ContainerStatus>> {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.init_containers.as_ref())
        .map(|init| {
            init.iter()
                .map(|container| {
                    let state = if done {
                        terminated(0, "Completed", None, None, None, None)
                    } else {
                        waiting("PodInitializing", None)
                    };
                    let mut status = container_status(
                        container,
                        state,
                        done,
                        instance_container_id(instance_id, &container.name),
                    );
                    status.started = None;
                    status
                })
                .collect()
        })
}

/// A Pending status while the pod's instance is not listed yet: launching, or retrying a
/// launch. With `launched`, the instance is named in the status (the launched condition and
/// the container ids), so a restarted orca finds it before EC2 lists it.
pub fn status_while_launching(
    pod: &Pod,
    reason: WaitingReason,
    message: String,
    launched: Option<&LaunchRef>,
) -> PodStatus {
    let current = pod.status.clone().unwrap_or_default();
    let reason = reason.as_str();
    let mut conditions = vec![
        condition(&current, "PodScheduled", true, None, None),
        condition(&current, "Initialized", false, Some(reason), Some(&message)),
        condition(&current, "ContainersReady", false, Some(reason), None),
        condition(&current, "Ready", false, Some(reason), Some(&message)),
    ];
    conditions.extend(launched.map(launched_condition));
    PodStatus {
        phase: Some(PodPhase::Pending.as_str().to_owned()),
        message: Some(message.clone()),
        conditions: Some(conditions),
        container_statuses: Some(
            containers(pod)
                .iter()
                .map(|container| {
                    container_status(
                        container,
                        waiting("ContainerCreating", Some(&message)),
                        false,
                        launched.and_then(|launched| {
                            instance_container_id(&launched.instance_id, &container.name)
                        }),
                    )
                })
                .collect(),
        ),
        start_time: current.start_time.or(Some(Time(Timestamp::now()))),
        qos_class: current.qos_class,
        ..PodStatus::default()
    }
}

/// A terminal Failed status for a pod that never ran or whose instance is gone.
pub fn status_failed(
    pod: &Pod,
    reason: FailureReason,
    message: String,
    launched: Option<&LaunchRef>,
) -> PodStatus {
    let current = pod.status.clone().unwrap_or_default();
    let previous: Vec<ContainerStatus> = current.container_statuses.clone().unwrap_or_default();
    let mut conditions = vec![
        condition(&current, "PodScheduled", true, None, None),
        condition(&current, "ContainersReady", false, Some("PodFailed"), None),
        condition(&current, "Ready", false, Some("PodFailed"), Some(&message)),
    ];
    conditions.extend(launched.map(launched_condition));
    PodStatus {
        phase: Some(PodPhase::Failed.as_str().to_owned()),
        reason: Some(reason.as_str().to_owned()),
        message: Some(message.clone()),
        conditions: Some(conditions),
        container_statuses: Some(
            containers(pod)
                .iter()
                .map(|container| {
                    let before = previous.iter().find(|status| status.name == container.name);
                    let container_id = before.and_then(|b| b.container_id.clone());
                    let started_at = before
                        .and_then(|b| b.state.as_ref())
                        .and_then(|s| s.running.as_ref())
                        .and_then(|r| r.started_at.clone());
                    // 137 is what a kubelet reports for a container killed from outside.
                    let state = terminated(
                        137,
                        reason.as_str(),
                        Some(message.clone()),
                        started_at,
                        Some(Time(Timestamp::now())),
                        container_id.clone(),
                    );
                    container_status(container, state, false, container_id)
                })
                .collect(),
        ),
        host_ip: current.host_ip,
        host_ips: current.host_ips,
        pod_ip: current.pod_ip,
        pod_ips: current.pod_ips,
        start_time: current.start_time.or(Some(Time(Timestamp::now()))),
        qos_class: current.qos_class,
        ..PodStatus::default()
    }
}

/// The condition that names the pod's instance and when it was launched.
fn launched_condition(launched: &LaunchRef) -> PodCondition {
    PodCondition {
        type_: LAUNCHED_CONDITION.to_owned(),
        status: "True".to_owned(),
        reason: Some("Launched".to_owned()),
        message: Some(launched.instance_id.clone()),
        last_transition_time: Some(Time(launched.at)),
        ..PodCondition::default()
    }
}

/// One container's status; every status orca writes goes through here.
fn container_status(
    container: &Container,
    state: ContainerState,
    ready: bool,
    container_id: Option<String>,
) -> ContainerStatus {
    ContainerStatus {
        name: container.name.clone(),
        image: container.image.clone().unwrap_or_default(),
        image_id: String::new(),
        container_id,
        ready,
        started: Some(ready),
        restart_count: 0,
        state: Some(state),
        ..ContainerStatus::default()
    }
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|spec| spec.containers.as_slice())
        .unwrap_or_default()
}

fn instance_container_id(instance_id: &str, container: &str) -> Option<String> {
    Some(format!("{CONTAINER_ID_SCHEME}{instance_id}/{container}"))
}

fn container_state(
    instance: &InstanceStatus,
    outcome: &Outcome,
    exit: Option<&WorkloadExit>,
    name: &str,
) -> ContainerState {
    let started_at = instance.started_at.map(Time);
    match outcome.phase {
        PodPhase::Pending => waiting("ContainerCreating", outcome.message.as_deref()),
        PodPhase::Running => ContainerState {
            running: Some(ContainerStateRunning { started_at }),
            ..ContainerState::default()
        },
        PodPhase::Succeeded | PodPhase::Failed => {
            let (exit_code, reason, finished_at) = match (exit, outcome.reason) {
                // An interrupted or stopped workload did not end by itself, whatever it exited
                // with.
                (Some(exit), None | Some(FailureReason::InstanceTerminated)) => {
                    let code = exit.code_of(name);
                    (
                        code,
                        if code == 0 { "Completed" } else { "Error" },
                        Some(Time(exit.finished_at)),
                    )
                }
                (exit, reason) => (
                    exit.map_or(137, |exit| exit.code_of(name)),
                    reason.map_or("InstanceTerminated", FailureReason::as_str),
                    exit.map(|exit| Time(exit.finished_at)),
                ),
            };
            terminated(
                exit_code,
                reason,
                outcome.message.clone(),
                started_at,
                finished_at,
                instance_container_id(&instance.instance_id, name),
            )
        }
    }
}

fn terminated(
    exit_code: i32,
    reason: &str,
    message: Option<String>,
    started_at: Option<Time>,
    finished_at: Option<Time>,
    container_id: Option<String>,
) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code,
            reason: Some(reason.to_owned()),
            message,
            started_at,
            finished_at,
            container_id,
            signal: None,
        }),
        ..ContainerState::default()
    }
}

fn waiting(reason: &str, message: Option<&str>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_owned()),
            message: message.map(str::to_owned),
        }),
        ..ContainerState::default()
    }
}

/// A condition, keeping the current transition time when its status is unchanged.
fn condition(
    current: &PodStatus,
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<&str>,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let previous = current
        .conditions
        .as_ref()
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == type_));
    let last_transition_time = match previous {
        Some(previous) if previous.status == status => previous.last_transition_time.clone(),
        _ => Some(Time(Timestamp::now())),
    };
    PodCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: if ok { None } else { reason.map(str::to_owned) },
        message: if ok { None } else { message.map(str::to_owned) },
        last_transition_time,
        ..PodCondition::default()
    }
}

#[cfg(test)]
mod tests;
