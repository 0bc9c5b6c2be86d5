//! Pods waiting for the policy: a pod whose plan met a plugin that is not loaded waits Pending
//! (`PolicyNotReady`) with backoff. When the policy can decide again (the plugin loaded), those
//! pods are made due and queued at once, rather than each waiting out its backoff.

use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::record::PodRecords;

/// Until `shutdown`: each time `policy_ready` turns true, queues the pods that were waiting.
pub async fn wake_on_ready(
    mut policy_ready: watch::Receiver<bool>,
    records: Arc<PodRecords>,
    store: Store<Pod>,
    queue: UnboundedSender<ObjectRef<Pod>>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = policy_ready.changed() => if changed.is_err() { return },
        }
        if !*policy_ready.borrow_and_update() {
            continue;
        }
        let waiting = records.wake_policy_waiters();
        if waiting.is_empty() {
            continue;
        }
        tracing::info!(
            pods = waiting.len(),
            "the policy can decide again; planning the pods that waited for it"
        );
        for pod in store.state() {
            if pod
                .metadata
                .uid
                .as_ref()
                .is_some_and(|uid| waiting.contains(uid))
            {
                let _ = queue.unbounded_send(ObjectRef::from_obj(&*pod));
            }
        }
    }
}
