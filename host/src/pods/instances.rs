//! The latest listing of the provider's instances, shared by the sync loop (writer) and the
//! reconcilers (readers): each pod's instance, and any instance beyond the one a pod can have.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::provider::{InstanceStatus, PodKey};

/// Instance statuses by pod UID.
#[derive(Default)]
pub struct InstanceCache {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    by_uid: HashMap<String, InstanceStatus>,
    /// Instances tagged for a pod that has another, chosen instance: never the pod's, so
    /// they are collected like orphans.
    extras: Vec<InstanceStatus>,
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

    /// How many instances the last listing held.
    pub fn len(&self) -> usize {
        let inner = self.read();
        inner.by_uid.len() + inner.extras.len()
    }

    /// Every listed instance: each pod's, then the extras.
    pub fn all(&self) -> Vec<InstanceStatus> {
        let inner = self.read();
        inner
            .by_uid
            .values()
            .chain(inner.extras.iter())
            .cloned()
            .collect()
    }

    /// Instances beyond the one each pod has.
    pub fn extras(&self) -> Vec<InstanceStatus> {
        self.read().extras.clone()
    }

    /// Replaces the whole view with a fresh listing; returns the pods whose instance appeared,
    /// changed or disappeared, so only those are reconciled.
    pub fn replace(&self, listing: Vec<InstanceStatus>) -> Vec<PodKey> {
        let (mut fresh, extras) = choose_per_pod(listing);
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
        std::mem::swap(&mut inner.by_uid, &mut fresh);
        inner.extras = extras;
        changed
    }
}

/// Each pod's instance (the one still holding resources, else the newest) and the others.
fn choose_per_pod(
    listing: Vec<InstanceStatus>,
) -> (HashMap<String, InstanceStatus>, Vec<InstanceStatus>) {
    let rank = |s: &InstanceStatus| (s.state.needs_termination(), s.launched_at);
    let mut chosen: HashMap<String, InstanceStatus> = HashMap::new();
    let mut others = Vec::new();
    for status in listing {
        match chosen.get(&status.pod.uid) {
            Some(kept) if rank(kept) >= rank(&status) => others.push(status),
            _ => {
                if let Some(replaced) = chosen.insert(status.pod.uid.clone(), status) {
                    others.push(replaced);
                }
            }
        }
    }
    // Only an extra that still holds resources matters.
    others.retain(|status| status.state.needs_termination());
    (chosen, others)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Market;
    use crate::provider::InstanceState;
    use jiff::Timestamp;

    fn instance(id: &str, uid: &str, state: InstanceState, launched: i64) -> InstanceStatus {
        InstanceStatus {
            pod: PodKey {
                namespace: "ns".into(),
                name: uid.into(),
                uid: uid.into(),
            },
            instance_id: id.into(),
            instance_type: "m5.large".into(),
            market: Market::OnDemand,
            state,
            private_ip: None,
            launched_at: Timestamp::from_second(launched).unwrap(),
            started_at: None,
            state_reason: None,
            workload_exit: None,
        }
    }

    #[test]
    fn a_second_live_instance_of_a_pod_is_an_extra_not_hidden() {
        let cache = InstanceCache::default();
        cache.replace(vec![
            instance("i-old", "u", InstanceState::Running, 10),
            instance("i-new", "u", InstanceState::Running, 20),
            instance("i-gone", "u", InstanceState::Terminated, 30),
        ]);
        assert_eq!(cache.get("u").unwrap().instance_id, "i-new");
        let extras: Vec<String> = cache.extras().into_iter().map(|i| i.instance_id).collect();
        assert_eq!(extras, ["i-old"]);
    }

    #[test]
    fn only_pods_whose_instance_changed_are_reported() {
        let cache = InstanceCache::default();
        let first = cache.replace(vec![instance("i-a", "a", InstanceState::Pending, 1)]);
        assert_eq!(first.len(), 1);
        let same = cache.replace(vec![instance("i-a", "a", InstanceState::Pending, 1)]);
        assert!(same.is_empty());
        let gone = cache.replace(vec![]);
        assert_eq!(gone[0].uid, "a");
    }
}
