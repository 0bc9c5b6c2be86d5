//! orca: a virtual Kubernetes node that runs each pod scheduled to it as an EC2 instance.
//!
//! Data flows one way: pod → [`policy`] → [`plan::LaunchPlan`] → [`workload`] (the pod resolved
//! into a [`provider::LaunchRequest`]) → [`provider`] → pod status.
//! [`node`] keeps the Node registered and knows nothing of pods.

pub mod aws_config;
pub mod catalogue_refresh;
pub mod cli;
pub mod config;
pub mod errors;
pub mod health;
pub mod heap;
#[cfg(test)]
mod import_cycles;
pub mod interruption;
pub mod kube_connection;
pub mod kube_http;
pub mod kubelet_api;
pub mod logging;
pub mod metrics;
pub mod node;
pub mod node_runtime;
pub mod orca;
pub mod plan;
pub mod plugin_cli;
pub mod pods;
pub mod policy;
pub mod provider;
pub mod replicas;
pub mod served_nodes;
#[cfg(test)]
mod source_text;
pub mod spend;
pub mod support;
pub mod tls;
pub mod turn;
pub mod workload;
