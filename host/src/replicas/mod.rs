//! Replicas sharing the declared nodes (`replicas.shareNodes`): each node has a coordination
//! Lease in orca's namespace (`orca-node-<node>`), taken and renewed by [`LeaseLock`] with
//! writes guarded by `resourceVersion`. A replica serves a node only while its own last write
//! of the Lease names it and is not about to expire on the boot clock
//! ([`Hold::serving_until`]); a replica that stops renewing (killed, cut off, stopped, its
//! renewals hung) stops acting on its own before the Lease expires ([`tenure`]), and the
//! others take the node over once the Lease has not changed for its duration on their own
//! clocks. Taking a node over is what a restart does: register (the Node's address becomes
//! this replica's), list the node's instances, adopt them, then reconcile; instance launches
//! are idempotent by their tokens, so a launch the previous holder had in flight is never
//! repeated.
//!
//! Each replica keeps warm what takeover needs: plugins compiled, catalogue loaded, the EC2
//! client connected, one watch on the Leases, and each declared node's pod watch (listed and
//! kept current while another replica serves the node). At shutdown a replica stops serving, then
//! releases its Leases, so another takes its nodes at once instead of after expiry.
//!
//! A turn of serving that ends by itself (a panic in the pod controller or the status sync)
//! is logged, counted (`orca_node_serving_ended_total`), and ends the hold: the Lease is
//! released, so another replica takes the node at once, and this one leaves it alone for a
//! Lease duration before it may take it again.

mod boot_clock;
mod hold;
mod lease_lock;
pub mod tenure;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::ReplicasConfig;
use crate::errors::error_chain;
use crate::node_runtime::{NodeRuntime, SharedParts, report_end};
use crate::pods::NodePods;
use crate::turn::{self, ServingTask, TurnEnd};

pub use boot_clock::BootInstant;
pub use hold::{Hold, Step};
pub use lease_lock::{LeaseError, LeaseLock};
pub use tenure::{STOP_BEFORE_EXPIRY, Tenure, TenureError, TenureGrant};

/// How often a replica looks at the Leases it waits for or serves under.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// This replica's part in sharing: its identity, the Lease settings, and its view of the
/// Leases (one watch for all nodes).
pub struct NodeSharing {
    client: kube::Client,
    namespace: String,
    identity: String,
    duration: Duration,
    renew_before: Duration,
    leases: Store<Lease>,
    /// Turns true once the watch has listed the Leases.
    listed: watch::Receiver<bool>,
}

