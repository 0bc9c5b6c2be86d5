//! One node's Lease as this replica takes, keeps and gives it back, the way client-go's
//! leader election does: every write replaces the Lease guarded by the `resourceVersion` it
//! was decided on, so of two replicas deciding on the same record one write wins and the
//! other gets a conflict and looks again; and another replica's Lease is taken only once it
//! has not changed for a whole `leaseDurationSeconds` on this replica's clock, so clocks that
//! disagree cannot make two replicas hold one node.
//!
//! Why not `kube-lease-manager` (used until stop 36): it renews with an unguarded patch and
//! takes a Lease with a server-side apply that is not forced, under a field manager per
//! replica. A renewal landing just after another replica cleared an expired Lease leaves
//! `renewTime` owned by the renewer, and from then on every replica's apply conflicts on it:
//! nobody can ever take the node again (the simulation caught it; reproduced with kubectl
//! against the apiserver).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

use super::held::holds;

/// What this replica does with the Lease after one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet: create it, held by this replica.
    Create,
    /// Ours, and its renewal is due.
    Renew,
    /// Free, or another replica's that stopped renewing: take it.
    Take,
    /// Ours and fresh, or another replica's that renews: nothing to write.
    Wait,
}

/// A Lease record as last seen, and when this replica first saw it so (its own clock).
#[derive(Debug, Clone)]
struct Observed {
    holder: Option<String>,
    renewed: Option<Timestamp>,
    since: Instant,
    /// How long the record promises the holder: its `leaseDurationSeconds`, or this
    /// replica's own duration if longer. Replicas mid-way through a rolling update that
    /// changes `replicas.leaseDuration` disagree; the holder stops serving by its own.
    lasts: Duration,
}

/// This replica's hold on one node's Lease: what it decides on, apart from the writes.
#[derive(Debug, Clone)]
pub struct Hold {
    identity: String,
    duration: Duration,
    /// How long after a renewal the next is due: the duration less `renewBefore`.
    renew_after: Duration,
    /// This replica's last write of the Lease, while it is the newest it knows of.
    written: Option<Written>,
    observed: Option<Observed>,
}

/// The Lease as this replica wrote it, and the resourceVersions a lagging watch may still
/// show in its place: the record its first write replaced and its own earlier writes. Each
/// write is guarded by the version it replaced, so it is that version's immediate successor:
/// a version the watch shows that is neither of these was written by someone else, after.
#[derive(Debug, Clone)]
struct Written {
    lease: Lease,
    stale: Vec<String>,
}

/// How many superseded versions are remembered: a watch lags by milliseconds, renewals come
/// seconds apart.
const STALE_KEPT: usize = 8;

fn version(lease: &Lease) -> String {
    lease.metadata.resource_version.clone().unwrap_or_default()
}

/// The Lease writes, and the hold they keep.
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    hold: Hold,
}

impl LeaseLock {
    pub fn new(
        api: Api<Lease>,
        name: String,
        identity: String,
        duration: Duration,
        renew_before: Duration,
    ) -> LeaseLock {
        LeaseLock {
            api,
            name,
            hold: Hold::new(identity, duration, renew_before),
        }
    }

    pub fn hold(&self) -> &Hold {
        &self.hold
    }

    /// One look at `seen` (the Lease as the watch shows it, `None` when there is none) and
    /// the write it calls for. A failed or conflicting write changes nothing here: the next
    /// look decides again on what it shows then.
    ///
    /// # Errors
    /// The write failed other than by a conflict (the apiserver unreachable, forbidden).
    pub async fn look(&mut self, seen: Option<&Lease>) -> Result<Step, kube::Error> {
        let now = Instant::now();
        let wall = Timestamp::now();
        let current = self.hold.current(seen);
        if let Some(lease) = &current {
            self.hold.observe(lease, now);
        }
        let step = self.hold.decide(current.as_ref(), now, wall);
        let (written, replaced) = match (&step, current) {
            (Step::Create, _) => (self.create(wall).await?, None),
            (Step::Renew, Some(lease)) => {
                let replaced = version(&lease);
                (self.replace(lease, wall, false).await?, Some(replaced))
            }
            (Step::Take, Some(lease)) => {
                let replaced = version(&lease);
                (self.replace(lease, wall, true).await?, Some(replaced))
            }
            _ => return Ok(step),
        };
        // None: someone wrote first, so what this replica wrote before is no longer the Lease.
        self.hold.wrote(written, replaced);
        Ok(step)
    }

    async fn create(&self, at: Timestamp) -> Result<Option<Lease>, kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(self.hold.spec(at, None, 0)),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => Ok(Some(created)),
            // Another replica created it first.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Renews (`take` false) or takes `lease`, guarded by its resourceVersion.
    async fn replace(
        &self,
        mut lease: Lease,
        at: Timestamp,
        take: bool,
    ) -> Result<Option<Lease>, kube::Error> {
        let old = lease.spec.take().unwrap_or_default();
        let transitions = old.lease_transitions.unwrap_or(0);
        lease.spec = Some(if take {
            self.hold.spec(at, None, transitions.saturating_add(1))
        } else {
            self.hold.spec(at, old.acquire_time, transitions)
        });
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(replaced) => Ok(Some(replaced)),
            // Written by someone else since it was read (or deleted): the next look sees what.
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Gives the Lease back if this replica holds it, so another takes the node at once
    /// rather than after expiry.
    ///
    /// # Errors
    /// The write failed; the Lease then expires by itself.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(Written { mut lease, .. }) = self.hold.written.take() else {
            return Ok(());
        };
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.acquire_time = None;
            spec.renew_time = None;
        }
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            // Taken by another since: not ours to give back.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(error),
        }
    }
}

