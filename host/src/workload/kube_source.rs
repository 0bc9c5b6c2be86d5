//! [`EnvSource`] backed by the apiserver, with orca's own client (the kubelet reads a pod's
//! objects with the node's credentials in the same way).

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret};
use kube::Api;

use super::source::{EnvSource, EnvSourceError, ObjectData};

/// Reads ConfigMaps, Secrets, claims and PersistentVolumes from the cluster, uncached: a pod's objects are read once per
/// launch (see `workload_spec`), and a launch is rare next to the cost of a stale value.
#[derive(Clone)]
pub struct KubeEnvSource {
    client: kube::Client,
}

impl KubeEnvSource {
    pub fn new(client: kube::Client) -> KubeEnvSource {
        KubeEnvSource { client }
    }
}

#[async_trait]
impl EnvSource for KubeEnvSource {
    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectData>, EnvSourceError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let object = api
            .get_opt(name)
            .await
            .map_err(|error| EnvSourceError::new(error.to_string()))?;
        Ok(object.map(|config_map| config_map.data.unwrap_or_default()))
    }

    async fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectData>, EnvSourceError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let object = api
            .get_opt(name)
            .await
            .map_err(|error| EnvSourceError::new(error.to_string()))?;
        object.map(|secret| decode_secret(name, secret)).transpose()
    }

    async fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, EnvSourceError> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name)
            .await
            .map_err(|error| EnvSourceError::new(error.to_string()))
    }

    async fn persistent_volume(
        &self,
        name: &str,
    ) -> Result<Option<PersistentVolume>, EnvSourceError> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.get_opt(name)
            .await
            .map_err(|error| EnvSourceError::new(error.to_string()))
    }
}

/// The Secret's `data` as text. `stringData` is write-only (the apiserver folds it into
/// `data`), so `data` is all there is.
fn decode_secret(name: &str, secret: Secret) -> Result<ObjectData, EnvSourceError> {
    secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, bytes)| match String::from_utf8(bytes.0) {
            Ok(text) => Ok((key, text)),
            Err(_) => Err(EnvSourceError::new(format!(
                "secret {name:?} key {key:?} is not UTF-8 text; orca passes secret values to \
                 instances as text, so binary values are not supported"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(data: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn secret_values_are_decoded_as_text() {
        let data = decode_secret("wandb", secret(&[("api-key", b"k3y\n")])).unwrap();
        assert_eq!(data["api-key"], "k3y\n");
    }

    #[test]
    fn a_binary_secret_value_is_an_error_naming_the_key() {
        let error = decode_secret(
            "tls",
            secret(&[("ok", b"fine"), ("store.jks", &[0xff, 0x00])]),
        )
        .unwrap_err();
        assert!(
            error
                .message
                .contains(r#"secret "tls" key "store.jks" is not UTF-8"#),
            "{error}"
        );
    }

    #[test]
    fn a_secret_without_data_is_empty_not_missing() {
        let data = decode_secret("empty", Secret::default()).unwrap();
        assert!(data.is_empty());
    }
}
