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
//! What to write, and whether the replica may serve, is [`Hold`]'s decision on the boot clock;
//! the wall clock only fills in the Lease's `renewTime` and `acquireTime`, for people and
//! client-go. Every write is given the time the hold has left at most.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

use super::BootInstant;
use super::hold::{Hold, Step, version};

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
                self.hold.gave_up();
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
        let Some(mut lease) = self.hold.take_written() else {
            return Ok(());
        };
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.acquire_time = None;
            spec.renew_time = None;
        }
        let waited = self.hold.duration();
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

#[cfg(test)]
mod tests;
