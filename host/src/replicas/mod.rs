//! Replicas sharing the declared nodes (`replicas.shareNodes`): each node has a coordination
//! Lease in orca's namespace (`orca-node-<node>`), acquired and renewed through
//! `kube-lease-manager`. A replica serves a node only while the Lease, as the apiserver last
//! showed it, names this replica and is not about to expire ([`held::holds`]); a replica that
//! stops renewing (killed, cut off) stops serving on its own before the Lease expires, and
//! the others take the node over once it has. Taking a node over is what a restart does:
//! register (the Node's address becomes this replica's), list the node's instances, adopt
//! them, then reconcile; instance launches are idempotent by their tokens, so a launch the
//! previous holder had in flight is never repeated.
//!
//! Each replica keeps warm what takeover needs: plugins compiled, catalogue loaded, the EC2
//! client connected, and one watch on the Leases. At shutdown a replica stops serving, then
//! releases its Leases, so another takes its nodes at once instead of after expiry.

mod held;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseParams};
use tokio_util::sync::CancellationToken;

use crate::config::ReplicasConfig;
use crate::errors::error_chain;
use crate::node_runtime::{NodeRuntime, SharedParts};

pub use held::{STOP_BEFORE_EXPIRY, holds};

/// How often a replica looks at the Leases it waits for or serves under.
const LOOK_EVERY: Duration = Duration::from_millis(200);
/// Pause after a failed Lease call before the next.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Who holds a node's Lease, as far as this replica can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Us,
    /// Another replica, renewing in time.
    Another,
    /// Nobody, or a replica that stopped renewing: the Lease is there to take.
    Nobody,
}

/// This replica's part in sharing: its identity, the Lease settings, and its view of the
/// Leases (one watch for all nodes).
pub struct NodeSharing {
    client: kube::Client,
    namespace: String,
    identity: String,
    duration: Duration,
    renew_before: Duration,
    leases: Store<Lease>,
}

impl NodeSharing {
    /// Starts the watch on the Leases in `config`'s namespace; it runs until `shutdown`.
    pub fn start(
        client: kube::Client,
        config: &ReplicasConfig,
        shutdown: CancellationToken,
    ) -> NodeSharing {
        let namespace = config.namespace();
        let identity = config.identity();
        tracing::info!(%identity, %namespace, "sharing the nodes with other replicas through Leases");
        let api: Api<Lease> = Api::namespaced(client.clone(), &namespace);
        let (store, writer) = reflector::store();
        let watch = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(|event| async move {
                if let Err(error) = event {
                    tracing::warn!(error = %error_chain(&error), "watching the node Leases failed; retrying");
                }
            });
        tokio::spawn(async move {
            tokio::select! {
                () = watch => {}
                () = shutdown.cancelled() => {}
            }
        });
        NodeSharing {
            client,
            namespace,
            identity,
            duration: config.lease_duration.get(),
            renew_before: config.renew_before.get(),
            leases: store,
        }
    }

    /// Who holds `lease` now, as the watch last showed it.
    fn holder(&self, lease: &str) -> Holder {
        let Some(lease) = self
            .leases
            .get(&ObjectRef::new(lease).within(&self.namespace))
        else {
            return Holder::Nobody;
        };
        let now = jiff::Timestamp::now();
        if holds(&lease, &self.identity, now) {
            return Holder::Us;
        }
        let other = lease
            .spec
            .as_ref()
            .and_then(|spec| spec.holder_identity.clone())
            .filter(|holder| holder != &self.identity);
        match other {
            Some(other) if holds(&lease, &other, now) => Holder::Another,
            _ => Holder::Nobody,
        }
    }

    /// Waits until this replica holds `lease` (or no longer does, for `held` false), or
    /// `shutdown`. While waiting to hold it, `settled` is called once another live replica is
    /// seen holding it: this replica's readiness need not wait for that node.
    async fn until(
        &self,
        lease: &str,
        held: bool,
        shutdown: &CancellationToken,
        settled: &(dyn Fn() + Sync),
    ) {
        loop {
            let holder = self.holder(lease);
            if (holder == Holder::Us) == held {
                return;
            }
            if holder == Holder::Another {
                settled();
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
        }
    }

    /// Serves `node` whenever this replica holds its Lease, until `shutdown`; then releases
    /// the Lease once serving has stopped.
    pub async fn share(
        self: Arc<Self>,
        node: Arc<NodeRuntime>,
        shared: SharedParts,
        shutdown: CancellationToken,
    ) {
        let lease = ReplicasConfig::lease_name(node.name());
        let name = node.name().to_owned();
        let settled = || shared.health.lease_settled(&name);
        shared.health.awaiting_lease(&name);
        let Some(manager) = self.manager(&lease, &shutdown).await else {
            return;
        };
        let manager = Arc::new(manager);
        // Acquires the Lease when it is free or expired, and renews it while held.
        let renewing = tokio::spawn({
            let (manager, lease) = (manager.clone(), lease.clone());
            async move {
                loop {
                    if let Err(error) = manager.changed().await {
                        tracing::warn!(%lease, error = %error_chain(&error), "node Lease call failed; retrying");
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                }
            }
        });
        loop {
            self.until(&lease, true, &shutdown, &settled).await;
            if shutdown.is_cancelled() {
                break;
            }
            // A fresh provider: what an earlier turn's remembered may be stale now.
            let parts = (node.new_provider)().and_then(|provider| {
                let controller = node
                    .node_controller(&provider, &shared)
                    .map_err(crate::orca::StartError::NodeFailed)?;
                Ok((provider, controller))
            });
            let (provider, controller) = match parts {
                Ok(parts) => parts,
                Err(error) => {
                    tracing::error!(node = node.name(), error = %error_chain(&error), "cannot serve the node; retrying");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(RETRY_AFTER) => continue,
                    }
                }
            };
            tracing::info!(node = node.name(), identity = %self.identity, "holding the node's Lease; serving it");
            // Readiness now waits for the node's own steps (registered, pods listed).
            shared.health.serve(&name);
            settled();
            let stop = shutdown.child_token();
            let serving = tokio::spawn({
                let (node, shared, stop) = (node.clone(), shared.clone(), stop.clone());
                async move { node.serve(provider, controller, &shared, stop).await }
            });
            self.until(&lease, false, &shutdown, &|| {}).await;
            stop.cancel();
            let _ = serving.await;
            if shutdown.is_cancelled() {
                break;
            }
            tracing::warn!(node = node.name(), identity = %self.identity, "lost the node's Lease (not renewed in time, or taken); stopped serving it");
        }
        renewing.abort();
        let _ = renewing.await;
        if let Err(error) = manager.release().await {
            tracing::warn!(%lease, error = %error_chain(&error), "releasing the node Lease failed; it expires by itself");
        }
    }

    /// The Lease's manager, creating the Lease if it is missing; retried until `shutdown`.
    async fn manager(&self, lease: &str, shutdown: &CancellationToken) -> Option<LeaseManager> {
        loop {
            let params = LeaseParams::new(
                self.identity.clone(),
                self.duration.as_secs(),
                self.renew_before.as_secs(),
            );
            match LeaseManager::new(
                self.client.clone(),
                lease,
                self.namespace.clone(),
                params,
                LeaseCreateMode::AutoCreate,
            )
            .await
            {
                Ok(manager) => return Some(manager),
                Err(error) => {
                    tracing::warn!(%lease, error = %error_chain(&error), "preparing the node Lease failed; retrying");
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep(RETRY_AFTER) => {}
            }
        }
    }
}
