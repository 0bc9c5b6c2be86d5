//! The pod as orca last wrote it, kept until the pod store catches up with the write.
//!
//! At scale the reflector store lags orca's own writes by seconds. A reconcile in that window
//! would decide on the pre-write pod: write the same status again, or a newer one on a stale
//! resourceVersion, and get a 409 over and over until the store catches up (measured: 8.7
//! status patches per pod at 1000 pods instead of 2). So the pod the apiserver returned for
//! the write stands in for the stored one while the store still shows the version the write
//! was based on. Any other stored version (our write arrived, or someone else wrote) is the
//! truth again, so a status another controller changed is still seen and corrected.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// One write: the version it was based on and the pod the apiserver answered with.
#[derive(Debug, Clone)]
pub struct LastWrite {
    read_version: String,
    written: Arc<Pod>,
}

impl LastWrite {
    pub fn new(read_version: String, written: Pod) -> LastWrite {
        LastWrite {
            read_version,
            written: Arc::new(written),
        }
    }

    /// The pod as written, while `stored` is still the version the write was based on.
    pub fn newer_than(&self, stored: &Pod) -> Option<Arc<Pod>> {
        (version(stored) == Some(self.read_version.as_str())).then(|| self.written.clone())
    }

    /// Whether `stored` is the watch's echo of this very write: nothing in it is news.
    pub fn echoed_by(&self, stored: &Pod) -> bool {
        version(stored).is_some() && version(stored) == version(&self.written)
    }
}

fn version(pod: &Pod) -> Option<&str> {
    pod.metadata.resource_version.as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(version: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                resource_version: Some(version.to_owned()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn the_written_pod_stands_in_only_while_the_store_shows_the_version_it_was_based_on() {
        let write = LastWrite::new("10".into(), pod("11"));
        let newer = write.newer_than(&pod("10")).expect("the store lags");
        assert_eq!(version(&newer), Some("11"));
        assert!(
            write.newer_than(&pod("11")).is_none(),
            "the store caught up"
        );
        assert!(
            write.newer_than(&pod("12")).is_none(),
            "someone else wrote after us: the store is the truth"
        );
    }

    #[test]
    fn only_the_version_the_write_produced_is_its_echo() {
        let write = LastWrite::new("10".into(), pod("11"));
        assert!(write.echoed_by(&pod("11")));
        assert!(!write.echoed_by(&pod("10")));
        assert!(!write.echoed_by(&pod("12")));
    }
}
