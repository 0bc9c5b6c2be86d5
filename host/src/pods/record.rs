//! Everything orca keeps about one pod beyond the pod object and the last listing, in one typed
//! record with one lifecycle: created when orca first reconciles the pod, dropped when the pod
//! leaves the store, whatever removed it (orca, a force delete, the pod garbage collector, a
//! TTL controller). Nothing about a pod lives anywhere else, so nothing outlives it.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::events::PodRecorder;
use super::view::LaunchRef;
use super::writes::LastWrite;
use crate::policy::DECISION_ANNOTATION;
use crate::policy::guardrails::Price;
use crate::provider::{InstanceStatus, LaunchProgress, Offering, WorkloadExit};
use crate::spend::Waiting;
use crate::support::Backoff;
use crate::support::errors::lock;

/// One pod's record.
#[derive(Debug, Clone, Default)]
pub struct PodRecord {
    /// What this process's launch of the pod's instance got.
    pub launch: Launch,
    /// When a listing last showed the pod's instance.
    pub last_listed: Option<Timestamp>,
    /// The pod's instance as a lookup by id found it while listings missed it. Boxed, as
    /// are the other parts most pods never need: the node keeps a record per pod.
    pub looked_up: Option<Box<InstanceStatus>>,
    /// When a lookup by id last found nothing.
    pub lookup_missed: Option<Timestamp>,
    /// The workload's exit report, read once its instance ended.
    pub exit: ExitReport,
    /// Failed steps in a row, for backoff.
    pub retry: Retry,
    /// The last status write, while the store may not show it yet.
    pub write: Option<LastWrite>,
    /// The apiserver accepted orca's removal of the pod object: the store drops it soon, and
    /// until then there is nothing left to do (a second delete would only be refused).
    pub removed: bool,
    /// The policy's decision (the annotation's JSON) while the pod does not carry it: it goes
    /// onto the pod with the next status write rather than in a patch of its own.
    pub decision: Option<String>,
    /// Where the provider stands in the pod's launch, likewise until the pod carries it.
    pub progress: Option<LaunchProgress>,
    /// The pod's Events, with what it needs to fold repeats into one.
    pub events: Option<PodRecorder>,
    /// The last plan found a plugin the policy needs not loaded: the pod is planned again as
    /// soon as the policy can decide, not only at its next backoff.
    pub waits_for_policy: bool,
    /// Plans that ran out of time (or found every sandbox slot busy). Counted apart from
    /// `retry.failures`, which also counts waits for a plugin and launch retries: only these
    /// bound how often a pod is planned again before it fails.
    pub policy_timeouts: u32,
    /// The volumes this process attached to the pod's instance, which listings may not show
    /// yet: they are not attached again.
    pub attached: Vec<String>,
    /// The pod's instance would take its namespace over its cap: the pod is planned again as
    /// soon as enough room frees there, not only at its next backoff.
    pub waits_for_room: Option<Box<RoomWait>>,
}

/// What a pod waiting for room in its namespace needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomWait {
    pub namespace: String,
    /// What its plan may cost an hour at most.
    pub price: Price,
    /// Since its first try found no room: the longest waiting go first.
    pub since: Timestamp,
}

impl PodRecord {
    /// The policy's decision when `pod` does not carry it yet.
    pub fn unwritten_decision(&self, pod: &Pod) -> Option<&str> {
        let decision = self.decision.as_deref()?;
        let carried = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(DECISION_ANNOTATION));
        (carried.map(String::as_str) != Some(decision)).then_some(decision)
    }

    /// The provider's progress when `pod` does not carry it yet.
    pub fn unwritten_progress(&self, pod: &Pod) -> Option<&LaunchProgress> {
        let progress = self.progress.as_ref()?;
        let carried = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(progress.annotation));
        (carried != Some(&progress.value)).then_some(progress)
    }
}

