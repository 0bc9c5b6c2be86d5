//! This replica's hold on one node's Lease: which write a look at the Lease calls for, and
//! until when the replica may serve. Pure decisions on what was seen and the boot clock
//! ([`BootInstant`]), never the wall clock: the wall clock steps, and a hold must end on time
//! however long the process was stopped. The writes themselves are [`super::LeaseLock`]'s.

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use super::BootInstant;
use super::tenure::STOP_BEFORE_EXPIRY;

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

pub(super) fn version(lease: &Lease) -> String {
    lease.metadata.resource_version.clone().unwrap_or_default()
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
    pub(super) fn time_for_write(&self, now: BootInstant) -> std::time::Duration {
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
    pub(super) fn wrote(
        &mut self,
        lease: Option<Lease>,
        replaced: Option<String>,
        sent: BootInstant,
    ) {
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
    pub(super) fn current(&mut self, seen: Option<&Lease>) -> Option<Lease> {
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

    pub(super) fn observe(&mut self, lease: &Lease, now: BootInstant) {
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

    pub(super) fn decide(&self, current: Option<&Lease>, now: BootInstant) -> Step {
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

    pub(super) fn spec(
        &self,
        at: Timestamp,
        acquired: Option<MicroTime>,
        transitions: i32,
    ) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: i32::try_from(self.duration.as_secs()).ok(),
            acquire_time: acquired.or(Some(MicroTime(at))),
            renew_time: Some(MicroTime(at)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// A write was given up on for lack of time: it may still land.
    pub(super) fn gave_up(&mut self) {
        self.abandoned = true;
    }

    /// This replica's last write, taken out of the hold (a release ends the hold).
    pub(super) fn take_written(&mut self) -> Option<Lease> {
        self.written.take().map(|written| written.lease)
    }

    /// The Lease's duration in this replica's settings.
    pub(super) fn duration(&self) -> Duration {
        self.duration
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
