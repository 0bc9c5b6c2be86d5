//! From `DescribeInstances` to the provider's instance statuses: the pod from the ownership
//! tags, the market from the lifecycle, the workload's end from the tags the bootstrap sets.

use jiff::Timestamp;

use super::api::Ec2Instance;
use super::workload::console;
use super::workload::{TAG_EXIT_CODE, TAG_FINISHED_AT, wanted_volumes};
use crate::provider::ownership::{TAG_POD_NAME, TAG_POD_NAMESPACE, TAG_POD_UID};
use crate::provider::{InstanceState, InstanceStatus, PodKey, WorkloadExit};

/// The status of every instance with orca's pod tags; others are not orca's and are left
/// out. A pod with several instances (something launched one outside orca) shows them all:
/// the pod controller picks the pod's and collects the rest.
pub fn statuses(instances: &[Ec2Instance]) -> Vec<InstanceStatus> {
    instances.iter().filter_map(instance_status).collect()
}

pub fn instance_status(instance: &Ec2Instance) -> Option<InstanceStatus> {
    let tag = |key: &str| instance.tags.get(key).cloned();
    let pod = PodKey {
        namespace: tag(TAG_POD_NAMESPACE)?,
        name: tag(TAG_POD_NAME)?,
        uid: tag(TAG_POD_UID)?,
    };
    Some(status_of_pod(instance, &pod))
}

/// The status of `pod`'s instance, whatever its tags say yet.
pub fn status_of_pod(instance: &Ec2Instance, pod: &PodKey) -> InstanceStatus {
    let tag = |key: &str| instance.tags.get(key).cloned();
    let pod = pod.clone();
    let workload_exit = tag(TAG_EXIT_CODE)
        .and_then(|code| code.trim().parse::<i32>().ok())
        .map(|exit_code| WorkloadExit {
            exit_code,
            finished_at: tag(TAG_FINISHED_AT)
                .and_then(|at| at.parse::<Timestamp>().ok())
                .unwrap_or(instance.launch_time),
            containers: Default::default(),
        });
    InstanceStatus {
        pod,
        instance_id: instance.instance_id.clone(),
        instance_type: instance.instance_type.clone(),
        market: instance.market(),
        state: instance.state,
        private_ip: instance.private_ip,
        launched_at: instance.launch_time,
        started_at: (instance.state != InstanceState::Pending).then_some(instance.launch_time),
        state_reason: instance.state_reason.clone(),
        workload_exit,
        volumes: wanted_volumes(&instance.tags, &instance.volume_ids),
    }
}

/// The workload's exit as the bootstrap reported it on the console: the pod's code and each
/// container's. `None` while the console holds no report (EC2 posts console output a while
/// after the fact; the exit-code tag, pod-level only, is in the listing).
pub fn exit_from_console(console_text: &str, instance: &InstanceStatus) -> Option<WorkloadExit> {
    let exit_code = console::exit_code(console_text)?;
    Some(WorkloadExit {
        exit_code,
        finished_at: instance
            .workload_exit
            .as_ref()
            .map(|exit| exit.finished_at)
            .unwrap_or_else(Timestamp::now),
        containers: console::container_exit_codes(console_text),
    })
}
