//! Policy: turning a pod into a `LaunchPlan`. The pod reconciler asks a [`Planner`]; it does not
//! know whether the answer came from native code or a WebAssembly plugin.

mod annotations;
mod native;
mod pod_view;
pub mod validate;
pub mod wasm;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

pub(crate) use annotations::is_instance_type_name;
pub use annotations::{ANNOTATION_PREFIX, PodAnnotations};
pub use native::NativePlanner;
pub use pod_view::{PodViewError, pod_view};

use crate::plan::LaunchPlan;

/// Why no plan could be made for a pod. Both fields end up in the pod's status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct PlanError {
    /// `InvalidAnnotation` or `PolicyError`.
    pub reason: &'static str,
    pub message: String,
}

/// Decides how a pod is launched.
#[async_trait]
pub trait Planner: Send + Sync + 'static {
    /// # Errors
    /// [`PlanError`] with a message precise enough to fix the pod.
    async fn plan(&self, pod: &Pod) -> Result<LaunchPlan, PlanError>;
}
