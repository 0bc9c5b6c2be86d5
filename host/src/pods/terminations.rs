//! Termination requests, remembered per instance id for the whole node: for pods' instances
//! and orphans alike, so a termination EC2 accepted is not asked again every second, one it
//! did not take is asked again, and one asked for an instance EC2 does not list yet is not
//! taken for done.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

use crate::provider::{InstanceStatus, Termination};
use crate::support::errors::lock;

/// The last request for one instance and its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    pub answer: Termination,
    pub at: Timestamp,
}

#[derive(Default)]
pub struct TerminationLedger {
    by_instance: Mutex<HashMap<String, Asked>>,
}

impl TerminationLedger {
    pub fn get(&self, instance_id: &str) -> Option<Asked> {
        lock(&self.by_instance).get(instance_id).copied()
    }

    pub fn note(&self, instance_id: &str, answer: Termination, at: Timestamp) {
        lock(&self.by_instance).insert(instance_id.to_owned(), Asked { answer, at });
    }

    /// Forgets requests that are done: the listing shows the instance going or gone, or does
    /// not show it and the request is older than `keep` (EC2 lists a new instance within that
    /// time, and a terminated one for an hour).
    pub fn prune(&self, listing: &[InstanceStatus], now: Timestamp, keep: Duration) {
        let listed: HashMap<&str, &InstanceStatus> = listing
            .iter()
            .map(|instance| (instance.instance_id.as_str(), instance))
            .collect();
        let mut by_instance = lock(&self.by_instance);
        by_instance.retain(|id, asked| match listed.get(id.as_str()) {
            Some(instance) => instance.state.needs_termination(),
            None => now.duration_since(asked.at).unsigned_abs() < keep,
        });
        crate::support::heap::shrink_when_sparse(&mut by_instance);
    }

    pub fn len(&self) -> usize {
        lock(&self.by_instance).len()
    }
}
