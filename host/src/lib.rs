//! orca: a virtual Kubernetes node that runs each pod scheduled to it as an EC2 instance.

pub mod cli;
pub mod config;
pub mod kube_connection;
pub mod logging;
pub mod node;
pub mod plan;
pub mod provider;
pub mod tls;
