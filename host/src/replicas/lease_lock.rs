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
//!
//! Every decision here reads the boot clock ([`BootInstant`]), never the wall clock: the wall
//! clock steps, and a hold must end on time however long the process was stopped. The wall
//! clock only fills in the Lease's `renewTime` and `acquireTime`, for people and client-go.

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

use super::BootInstant;
use super::tenure::STOP_BEFORE_EXPIRY;

/// Why a write of the Lease did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("{step} of Lease {lease} failed")]
    WriteFailed {
        lease: String,
        step: Step,
        #[source]
        source: kube::Error,
    },
    #[error(
        "{step} of Lease {lease}: no answer within {waited:?}, the time the hold had left; given up (it may still land)"
    )]
    WriteTimedOut {
        lease: String,
        step: Step,
        waited: Duration,
    },
    #[error("releasing Lease {lease} failed")]
    ReleaseFailed {
        lease: String,
        #[source]
        source: kube::Error,
    },
    #[error("releasing Lease {lease}: no answer within {waited:?}; given up")]
    ReleaseTimedOut { lease: String, waited: Duration },
}

/// What this replica does with the Lease after one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Create => "creating",
            Step::Renew => "renewing",
            Step::Take => "taking",
            Step::Wait => "waiting on",
        })
    }
}

/// A Lease record as last seen, and when this replica first saw it so (its boot clock).
#[derive(Debug, Clone)]
struct Observed {
    holder: Option<String>,
    renewed: Option<Timestamp>,
    since: BootInstant,
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
    /// A write was given up on for lack of time since the last answer: it may still have
    /// landed, so a record naming this replica that it does not know of may be its own.
    abandoned: bool,
}

