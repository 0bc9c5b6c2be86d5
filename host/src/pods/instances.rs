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
    /// The pod UID of each pod's instance, by instance id: interruption notices name
    /// instances, and a hundred notices at once must not each scan thousands of pods.
    uid_by_instance: HashMap<String, String>,
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

    /// The listed instance with this id: a pod's, or an extra.
    pub fn by_instance_id(&self, instance_id: &str) -> Option<InstanceStatus> {
        let inner = self.read();
        match inner.uid_by_instance.get(instance_id) {
            Some(uid) => inner.by_uid.get(uid).cloned(),
            None => inner
                .extras
                .iter()
                .find(|status| status.instance_id == instance_id)
                .cloned(),
        }
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
    /// changed or disappeared, so only those are reconciled. `named` holds, by pod UID, the
    /// instance the pod's status or this process's launch names: that one is the pod's, and
    /// any other instance tagged for the pod is an extra, even while a listing misses the
    /// named one (see [`Choice`]). The view is updated in place: a node with thousands of
    /// pods lists them every sync, and a second map beside the first would double what the
    /// listing costs at that moment.
    pub fn replace(
        &self,
        listing: Vec<InstanceStatus>,
        named: &HashMap<String, String>,
    ) -> Vec<PodKey> {
        // A pod's instances other than the one it names are never its own.
        let (mut listing, mut extras): (Vec<_>, Vec<_>) = listing.into_iter().partition(|status| {
            named
                .get(&status.pod.uid)
                .is_none_or(|id| *id == status.instance_id)
        });
        extras.retain(|status| status.state.needs_termination());
        // Each pod's instances side by side, its chosen one last.
        listing.sort_unstable_by(|a, b| {
            (a.pod.uid.as_str(), Choice::of(a)).cmp(&(b.pod.uid.as_str(), Choice::of(b)))
        });
        let mut inner = self.write();
        let inner = &mut *inner;
        let mut changed = Vec::new();
        inner.by_uid.retain(|uid, old| {
            let listed = listing
                .binary_search_by(|status| status.pod.uid.as_str().cmp(uid))
                .is_ok();
            if !listed {
                changed.push(old.pod.clone());
                inner.uid_by_instance.remove(&old.instance_id);
            }
            listed
        });
        let mut listing = listing.into_iter().peekable();
        while let Some(status) = listing.next() {
            let chosen = listing
                .peek()
                .is_none_or(|next| next.pod.uid != status.pod.uid);
            if !chosen {
                // Only an extra that still holds resources matters.
                if status.state.needs_termination() {
                    extras.push(status);
                }
                continue;
            }
            match inner.by_uid.get_mut(&status.pod.uid) {
                Some(old) if *old == status => {}
                Some(old) => {
                    changed.push(status.pod.clone());
                    if old.instance_id != status.instance_id {
                        inner.uid_by_instance.remove(&old.instance_id);
                        inner
                            .uid_by_instance
                            .insert(status.instance_id.clone(), status.pod.uid.clone());
                    }
                    *old = status;
                }
                None => {
                    changed.push(status.pod.clone());
                    inner
                        .uid_by_instance
                        .insert(status.instance_id.clone(), status.pod.uid.clone());
                    inner.by_uid.insert(status.pod.uid.clone(), status);
                }
            }
        }
        crate::support::heap::shrink_when_sparse(&mut inner.by_uid);
        crate::support::heap::shrink_when_sparse(&mut inner.uid_by_instance);
        inner.extras = extras;
        changed
    }
}

/// How the instances of a pod that names none rank for being its own, the greatest chosen:
/// one still holding resources, then the oldest (the instance id breaks a tie, so the choice is
/// the same at every listing).
///
/// Never the newest: a second live instance tagged for a pod comes from a person ("launch more
/// like this" copies the tags), a stale replica or a token moved on, and the pod's workload runs
/// on the first. Keeping the newest terminated the instance running the workload and kept the
/// copy (issue 39, case 3). A pod whose status or record names its instance does not get here:
/// that one is its own.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Choice<'a> {
    live: bool,
    older: std::cmp::Reverse<jiff::Timestamp>,
    instance_id: &'a str,
}

