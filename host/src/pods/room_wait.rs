//! Pods waiting for room under their namespace's cap (`NamespaceBudgetExceeded`): when some
//! namespace's spend may have gone down (an instance ended, a launch failed, a listing shows
//! less), the pods that now fit are made due and queued at once, longest waiting first, rather
//! than each waiting out its backoff. Only as many as fit are woken, so a namespace with a
//! hundred pods waiting is not planned a hundred times for every instance that ends.

use std::collections::HashSet;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio_util::sync::CancellationToken;

use super::record::PodRecords;
use crate::spend::{NamespaceSpend, to_wake};

/// Until `shutdown`: each time room may have freed, queues the waiting pods that fit.
pub async fn wake_on_room(
    spend: Arc<NamespaceSpend>,
    records: Arc<PodRecords>,
    store: Store<Pod>,
    queue: UnboundedSender<ObjectRef<Pod>>,
    shutdown: CancellationToken,
) {
    let mut freed = spend.freed();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = freed.changed() => if changed.is_err() { return },
        }
        let waiting = records.room_waiters();
        if waiting.is_empty() {
            continue;
        }
        let wake = to_wake(&waiting, |namespace| spend.room(namespace));
        if wake.is_empty() {
            continue;
        }
        tracing::debug!(
            pods = wake.len(),
            waiting = waiting.len(),
            "room freed under the namespaces' caps; planning the pods that fit"
        );
        records.make_due(&wake);
        let wake: HashSet<&str> = wake.iter().map(String::as_str).collect();
        for pod in store.state() {
            if pod
                .metadata
                .uid
                .as_deref()
                .is_some_and(|uid| wake.contains(uid))
            {
                let _ = queue.unbounded_send(ObjectRef::from_obj(&*pod));
            }
        }
    }
}
