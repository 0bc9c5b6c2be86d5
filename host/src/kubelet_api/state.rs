//! What every kubelet API handler reads: the state the routes share, and what the gate let
//! through for one request.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::auth::Gate;
use super::target::{Check, Target};
use crate::cluster::apiserver::ServerSchema;
use crate::process::pod_usage::PodUsages;
use crate::process::served_nodes::{FoundPod, ServedNodes};

/// What every handler reads.
pub struct ApiState {
    pub gate: Gate,
    /// The nodes this process serves: one listener answers for all of them.
    pub served: Arc<ServedNodes>,
    /// The node a request about no node's data (`/healthz`, an unknown path) is authorized
    /// on, and every request while no node is served here: the first declared.
    pub first_node: String,
    pub follow_poll_interval: Duration,
    /// The reads of `kubectl logs -f` followers, shared per pod, container and cursor.
    pub log_polls: Arc<super::logs::LogPolls>,
    /// The served pods' usage as last read (`/metrics/resource`, `/stats/summary`).
    pub usages: Arc<PodUsages>,
    /// What orca knows of the apiserver (its release, for what exec says when it cannot be).
    pub schema: Arc<ServerSchema>,
    /// Warnings on pods about requests the node could not serve.
    pub warnings: PodWarnings,
}

/// Warning Events on pods about requests the kubelet API refused (`kubectl exec` through an
/// apiserver that speaks only SPDY to nodes), so `kubectl describe pod` says why. One
/// recorder for them all: the same Warning again on the same pod folds into one Event with a
/// count.
#[derive(Clone)]
pub struct PodWarnings {
    recorder: Recorder,
}

/// How long a handler waits for its Warning to be written before it answers anyway.
const WARNING_TIMEOUT: Duration = Duration::from_secs(5);

impl PodWarnings {
    pub fn new(client: kube::Client) -> PodWarnings {
        PodWarnings {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: "orca".to_owned(),
                    instance: None,
                },
            ),
        }
    }

    /// Writes a Warning `reason` on `pod`; a failure is logged, never the request's.
    pub async fn warn(&self, pod: &Pod, reason: &str, action: &str, note: &str) {
        let reference = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            resource_version: None,
            field_path: None,
        };
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(note.to_owned()),
            action: action.to_owned(),
            secondary: None,
        };
        match tokio::time::timeout(WARNING_TIMEOUT, self.recorder.publish(&event, &reference)).await
        {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(pod = ?pod.metadata.name, reason, %error, "writing a Warning on the pod failed");
            }
            Err(_) => {
                tracing::warn!(pod = ?pod.metadata.name, reason, "writing a Warning on the pod took over {WARNING_TIMEOUT:?}");
            }
        }
    }
}

impl ApiState {
    /// A pod bound to a served node, from that node's pod cache.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<FoundPod> {
        self.served.pod(namespace, name)
    }

    /// What a handler answers for a pod that is not on a node served here.
    pub fn not_served(&self, namespace: &str, name: &str) -> String {
        format!(
            "pod {namespace}/{name} is not on a node orca serves here ({})",
            self.node_names()
        )
    }

    /// The served nodes' names, for messages.
    pub fn node_names(&self) -> String {
        let names = self.served.names();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    /// The check a request for `path` passes, and the pod it concerns if that pod is on a
    /// served node: the handler serves that pod and no other.
    pub(super) fn check_for(&self, path: &str) -> (Check, Option<FoundPod>) {
        let target = Target::of(path);
        let found = match &target {
            Target::Pod(Some(pod)) => self.pod(&pod.namespace, &pod.name),
            _ => None,
        };
        let check = Check::for_target(
            &target,
            found.as_ref().map(|found| found.node.as_str()),
            &self.served.names(),
            &self.first_node,
        );
        (check, found)
    }
}

/// What the routes' gate let through, for the handler: the pod authorized (if the path names one on
/// a served node) and the nodes the caller was allowed on.
#[derive(Clone)]
pub struct Admitted {
    pub pod: Option<FoundPod>,
    pub nodes: Vec<String>,
}

impl Admitted {
    /// The pod the gate authorized, if it is `namespace/name` (the handler's own path).
    pub fn pod_named(self, namespace: &str, name: &str) -> Option<FoundPod> {
        self.pod.filter(|found| {
            found.pod.metadata.namespace.as_deref() == Some(namespace)
                && found.pod.metadata.name.as_deref() == Some(name)
        })
    }
}
