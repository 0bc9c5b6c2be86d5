//! The pod's workload as the world reports it: how it ended, and spot
//! interruption notices.

use jiff::Timestamp;

/// The tag the bootstrap writes with the pod's exit code.
pub const EXIT_CODE_TAG: &str = "orca.research/exit-code";
/// The tag the bootstrap writes with the RFC 3339 time the pod finished.
pub const FINISHED_AT_TAG: &str = "orca.research/finished-at";

/// How the workload on an instance ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadEnd {
    pub pod_exit_code: i32,
    /// (container name, exit code), in the order the bootstrap reports them.
    pub containers: Vec<(String, i32)>,
    pub finished_at: Timestamp,
}

/// EC2's two-minute warning that a spot instance is being reclaimed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptionNotice {
    pub instance_id: String,
    pub issued_at: Timestamp,
    /// When the instance starts shutting down.
    pub terminates_at: Timestamp,
}
