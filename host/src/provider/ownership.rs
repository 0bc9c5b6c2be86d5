//! The tags orca itself relies on to find a pod's instance again. The host sets them after the
//! tag plugins ran, so no plugin can drop or change them and orphan an instance.
//!
//! # Which cluster an instance belongs to
//! `orca.research/cluster-id` carries the UID of the cluster's `kube-system` namespace: made by
//! the apiserver when the cluster was created, never reused, and the same for every orca in
//! the cluster. Every listing filters on it, so two clusters in one account and region never
//! see (or collect) each other's instances, whatever their `node.name` and
//! `node.clusterName`. `orca.research/cluster` keeps the configured name, for people.

use crate::provider::PodKey;
use crate::support::Backoff;

pub const TAG_MANAGED_BY: &str = "ManagedBy";
pub const MANAGED_BY_VALUE: &str = "ORCA";
pub const TAG_NODE: &str = "orca.research/node";
pub const TAG_CLUSTER: &str = "orca.research/cluster";
/// The UID of the cluster's `kube-system` namespace (see the module's documentation).
pub const TAG_CLUSTER_ID: &str = "orca.research/cluster-id";
pub const TAG_POD_NAMESPACE: &str = "orca.research/pod-namespace";
pub const TAG_POD_NAME: &str = "orca.research/pod-name";
pub const TAG_POD_UID: &str = "orca.research/pod-uid";

/// The ownership tags of one pod's instance.
pub fn ownership_tags(node: &str, cluster: &str, pod: &PodKey) -> [(&'static str, String); 6] {
    [
        (TAG_MANAGED_BY, MANAGED_BY_VALUE.to_owned()),
        (TAG_NODE, node.to_owned()),
        (TAG_CLUSTER, cluster.to_owned()),
        (TAG_POD_NAMESPACE, pod.namespace.clone()),
        (TAG_POD_NAME, pod.name.clone()),
        (TAG_POD_UID, pod.uid.clone()),
    ]
}

/// The namespace whose UID names the cluster: every cluster has it from its first moment.
pub const CLUSTER_ID_NAMESPACE: &str = "kube-system";

/// Why the cluster's identity could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterIdError {
    #[error(
        "reading namespace {CLUSTER_ID_NAMESPACE}, whose UID tells this cluster's instances from \
         other clusters' (orca's ClusterRole needs get on namespaces, resourceNames \
         [{CLUSTER_ID_NAMESPACE}])"
    )]
    ReadFailed(#[source] kube::Error),
    #[error("namespace {CLUSTER_ID_NAMESPACE} has no UID")]
    NoUid,
}

/// How long startup keeps asking an apiserver that does not answer (restarting, overloaded)
/// for the cluster's identity before it gives up.
const READ_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// The pauses between those reads.
const READ_BACKOFF: Backoff = Backoff::new(
    std::time::Duration::from_millis(200),
    std::time::Duration::from_secs(5),
);

/// The cluster's identity: the UID of its `kube-system` namespace. An apiserver that does not
/// answer, or answers 429 or 5xx, is asked again for up to a minute; a refusal (403) is final.
///
/// # Errors
/// [`ClusterIdError`] when the namespace cannot be read or has no UID.
pub async fn read_cluster_id(client: &kube::Client) -> Result<String, ClusterIdError> {
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let started = tokio::time::Instant::now();
    let mut pauses = READ_BACKOFF.delays();
    loop {
        match api.get(CLUSTER_ID_NAMESPACE).await {
            Ok(namespace) => return namespace.metadata.uid.ok_or(ClusterIdError::NoUid),
            Err(error) if is_passing(&error) && started.elapsed() < READ_PATIENCE => {
                tracing::warn!(error = %crate::support::errors::error_chain(&error), "reading the cluster's identity failed; retrying");
                tokio::time::sleep(pauses.next_delay()).await;
            }
            Err(error) => return Err(ClusterIdError::ReadFailed(error)),
        }
    }
}

/// An error that asking again may cure: no answer, throttling, a server error.
fn is_passing(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::Auth(_) | kube::Error::Discovery(_) => false,
        _ => true,
    }
}

/// Names the example configs ship with: harmless for telling clusters apart (the cluster's
/// UID does that), but they say nothing to a person reading EC2's tags or the bill.
pub const PLACEHOLDER_NAMES: [&str; 3] = ["orca-aws-node", "kubernetes", "my-cluster"];
