//! The latest instance statuses from the provider, shared by the sync loop (writer) and the
//! reconcilers (readers), plus what this process launched recently (for eventual consistency).

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use crate::provider::{InstanceStatus, PodKey};

/// Instance statuses by pod UID.
#[derive(Default)]
pub struct InstanceCache {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    by_uid: HashMap<String, InstanceStatus>,
    launched: HashMap<String, Instant>,
}

impl InstanceCache {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn get(&self, uid: &str) -> Option<InstanceStatus> {
        self.read().by_uid.get(uid).cloned()
    }

    pub fn all(&self) -> Vec<InstanceStatus> {
        self.read().by_uid.values().cloned().collect()
    }

    /// Replaces the whole view with a fresh listing; returns the pods whose instance appeared,
    /// changed or disappeared, so only those are reconciled.
    pub fn replace(&self, listing: Vec<InstanceStatus>) -> Vec<PodKey> {
        let mut fresh: HashMap<String, InstanceStatus> = listing
            .into_iter()
            .map(|status| (status.pod.uid.clone(), status))
            .collect();
        let mut inner = self.write();
        let mut changed: Vec<PodKey> = fresh
            .values()
            .filter(|status| inner.by_uid.get(&status.pod.uid) != Some(status))
            .map(|status| status.pod.clone())
            .collect();
        changed.extend(
            inner
                .by_uid
                .values()
                .filter(|old| !fresh.contains_key(&old.pod.uid))
                .map(|old| old.pod.clone()),
        );
        // A pod's first listing ends the launch grace: from now on a missing instance is lost.
        inner.launched.retain(|uid, _| !fresh.contains_key(uid));
        std::mem::swap(&mut inner.by_uid, &mut fresh);
        changed
    }

    /// Records that this process just launched the pod's instance.
    pub fn note_launched(&self, uid: &str) {
        self.write().launched.insert(uid.to_owned(), Instant::now());
    }

    /// Whether this process launched the pod's instance less than `grace` ago and the
    /// provider has not listed it since (EC2's listing is eventually consistent).
    pub fn launched_within(&self, uid: &str, grace: Duration) -> bool {
        self.read()
            .launched
            .get(uid)
            .is_some_and(|at| at.elapsed() < grace)
    }

    pub fn forget_launch(&self, uid: &str) {
        self.write().launched.remove(uid);
    }
}
