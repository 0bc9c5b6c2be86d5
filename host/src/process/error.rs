//! Why orca could not start, or stopped running before it was asked to.

use super::loops::ProcessLoop;
use super::node::ProviderStartError;
use super::turn::{Failure, TurnEnd};
use crate::node::RegistrationError;
use crate::policy::setup::PolicySetupError;

/// Why orca could not start, or stopped running before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    ProviderFailed(#[from] ProviderStartError),
    #[error("preparing the policy plugins")]
    PolicyFailed(#[source] PolicySetupError),
    #[error("policy.guardrails")]
    GuardrailsFailed(#[source] crate::policy::guardrails::GuardrailError),
    #[error("reading the cluster's identity")]
    ClusterIdFailed(#[source] crate::provider::ownership::ClusterIdError),
    #[error("reading the account whose interruption notices count")]
    AccountFailed(#[source] crate::interruption::AccountError),
    #[error("making the log group ready")]
    LogGroupFailed(#[source] crate::provider::aws::logs::group::GroupError),
    #[error("watching the plugins directory {dir}")]
    PluginWatchFailed {
        dir: String,
        #[source]
        source: notify::Error,
    },
    #[error("policy.registry: {0}")]
    PluginRegistryFailed(String),
    #[error("preparing the node")]
    NodeFailed(#[source] RegistrationError),
    #[error("starting the kubelet API")]
    KubeletApiFailed(#[source] crate::kubelet_api::KubeletApiError),
    #[error("listening on {address} ({field})")]
    ListenFailed {
        address: std::net::SocketAddr,
        field: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "serving node {node} ended by itself ({reason}); exiting so that the process is restarted"
    )]
    ServingEnded { node: String, reason: TurnEnd },
    #[error("{task} ended by itself ({}); exiting so that the process is restarted", how.as_str())]
    LoopEnded { task: ProcessLoop, how: Failure },
}
