//! Reads the simulated provider's journal, the tests' view of "the cloud": which instances
//! exist for which pod, and which were asked to terminate.

use std::collections::BTreeMap;
use std::path::Path;

/// One pod's instance as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalInstance {
    pub instance_id: String,
    pub terminated: bool,
    /// What the instance was launched to run, as orca resolved the pod (its containers with
    /// their environment, its volumes); `null` in records of orcas that did not keep it.
    pub workload: serde_json::Value,
}

/// Every launch recorded for each pod UID (more than one would be a duplicate).
pub fn launches_by_pod(path: &Path) -> BTreeMap<String, Vec<JournalInstance>> {
    let mut by_pod: BTreeMap<String, Vec<JournalInstance>> = BTreeMap::new();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines() {
        let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match record["op"].as_str() {
            Some("launch") => {
                let uid = record["pod"]["uid"].as_str().unwrap_or_default().to_owned();
                let instance_id = record["instance_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let terminated = !record["terminate_requested_at"].is_null();
                let workload = record["workload"].clone();
                let entry = by_pod.entry(uid).or_default();
                // Compaction rewrites live records on each start: same id is the same instance.
                match entry.iter_mut().find(|i| i.instance_id == instance_id) {
                    Some(existing) => existing.terminated |= terminated,
                    None => entry.push(JournalInstance {
                        instance_id,
                        terminated,
                        workload,
                    }),
                }
            }
            Some("terminate") => {
                let uid = record["uid"].as_str().unwrap_or_default();
                if let Some(instances) = by_pod.get_mut(uid) {
                    for instance in instances {
                        instance.terminated = true;
                    }
                }
            }
            _ => {}
        }
    }
    by_pod
}
