//! The words a pod's status is written in: its phase, why it is there, and why it is waiting.
//! Enums, so a misspelt reason cannot reach a user and every reason is documented in one place.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

use crate::policy::PlanFailure;

/// A pod's phase, as Kubernetes names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl PodPhase {
    /// The pod's phase as stored; `None` when it has none yet (or one orca does not write).
    pub fn of(pod: &Pod) -> Option<PodPhase> {
        match pod.status.as_ref()?.phase.as_deref()? {
            "Pending" => Some(PodPhase::Pending),
            "Running" => Some(PodPhase::Running),
            "Succeeded" => Some(PodPhase::Succeeded),
            "Failed" => Some(PodPhase::Failed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
        }
    }

    /// Succeeded and Failed are final: Kubernetes never lets a pod leave them.
    pub fn is_final(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// Why a pod Failed (`status.reason`; also its containers' terminated reason and the Warning
/// Event's reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// The instance ended and the workload's exit code says it failed, or the instance ended
    /// (terminated by someone, shut down) before the workload reported.
    InstanceTerminated,
    /// EC2 reclaimed the spot instance. Wins over an exit code: the workload's exit was the
    /// interruption's doing.
    SpotInterrupted,
    /// Someone or something stopped the instance; orca then terminates it.
    InstanceStopped,
    /// The instance vanished from EC2 (two listings and a lookup by id could not find it).
    InstanceLost,
    /// EC2 refused the launch for good (no offering had capacity, a bad AMI, no permission).
    InstanceCreationFailed,
    /// A pod annotation orca reads is invalid; nothing reached EC2.
    InvalidAnnotation,
    /// The policy plugins could not decide.
    PolicyError,
    /// `policy.guardrails` left nothing of the plugins' plan to launch; nothing reached EC2.
    GuardrailViolation,
}

impl FailureReason {
    pub const ALL: [FailureReason; 8] = [
        FailureReason::InstanceTerminated,
        FailureReason::SpotInterrupted,
        FailureReason::InstanceStopped,
        FailureReason::InstanceLost,
        FailureReason::InstanceCreationFailed,
        FailureReason::InvalidAnnotation,
        FailureReason::PolicyError,
        FailureReason::GuardrailViolation,
    ];

    /// The reason a status names, if it is one of orca's.
    pub fn parse(reason: &str) -> Option<FailureReason> {
        Self::ALL.into_iter().find(|known| known.as_str() == reason)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::InstanceTerminated => "InstanceTerminated",
            FailureReason::SpotInterrupted => "SpotInterrupted",
            FailureReason::InstanceStopped => "InstanceStopped",
            FailureReason::InstanceLost => "InstanceLost",
            FailureReason::InstanceCreationFailed => "InstanceCreationFailed",
            FailureReason::InvalidAnnotation => "InvalidAnnotation",
            FailureReason::PolicyError => "PolicyError",
            FailureReason::GuardrailViolation => "GuardrailViolation",
        }
    }

    /// The reason for a plan that failed.
    pub fn of_plan(failure: PlanFailure) -> FailureReason {
        match failure {
            PlanFailure::InvalidAnnotation => FailureReason::InvalidAnnotation,
            PlanFailure::GuardrailViolation => FailureReason::GuardrailViolation,
            PlanFailure::PolicyError => FailureReason::PolicyError,
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a pod is Pending (the reason of its not-ready conditions).
// Variants are the reasons users read in `kubectl describe`, hence the shared prefix.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitingReason {
    /// `RunInstances` answered; EC2 does not list the instance yet.
    InstanceLaunching,
    /// A launch failed in a way that may pass (throttling, a ConfigMap not there yet, an
    /// answer that never came); orca retries with backoff.
    InstanceCreationRetrying,
    /// The instance is booting.
    InstancePending,
    /// A plugin the policy chain needs is not loaded; the pod is planned again with backoff
    /// and goes on once it loads.
    PolicyNotReady,
    /// A plugin ran out of time deciding (a busy machine can cause it); a few more tries.
    PolicyRetrying,
    /// The pod's instance would take its namespace's live instances over their cap
    /// (`policy.guardrails.maxNamespacePricePerHour`); the pod launches once enough of them
    /// end.
    NamespaceBudgetExceeded,
}

impl WaitingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingReason::InstanceLaunching => "InstanceLaunching",
            WaitingReason::InstanceCreationRetrying => "InstanceCreationRetrying",
            WaitingReason::InstancePending => "InstancePending",
            WaitingReason::PolicyNotReady => "PolicyNotReady",
            WaitingReason::PolicyRetrying => "PolicyRetrying",
            WaitingReason::NamespaceBudgetExceeded => "NamespaceBudgetExceeded",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_round_trip_through_the_pod_status() {
        for phase in [
            PodPhase::Pending,
            PodPhase::Running,
            PodPhase::Succeeded,
            PodPhase::Failed,
        ] {
            let pod = Pod {
                status: Some(k8s_openapi::api::core::v1::PodStatus {
                    phase: Some(phase.as_str().to_owned()),
                    ..Default::default()
                }),
                ..Pod::default()
            };
            assert_eq!(PodPhase::of(&pod), Some(phase));
        }
        assert_eq!(PodPhase::of(&Pod::default()), None);
    }
}
