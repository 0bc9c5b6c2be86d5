//! From `DescribeInstances` to the provider's instance statuses: the pod from the ownership
//! tags, the market from the lifecycle, the workload's end from the tags the bootstrap sets.

use std::collections::HashMap;

use jiff::Timestamp;

use super::api::Ec2Instance;
use super::workload::{TAG_EXIT_CODE, TAG_FINISHED_AT};
use crate::provider::ownership::{TAG_POD_NAME, TAG_POD_NAMESPACE, TAG_POD_UID};
use crate::provider::{InstanceState, InstanceStatus, PodKey, WorkloadExit};

/// One status per pod: its live instance if it has one, else its newest. Instances without
/// orca's pod tags are not orca's and are left out.
pub fn newest_per_pod(instances: Vec<Ec2Instance>) -> Vec<InstanceStatus> {
    let mut by_uid: HashMap<String, InstanceStatus> = HashMap::new();
    for status in instances.iter().filter_map(instance_status) {
        let rank = |s: &InstanceStatus| (!s.state.is_finished(), s.launched_at);
        match by_uid.get(&status.pod.uid) {
            Some(kept) if rank(kept) >= rank(&status) => {}
            _ => {
                by_uid.insert(status.pod.uid.clone(), status);
            }
        }
    }
    by_uid.into_values().collect()
}

pub fn instance_status(instance: &Ec2Instance) -> Option<InstanceStatus> {
    let tag = |key: &str| instance.tags.get(key).cloned();
    let pod = PodKey {
        namespace: tag(TAG_POD_NAMESPACE)?,
        name: tag(TAG_POD_NAME)?,
        uid: tag(TAG_POD_UID)?,
    };
    let workload_exit = tag(TAG_EXIT_CODE)
        .and_then(|code| code.trim().parse::<i32>().ok())
        .map(|exit_code| WorkloadExit {
            exit_code,
            finished_at: tag(TAG_FINISHED_AT)
                .and_then(|at| at.parse::<Timestamp>().ok())
                .unwrap_or(instance.launch_time),
        });
    Some(InstanceStatus {
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
    })
}
