//! Pod volumes on an instance. An instance runs one pod, so a volume is a directory of the
//! instance mounted into the containers that mount it:
//!
//! - `emptyDir`: an empty directory; with `medium: Memory` a tmpfs (sized by `sizeLimit` when
//!   set), so containers share it as they would on a node. A disk `sizeLimit` is not enforced.
//! - `configMap` and `secret`: files with the content read at launch, with `items` and
//!   `defaultMode`/`mode` honoured, mounted read-only. They are a snapshot taken at launch;
//!   later changes to the object do not reach the instance.
//! - The projected service-account token volume (`kube-api-access-*`) is skipped: instances
//!   are outside the cluster network, so a token would not help them reach the apiserver.
//! - `persistentVolumeClaim`, and generic `ephemeral` volumes (whose claim is named after the
//!   pod and the volume): an EBS volume the instance attaches and mounts, or an EFS file system
//!   it mounts, read from the claim's PersistentVolume (see [`claims`]).
//! - Everything else (hostPath, nfs, csi, …) is refused.

mod claims;

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, KeyToPath, Pod, Volume};
use serde::{Deserialize, Serialize};

use claims::{ClaimProblem, ClaimedVolume, claimed_volume};
pub use claims::{
    ClaimRefusal, ClaimWait, EBS_CSI_DRIVER, EBS_ZONE_LABEL, EFS_CSI_DRIVER, EbsVolume, EfsVolume,
    FsType,
};

use super::fields::units;
use super::source::{EnvSourceError, ObjectKind, Objects};
use crate::config::is_dns_label;

/// The mode of configMap and secret files when the pod does not say (`0644`).
const DEFAULT_MODE: u32 = 0o644;

/// A volume as it exists on the instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeSpec {
    /// An `emptyDir` on the instance's disk.
    Directory { name: String },
    /// An `emptyDir` with `medium: Memory`: a tmpfs of `size_bytes` (half the RAM when unset).
    Memory {
        name: String,
        size_bytes: Option<u64>,
    },
    /// A `configMap` or `secret` volume: its files.
    Files {
        name: String,
        files: Vec<VolumeFile>,
    },
    /// A `persistentVolumeClaim` (or `ephemeral`) volume: an EBS volume attached to the
    /// instance, its filesystem mounted.
    Ebs { name: String, volume: EbsVolume },
    /// A `persistentVolumeClaim` volume of an EFS file system, mounted over NFS.
    Efs { name: String, volume: EfsVolume },
}

impl VolumeSpec {
    pub fn name(&self) -> &str {
        match self {
            VolumeSpec::Directory { name }
            | VolumeSpec::Memory { name, .. }
            | VolumeSpec::Files { name, .. }
            | VolumeSpec::Ebs { name, .. }
            | VolumeSpec::Efs { name, .. } => name,
        }
    }

    fn read_only(&self) -> bool {
        match self {
            VolumeSpec::Files { .. } => true,
            VolumeSpec::Ebs { volume, .. } => volume.read_only,
            VolumeSpec::Efs { volume, .. } => volume.read_only,
            VolumeSpec::Directory { .. } | VolumeSpec::Memory { .. } => false,
        }
    }

    /// The EBS volume it is, if it is one.
    pub fn ebs(&self) -> Option<&EbsVolume> {
        match self {
            VolumeSpec::Ebs { volume, .. } => Some(volume),
            _ => None,
        }
    }
}

/// One file of a configMap or secret volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeFile {
    /// Relative to the volume's directory; may contain `/`, never `..`.
    pub path: String,
    /// Permission bits, e.g. `0o644`.
    pub mode: u32,
    pub content: String,
}

/// A volume mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub volume: String,
    /// `subPath`: a path inside the volume, relative, never `..`.
    pub sub_path: Option<String>,
    /// Absolute path in the container.
    pub container_path: String,
    pub read_only: bool,
}

