//! The virtual Node: registration, the Lease heartbeat, conditions that follow the provider's
//! health, and re-creation if someone deletes the Node. It knows nothing of pods.

mod conditions;
pub mod daemonsets;
mod lease;
mod object;
pub mod plugin_events;
mod registration;
pub mod selector;

pub use object::node_address;

use crate::metrics::LeaseMetrics;
use crate::process::health::Health;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

pub use conditions::{ProviderHealth, ReadyTracker};
pub use lease::{LEASE_NAMESPACE, LeaseKeeper};
pub use registration::{Registrar, RegistrationError};

use crate::cluster::apiserver::ServerSchema;
use crate::config::NodeConfig;
use crate::provider::Provider;
use crate::support::Backoff;
use crate::support::errors::error_chain;

/// The Node as orca registers it from `config`: its skeleton (when one is set and reads) under
/// the config's labels, annotations and taints. What is decided on a node's labels and taints
/// before it registers (which DaemonSets land on it) reads this.
pub fn as_registered(config: &NodeConfig) -> Node {
    let skeleton =
        (config.skeleton.as_deref()).and_then(|path| registration::load_skeleton(path).ok());
    object::desired_node(config, skeleton)
}

/// The waits between tries to register the Node.
const REGISTRATION_BACKOFF: Backoff =
    Backoff::new(Duration::from_millis(200), Duration::from_secs(10));

/// Keeps orca's Node registered, leased and truthful about the provider's health.
pub struct NodeController {
    client: kube::Client,
    registrar: Registrar,
    lease: LeaseKeeper,
    provider: Arc<dyn Provider>,
    config: NodeConfig,
    health: Arc<Health>,
    schema: Arc<ServerSchema>,
}

/// What a node controller writes with, besides its client and config.
pub struct NodeDeps {
    pub provider: Arc<dyn Provider>,
    pub lease_metrics: Arc<LeaseMetrics>,
    pub health: Arc<Health>,
    /// What the apiserver knows: what the Node and Lease writes leave out.
    pub schema: Arc<ServerSchema>,
}

impl NodeController {
    /// # Errors
    /// [`RegistrationError`] for a bad node skeleton file.
    pub fn new(
        client: kube::Client,
        config: NodeConfig,
        deps: NodeDeps,
    ) -> Result<Self, RegistrationError> {
        let address = node_address(&config);
        Ok(NodeController {
            registrar: Registrar::new(
                client.clone(),
                config.clone(),
                address,
                deps.schema.clone(),
            )?,
            lease: LeaseKeeper::new(
                client.clone(),
                &config.name,
                config.lease_duration.get(),
                deps.lease_metrics,
                deps.schema.clone(),
            ),
            client,
            provider: deps.provider,
            config,
            health: deps.health,
            schema: deps.schema,
        })
    }

