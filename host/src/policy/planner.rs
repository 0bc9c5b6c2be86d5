//! What the pod controller asks of the policy ([`Planner`]), and why an answer may be no plan.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use super::decision::{Decision, DecisionRecord};

/// Why no plan could be made for a pod. Both fields end up in the pod's status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct PlanError {
    pub reason: PlanFailure,
    pub message: String,
    /// Whether asking again may give a plan.
    pub retry: PlanRetry,
    /// The plugins' decision the guardrails refused, recorded on the pod as a decided plan
    /// is; `None` for every other failure.
    pub refused: Option<Box<DecisionRecord>>,
}

/// Why no plan could be made, in the words the pod's status uses (and `orca plugin test`
/// cases read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum PlanFailure {
    /// A pod annotation the policy reads is invalid.
    InvalidAnnotation,
    /// `policy.guardrails` left nothing of the plugins' plan to launch.
    GuardrailViolation,
    /// The plugins could not decide (an error, a crash, an invalid answer, no plugin loaded).
    PolicyError,
}

impl PlanFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanFailure::InvalidAnnotation => "InvalidAnnotation",
            PlanFailure::GuardrailViolation => "GuardrailViolation",
            PlanFailure::PolicyError => "PolicyError",
        }
    }
}

impl std::fmt::Display for PlanFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a failed plan may pass if the pod is planned again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlanRetry {
    /// The failure is about the pod or is a plugin's answer: asking again gives the same.
    #[default]
    No,
    /// A plugin the chain needs is not loaded: the pod waits for it (policy not ready).
    WhenLoaded,
    /// A plugin ran out of time, which a busy machine can cause, or found every sandbox slot
    /// taken: worth a few more tries.
    Transient,
}

/// Decides how a pod is launched.
#[async_trait]
pub trait Planner: Send + Sync + 'static {
    /// # Errors
    /// [`PlanError`] with a message precise enough to fix the pod.
    async fn plan(&self, pod: &Pod) -> Result<Decision, PlanError>;

    /// The decision `plan` made was launched: `record` holds the launch and its price (and the
    /// shadow's, priced the same way).
    fn launched(&self, _record: &DecisionRecord) {}
}
