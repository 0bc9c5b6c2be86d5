//! The whole orca process: provider, policy, node controller and pod controller, wired once.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{Config, ProviderKind};
use crate::node::{NodeController, RegistrationError};
use crate::pods::{self, PodControllerDeps};
use crate::policy::{NativePlanner, Planner};
use crate::provider::Provider;
use crate::provider::simulated::SimulatedProvider;

/// Why orca could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("starting the simulated provider")]
    SimulatedProviderFailed(#[source] crate::provider::simulated::JournalError),
    #[error("preparing the node")]
    NodeFailed(#[source] RegistrationError),
}

/// A configured orca, ready to run.
pub struct Orca {
    config: Config,
    client: kube::Client,
    provider: Arc<dyn Provider>,
    planner: Arc<dyn Planner>,
}

impl Orca {
    /// # Errors
    /// [`StartError`] naming the part that could not be built.
    pub fn new(config: Config, client: kube::Client) -> Result<Orca, StartError> {
        let provider: Arc<dyn Provider> = match config.provider.kind {
            ProviderKind::Simulated => Arc::new(
                SimulatedProvider::new(config.provider.simulated.clone())
                    .map_err(StartError::SimulatedProviderFailed)?,
            ),
        };
        let planner = Arc::new(NativePlanner::new(
            &config.node.name,
            &config.policy.default_instance_type,
            config.policy.default_market,
        ));
        Ok(Orca {
            config,
            client,
            provider,
            planner,
        })
    }

    /// Runs until `shutdown` is cancelled, then waits up to the shutdown grace period for the
    /// controllers to finish their current steps. Pods, instances, the Node and its Lease stay:
    /// the next start adopts them.
    ///
    /// # Errors
    /// [`StartError::NodeFailed`] for a bad node skeleton.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), StartError> {
        let node = NodeController::new(
            self.client.clone(),
            self.config.node.clone(),
            self.provider.clone(),
        )
        .map_err(StartError::NodeFailed)?;
        let node_task = tokio::spawn(node.run(shutdown.clone()));
        let pods_task = tokio::spawn(pods::run(
            PodControllerDeps {
                client: self.client.clone(),
                node_name: self.config.node.name.clone(),
                provider: self.provider.clone(),
                planner: self.planner.clone(),
                config: self.config.pods.clone(),
            },
            shutdown.clone(),
        ));
        shutdown.cancelled().await;
        let grace = self.config.pods.shutdown_grace_period.get();
        let drained = tokio::time::timeout(grace, async {
            let _ = node_task.await;
            let _ = pods_task.await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                ?grace,
                "shutdown grace period elapsed with work in flight; exiting anyway"
            );
        }
        Ok(())
    }
}

/// Cancels the returned token on the first SIGTERM or SIGINT.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; shutting down"),
            () = terminate => tracing::info!("SIGTERM received; shutting down"),
        }
        cancel.cancel();
    });
    token
}