impl Hold {
    pub fn new(identity: String, duration: Duration, renew_before: Duration) -> Hold {
        Hold {
            identity,
            duration,
            renew_after: duration.saturating_sub(renew_before),
            written: None,
            observed: None,
        }
    }

    /// Whether this replica may serve the node at `now`: its own last write names it and
    /// is more than [`super::STOP_BEFORE_EXPIRY`] from expiry.
    pub fn held(&self, now: Timestamp) -> bool {
        self.written
            .as_ref()
            .is_some_and(|written| holds(&written.lease, &self.identity, now))
    }

    /// Whether another replica holds the Lease and renews it in time, as last seen.
    pub fn held_by_another(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|observed| {
            observed
                .holder
                .as_deref()
                .is_some_and(|holder| holder != self.identity)
                && now < observed.since + observed.lasts
        })
    }

    /// Records a write's outcome: the Lease as written, having replaced version `replaced`
    /// (`None` for a create), or `None` when someone else wrote first.
    fn wrote(&mut self, lease: Option<Lease>, replaced: Option<String>) {
        self.written = lease.map(|lease| {
            let mut stale = self
                .written
                .take()
                .map(|earlier| {
                    let mut stale = earlier.stale;
                    stale.push(version(&earlier.lease));
                    stale
                })
                .unwrap_or_default();
            stale.extend(replaced);
            let excess = stale.len().saturating_sub(STALE_KEPT);
            stale.drain(..excess);
            Written { lease, stale }
        });
    }

    /// The Lease to decide on: `seen`, unless the watch has not shown this replica's own last
    /// write yet.
    fn current(&mut self, seen: Option<&Lease>) -> Option<Lease> {
        let Some(written) = &mut self.written else {
            return seen.cloned();
        };
        match seen {
            // Created, and not shown yet.
            None if written.stale.is_empty() => Some(written.lease.clone()),
            // Deleted since.
            None => {
                self.written = None;
                None
            }
            Some(seen) if version(seen) == version(&written.lease) => {
                written.stale.clear();
                Some(written.lease.clone())
            }
            Some(seen) if written.stale.contains(&version(seen)) => Some(written.lease.clone()),
            // Written by someone else after this replica's last write.
            Some(seen) => {
                if holder_of(seen) == Some(self.identity.as_str()) {
                    tracing::error!(identity = %self.identity, "another process renews this node's Lease under this replica's identity: each replica needs an identity of its own (replicas.identity unset, POD_NAME set)");
                }
                self.written = None;
                Some(seen.clone())
            }
        }
    }

    fn observe(&mut self, lease: &Lease, now: Instant) {
        let holder = holder_of(lease).map(str::to_owned);
        let renewed = lease
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0);
        let promised = lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map_or(Duration::ZERO, Duration::from_secs);
        let unchanged = self
            .observed
            .as_ref()
            .is_some_and(|o| o.holder == holder && o.renewed == renewed);
        if !unchanged {
            self.observed = Some(Observed {
                holder,
                renewed,
                since: now,
                lasts: promised.max(self.duration),
            });
        }
    }

    fn decide(&self, current: Option<&Lease>, now: Instant, wall: Timestamp) -> Step {
        let Some(lease) = current else {
            return Step::Create;
        };
        let Some(observed) = &self.observed else {
            return Step::Wait;
        };
        match observed.holder.as_deref() {
            None => Step::Take,
            Some(holder) if holder == self.identity => {
                let due = observed
                    .renewed
                    .and_then(|renewed| {
                        jiff::SignedDuration::try_from(self.renew_after)
                            .ok()
                            .and_then(|after| renewed.checked_add(after).ok())
                    })
                    .is_none_or(|due| wall >= due);
                // A record naming this replica that it did not write in this life (a
                // restart keeps the identity) is renewed at once, so it is this life's.
                let own = self
                    .written
                    .as_ref()
                    .is_some_and(|written| version(&written.lease) == version(lease));
                if due || !own { Step::Renew } else { Step::Wait }
            }
            Some(_) if now >= observed.since + observed.lasts => Step::Take,
            Some(_) => Step::Wait,
        }
    }

    fn spec(&self, at: Timestamp, acquired: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: i32::try_from(self.duration.as_secs()).ok(),
            acquire_time: acquired.or(Some(MicroTime(at))),
            renew_time: Some(MicroTime(at)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }
}

/// The Lease's holder; an empty identity (client-go's release) is none.
fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|holder| !holder.is_empty())
}

#[cfg(test)]
mod tests;
