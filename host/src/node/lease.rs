//! The node's heartbeat: a Lease in `kube-node-lease`, owned by the Node so it is garbage
//! collected with it, renewed on an interval well inside its duration.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};
use std::sync::Arc;

use crate::cluster::apiserver::{ServerSchema, Written};
use crate::metrics::LeaseMetrics;

pub const LEASE_NAMESPACE: &str = "kube-node-lease";
pub const FIELD_MANAGER: &str = "orca";

/// Renews one node's Lease.
pub struct LeaseKeeper {
    api: Api<Lease>,
    node_name: String,
    duration_seconds: i32,
    metrics: Arc<LeaseMetrics>,
    schema: Arc<ServerSchema>,
}

impl LeaseKeeper {
    pub fn new(
        client: kube::Client,
        node_name: &str,
        duration: std::time::Duration,
        metrics: Arc<LeaseMetrics>,
        schema: Arc<ServerSchema>,
    ) -> LeaseKeeper {
        LeaseKeeper {
            api: Api::namespaced(client, LEASE_NAMESPACE),
            node_name: node_name.to_owned(),
            duration_seconds: i32::try_from(duration.as_secs()).unwrap_or(i32::MAX),
            metrics,
            schema,
        }
    }

    /// Sets `renewTime` to now. Server-side apply creates the Lease when it is missing (first
    /// start, or after the Node and with it the Lease were deleted) and needs no read first.
    ///
    /// # Errors
    /// The apiserver's error; the caller retries on the next tick.
    pub async fn renew(&self, node_uid: &str) -> Result<(), kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.node_name.clone()),
                namespace: Some(LEASE_NAMESPACE.to_owned()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".to_owned(),
                    kind: "Node".to_owned(),
                    name: self.node_name.clone(),
                    uid: node_uid.to_owned(),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.node_name.clone()),
                lease_duration_seconds: Some(self.duration_seconds),
                renew_time: Some(MicroTime(Timestamp::now())),
                ..LeaseSpec::default()
            }),
        };
        let (api, name) = (&self.api, self.node_name.as_str());
        let renewed = match serde_json::to_value(&lease) {
            Ok(lease) => {
                self.schema
                    .write(Written::Lease, lease, |lease| async move {
                        api.patch(
                            name,
                            &PatchParams::apply(FIELD_MANAGER).force(),
                            &Patch::Apply(&lease),
                        )
                        .await
                    })
                    .await
            }
            Err(error) => Err(kube::Error::SerdeError(error)),
        };
        self.metrics.record(renewed.is_ok());
        renewed.map(|_| ())
    }
}
