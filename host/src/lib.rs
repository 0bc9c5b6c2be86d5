//! orca: a virtual Kubernetes node that runs each pod scheduled to it as an EC2 instance.
//!
//! Data flows one way: pod → [`policy`] → [`provider::plan::LaunchPlan`] → [`workload`] (the
//! pod resolved into a [`provider::LaunchRequest`]) → [`provider`] → pod status. [`node`] keeps
//! the Node registered and knows nothing of pods; [`process`] wires the parts once and owns
//! every loop. `docs/src/concepts/architecture.md` has the modules and what each may depend
//! on.

pub mod cluster;
pub mod config;
pub mod cost;
pub mod interruption;
pub mod kubelet_api;
pub mod metrics;
pub mod node;
pub mod plugin_cli;
pub mod pods;
pub mod policy;
pub mod process;
pub mod provider;
pub mod replicas;
pub mod spend;
#[cfg(test)]
mod structure;
pub mod support;
pub mod workload;