/// Why a pod's volumes cannot be set up on an instance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error(
        "volume {volume:?}: {kind} volumes are not supported on orca nodes; \
         use emptyDir, configMap, secret or a persistentVolumeClaim of an EBS or EFS volume"
    )]
    Unsupported { volume: String, kind: String },
    #[error("volume {volume:?}: {kind} {name:?} not found")]
    ObjectNotFound {
        volume: String,
        kind: ObjectKind,
        name: String,
    },
    #[error("volume {volume:?}: {kind} {name:?} has no key {key:?}")]
    KeyNotFound {
        volume: String,
        kind: ObjectKind,
        name: String,
        key: String,
    },
    #[error("volume {volume:?}: reading {kind} {name:?} failed: {cause}")]
    LookupFailed {
        volume: String,
        kind: ObjectKind,
        name: String,
        cause: EnvSourceError,
    },
    /// The claim or its PersistentVolume is not there yet: the pod waits for it.
    #[error("volume {volume:?}: persistentVolumeClaim {claim:?} {wait}")]
    ClaimNotReady {
        volume: String,
        claim: String,
        wait: ClaimWait,
    },
    #[error("volume {volume:?}: persistentVolumeClaim {claim:?}: {refusal}")]
    ClaimRefused {
        volume: String,
        claim: String,
        refusal: ClaimRefusal,
    },
    #[error("volume {volume:?}: {problem}")]
    Invalid { volume: String, problem: String },
    #[error("container {container:?}: volumeMount {volume:?}: {problem}")]
    Mount {
        container: String,
        volume: String,
        problem: String,
    },
}

impl VolumeError {
    /// Whether a retry may succeed without the pod changing (an object or key may appear).
    pub fn may_resolve_later(&self) -> bool {
        matches!(
            self,
            VolumeError::ObjectNotFound { .. }
                | VolumeError::KeyNotFound { .. }
                | VolumeError::LookupFailed { .. }
                | VolumeError::ClaimNotReady { .. }
        )
    }
}

/// The pod's volumes, and the names of those skipped (their mounts are dropped too).
pub(crate) struct Volumes {
    pub(crate) specs: Vec<VolumeSpec>,
    skipped: HashSet<String>,
}

/// Decides how each of the pod's volumes exists on the instance, reading configMap and secret
/// contents.
///
/// # Errors
/// [`VolumeError`] for an unsupported kind, a missing non-optional object or item key, or a
/// name or path that would leave the volume's directory.
pub(crate) async fn plan_volumes(
    pod: &Pod,
    objects: &mut Objects<'_>,
) -> Result<Volumes, VolumeError> {
    let mut volumes = Volumes {
        specs: Vec::new(),
        skipped: HashSet::new(),
    };
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let name = volume.name.clone();
        if !is_dns_label(&name) {
            return Err(VolumeError::Invalid {
                volume: name,
                problem: "a volume name must be a DNS label (a-z, 0-9 and -)".to_owned(),
            });
        }
        // Stored pods come without it (`pods::stored`); a pod read elsewhere may have it.
        if crate::pods::is_service_account_token(volume) {
            volumes.skipped.insert(name);
            continue;
        }
        volumes
            .specs
            .push(volume_spec(pod, volume, name, objects).await?);
    }
    Ok(volumes)
}

