//! Serving a node in turns, while this replica holds its Lease (`replicas.shareNodes`): the
//! Lease is looked at every [`LOOK_EVERY`]; a hold starts a turn of
//! [`NodeRuntime::serve`], a hold lost stops it, and a turn that ended by itself releases
//! the Lease so another replica takes the node at once. The Lease mechanics (the lock, the
//! hold, the tenure) are `replicas`'; this file is what the process does with them.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::node::{NodeRuntime, SharedParts, report_end};
use super::turn::{self, ServingTask, TurnEnd};
use crate::pods::NodePods;
use crate::replicas::{BootInstant, NodeSharing, Tenure, TenureGrant};
use crate::support::errors::error_chain;

/// How often a replica looks at the Leases it waits for or serves under.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// Serves `node` whenever this replica holds its Lease, until `shutdown`; then releases the
/// Lease once serving has stopped.
pub async fn share(
    sharing: Arc<NodeSharing>,
    node: Arc<NodeRuntime>,
    pods: Arc<NodePods>,
    shared: SharedParts,
    shutdown: CancellationToken,
) {
    let name = node.name().to_owned();
    shared.health.awaiting_lease(&name);
    if !sharing.listed(&shutdown).await {
        return;
    }
    let mut lease = sharing.lock(&name);
    let grant = TenureGrant::new();
    let mut serving: Option<Serving> = None;
    let mut failing = false;
    // After a turn failed: when this replica may take the node again.
    let mut away_until: Option<BootInstant> = None;
    loop {
        if away_until.is_some_and(|until| BootInstant::now() < until) {
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(LOOK_EVERY) => continue,
            }
        }
        let seen = sharing.seen(&lease);
        match lease.lock.look(seen.as_deref()).await {
            Ok(_) => failing = false,
            Err(error) => {
                // Every look retries; one warning per run of failures.
                if !failing {
                    tracing::warn!(lease = %lease.name, error = %error_chain(&error), "writing the node Lease failed; retrying");
                }
                failing = true;
            }
        }
        grant.extend_to(lease.lock.hold().serving_until());
        let held = lease.lock.hold().held(BootInstant::now());
        match (&serving, held) {
            (None, true) => {
                serving = start_serving(&sharing, &node, &pods, &shared, grant.tenure());
            }
            (Some(_), false) => {
                if let Some(turn) = serving.take() {
                    let end = hold_end(turn.stop().await, lease.lock.hold().serving_until());
                    report_end(&shared.serving_metrics, &name, end);
                    if matches!(end, TurnEnd::Failed { .. }) {
                        away_until = sharing.give_up(&mut lease.lock, &name).await;
                    }
                }
            }
            _ => {}
        }
        if serving.is_none() && lease.lock.hold().held_by_another(BootInstant::now()) {
            // Readiness need not wait for a node another live replica serves.
            shared.health.lease_settled(&name);
        }
        let ended = tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(LOOK_EVERY) => None,
            joined = turn_task(&mut serving) => Some(joined),
        };
        if let Some(joined) = ended {
            // The turn ended by itself: a task of it failed, or its hold ran out.
            serving = None;
            let end = turn::end_of(ServingTask::Turn, joined.map(Ok), false);
            report_end(&shared.serving_metrics, &name, end);
            if matches!(end, TurnEnd::Failed { .. }) {
                away_until = sharing.give_up(&mut lease.lock, &name).await;
            }
        }
    }
    if let Some(turn) = serving.take() {
        turn.stop().await;
    }
    grant.extend_to(None);
    if let Err(error) = lease.lock.release().await {
        tracing::warn!(lease = %lease.name, error = %error_chain(&error), "releasing the node Lease failed; it expires by itself");
    }
}

/// Why a turn stopped for a hold that ended: its own failure or lapse first; else a hold
/// that ran out (`serving_until` still set), or one ended by a write refused or a Lease
/// taken.
fn hold_end(end: TurnEnd, serving_until: Option<BootInstant>) -> TurnEnd {
    match (end, serving_until) {
        (TurnEnd::Failed { .. } | TurnEnd::Lapsed, _) => end,
        (_, Some(_)) => TurnEnd::Lapsed,
        (_, None) => TurnEnd::Lost,
    }
}

/// One turn of serving `node`, with a fresh provider: what an earlier turn remembered may be
/// stale now. `None` when the node cannot be served (the next look tries again).
fn start_serving(
    sharing: &NodeSharing,
    node: &Arc<NodeRuntime>,
    pods: &Arc<NodePods>,
    shared: &SharedParts,
    tenure: Tenure,
) -> Option<Serving> {
    let provider = match (node.new_provider)() {
        Ok(provider) => provider,
        Err(error) => {
            tracing::error!(node = node.name(), error = %error_chain(&error), "cannot serve the node; retrying");
            return None;
        }
    };
    let controller = match node.node_controller(&provider, shared) {
        Ok(controller) => controller,
        Err(error) => {
            tracing::error!(node = node.name(), error = %error_chain(&error), "cannot serve the node; retrying");
            return None;
        }
    };
    tracing::info!(node = node.name(), identity = %sharing.identity(), "holding the node's Lease; serving it");
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (node, pods, shared, stop) = (node.clone(), pods.clone(), shared.clone(), stop.clone());
        async move {
            node.serve(provider, controller, pods, &shared, stop, tenure)
                .await
        }
    });
    Some(Serving { stop, task })
}

/// A node served now: stopping it ends its Node heartbeat and pod controller.
struct Serving {
    stop: CancellationToken,
    task: JoinHandle<TurnEnd>,
}

impl Serving {
    /// Stops the turn; how it ended (it may have failed or lapsed before it was asked).
    async fn stop(self) -> TurnEnd {
        self.stop.cancel();
        turn::end_of(ServingTask::Turn, self.task.await.map(Ok), true)
    }
}

/// Until the turn's task ends (forever when no turn runs); what it answered.
async fn turn_task(serving: &mut Option<Serving>) -> Result<TurnEnd, tokio::task::JoinError> {
    match serving {
        Some(turn) => (&mut turn.task).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::turn::Failure;

    #[test]
    fn a_turn_stopped_for_a_hold_that_ended_says_how_the_hold_ended() {
        let failed = TurnEnd::Failed {
            task: ServingTask::PodController,
            how: Failure::Panicked,
        };
        let until = Some(BootInstant::now());
        let cases = [
            (TurnEnd::Stopped, until, TurnEnd::Lapsed),
            (TurnEnd::Stopped, None, TurnEnd::Lost),
            (TurnEnd::Lapsed, None, TurnEnd::Lapsed),
            (failed, until, failed),
            (failed, None, failed),
        ];
        for (end, serving_until, expected) in cases {
            assert_eq!(
                hold_end(end, serving_until),
                expected,
                "{end:?} until={serving_until:?}"
            );
        }
    }
}