/// What this process's launch of the pod's instance got.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Launch {
    /// Not launched by this process (maybe by an earlier one: the pod's status says).
    #[default]
    NotSent,
    /// EC2 answered with the instance.
    Answered {
        launch: LaunchRef,
        offering: Offering,
    },
    /// A request got no answer (a dropped connection, a timeout, a server error): an instance
    /// may exist that no listing shows yet. Since the first such request.
    InDoubt { since: Timestamp },
    /// EC2 refused the launch because the pod's instance was launched already and has
    /// terminated (`IdempotentInstanceTerminated`): a listing should show how it ended.
    EndedUnseen { since: Timestamp },
}

impl Launch {
    /// Records a request whose answer never came, keeping the earliest.
    pub fn in_doubt(&self, now: Timestamp) -> Launch {
        match self {
            Launch::InDoubt { since } => Launch::InDoubt { since: *since },
            _ => Launch::InDoubt { since: now },
        }
    }

    /// Records that the pod's instance ended before any listing showed it, keeping the
    /// earliest such answer.
    pub fn ended_unseen(&self, now: Timestamp) -> Launch {
        match self {
            Launch::EndedUnseen { since } => Launch::EndedUnseen { since: *since },
            _ => Launch::EndedUnseen { since: now },
        }
    }
}

/// The workload's exit report, as read from the provider once the instance ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ExitReport {
    #[default]
    NotRead,
    /// Read first at `first` and last at `last`; `exit` is `None` while no report is there.
    Read {
        exit: Option<WorkloadExit>,
        first: Timestamp,
        last: Timestamp,
    },
}

impl ExitReport {
    /// The report after another read at `now`.
    pub fn read(&self, exit: Option<WorkloadExit>, now: Timestamp) -> ExitReport {
        let first = match self {
            ExitReport::Read { first, .. } => *first,
            ExitReport::NotRead => now,
        };
        ExitReport::Read {
            exit,
            first,
            last: now,
        }
    }
}

/// Failed steps in a row and when the next try is due: exponential backoff per pod within
/// `pods.retryInitialBackoff` and `pods.retryMaxBackoff`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retry {
    pub failures: u32,
    pub due: Option<Timestamp>,
}

impl Retry {
    /// One more failure at `now`: the next try waits twice as long as the last, within bounds.
    pub fn failed(self, now: Timestamp, initial: Duration, max: Duration) -> Retry {
        let failures = self.failures.saturating_add(1);
        let delay = Backoff::new(initial, max).delay(failures);
        Retry {
            failures,
            due: now.checked_add(delay).ok(),
        }
    }

    /// How long until the next try is due, if it is not yet.
    pub fn wait(self, now: Timestamp) -> Option<Duration> {
        let due = self.due?;
        let left = now.duration_until(due);
        (left.is_positive()).then(|| left.unsigned_abs())
    }
}

/// The records of every pod orca reconciles, by UID.
#[derive(Default)]
pub struct PodRecords {
    by_uid: Mutex<HashMap<String, PodRecord>>,
}

impl PodRecords {
    /// The pod's record, made empty the first time.
    pub fn get_or_create(&self, uid: &str) -> PodRecord {
        lock(&self.by_uid)
            .entry(uid.to_owned())
            .or_default()
            .clone()
    }

    /// The pod's record, if it still has one.
    pub fn get(&self, uid: &str) -> Option<PodRecord> {
        lock(&self.by_uid).get(uid).cloned()
    }

    /// The pod's recorder, made with `make` the first time; `None` once the pod's record is
    /// gone.
    pub fn recorder(&self, uid: &str, make: impl FnOnce() -> PodRecorder) -> Option<PodRecorder> {
        lock(&self.by_uid)
            .get_mut(uid)
            .map(|record| record.events.get_or_insert_with(make).clone())
    }

    /// Changes the pod's record; a pod whose record was dropped (it left the store while a
    /// step was in flight) does not get one back.
    pub fn update(&self, uid: &str, change: impl FnOnce(&mut PodRecord)) {
        if let Some(record) = lock(&self.by_uid).get_mut(uid) {
            change(record);
        }
    }