/// How one volume, named `name`, exists on the instance, by its kind.
async fn volume_spec(
    pod: &Pod,
    volume: &Volume,
    name: String,
    objects: &mut Objects<'_>,
) -> Result<VolumeSpec, VolumeError> {
    if let Some(source) = &volume.persistent_volume_claim {
        let read_only = source.read_only == Some(true);
        claim_spec(name, &source.claim_name, None, read_only, objects).await
    } else if volume.ephemeral.is_some() {
        // The ephemeral volume controller names the claim `<pod>-<volume>` and makes the pod
        // its owner; a claim of that name the pod does not own is not its volume.
        let claim = format!(
            "{}-{name}",
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        let owner = pod.metadata.uid.as_deref();
        claim_spec(name, &claim, owner, false, objects).await
    } else if let Some(empty_dir) = &volume.empty_dir {
        empty_dir_spec(name, empty_dir)
    } else if let Some(source) = &volume.config_map {
        let files = object_files(
            &name,
            ObjectKind::ConfigMap,
            &source.name,
            source.items.as_deref(),
            source.default_mode,
            source.optional == Some(true),
            objects,
        )
        .await?;
        Ok(VolumeSpec::Files { name, files })
    } else if let Some(source) = &volume.secret {
        let secret_name = source.secret_name.clone().unwrap_or_default();
        let files = object_files(
            &name,
            ObjectKind::Secret,
            &secret_name,
            source.items.as_deref(),
            source.default_mode,
            source.optional == Some(true),
            objects,
        )
        .await?;
        Ok(VolumeSpec::Files { name, files })
    } else {
        Err(VolumeError::Unsupported {
            kind: volume_kind(volume),
            volume: name,
        })
    }
}

/// A claim's volume: its EBS volume when the claim is bound to one (and, for an ephemeral
/// volume, owned by the pod `owner`).
async fn claim_spec(
    name: String,
    claim_name: &str,
    owner: Option<&str>,
    read_only: bool,
    objects: &mut Objects<'_>,
) -> Result<VolumeSpec, VolumeError> {
    let not_ready = |wait: ClaimWait| VolumeError::ClaimNotReady {
        volume: name.clone(),
        claim: claim_name.to_owned(),
        wait,
    };
    let read_failed = |error: EnvSourceError| {
        not_ready(ClaimWait::ReadFailed {
            message: error.message,
        })
    };
    let claim = objects.claim(claim_name).await.map_err(read_failed)?;
    if let (Some(owner), Some(claim)) = (owner, &claim) {
        let owned = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|reference| reference.uid == owner);
        if !owned {
            return Err(VolumeError::ClaimRefused {
                volume: name,
                claim: claim_name.to_owned(),
                refusal: ClaimRefusal::NotThePods,
            });
        }
    }
    let bound_to = claim
        .as_ref()
        .and_then(|claim| claim.spec.as_ref())
        .and_then(|spec| spec.volume_name.clone())
        .filter(|volume| !volume.is_empty());
    let persistent_volume = match &bound_to {
        Some(volume) => objects
            .persistent_volume(volume)
            .await
            .map_err(read_failed)?,
        None => None,
    };
    match claimed_volume(
        claim_name,
        claim.as_ref(),
        persistent_volume.as_ref(),
        read_only,
    ) {
        Ok(ClaimedVolume::Ebs(volume)) => Ok(VolumeSpec::Ebs { name, volume }),
        Ok(ClaimedVolume::Efs(volume)) => Ok(VolumeSpec::Efs { name, volume }),
        Err(ClaimProblem::Wait(wait)) => Err(not_ready(wait)),
        Err(ClaimProblem::Refused(refusal)) => Err(VolumeError::ClaimRefused {
            volume: name,
            claim: claim_name.to_owned(),
            refusal,
        }),
    }
}

/// An `emptyDir`: a directory on the instance's disk, or a tmpfs of its `sizeLimit` for
/// `medium: Memory`.
fn empty_dir_spec(
    name: String,
    empty_dir: &EmptyDirVolumeSource,
) -> Result<VolumeSpec, VolumeError> {
    match empty_dir.medium.as_deref().unwrap_or("") {
        "" => Ok(VolumeSpec::Directory { name }),
        "Memory" => {
            let size_bytes = match &empty_dir.size_limit {
                None => None,
                Some(limit) => Some(units(&limit.0).filter(|&b| b > 0).ok_or_else(|| {
                    VolumeError::Invalid {
                        volume: name.clone(),
                        problem: format!(
                            "emptyDir sizeLimit {:?} is not a positive quantity",
                            limit.0
                        ),
                    }
                })?),
            };
            Ok(VolumeSpec::Memory { name, size_bytes })
        }
        medium => Err(VolumeError::Invalid {
            volume: name,
            problem: format!(
                "emptyDir medium {medium:?} is not supported on orca nodes; \
                 use the default medium or Memory"
            ),
        }),
    }
}

