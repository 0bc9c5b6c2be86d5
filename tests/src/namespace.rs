//! A namespace per test, so tests sharing one cluster never see each other's objects.

use anyhow::Result;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

/// A uniquely named namespace created for one test.
pub struct TestNamespace {
    pub name: String,
    api: Api<Namespace>,
}

impl TestNamespace {
    /// Creates `<prefix>-<random suffix>`, labelled so leftovers are easy to find.
    /// The prefix is this test binary's alone ([`crate::names::claim`]).
    pub async fn create(client: &kube::Client, prefix: &str) -> Result<TestNamespace> {
        crate::names::claim(crate::names::NameKind::Namespace, prefix);
        let name = format!("{prefix}-{:08x}", random_suffix());
        let api: Api<Namespace> = Api::all(client.clone());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([("orca.research/e2e".to_owned(), "true".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        api.create(&PostParams::default(), &namespace).await?;
        Ok(TestNamespace { name, api })
    }

    /// Deletes the namespace (and, through the namespace controller, everything in it).
    pub async fn delete(self) -> Result<()> {
        self.api
            .delete(&self.name, &DeleteParams::default())
            .await?;
        Ok(())
    }
}

fn random_suffix() -> u32 {
    use std::hash::{BuildHasher, RandomState};
    // RandomState is seeded per process from the OS; hashing the time mixes in per-call entropy.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    RandomState::new().hash_one(nanos) as u32
}
