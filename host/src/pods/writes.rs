//! The last status write of a pod, kept until the pod store catches up with it.
//!
//! At scale the reflector store lags orca's own writes by seconds. A reconcile in that window
//! sees the pre-write status, would write the same status again with a stale resourceVersion,
//! and get a 409, over and over until the store catches up (measured: 8.7 status patches per
//! pod at 1000 pods instead of 2). While the store still shows the version a write was based
//! on, that write is known to be in flight and is not repeated. Any other version (our write
//! arrived, or someone else wrote) goes through the normal comparison, so a status another
//! controller changed is still corrected.

use k8s_openapi::api::core::v1::PodStatus;

/// One status write: the version it was based on and what it wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct LastWrite {
    read_version: String,
    status: serde_json::Value,
}

impl LastWrite {
    /// `None` if the status cannot be serialized (it always can).
    pub fn new(read_version: String, status: &PodStatus) -> Option<LastWrite> {
        Some(LastWrite {
            read_version,
            status: serde_json::to_value(status).ok()?,
        })
    }

    /// True when `desired` was already written on top of `read_version`, the version the
    /// store still shows: the write is in flight, not missing.
    pub fn covers(&self, read_version: &str, desired: &PodStatus) -> bool {
        self.read_version == read_version
            && serde_json::to_value(desired).is_ok_and(|desired| desired == self.status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(phase: &str) -> PodStatus {
        PodStatus {
            phase: Some(phase.to_owned()),
            ..PodStatus::default()
        }
    }

    #[test]
    fn a_write_is_in_flight_only_while_the_store_shows_the_version_it_was_based_on() {
        let write = LastWrite::new("10".into(), &status("Running")).unwrap();
        assert!(write.covers("10", &status("Running")));
        assert!(
            !write.covers("10", &status("Succeeded")),
            "a different status is written"
        );
        assert!(
            !write.covers("11", &status("Running")),
            "a newer version is compared normally"
        );
    }
}
