//! Instance → pod status, as a pure function (the table in DESIGN.md).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::provider::{InstanceState, InstanceStatus};

pub const CONTAINER_ID_SCHEME: &str = "orca://";
pub const SPOT_INTERRUPTION_CODE: &str = "Server.SpotInstanceTermination";

/// The pod's phase and why, derived from its instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub phase: &'static str,
    pub reason: Option<&'static str>,
    pub message: Option<String>,
}

/// Phase, reason and message for a pod whose instance is in `instance`'s state.
pub fn outcome(instance: &InstanceStatus) -> Outcome {
    let describe = |what: &str| {
        format!(
            "instance {} ({}, {}) {what}",
            instance.instance_id,
            instance.instance_type,
            instance.market.as_str()
        )
    };
    match instance.state {
        InstanceState::Pending => Outcome {
            phase: "Pending",
            reason: None,
            message: Some(describe("is booting")),
        },
        InstanceState::Running => Outcome {
            phase: "Running",
            reason: None,
            message: None,
        },
        _ => match &instance.workload_exit {
            Some(exit) if exit.exit_code == 0 => Outcome {
                phase: "Succeeded",
                reason: None,
                message: None,
            },
            Some(exit) => Outcome {
                phase: "Failed",
                reason: Some("InstanceTerminated"),
                message: Some(describe(&format!(
                    "finished: the workload exited with code {}",
                    exit.exit_code
                ))),
            },
            None => match &instance.state_reason {
                Some(reason) if reason.code == SPOT_INTERRUPTION_CODE => Outcome {
                    phase: "Failed",
                    reason: Some("SpotInterrupted"),
                    message: Some(describe(&format!(
                        "was interrupted by EC2 ({}: {})",
                        reason.code, reason.message
                    ))),
                },
                Some(reason) => Outcome {
                    phase: "Failed",
                    reason: Some("InstanceTerminated"),
                    message: Some(describe(&format!(
                        "ended before its workload finished ({}: {})",
                        reason.code, reason.message
                    ))),
                },
                None => Outcome {
                    phase: "Failed",
                    reason: Some("InstanceTerminated"),
                    message: Some(describe("ended before its workload finished")),
                },
            },
        },
    }
}