    /// Runs until `shutdown` is cancelled. Registration is retried until it succeeds; every
    /// later apiserver error is logged and retried on the next tick, so an apiserver restart
    /// never ends the loop. The Node and its Lease are left in place on shutdown: a restarted
    /// orca adopts them (and the pods).
    pub async fn run(self, shutdown: CancellationToken) {
        let mut ready = ReadyTracker::new(self.ping().await, Timestamp::now());
        let Some(mut node_uid) = self.register_until_done(&ready, &shutdown).await else {
            return;
        };
        tracing::info!(node = self.registrar.name(), "node registered");
        self.health.node_registered(self.registrar.name());

        let mut deletions = std::pin::pin!(self.node_deletions());
        let mut lease_tick = interval(self.config.lease_renew_interval.get());
        let mut ping_tick = interval(self.config.ping_interval.get());
        let mut status_tick = interval(self.config.status_update_interval.get());
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = lease_tick.tick() => {
                    if let Err(error) = self.lease.renew(&node_uid).await {
                        tracing::warn!(error = %error, "lease renewal failed; retrying next interval");
                    }
                }
                _ = ping_tick.tick() => {
                    let health = self.ping().await;
                    if ready.observe(health, Timestamp::now()) {
                        tracing::info!(health = ?ready.health(), "provider health changed");
                        node_uid = self.write_status_or_reregister(&ready, node_uid, &shutdown).await;
                    }
                }
                _ = status_tick.tick() => {
                    node_uid = self.write_status_or_reregister(&ready, node_uid, &shutdown).await;
                }
                Some(()) = deletions.next() => {
                    tracing::warn!(node = self.registrar.name(), "node was deleted; registering it again");
                    match self.register_until_done(&ready, &shutdown).await {
                        Some(uid) => node_uid = uid,
                        None => break,
                    }
                }
            }
        }
        tracing::info!("node controller stopped; node and lease left for the next start");
    }

    async fn ping(&self) -> ProviderHealth {
        match self.provider.ping().await {
            Ok(()) => ProviderHealth::Ready,
            Err(error) => ProviderHealth::NotReady {
                message: error.to_string(),
            },
        }
    }

    async fn register(&self, ready: &ReadyTracker) -> Result<String, RegistrationError> {
        let uid = self.registrar.ensure_node().await?;
        self.registrar.write_status(ready).await?;
        if let Err(error) = self.lease.renew(&uid).await {
            tracing::warn!(error = %error, "first lease renewal failed; retrying next interval");
        }
        Ok(uid)
    }

    /// Registers, retrying with backoff; `None` when shutdown came first.
    async fn register_until_done(
        &self,
        ready: &ReadyTracker,
        shutdown: &CancellationToken,
    ) -> Option<String> {
        let mut delays = REGISTRATION_BACKOFF.delays();
        loop {
            let delay = match self.register(ready).await {
                Ok(uid) => return Some(uid),
                Err(error) => {
                    let delay = delays.next_delay();
                    tracing::warn!(error = %error_chain(&error), retry_in = ?delay, "node registration failed");
                    delay
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn write_status_or_reregister(
        &self,
        ready: &ReadyTracker,
        uid: String,
        shutdown: &CancellationToken,
    ) -> String {
        match self.registrar.write_status(ready).await {
            Ok(()) => uid,
            Err(RegistrationError::StatusWriteFailed {
                source: kube::Error::Api(status),
                ..
            }) if status.code == 404 => self
                .register_until_done(ready, shutdown)
                .await
                .unwrap_or(uid),
            Err(error) => {
                tracing::warn!(error = %error_chain(&error), "node status update failed; retrying next interval");
                uid
            }
        }
    }

    /// Yields whenever our Node disappears: a watch Delete event, or a re-list (after a watch
    /// error or apiserver restart) that no longer contains it. A watch error or a re-list also
    /// has the apiserver's release read again: a restart may have been an upgrade.
    fn node_deletions(&self) -> impl futures::Stream<Item = ()> + use<> {
        let api: Api<Node> = Api::all(self.client.clone());
        let config =
            watcher::Config::default().fields(&format!("metadata.name={}", self.config.name));
        let mut seen_in_relist = true;
        let mut listed_before = false;
        let schema = self.schema.clone();
        watcher(api, config)
            .default_backoff()
            .filter_map(move |event| {
                let deleted = match event {
                    Ok(watcher::Event::Delete(_)) => true,
                    Ok(watcher::Event::Init) => {
                        if std::mem::replace(&mut listed_before, true) {
                            schema.relearn_soon();
                        }
                        seen_in_relist = false;
                        false
                    }
                    Ok(watcher::Event::InitApply(_)) => {
                        seen_in_relist = true;
                        false
                    }
                    Ok(watcher::Event::InitDone) => !seen_in_relist,
                    Ok(watcher::Event::Apply(_)) => false,
                    Err(error) => {
                        tracing::debug!(%error, "node watch error; the watcher retries");
                        // The apiserver went away or answered oddly: it may come back another
                        // release.
                        schema.relearn_soon();
                        false
                    }
                };
                std::future::ready(deleted.then_some(()))
            })
    }
}

fn interval(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}
