//! Pods bound to orca's node: watched with a field selector, reconciled one step at a time per
//! pod and many pods in parallel, their status mirrored from the provider's instances.

mod context;
mod controller;
mod decide;
mod error;
pub(crate) mod events;
mod execute;
mod instances;
mod launch;
mod node_pods;
mod notice_sink;
mod phase;
mod policy_wait;
mod reconcile;
mod record;
mod room_wait;
mod status;
mod stored;
mod sync;
mod terminations;
mod view;
mod writer;
mod writes;

pub use controller::{PodControllerDeps, run};
pub use node_pods::NodePods;
pub use phase::{FailureReason, PodPhase};
pub use status::outcome;
pub use stored::is_service_account_token;
pub use view::{CONTAINER_ID_SCHEME, LAUNCHED_CONDITION};
