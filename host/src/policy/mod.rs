//! Policy: turning a pod into a `LaunchPlan`. The pod reconciler asks a [`Planner`]; the
//! answer comes from the plugin pipeline (WebAssembly components, embedded or from the
//! plugins directory), checked host-side.

pub mod catalogue;
mod convert;
pub mod decision;
pub mod embedded;
pub mod explain;
pub mod guardrails;
pub mod native;
pub mod oci;
pub mod pipeline;
mod plugin_text;
mod pod_view;
pub mod readiness;
pub mod registry;
pub mod reload;
pub mod setup;
pub mod validate;
pub mod wasm;

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

pub use decision::{DECISION_ANNOTATION, Decision, DecisionRecord};
pub use pipeline::Pipeline;
pub use pod_view::{PodViewError, pod_view, pod_view_on};

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

/// Why no plan could be made, in the words the pod's status uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

#[async_trait]
impl Planner for Arc<Pipeline> {
    async fn plan(&self, pod: &Pod) -> Result<Decision, PlanError> {
        // Plugin calls are CPU-bound and may run up to their time limit: off the async workers,
        // and no more at once than `policy.limits.concurrentCalls`. A plugin's time limit starts
        // with its call, so waiting for a permit does not count against it.
        // (The semaphore is never closed, so the permit is always there.)
        let _permit = self.deciding.acquire().await.ok();
        let pipeline = self.clone();
        let pod = pod.clone();
        tokio::task::spawn_blocking(move || pipeline.decide(&pod))
            .await
            .unwrap_or_else(|error| {
                Err(PlanError {
                    reason: PlanFailure::PolicyError,
                    message: format!("the policy pipeline crashed: {error}"),
                    retry: PlanRetry::No,
                    refused: None,
                })
            })
    }
}