/// The Lease as this replica wrote it, and the resourceVersions a lagging watch may still
/// show in its place: the record its first write replaced and its own earlier writes. Each
/// write is guarded by the version it replaced, so it is that version's immediate successor:
/// a version the watch shows that is neither of these was written by someone else, after.
#[derive(Debug, Clone)]
struct Written {
    lease: Lease,
    stale: Vec<String>,
    /// When the write was sent (before it landed, so before anyone could see it).
    sent: BootInstant,
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
    /// # Guarantees
    /// Returns within the time the hold has left (or, when there is no hold, the length of the
    /// hold the write would give), kube's retries included: a write still unanswered then is
    /// given up on, so a renewal that hangs cannot hold up the end of the hold.
    ///
    /// # Errors
    /// [`LeaseError::WriteFailed`] when the write failed other than by a conflict (the
    /// apiserver unreachable, forbidden); [`LeaseError::WriteTimedOut`] when it did not answer
    /// in time.
    pub async fn look(&mut self, seen: Option<&Lease>) -> Result<Step, LeaseError> {
        let now = BootInstant::now();
        let current = self.hold.current(seen);
        if let Some(lease) = &current {
            self.hold.observe(lease, now);
        }
        let step = self.hold.decide(current.as_ref(), now);
        let (lease, take) = match (step, current) {
            (Step::Create, _) => (None, false),
            (Step::Renew, Some(lease)) => (Some(lease), false),
            (Step::Take, Some(lease)) => (Some(lease), true),
            _ => return Ok(step),
        };
        let replaced = lease.as_ref().map(version);
        let waited = self.hold.time_for_write(now);
        let wall = Timestamp::now();
        let write = async {
            match lease {
                None => self.create(wall).await,
                Some(lease) => self.replace(lease, wall, take).await,
            }
        };
        let written = match tokio::time::timeout(waited, write).await {
            Ok(Ok(written)) => written,
            Ok(Err(source)) => {
                return Err(LeaseError::WriteFailed {
                    lease: self.name.clone(),
                    step,
                    source,
                });
            }
            Err(_) => {
                self.hold.abandoned = true;
                return Err(LeaseError::WriteTimedOut {
                    lease: self.name.clone(),
                    step,
                    waited,
                });
            }
        };
        // None: someone wrote first, so what this replica wrote before is no longer the Lease.
        self.hold.wrote(written, replaced, now);
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
    /// rather than after expiry. Waits at most the Lease's duration for the answer.
    ///
    /// # Errors
    /// The write failed or did not answer in time; the Lease then expires by itself.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        let Some(Written { mut lease, .. }) = self.hold.written.take() else {
            return Ok(());
        };
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.acquire_time = None;
            spec.renew_time = None;
        }
        let waited = self.hold.duration;
        let params = PostParams::default();
        let write = self.api.replace(&self.name, &params, &lease);
        match tokio::time::timeout(waited, write).await {
            Ok(Ok(_)) => Ok(()),
            // Taken by another since: not ours to give back.
            Ok(Err(kube::Error::Api(status))) if status.code == 409 => Ok(()),
            Ok(Err(source)) => Err(LeaseError::ReleaseFailed {
                lease: self.name.clone(),
                source,
            }),
            Err(_) => Err(LeaseError::ReleaseTimedOut {
                lease: self.name.clone(),
                waited,
            }),
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
            abandoned: false,
        }
    }

    /// Until when (on the boot clock) this replica may serve the node: its own last write,
    /// while the newest it knows of, sent at `S`, lets it serve until `S + leaseDuration -`
    /// [`STOP_BEFORE_EXPIRY`] (see [`super::tenure`] for why). `None` without such a write.
    pub fn serving_until(&self) -> Option<BootInstant> {
        let valid_for = self.duration.saturating_sub(STOP_BEFORE_EXPIRY);
        self.written
            .as_ref()
            .map(|written| written.sent.saturating_add(valid_for))
    }

    /// Whether this replica may serve the node at `now` (see [`Self::serving_until`]).
    pub fn held(&self, now: BootInstant) -> bool {
        self.serving_until().is_some_and(|until| now < until)
    }

    /// How long a write decided at `now` may take: the time the hold has left while it
    /// lasts (an answer after that would come too late to serve on), else the length of the
    /// hold the write would give.
    fn time_for_write(&self, now: BootInstant) -> std::time::Duration {
        match self.serving_until() {
            Some(until) if now < until => until.saturating_duration_since(now),
            _ => self.duration.saturating_sub(STOP_BEFORE_EXPIRY),
        }
    }

    /// Whether another replica holds the Lease and renews it in time, as last seen.
    pub fn held_by_another(&self, now: BootInstant) -> bool {
        self.observed.as_ref().is_some_and(|observed| {
            observed
                .holder
                .as_deref()
                .is_some_and(|holder| holder != self.identity)
                && now < observed.since.saturating_add(observed.lasts)
        })
    }

    /// Records a write's outcome: the Lease as written (sent at `sent`), having replaced
    /// version `replaced` (`None` for a create), or `None` when someone else wrote first.
    fn wrote(&mut self, lease: Option<Lease>, replaced: Option<String>, sent: BootInstant) {
        self.abandoned = false;
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
            Written { lease, stale, sent }
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
                // After a write given up on, that write may be what the watch shows.
                if holder_of(seen) == Some(self.identity.as_str()) && !self.abandoned {
                    tracing::error!(identity = %self.identity, "another process renews this node's Lease under this replica's identity: each replica needs an identity of its own (replicas.identity unset, POD_NAME set)");
                }
                self.written = None;
                Some(seen.clone())
            }
        }
    }

    fn observe(&mut self, lease: &Lease, now: BootInstant) {
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

    fn decide(&self, current: Option<&Lease>, now: BootInstant) -> Step {
        let Some(lease) = current else {
            return Step::Create;
        };
        let Some(observed) = &self.observed else {
            return Step::Wait;
        };
        match observed.holder.as_deref() {
            None => Step::Take,
            Some(holder) if holder == self.identity => {
                // A record naming this replica that it did not write in this life (a
                // restart keeps the identity) is renewed at once, so it is this life's.
                let Some(written) = self
                    .written
                    .as_ref()
                    .filter(|written| version(&written.lease) == version(lease))
                else {
                    return Step::Renew;
                };
                if now >= written.sent.saturating_add(self.renew_after) {
                    Step::Renew
                } else {
                    Step::Wait
                }
            }
            Some(_) if now >= observed.since.saturating_add(observed.lasts) => Step::Take,
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
