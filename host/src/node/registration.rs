//! Creating the Node, or bringing an existing one in line with config, and writing its status.

use std::net::IpAddr;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeStatus};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::conditions::ReadyTracker;
use super::lease::FIELD_MANAGER;
use super::object::{configured_taints, desired_node, merge_taints, static_status};
use crate::cluster::apiserver::{ServerSchema, Written};
use crate::config::NodeConfig;

/// Why the Node could not be registered or updated.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error("reading node skeleton {path}")]
    SkeletonUnreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("node skeleton {path} is not a Node: {message}")]
    SkeletonInvalid { path: String, message: String },
    #[error("creating or updating Node {name}")]
    NodeWriteFailed {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing status of Node {name}")]
    StatusWriteFailed {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Reads a Node YAML used as the base of the registered Node.
///
/// # Errors
/// [`RegistrationError::SkeletonUnreadable`] or [`RegistrationError::SkeletonInvalid`],
/// naming the file.
pub fn load_skeleton(path: &std::path::Path) -> Result<Node, RegistrationError> {
    let display = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|source| RegistrationError::SkeletonUnreadable {
            path: display.clone(),
            source,
        })?;
    serde_saphyr::from_str(&text).map_err(|error| RegistrationError::SkeletonInvalid {
        path: display,
        message: error.to_string(),
    })
}

/// Writes the Node and its status.
pub struct Registrar {
    api: Api<Node>,
    config: NodeConfig,
    skeleton: Option<Node>,
    address: IpAddr,
    /// What the apiserver knows: the status leaves out the fields it does not.
    schema: Arc<ServerSchema>,
}

impl Registrar {
    /// # Errors
    /// [`RegistrationError::SkeletonUnreadable`] / [`RegistrationError::SkeletonInvalid`] for a
    /// bad `node.skeleton` file.
    pub fn new(
        client: kube::Client,
        config: NodeConfig,
        address: IpAddr,
        schema: Arc<ServerSchema>,
    ) -> Result<Registrar, RegistrationError> {
        let skeleton = config.skeleton.as_deref().map(load_skeleton).transpose()?;
        Ok(Registrar {
            api: Api::all(client),
            config,
            skeleton,
            address,
            schema,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Creates the Node if it is missing; otherwise applies config's labels and annotations and
    /// adds config's taints, leaving taints other controllers set (like `not-ready`) in place.
    /// Returns the Node's UID.
    ///
    /// # Errors
    /// [`RegistrationError::NodeWriteFailed`].
    pub async fn ensure_node(&self) -> Result<String, RegistrationError> {
        let failed = |source| RegistrationError::NodeWriteFailed {
            name: self.config.name.clone(),
            source,
        };
        let desired = desired_node(&self.config, self.skeleton.clone());
        let existing = match self.api.get_opt(&self.config.name).await.map_err(failed)? {
            Some(existing) => existing,
            None => {
                let params = PostParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PostParams::default()
                };
                match self.api.create(&params, &desired).await {
                    Ok(created) => return Ok(created.metadata.uid.unwrap_or_default()),
                    // Someone (an earlier orca, racing) created it meanwhile: update it below.
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        self.api.get(&self.config.name).await.map_err(failed)?
                    }
                    Err(error) => return Err(failed(error)),
                }
            }
        };
        let metadata = json!({
            "metadata": {
                "labels": desired.metadata.labels,
                "annotations": desired.metadata.annotations,
            }
        });
        self.api
            .patch(
                &self.config.name,
                &PatchParams::default(),
                &Patch::Merge(&metadata),
            )
            .await
            .map_err(failed)?;
        let current = existing
            .spec
            .as_ref()
            .and_then(|spec| spec.taints.clone())
            .unwrap_or_default();
        let merged = merge_taints(current.clone(), &configured_taints(&self.config));
        if merged != current {
            // `spec.taints` is an atomic list: the resourceVersion precondition makes a concurrent
            // change by the node lifecycle controller a 409 (retried by the caller), never lost.
            let patch = json!({
                "metadata": { "resourceVersion": existing.metadata.resource_version },
                "spec": { "taints": merged },
            });
            self.api
                .patch(
                    &self.config.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(failed)?;
        }
        Ok(existing.metadata.uid.unwrap_or_default())
    }

    /// Writes the full status: capacity, info, addresses, port, and conditions with a fresh
    /// heartbeat. Server-side apply: conditions are a map keyed by type, so conditions other
    /// controllers own are left alone. Fields the apiserver does not know (`declaredFeatures`
    /// before 1.35) are left out; one it refuses anyway is left out and the status written
    /// again ([`ServerSchema::write`]), so no field keeps the Node from Ready.
    ///
    /// # Errors
    /// [`RegistrationError::StatusWriteFailed`].
    pub async fn write_status(&self, ready: &ReadyTracker) -> Result<(), RegistrationError> {
        let status = NodeStatus {
            conditions: Some(ready.conditions(Timestamp::now())),
            ..static_status(&self.config, self.address)
        };
        let patch = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": { "name": self.config.name },
            "status": status,
        });
        let (api, name) = (&self.api, self.config.name.as_str());
        self.schema
            .write(Written::Node, patch, |patch| async move {
                api.patch_status(
                    name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await
            })
            .await
            .map_err(|source| RegistrationError::StatusWriteFailed {
                name: self.config.name.clone(),
                source,
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skeleton_yaml_is_loaded_as_a_node() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.yaml");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Node\nmetadata:\n  labels:\n    team: ml\n",
        )
        .unwrap();
        let node = load_skeleton(&path).unwrap();
        assert_eq!(node.metadata.labels.unwrap()["team"], "ml");
    }

    #[test]
    fn missing_or_malformed_skeleton_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.yaml");
        let error = load_skeleton(&missing).unwrap_err().to_string();
        assert!(error.contains("absent.yaml"), "{error}");

        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "metadata: [not, a, map]\n").unwrap();
        let error = load_skeleton(&bad).unwrap_err().to_string();
        assert!(
            error.contains("bad.yaml") && error.contains("not a Node"),
            "{error}"
        );
    }
}
