//! What a provider reports about one instance.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use crate::provider::plan::Market;

/// Identifies a pod across restarts: namespace and name for people, UID for exactness (a pod
/// re-created with the same name is a different pod).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodKey {
    /// The key of a pod read from the apiserver; `None` if it lacks a name or UID (it never
    /// does once stored, but the type allows it).
    pub fn of(pod: &Pod) -> Option<PodKey> {
        Some(PodKey {
            namespace: pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_owned()),
            name: pod.metadata.name.clone()?,
            uid: pod.metadata.uid.clone()?,
        })
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// An instance's lifecycle state, as EC2 names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

impl InstanceState {
    /// Whether the instance still exists as a machine orca must terminate once its pod is gone
    /// or finished: it runs (or is about to), or it is stopped or stopping, which keeps its
    /// volumes (billed) and lets anyone start it again.
    pub fn needs_termination(self) -> bool {
        matches!(
            self,
            Self::Pending | Self::Running | Self::Stopping | Self::Stopped
        )
    }

    /// Whether the pod's workload cannot run on it any more: it is shutting down, gone, or
    /// stopped (a stopped instance lost its workload's processes).
    pub fn workload_over(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// EC2's name for the state, as `DescribeInstances` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::ShuttingDown => "shutting-down",
            Self::Terminated => "terminated",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
        }
    }
}

/// Why an instance changed state (EC2's `StateReason`), e.g. `Server.SpotInstanceTermination`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateReason {
    pub code: String,
    pub message: String,
}

impl StateReason {
    /// EC2 reclaimed a spot instance.
    pub const SPOT_INTERRUPTION: &str = "Server.SpotInstanceTermination";
    /// The instance shut itself down: orca's bootstrap does that once the workload has ended
    /// and reported its exit code.
    pub const INSTANCE_INITIATED_SHUTDOWN: &str = "Client.InstanceInitiatedShutdown";

    pub fn is_spot_interruption(&self) -> bool {
        self.code == Self::SPOT_INTERRUPTION
    }

    pub fn is_instance_initiated_shutdown(&self) -> bool {
        self.code == Self::INSTANCE_INITIATED_SHUTDOWN
    }
}

impl fmt::Display for StateReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // EC2's messages already start with the code ("Client.UserInitiatedShutdown: User
        // initiated shutdown"); say it once.
        if self.message.starts_with(&self.code) {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

/// How the pod's workload ended, as reported by the instance's bootstrap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadExit {
    /// The pod's exit code (the first failing container's, else 0).
    pub exit_code: i32,
    pub finished_at: Timestamp,
    /// Each container's own exit code, where the report names them; a container missing
    /// here is reported with the pod's code.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub containers: BTreeMap<String, i32>,
}

impl WorkloadExit {
    /// The exit code to report for `container`.
    pub fn code_of(&self, container: &str) -> i32 {
        self.containers
            .get(container)
            .copied()
            .unwrap_or(self.exit_code)
    }
}

/// One instance, as the provider sees it now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceStatus {
    pub pod: PodKey,
    pub instance_id: String,
    pub instance_type: String,
    pub market: Market,
    pub state: InstanceState,
    pub private_ip: Option<IpAddr>,
    pub launched_at: Timestamp,
    /// When the workload started (the instance reached running).
    pub started_at: Option<Timestamp>,
    pub state_reason: Option<StateReason>,
    pub workload_exit: Option<WorkloadExit>,
    /// The volumes the instance attaches (its pod's EBS volumes), and whether each is.
    #[serde(default)]
    pub volumes: Vec<VolumeAttachment>,
}

impl InstanceStatus {
    /// The volumes it waits for that are not attached yet.
    pub fn volumes_to_attach(&self) -> impl Iterator<Item = &VolumeAttachment> {
        self.volumes.iter().filter(|volume| !volume.attached)
    }
}

/// A volume an instance attaches: the pod's workload waits for it at `device`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeAttachment {
    pub volume_id: String,
    /// The device name it is attached at (`/dev/sdf`).
    pub device: String,
    /// Whether the listing shows it attached to the instance.
    pub attached: bool,
}