impl<'a> Choice<'a> {
    fn of(status: &'a InstanceStatus) -> Choice<'a> {
        Choice {
            live: status.state.needs_termination(),
            older: std::cmp::Reverse(status.launched_at),
            instance_id: &status.instance_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::InstanceState;
    use crate::provider::plan::Market;
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
            volumes: Vec::new(),
        }
    }

    fn none_named() -> HashMap<String, String> {
        HashMap::new()
    }

    fn named(uid: &str, instance_id: &str) -> HashMap<String, String> {
        HashMap::from([(uid.to_owned(), instance_id.to_owned())])
    }

    fn extra_ids(cache: &InstanceCache) -> Vec<String> {
        let mut ids: Vec<String> = cache.extras().into_iter().map(|i| i.instance_id).collect();
        ids.sort_unstable();
        ids
    }

    /// Regression (issue 39, case 3): with two live instances for one pod, the newest was kept
    /// and the older one, which the workload runs on, collected as an extra. A look-alike
    /// (a person's "launch more like this", a stale replica's launch) is the newer one.
    #[test]
    fn a_look_alike_of_a_pods_instance_is_the_extra_not_the_instance_it_copies() {
        let cache = InstanceCache::default();
        cache.replace(
            vec![
                instance("i-old", "u", InstanceState::Running, 10),
                instance("i-new", "u", InstanceState::Running, 20),
                instance("i-gone", "u", InstanceState::Terminated, 30),
            ],
            &none_named(),
        );
        assert_eq!(cache.get("u").unwrap().instance_id, "i-old");
        assert_eq!(extra_ids(&cache), ["i-new"]);
    }

    /// The instance the pod's status (or this process's launch) names is the pod's whatever
    /// the others are: older, or live while it has ended.
    #[test]
    fn the_instance_a_pod_names_is_its_own_whatever_else_is_tagged_for_it() {
        let cache = InstanceCache::default();
        let listing = || {
            vec![
                instance("i-first", "u", InstanceState::Running, 10),
                instance("i-named", "u", InstanceState::Terminated, 20),
                instance("i-third", "u", InstanceState::Pending, 30),
            ]
        };
        cache.replace(listing(), &named("u", "i-named"));
        assert_eq!(cache.get("u").unwrap().instance_id, "i-named");
        assert_eq!(extra_ids(&cache), ["i-first", "i-third"]);

        // A listing that misses the named instance (EC2 lists late) leaves the pod without
        // one: the others are still extras, never its instance.
        let missing: Vec<InstanceStatus> = listing()
            .into_iter()
            .filter(|i| i.instance_id != "i-named")
            .collect();
        let changed = cache.replace(missing, &named("u", "i-named"));
        assert_eq!(changed.len(), 1, "the pod's instance disappeared");
        assert!(cache.get("u").is_none());
        assert_eq!(extra_ids(&cache), ["i-first", "i-third"]);
    }

    /// Two live instances launched at the same moment: the same one is the pod's at every
    /// listing, whatever order EC2 lists them in.
    #[test]
    fn a_tie_is_decided_the_same_way_at_every_listing() {
        let cache = InstanceCache::default();
        let a = instance("i-a", "u", InstanceState::Running, 10);
        let b = instance("i-b", "u", InstanceState::Running, 10);
        cache.replace(vec![a.clone(), b.clone()], &none_named());
        assert_eq!(cache.get("u").unwrap().instance_id, "i-b");
        let changed = cache.replace(vec![b, a], &none_named());
        assert!(changed.is_empty(), "{changed:?}");
        assert_eq!(cache.get("u").unwrap().instance_id, "i-b");
        assert_eq!(cache.extras()[0].instance_id, "i-a");
    }

    #[test]
    fn only_pods_whose_instance_changed_are_reported() {
        let cache = InstanceCache::default();
        let first = cache.replace(
            vec![instance("i-a", "a", InstanceState::Pending, 1)],
            &none_named(),
        );
        assert_eq!(first.len(), 1);
        let same = cache.replace(
            vec![instance("i-a", "a", InstanceState::Pending, 1)],
            &none_named(),
        );
        assert!(same.is_empty());
        let running = cache.replace(
            vec![
                instance("i-a", "a", InstanceState::Running, 1),
                instance("i-b", "b", InstanceState::Pending, 2),
            ],
            &none_named(),
        );
        let mut running: Vec<&str> = running.iter().map(|key| key.uid.as_str()).collect();
        running.sort_unstable();
        assert_eq!(running, ["a", "b"], "a changed, b appeared");
        let gone = cache.replace(
            vec![instance("i-b", "b", InstanceState::Pending, 2)],
            &none_named(),
        );
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].uid, "a");
        assert!(cache.get("a").is_none());
    }

    #[test]
    fn instances_are_found_by_id_as_listings_come_and_go() {
        let cache = InstanceCache::default();
        let id = |cache: &InstanceCache, id: &str| cache.by_instance_id(id).map(|s| s.pod.uid);
        cache.replace(
            vec![
                instance("i-a", "a", InstanceState::Running, 1),
                instance("i-old", "b", InstanceState::Running, 1),
                instance("i-new", "b", InstanceState::Running, 2),
            ],
            &none_named(),
        );
        assert_eq!(id(&cache, "i-a").as_deref(), Some("a"));
        assert_eq!(id(&cache, "i-new").as_deref(), Some("b"));
        assert_eq!(
            id(&cache, "i-old").as_deref(),
            Some("b"),
            "an extra is found too"
        );
        assert_eq!(id(&cache, "i-other"), None);

        // Pod a's instance replaced by another; pod b gone.
        cache.replace(
            vec![instance("i-a2", "a", InstanceState::Pending, 3)],
            &none_named(),
        );
        assert_eq!(id(&cache, "i-a2").as_deref(), Some("a"));
        for gone in ["i-a", "i-new", "i-old"] {
            assert_eq!(id(&cache, gone), None, "{gone}");
        }
        assert_eq!(cache.read().uid_by_instance.len(), 1);
    }
}
