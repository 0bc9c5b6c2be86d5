//! The provider boundary: what runs pods. The pod reconciler drives it; it knows nothing of
//! Kubernetes watches or WebAssembly, only launch requests (pods resolved, see
//! [`crate::workload`]) in and instance statuses out.

pub mod aws;
mod error;
mod exec;
mod instance;
mod launch;
mod logs;
pub mod ownership;
pub mod plan;
pub mod simulated;
mod usage;
pub mod zones;

use async_trait::async_trait;

pub use error::{ErrorClass, ProviderError};
pub use exec::{ExecOutcome, ExecRequest, MAX_STDIN_BYTES};
pub use instance::{
    InstanceState, InstanceStatus, PodKey, StateReason, VolumeAttachment, WorkloadExit,
};
pub use launch::{
    LaunchFailed, LaunchProgress, LaunchRequest, Launched, Offering, PassedOver, offerings,
};
pub use logs::{LogCursor, LogLine, LogPage, LogStart, timed_lines};
pub use usage::{ContainerUsage, GpuUsage, PodUsage, Sample, UsageQuery};

/// A backend that runs each pod as one instance.
///
/// # Guarantees an implementation gives
/// - `create` is idempotent per pod UID (`request.pod.uid`): calling it again (a retry, a restart, another plan)
///   never makes a second instance for the same pod.
/// - `terminate` is idempotent per instance: asking again is harmless.
/// - `statuses` lists every instance of this node in one call, however many there are.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// Launches the instance that runs `request.workload` according to `request.plan`,
    /// moving down its offerings on capacity errors; the answer lists each offering passed
    /// over.
    async fn create(&self, request: &LaunchRequest) -> Result<Launched, LaunchFailed>;
    /// Asks for one instance to be terminated.
    ///
    /// # Errors
    /// A refusal for this instance alone (termination protection, a state that cannot be
    /// terminated now) or for the whole call (throttling, credentials).
    async fn terminate(&self, instance_id: &str) -> Result<Termination, ProviderError>;
    /// `pod`'s instance by id: the second look when listings miss it. It does not depend on
    /// the instance's tags, which EC2 may show later than the instance. `None`: the provider
    /// does not know it (not visible yet, or gone).
    async fn lookup(
        &self,
        pod: &PodKey,
        instance_id: &str,
    ) -> Result<Option<InstanceStatus>, ProviderError>;
    /// How the workload on an instance that has ended exited, per container, as the
    /// bootstrap reported it. `None`: no report (yet: reports can arrive after the instance
    /// ended).
    async fn workload_exit(
        &self,
        instance: &InstanceStatus,
    ) -> Result<Option<WorkloadExit>, ProviderError>;
    /// All instances this node owns, including recently terminated ones.
    async fn statuses(&self) -> Result<Vec<InstanceStatus>, ProviderError>;
    /// A page of `container`'s output, from `start`. `InstanceNotFound`: the pod has no
    /// instance (yet).
    async fn log_page(
        &self,
        pod: &PodKey,
        container: &str,
        start: &LogStart,
    ) -> Result<LogPage, ProviderError>;
    /// What each of `pods` uses, as last sampled, read in as few calls as the backend
    /// allows; a pod with no figures yet is left out. The default: no figures (a backend
    /// that samples nothing).
    ///
    /// # Errors
    /// The read failed; the caller keeps the figures it had and asks again later.
    async fn usage(&self, pods: &[UsageQuery]) -> Result<Vec<PodUsage>, ProviderError> {
        let _ = pods;
        Ok(Vec::new())
    }
    /// Attaches to a running `instance` the volumes it waits for and does not have yet
    /// ([`InstanceStatus::volumes_to_attach`]), each at its device; asking again for a volume
    /// attached meanwhile is harmless. The default: a backend that attaches no volumes
    /// refuses, naming them.
    ///
    /// # Errors
    /// The first volume that could not be attached, and why (attached to another instance,
    /// the instance not running yet); the caller tries again later.
    async fn attach(&self, instance: &InstanceStatus) -> Result<Vec<Attached>, ProviderError> {
        let volumes: Vec<&str> = instance
            .volumes_to_attach()
            .map(|volume| volume.volume_id.as_str())
            .collect();
        Err(ProviderError::permanent(
            "VolumesUnsupported",
            format!("this backend attaches no volumes ({})", volumes.join(", ")),
        ))
    }
    /// Runs `request`'s command in one of `pod`'s containers on its instance, to its end
    /// (`kubectl exec`). The default: a backend that reaches no container refuses.
    ///
    /// # Errors
    /// The pod has no running instance (`InstanceNotFound`, `InstanceNotRunning`), the command
    /// could not be run (the backend's code and why), or it did not end in time.
    async fn exec(
        &self,
        pod: &PodKey,
        request: &ExecRequest,
    ) -> Result<ExecOutcome, ProviderError> {
        let _ = request;
        Err(ProviderError::permanent(
            "ExecUnsupported",
            format!("this backend cannot run commands in pod {pod}'s containers"),
        ))
    }
    /// Whether the backend answers; drives the node's Ready condition.
    async fn ping(&self) -> Result<(), ProviderError>;
    /// Forgets what it keeps per pod (launch attempts) for pods not in `present` (UIDs): they
    /// are gone, and a long-running node must not keep every pod it ever saw.
    fn retain_pods(&self, present: &std::collections::HashSet<String>) {
        let _ = present;
    }

    /// Claims the instances an earlier orca launched for this node before instances carried
    /// the cluster's id (see [`ownership`]): those whose pod is in `present` (the node's pods,
    /// completely listed) get the id, so listings show them again; the others are left alone
    /// and reported, since nothing tells another cluster's instance at the same names from
    /// an instance whose pod was force-deleted while no orca ran. The default: nothing to
    /// claim.
    ///
    /// # Errors
    /// The listing or the tagging failed; asking again is harmless.
    async fn claim_untagged(
        &self,
        present: &std::collections::HashSet<String>,
    ) -> Result<Claimed, ProviderError> {
        let _ = present;
        Ok(Claimed::default())
    }
}

/// A volume [`Provider::attach`] attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    pub volume_id: String,
    pub device: String,
    pub instance_id: String,
}

/// What [`Provider::claim_untagged`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claimed {
    /// Instance ids that carry the cluster's id now.
    pub claimed: Vec<String>,
    /// Instance ids left alone, with no pod here: never terminated by orca.
    pub unclaimed: Vec<String>,
}

/// What became of a termination request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// The instance is shutting down or already gone.
    Requested,
    /// The provider knows no such instance: not visible yet (EC2 is eventually consistent),
    /// or gone long ago.
    Unknown,
}