impl NodeSharing {
    /// Starts the watch on the Leases in `config`'s namespace; it runs until `shutdown`, in the
    /// task returned.
    pub fn start(
        client: kube::Client,
        config: &ReplicasConfig,
        shutdown: CancellationToken,
    ) -> (NodeSharing, JoinHandle<()>) {
        let namespace = config.namespace();
        let identity = config.identity();
        tracing::info!(%identity, %namespace, "sharing the nodes with other replicas through Leases");
        let api: Api<Lease> = Api::namespaced(client.clone(), &namespace);
        let (store, writer) = reflector::store();
        let (listed_tx, listed) = watch::channel(false);
        let watch = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(move |event| {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        listed_tx.send_replace(true);
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(error = %error_chain(&error), "watching the node Leases failed; retrying");
                    }
                }
                std::future::ready(())
            });
        let task = tokio::spawn(async move {
            tokio::select! {
                () = watch => {}
                () = shutdown.cancelled() => {}
            }
        });
        let sharing = NodeSharing {
            client,
            namespace,
            identity,
            duration: config.lease_duration.get(),
            renew_before: config.renew_before.get(),
            leases: store,
            listed,
        };
        (sharing, task)
    }

    /// Serves `node` whenever this replica holds its Lease, until `shutdown`; then releases
    /// the Lease once serving has stopped.
    pub async fn share(
        self: Arc<Self>,
        node: Arc<NodeRuntime>,
        pods: Arc<NodePods>,
        shared: SharedParts,
        shutdown: CancellationToken,
    ) {
        let lease = ReplicasConfig::lease_name(node.name());
        let name = node.name().to_owned();
        shared.health.awaiting_lease(&name);
        // Deciding before the watch has listed would take every Lease for missing.
        let mut listed = self.listed.clone();
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = listed.wait_for(|listed| *listed) => {}
        }
        let mut lock = LeaseLock::new(
            Api::namespaced(self.client.clone(), &self.namespace),
            lease.clone(),
            self.identity.clone(),
            self.duration,
            self.renew_before,
        );
        let reference = ObjectRef::new(&lease).within(&self.namespace);
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
            let seen = self.leases.get(&reference);
            match lock.look(seen.as_deref()).await {
                Ok(_) => failing = false,
                Err(error) => {
                    // Every look retries; one warning per run of failures.
                    if !failing {
                        tracing::warn!(%lease, error = %error_chain(&error), "writing the node Lease failed; retrying");
                    }
                    failing = true;
                }
            }
            grant.extend_to(lock.hold().serving_until());
            let held = lock.hold().held(BootInstant::now());
            match (&serving, held) {
                (None, true) => {
                    serving = self.start_serving(&node, &pods, &shared, grant.tenure());
                }
                (Some(_), false) => {
                    if let Some(turn) = serving.take() {
                        let end = turn.stop().await;
                        // A hold that ran out, or one ended by a write refused or a Lease
                        // taken.
                        let end = match (end, lock.hold().serving_until()) {
                            (TurnEnd::Failed { .. } | TurnEnd::Lapsed, _) => end,
                            (_, Some(_)) => TurnEnd::Lapsed,
                            (_, None) => TurnEnd::Lost,
                        };
                        report_end(&shared.serving_metrics, &name, end);
                        if matches!(end, TurnEnd::Failed { .. }) {
                            away_until = self.give_up(&mut lock, &name).await;
                        }
                    }
                }
                _ => {}
            }
            if serving.is_none() && lock.hold().held_by_another(BootInstant::now()) {
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
                    away_until = self.give_up(&mut lock, &name).await;
                }
            }
        }
        if let Some(turn) = serving.take() {
            turn.stop().await;
        }
        grant.extend_to(None);
        if let Err(error) = lock.release().await {
            tracing::warn!(%lease, error = %error_chain(&error), "releasing the node Lease failed; it expires by itself");
        }
    }

    /// After a turn of serving `node` failed: releases its Lease, so another replica takes the
    /// node at once, and answers until when this replica leaves the node alone (a Lease
    /// duration: a failure that comes back each turn is not retried in a tight loop, and
    /// another replica gets the node first).
    async fn give_up(&self, lock: &mut LeaseLock, node: &str) -> Option<BootInstant> {
        match lock.release().await {
            Ok(()) => {
                tracing::warn!(%node, identity = %self.identity, pause = ?self.duration, "released the node's Lease for another replica to take; this one leaves the node alone for a Lease duration")
            }
            Err(error) => {
                tracing::warn!(%node, error = %error_chain(&error), "releasing the node's Lease after its serving failed did not work; it expires by itself")
            }
        }
        Some(BootInstant::now().saturating_add(self.duration))
    }

    /// One turn of serving `node`, with a fresh provider: what an earlier turn's remembered
    /// may be stale now. `None` when the node cannot be served (the next look tries again).
    fn start_serving(
        &self,
        node: &Arc<NodeRuntime>,
        pods: &Arc<NodePods>,
        shared: &SharedParts,
        tenure: Tenure,
    ) -> Option<Serving> {
        let parts = (node.new_provider)().and_then(|provider| {
            let controller = node
                .node_controller(&provider, shared)
                .map_err(crate::orca::StartError::NodeFailed)?;
            Ok((provider, controller))
        });
        let (provider, controller) = match parts {
            Ok(parts) => parts,
            Err(error) => {
                tracing::error!(node = node.name(), error = %error_chain(&error), "cannot serve the node; retrying");
                return None;
            }
        };
        tracing::info!(node = node.name(), identity = %self.identity, "holding the node's Lease; serving it");
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (node, pods, shared, stop) =
                (node.clone(), pods.clone(), shared.clone(), stop.clone());
            async move {
                node.serve(provider, controller, pods, &shared, stop, tenure)
                    .await
            }
        });
        Some(Serving { stop, task })
    }
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
