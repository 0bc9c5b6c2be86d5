//! Where the objects a pod uses come from (its ConfigMaps and Secrets, its claims and their
//! PersistentVolumes): a narrow trait (the seam for fakes), and a per-pod memo so each
//! ConfigMap and Secret is read once and every container sees the same version.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

/// A key → text map, as a ConfigMap's `data` or a Secret's decoded `data`.
pub type ObjectData = BTreeMap<String, String>;

/// Reads the objects a pod uses: ConfigMaps and Secrets for its environment and its volumes,
/// PersistentVolumeClaims and the PersistentVolumes they are bound to for its disks.
///
/// # Guarantees an implementation gives
/// - `Ok(None)` means the object does not exist; `Err` means it could not be read (the
///   apiserver is unreachable, access is denied), which may be different on a retry.
/// - Secret values are decoded text, not base64.
#[async_trait]
pub trait EnvSource: Send + Sync {
    /// The ConfigMap's `data` (`binaryData` is not included).
    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectData>, EnvSourceError>;
    /// The Secret's `data`, each value decoded as UTF-8.
    async fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectData>, EnvSourceError>;
    /// The PersistentVolumeClaim, as stored.
    async fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, EnvSourceError>;
    /// The PersistentVolume (cluster-scoped), as stored.
    async fn persistent_volume(
        &self,
        name: &str,
    ) -> Result<Option<PersistentVolume>, EnvSourceError>;
}

/// Why an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EnvSourceError {
    pub message: String,
}

impl EnvSourceError {
    pub fn new(message: impl Into<String>) -> EnvSourceError {
        EnvSourceError {
            message: message.into(),
        }
    }
}

/// A cluster without any object: for launching pods that use none (benchmarks, tests of
/// what happens around a launch).
pub struct NoObjects;

#[async_trait]
impl EnvSource for NoObjects {
    async fn config_map(&self, _: &str, _: &str) -> Result<Option<ObjectData>, EnvSourceError> {
        Ok(None)
    }

    async fn secret(&self, _: &str, _: &str) -> Result<Option<ObjectData>, EnvSourceError> {
        Ok(None)
    }

    async fn claim(
        &self,
        _: &str,
        _: &str,
    ) -> Result<Option<PersistentVolumeClaim>, EnvSourceError> {
        Ok(None)
    }

    async fn persistent_volume(&self, _: &str) -> Result<Option<PersistentVolume>, EnvSourceError> {
        Ok(None)
    }
}

/// The two kinds of object a pod can read values from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    ConfigMap,
    Secret,
}

impl fmt::Display for ObjectKind {
    /// Spelled as in the pod spec's field names (`configMapKeyRef`, `secretRef`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ObjectKind::ConfigMap => "configMap",
            ObjectKind::Secret => "secret",
        })
    }
}

/// The objects of one pod's namespace, each read at most once.
pub(crate) struct Objects<'a> {
    source: &'a dyn EnvSource,
    namespace: String,
    read: HashMap<(ObjectKind, String), Option<Arc<ObjectData>>>,
}

