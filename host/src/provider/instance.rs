//! What a provider reports about one instance.

use std::fmt;
use std::net::IpAddr;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use crate::plan::Market;

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
    /// Whether the instance has stopped running its workload for good.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            Self::ShuttingDown | Self::Terminated | Self::Stopping | Self::Stopped
        )
    }
}

/// Why an instance changed state (EC2's `StateReason`), e.g. `Server.SpotInstanceTermination`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateReason {
    pub code: String,
    pub message: String,
}

/// How the pod's workload ended, as reported by the instance's bootstrap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadExit {
    pub exit_code: i32,
    pub finished_at: Timestamp,
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
}
