//! The whole orca process: the shared parts (EC2 API, catalogue, policy, kubelet API, metrics,
//! interruption queue) wired once ([`parts`]), then run ([`run`]): a node controller and pod
//! controller per declared node, served alone or in turns ([`node`], [`sharing`]), and every
//! loop owned by one [`tasks::ProcessTasks`], which joins them at shutdown and ends the process
//! when one ends by itself. Beside them, what the process answers for as a whole: readiness
//! ([`health`]), the nodes served now ([`served_nodes`]), the command line ([`cli`]) and its
//! logging ([`logging`]).

pub mod catalogue_refresh;
pub mod cli;
mod error;
pub mod health;
pub mod logging;
mod loops;
pub mod node;
mod parts;
mod plugin_pulls;
pub mod pod_usage;
mod run;
pub mod served_nodes;
mod sharing;
mod signals;
pub mod tasks;
pub mod turn;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use error::StartError;
pub use loops::ProcessLoop;
pub use signals::shutdown_on_signals;

use crate::interruption::NoticeQueue;
use crate::provider::aws::api::Ec2Api;
use parts::{Interruptions, Parts};

/// A configured orca, ready to run.
pub struct Orca {
    parts: Parts,
}

impl Orca {
    /// # Errors
    /// [`StartError`] naming the part that could not be built.
    pub async fn new(
        config: crate::config::Config,
        client: kube::Client,
    ) -> Result<Orca, StartError> {
        let parts = Parts::build(config, client, None).await?;
        Ok(Orca { parts })
    }

    /// An orca whose aws provider talks to `ec2` instead of the SDK client (a model of EC2 in
    /// tests); everything else is as [`Orca::new`] builds it.
    ///
    /// # Errors
    /// As [`Orca::new`].
    pub async fn with_ec2(
        config: crate::config::Config,
        client: kube::Client,
        ec2: Arc<dyn Ec2Api>,
    ) -> Result<Orca, StartError> {
        let parts = Parts::build(config, client, Some(ec2)).await?;
        Ok(Orca { parts })
    }

    /// Reads EC2's advance warnings from `queue` instead of the configured SQS queue (a model
    /// of the queue in tests), taking those from `account` (and `provider.region`) as this
    /// orca's.
    pub fn with_interruption_queue(mut self, queue: Arc<dyn NoticeQueue>, account: &str) -> Orca {
        self.parts.interruptions = Some(Interruptions {
            queue,
            account: account.to_owned(),
        });
        self
    }

    /// Runs until `shutdown` is cancelled, then waits up to the shutdown grace period for
    /// every loop to finish. Pods, instances, the Nodes and their Leases stay: the next start
    /// adopts them.
    ///
    /// # Errors
    /// [`StartError`] for a node that cannot be served, a listener that cannot bind, or a
    /// loop that ended by itself (the process should be restarted).
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), StartError> {
        run::run(self.parts, shutdown).await
    }
}