/// The files of a configMap or secret volume, as the kubelet lays them out: every key as a
/// file of its name, or only `items`, each at its `path`.
async fn object_files(
    volume: &str,
    kind: ObjectKind,
    object: &str,
    items: Option<&[KeyToPath]>,
    default_mode: Option<i32>,
    optional: bool,
    objects: &mut Objects<'_>,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let invalid = |problem: String| VolumeError::Invalid {
        volume: volume.to_owned(),
        problem,
    };
    let default_mode = mode(default_mode, DEFAULT_MODE).map_err(&invalid)?;
    let data = objects
        .get(kind, object)
        .await
        .map_err(|cause| VolumeError::LookupFailed {
            volume: volume.to_owned(),
            kind,
            name: object.to_owned(),
            cause,
        })?;
    let Some(data) = data else {
        if optional {
            return Ok(Vec::new());
        }
        return Err(VolumeError::ObjectNotFound {
            volume: volume.to_owned(),
            kind,
            name: object.to_owned(),
        });
    };
    let mut files = Vec::new();
    match items {
        None | Some([]) => {
            for (key, content) in data.iter() {
                files.push(VolumeFile {
                    path: relative_path(key).map_err(&invalid)?,
                    mode: default_mode,
                    content: content.clone(),
                });
            }
        }
        Some(items) => {
            for item in items {
                let Some(content) = data.get(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(VolumeError::KeyNotFound {
                        volume: volume.to_owned(),
                        kind,
                        name: object.to_owned(),
                        key: item.key.clone(),
                    });
                };
                files.push(VolumeFile {
                    path: relative_path(&item.path).map_err(&invalid)?,
                    mode: mode(item.mode, default_mode).map_err(&invalid)?,
                    content: content.clone(),
                });
            }
        }
    }
    Ok(files)
}

/// A file mode between 0 and 0777, or `default`.
fn mode(mode: Option<i32>, default: u32) -> Result<u32, String> {
    match mode {
        None => Ok(default),
        Some(mode) => u32::try_from(mode)
            .ok()
            .filter(|&m| m <= 0o777)
            .ok_or_else(|| format!("file mode {mode} is not between 0 and 0777 (511)")),
    }
}

/// `path` if it stays inside the directory it is relative to.
fn relative_path(path: &str) -> Result<String, String> {
    let escapes = path.is_empty()
        || path.starts_with('/')
        || path.split('/').any(|part| part == "..")
        || path.contains('\0');
    if escapes {
        Err(format!(
            "path {path:?} must be relative and must not contain \"..\""
        ))
    } else {
        Ok(path.to_owned())
    }
}

/// The container's mounts of the planned volumes; mounts of skipped volumes are dropped.
///
/// # Errors
/// [`VolumeError::Mount`] for a mount of a volume the pod lacks, a `subPath` leaving the
/// volume, or `subPathExpr`.
pub(crate) fn container_mounts(
    container: &Container,
    volumes: &Volumes,
) -> Result<Vec<Mount>, VolumeError> {
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        if volumes.skipped.contains(&mount.name) {
            continue;
        }
        let error = |problem: String| VolumeError::Mount {
            container: container.name.clone(),
            volume: mount.name.clone(),
            problem,
        };
        let volume = volumes
            .specs
            .iter()
            .find(|v| v.name() == mount.name)
            .ok_or_else(|| error("the pod has no volume of that name".to_owned()))?;
        if mount
            .sub_path_expr
            .as_deref()
            .is_some_and(|e| !e.is_empty())
        {
            return Err(error(
                "subPathExpr is not supported on orca nodes; use subPath".to_owned(),
            ));
        }
        let sub_path = match mount.sub_path.as_deref() {
            None | Some("") => None,
            Some(sub_path) => {
                Some(relative_path(sub_path).map_err(|p| error(format!("subPath {p}")))?)
            }
        };
        if !mount.mount_path.starts_with('/') {
            return Err(error(format!(
                "mountPath {:?} must be an absolute path",
                mount.mount_path
            )));
        }
        mounts.push(Mount {
            volume: mount.name.clone(),
            sub_path,
            container_path: mount.mount_path.clone(),
            read_only: mount.read_only == Some(true) || volume.read_only(),
        });
    }
    Ok(mounts)
}

/// The volume's kind as the pod spec spells it (`persistentVolumeClaim`, `hostPath`, …): the
/// one field set besides `name`.
fn volume_kind(volume: &Volume) -> String {
    serde_json::to_value(volume)
        .ok()
        .and_then(|value| {
            value
                .as_object()?
                .keys()
                .find(|key| *key != "name")
                .cloned()
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests;
