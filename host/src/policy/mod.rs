//! Policy: turning a pod into a `LaunchPlan`. The pod reconciler asks a [`Planner`]; the
//! answer comes from the plugin pipeline (WebAssembly components, embedded or from the
//! plugins directory), checked host-side.

pub mod catalogue;
pub mod chains;
mod convert;
pub mod decision;
pub mod embedded;
pub mod explain;
pub mod guardrails;
pub mod honoured;
pub mod mixed;
pub mod native;
pub mod oci;
pub mod pipeline;
mod planner;
mod plugin_text;
mod pod_view;
pub mod readiness;
pub mod registry;
pub mod reload;
pub mod setup;
pub mod shadow;
pub mod tag_merge;
pub mod validate;
pub mod wasm;

pub use decision::{DECISION_ANNOTATION, Decision, DecisionRecord};
pub use pipeline::Pipeline;
pub use planner::{PlanError, PlanFailure, PlanRetry, Planner};
pub use pod_view::{PodViewError, pod_view, pod_view_on};
