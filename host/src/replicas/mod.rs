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
use crate::support::errors::error_chain;

pub use boot_clock::BootInstant;
pub use hold::{Hold, Step};
pub use lease_lock::{LeaseError, LeaseLock};
pub use tenure::{STOP_BEFORE_EXPIRY, Tenure, TenureError, TenureGrant};

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

    /// Waits until the watch has listed the Leases (deciding before would take every
    /// Lease for missing); `false` when `shutdown` came first.
    pub async fn listed(&self, shutdown: &CancellationToken) -> bool {
        let mut listed = self.listed.clone();
        tokio::select! {
            () = shutdown.cancelled() => false,
            _ = listed.wait_for(|listed| *listed) => true,
        }
    }

    /// The lock on `node`'s Lease, as this replica takes and renews it.
    pub fn lock(&self, node: &str) -> NodeLease {
        let lease = ReplicasConfig::lease_name(node);
        NodeLease {
            reference: ObjectRef::new(&lease).within(&self.namespace),
            lock: LeaseLock::new(
                Api::namespaced(self.client.clone(), &self.namespace),
                lease.clone(),
                self.identity.clone(),
                self.duration,
                self.renew_before,
            ),
            name: lease,
        }
    }

    /// The Lease as the watch last saw it.
    pub fn seen(&self, lease: &NodeLease) -> Option<Arc<Lease>> {
        self.leases.get(&lease.reference)
    }

    /// This replica's identity, as its Lease writes name it.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// After a turn of serving `node` failed: releases its Lease, so another replica takes the
    /// node at once, and answers until when this replica leaves the node alone (a Lease
    /// duration: a failure that comes back each turn is not retried in a tight loop, and
    /// another replica gets the node first).
    pub async fn give_up(&self, lock: &mut LeaseLock, node: &str) -> Option<BootInstant> {
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
}

/// One node's Lease: its name, where the watch keeps it, and this replica's lock on it.
pub struct NodeLease {
    pub name: String,
    pub reference: ObjectRef<Lease>,
    pub lock: LeaseLock,
}