/// The full status for `pod` running on `instance`, keeping transition times and the start
/// time the pod already has when nothing changed.
pub fn status_for_instance(pod: &Pod, instance: &InstanceStatus) -> PodStatus {
    let outcome = outcome(instance);
    let current = pod.status.clone().unwrap_or_default();
    let ip = instance.private_ip.map(|ip| ip.to_string());
    let running = outcome.phase == "Running";
    let terminal = matches!(outcome.phase, "Succeeded" | "Failed");
    let ready_reason = match outcome.phase {
        "Pending" => Some("InstancePending"),
        "Succeeded" => Some("PodCompleted"),
        "Failed" => Some("PodFailed"),
        _ => None,
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
    ];
    let container_statuses = containers(pod)
        .iter()
        .map(|container| {
            let state = container_state(instance, &outcome, &container.name);
            container_status(
                container,
                state,
                running,
                instance_container_id(instance, &container.name),
            )
        })
        .collect();
    // Init containers ran to completion before the workload started on the instance.
    let done = instance.started_at.is_some() || terminal;
    let init_container_statuses = pod
        .spec
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
                        instance_container_id(instance, &container.name),
                    );
                    status.started = None;
                    status
                })
                .collect()
        });
    PodStatus {
        phase: Some(outcome.phase.to_owned()),
        reason: outcome.reason.map(str::to_owned),
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

/// A Pending status while no instance exists yet (launching, or retrying a transient error).
pub fn status_while_launching(pod: &Pod, reason: &'static str, message: String) -> PodStatus {
    let current = pod.status.clone().unwrap_or_default();
    PodStatus {
        phase: Some("Pending".to_owned()),
        message: Some(message.clone()),
        conditions: Some(vec![
            condition(&current, "PodScheduled", true, None, None),
            condition(&current, "Initialized", false, Some(reason), Some(&message)),
            condition(&current, "ContainersReady", false, Some(reason), None),
            condition(&current, "Ready", false, Some(reason), Some(&message)),
        ]),
        container_statuses: Some(
            containers(pod)
                .iter()
                .map(|container| {
                    container_status(
                        container,
                        waiting("ContainerCreating", Some(&message)),
                        false,
                        None,
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
pub fn status_failed(pod: &Pod, reason: &'static str, message: String) -> PodStatus {
    let current = pod.status.clone().unwrap_or_default();
    let previous: Vec<ContainerStatus> = current.container_statuses.clone().unwrap_or_default();
    PodStatus {
        phase: Some("Failed".to_owned()),
        reason: Some(reason.to_owned()),
        message: Some(message.clone()),
        conditions: Some(vec![
            condition(&current, "PodScheduled", true, None, None),
            condition(&current, "ContainersReady", false, Some("PodFailed"), None),
            condition(&current, "Ready", false, Some("PodFailed"), Some(&message)),
        ]),
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
                        reason,
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

fn instance_container_id(instance: &InstanceStatus, container: &str) -> Option<String> {
    Some(format!(
        "{CONTAINER_ID_SCHEME}{}/{container}",
        instance.instance_id
    ))
}

fn container_state(instance: &InstanceStatus, outcome: &Outcome, name: &str) -> ContainerState {
    let started_at = instance.started_at.map(Time);
    match outcome.phase {
        "Pending" => waiting("ContainerCreating", outcome.message.as_deref()),
        "Running" => ContainerState {
            running: Some(ContainerStateRunning { started_at }),
            ..ContainerState::default()
        },
        _ => {
            let (exit_code, reason, finished_at) = match &instance.workload_exit {
                Some(exit) => (
                    exit.exit_code,
                    if exit.exit_code == 0 {
                        "Completed"
                    } else {
                        "Error"
                    },
                    Some(Time(exit.finished_at)),
                ),
                None => (137, outcome.reason.unwrap_or("InstanceTerminated"), None),
            };
            terminated(
                exit_code,
                reason,
                outcome.message.clone(),
                started_at,
                finished_at,
                instance_container_id(instance, name),
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

/// Whether the pod's status already records an instance (so a missing one was lost, not
/// never launched).
pub fn recorded_instance_id(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find_map(|status| {
            status
                .container_id
                .as_deref()?
                .strip_prefix(CONTAINER_ID_SCHEME)
        })
        .and_then(|rest| rest.split('/').next())
        .map(str::to_owned)
}

/// Whether writing `desired` (as a strategic merge patch) would change `current`. Lists merge
/// by the same keys the apiserver uses (`type` for conditions, `name` for container statuses,
/// `ip` for IPs), so fields other components own never cause a write, and a reconcile after
/// our own write is a no-op rather than a loop.
pub fn needs_write(current: Option<&PodStatus>, desired: &PodStatus) -> bool {
    let Some(current) = current else { return true };
    let current = serde_json::to_value(current).unwrap_or_default();
    let desired = serde_json::to_value(desired).unwrap_or_default();
    !covers(&current, &desired)
}

fn covers(current: &serde_json::Value, desired: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (current, desired) {
        (Value::Object(current), Value::Object(desired)) => {
            desired.iter().all(|(key, wanted)| match current.get(key) {
                Some(have) => covers(have, wanted),
                None => wanted.is_null(),
            })
        }
        (Value::Array(current), Value::Array(desired)) => match merge_key(desired) {
            Some(key) => desired.iter().all(|wanted| {
                current
                    .iter()
                    .find(|have| have.get(key) == wanted.get(key))
                    .is_some_and(|have| covers(have, wanted))
            }),
            None => current == desired,
        },
        (current, desired) => current == desired,
    }
}

fn merge_key(items: &[serde_json::Value]) -> Option<&'static str> {
    let first = items.first()?.as_object()?;
    ["type", "name", "ip"]
        .into_iter()
        .find(|key| first.contains_key(*key))
}

#[cfg(test)]
mod tests;
