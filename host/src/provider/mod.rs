//! The provider boundary: what runs pods. The pod reconciler drives it; it knows nothing of
//! Kubernetes watches or WebAssembly, only pods in and instance statuses out.

pub mod aws;
mod error;
mod instance;
mod launch;
mod logs;
pub mod ownership;
pub mod simulated;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

pub use error::{ErrorClass, ProviderError};
pub use instance::{InstanceState, InstanceStatus, PodKey, StateReason, WorkloadExit};
pub use launch::{LaunchFailed, Launched, Offering, PassedOver, offerings};
pub use logs::{LogOptions, render as render_logs};

use crate::plan::LaunchPlan;

/// A backend that runs each pod as one instance.
///
/// # Guarantees an implementation gives
/// - `create` is idempotent per pod UID: calling it again (a retry, a restart) never makes a
///   second instance for the same pod.
/// - `delete` of an instance that is already gone succeeds.
/// - `statuses` lists every instance of this node in one call, however many there are.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// Launches the pod's instance according to `plan`, moving down its offerings on
    /// capacity errors; the answer lists each offering passed over.
    async fn create(&self, pod: &Pod, plan: &LaunchPlan) -> Result<Launched, LaunchFailed>;
    /// Terminates the pod's instance; success when it is already gone.
    async fn delete(&self, pod: &PodKey) -> Result<(), ProviderError>;
    /// All instances this node owns, including recently terminated ones.
    async fn statuses(&self) -> Result<Vec<InstanceStatus>, ProviderError>;
    /// The workload's output.
    async fn logs(&self, pod: &PodKey, options: &LogOptions) -> Result<String, ProviderError>;
    /// Whether the backend answers; drives the node's Ready condition.
    async fn ping(&self) -> Result<(), ProviderError>;
}