    /// Whether `pod` is the watch's echo of orca's last write of it; the write is then
    /// forgotten, since the store holds it now.
    pub fn take_echo(&self, pod: &Pod) -> bool {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return false;
        };
        let mut by_uid = lock(&self.by_uid);
        let Some(record) = by_uid.get_mut(uid) else {
            return false;
        };
        let echo = record
            .write
            .as_ref()
            .is_some_and(|write| write.echoed_by(pod));
        if echo {
            record.write = None;
        }
        echo
    }

    /// Drops the records of pods not in `present` (the store's UIDs); answers how many.
    pub fn retain(&self, present: &HashSet<String>) -> usize {
        let mut by_uid = lock(&self.by_uid);
        let before = by_uid.len();
        by_uid.retain(|uid, _| present.contains(uid));
        crate::support::heap::shrink_when_sparse(&mut by_uid);
        before - by_uid.len()
    }

    pub fn len(&self) -> usize {
        lock(&self.by_uid).len()
    }

    /// Adds to `named` the instance this process's launch got for each pod (UID → instance
    /// id): the pod's own, whatever else a listing shows tagged for it.
    pub fn answered_launches(&self, named: &mut std::collections::HashMap<String, String>) {
        for (uid, record) in lock(&self.by_uid).iter() {
            if let Launch::Answered { launch, .. } = &record.launch {
                named.insert(uid.clone(), launch.instance_id.clone());
            }
        }
    }

    /// The pods waiting for room in their namespace.
    pub fn room_waiters(&self) -> Vec<Waiting> {
        lock(&self.by_uid)
            .iter()
            .filter_map(|(uid, record)| {
                let wait = record.waits_for_room.as_deref()?;
                Some(Waiting {
                    uid: uid.clone(),
                    namespace: wait.namespace.clone(),
                    price: wait.price,
                    since: wait.since,
                })
            })
            .collect()
    }

    /// Makes the pods `uids` due now (their backoff waived).
    pub fn make_due(&self, uids: &[String]) {
        let mut by_uid = lock(&self.by_uid);
        for uid in uids {
            if let Some(record) = by_uid.get_mut(uid) {
                record.retry.due = None;
            }
        }
    }

    /// The pods waiting for a plugin to load, made due now; answers their UIDs.
    pub fn wake_policy_waiters(&self) -> HashSet<String> {
        let mut by_uid = lock(&self.by_uid);
        by_uid
            .iter_mut()
            .filter(|(_, record)| record.waits_for_policy)
            .map(|(uid, record)| {
                record.waits_for_policy = false;
                record.retry.due = None;
                uid.clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn each_failure_pushes_the_next_try_further_out() {
        let (initial, max) = (Duration::from_secs(1), Duration::from_secs(60));
        let once = Retry::default().failed(at(100), initial, max);
        assert_eq!(once.wait(at(100)), Some(Duration::from_secs(1)));
        let twice = once.failed(at(101), initial, max);
        assert_eq!(twice.wait(at(101)), Some(Duration::from_secs(2)));
        assert_eq!(twice.wait(at(103)), None, "due now");
    }

    #[test]
    fn records_of_pods_gone_from_the_store_are_dropped_and_not_brought_back() {
        let records = PodRecords::default();
        records.get_or_create("a");
        records.get_or_create("b");
        let present = HashSet::from(["a".to_owned()]);
        assert_eq!(records.retain(&present), 1);
        records.update("b", |record| record.last_listed = Some(at(1)));
        assert!(records.get("b").is_none(), "an update does not recreate it");
        assert_eq!(records.len(), 1);
    }

    #[test]
    fn a_launch_in_doubt_keeps_its_first_moment() {
        let first = Launch::NotSent.in_doubt(at(10));
        assert_eq!(first.in_doubt(at(20)), Launch::InDoubt { since: at(10) });
    }
}