impl<'a> Objects<'a> {
    pub(crate) fn new(source: &'a dyn EnvSource, namespace: &str) -> Objects<'a> {
        Objects {
            source,
            namespace: namespace.to_owned(),
            read: HashMap::new(),
        }
    }

    /// The object's data, `None` when it does not exist.
    pub(crate) async fn get(
        &mut self,
        kind: ObjectKind,
        name: &str,
    ) -> Result<Option<Arc<ObjectData>>, EnvSourceError> {
        let key = (kind, name.to_owned());
        if let Some(known) = self.read.get(&key) {
            return Ok(known.clone());
        }
        let data = match kind {
            ObjectKind::ConfigMap => self.source.config_map(&self.namespace, name).await?,
            ObjectKind::Secret => self.source.secret(&self.namespace, name).await?,
        }
        .map(Arc::new);
        self.read.insert(key, data.clone());
        Ok(data)
    }

    /// The claim of this namespace, `None` when it does not exist.
    pub(crate) async fn claim(
        &self,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, EnvSourceError> {
        self.source.claim(&self.namespace, name).await
    }

    /// The PersistentVolume, `None` when it does not exist.
    pub(crate) async fn persistent_volume(
        &self,
        name: &str,
    ) -> Result<Option<PersistentVolume>, EnvSourceError> {
        self.source.persistent_volume(name).await
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! An in-memory [`EnvSource`] that counts reads and can be told to fail.

    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Default)]
    pub(crate) struct FakeSource {
        pub(crate) config_maps: BTreeMap<String, ObjectData>,
        pub(crate) secrets: BTreeMap<String, ObjectData>,
        pub(crate) claims: BTreeMap<String, PersistentVolumeClaim>,
        pub(crate) persistent_volumes: BTreeMap<String, PersistentVolume>,
        pub(crate) failure: Mutex<Option<String>>,
        pub(crate) reads: AtomicUsize,
    }

    impl FakeSource {
        pub(crate) fn config_map(mut self, name: &str, data: &[(&str, &str)]) -> FakeSource {
            self.config_maps.insert(name.to_owned(), to_data(data));
            self
        }

        pub(crate) fn secret(mut self, name: &str, data: &[(&str, &str)]) -> FakeSource {
            self.secrets.insert(name.to_owned(), to_data(data));
            self
        }

        /// The claim, by its `metadata.name`.
        pub(crate) fn with_claim(mut self, claim: PersistentVolumeClaim) -> FakeSource {
            let name = claim.metadata.name.clone().unwrap_or_default();
            self.claims.insert(name, claim);
            self
        }

        /// The PersistentVolume, by its `metadata.name`.
        pub(crate) fn with_persistent_volume(mut self, volume: PersistentVolume) -> FakeSource {
            let name = volume.metadata.name.clone().unwrap_or_default();
            self.persistent_volumes.insert(name, volume);
            self
        }

        /// Claim `claim` of the namespace, bound to PersistentVolume `pv-<claim>` whose
        /// source is the CSI volume `csi` (`{"driver": …, "volumeHandle": …, …}`).
        pub(crate) fn with_bound_claim(self, claim: &str, csi: serde_json::Value) -> FakeSource {
            let uid = format!("uid-{claim}");
            let volume = format!("pv-{claim}");
            self.with_claim(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": claim, "namespace": "ml", "uid": uid},
                    "spec": {"volumeName": volume},
                    "status": {"phase": "Bound"},
                }))
                .expect("a claim"),
            )
            .with_persistent_volume(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": volume},
                    "spec": {
                        "csi": csi,
                        "claimRef": {"name": claim, "namespace": "ml", "uid": uid},
                    },
                }))
                .expect("a PersistentVolume"),
            )
        }

        fn failed(&self) -> Result<(), EnvSourceError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            match self.failure.lock().unwrap().clone() {
                Some(message) => Err(EnvSourceError::new(message)),
                None => Ok(()),
            }
        }

        pub(crate) fn failing(self, message: &str) -> FakeSource {
            *self.failure.lock().unwrap() = Some(message.to_owned());
            self
        }

        fn lookup(
            &self,
            objects: &BTreeMap<String, ObjectData>,
            namespace: &str,
            name: &str,
        ) -> Result<Option<ObjectData>, EnvSourceError> {
            assert_eq!(namespace, "ml", "objects are read from the pod's namespace");
            self.failed()?;
            Ok(objects.get(name).cloned())
        }
    }

    fn to_data(data: &[(&str, &str)]) -> ObjectData {
        data.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[async_trait]
    impl EnvSource for FakeSource {
        async fn config_map(
            &self,
            namespace: &str,
            name: &str,
        ) -> Result<Option<ObjectData>, EnvSourceError> {
            self.lookup(&self.config_maps, namespace, name)
        }

        async fn secret(
            &self,
            namespace: &str,
            name: &str,
        ) -> Result<Option<ObjectData>, EnvSourceError> {
            self.lookup(&self.secrets, namespace, name)
        }

        async fn claim(
            &self,
            namespace: &str,
            name: &str,
        ) -> Result<Option<PersistentVolumeClaim>, EnvSourceError> {
            assert_eq!(namespace, "ml", "claims are read from the pod's namespace");
            self.failed()?;
            Ok(self.claims.get(name).cloned())
        }

        async fn persistent_volume(
            &self,
            name: &str,
        ) -> Result<Option<PersistentVolume>, EnvSourceError> {
            self.failed()?;
            Ok(self.persistent_volumes.get(name).cloned())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::fake::FakeSource;
    use super::*;

    #[tokio::test]
    async fn each_object_is_read_once_even_when_missing() {
        let source = FakeSource::default().config_map("settings", &[("a", "1")]);
        let mut objects = Objects::new(&source, "ml");
        for _ in 0..3 {
            let data = objects
                .get(ObjectKind::ConfigMap, "settings")
                .await
                .unwrap();
            assert_eq!(data.unwrap()["a"], "1");
            let missing = objects.get(ObjectKind::Secret, "settings").await.unwrap();
            assert!(missing.is_none());
        }
        assert_eq!(source.reads.load(Ordering::SeqCst), 2);
    }
}
