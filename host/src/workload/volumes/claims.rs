//! `persistentVolumeClaim` (and generic `ephemeral`) volumes: the claim, the PersistentVolume
//! it is bound to, and from that what the pod's instance mounts: an EBS volume it attaches (the
//! EBS CSI driver's, `ebs.csi.aws.com` with `volumeHandle: vol-…`, or the in-tree
//! `awsElasticBlockStore`, `volumeID: vol-…` or `aws://zone/vol-…`), or an EFS file system it
//! mounts over NFS (the EFS CSI driver's, `efs.csi.aws.com` with `volumeHandle:
//! fs-…[:path[:fsap-…]]`). A claim not bound yet, or bound to a volume that does not exist
//! yet, is waited for, as the kubelet waits; any other volume type is refused with its name.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde::{Deserialize, Serialize};

use crate::config::is_resource_id;

/// The EBS CSI driver's name, as its PersistentVolumes carry it.
pub const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";
/// The EFS CSI driver's name.
pub const EFS_CSI_DRIVER: &str = "efs.csi.aws.com";
pub use crate::provider::zones::EBS_ZONE_LABEL;
/// The zone keys a PersistentVolume's node affinity may name a zone by.
const ZONE_KEYS: [&str; 3] = [
    EBS_ZONE_LABEL,
    crate::provider::zones::ZONE_LABEL,
    "failure-domain.beta.kubernetes.io/zone",
];

/// An EBS volume the pod's instance attaches and mounts where its containers mount the claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EbsVolume {
    /// `vol-…`.
    pub volume_id: String,
    /// The filesystem it holds, or is given when it holds none and may be formatted.
    pub fs_type: FsType,
    /// Mounted read-only (the claim's volume source or the PersistentVolume says so, or it
    /// is `ReadOnlyMany` only). A read-only volume is never formatted.
    pub read_only: bool,
    /// The zones the PersistentVolume's node affinity admits; empty: it names none (the
    /// provider learns the volume's zone from EC2 either way).
    pub zones: BTreeSet<String>,
    /// The claim it was bound to, for messages.
    pub claim: String,
}

/// An EFS file system (or a directory of it, or an access point) the pod's instance mounts
/// where its containers mount the claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EfsVolume {
    /// `fs-…`.
    pub file_system_id: String,
    /// The directory of the file system mounted, absolute (`/` by default).
    pub path: String,
    /// `fsap-…`: mounted through this access point (which needs EFS's mount helper).
    pub access_point: Option<String>,
    pub read_only: bool,
    /// The claim it was bound to, for messages.
    pub claim: String,
}

/// What a claim's PersistentVolume is on the instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimedVolume {
    Ebs(EbsVolume),
    Efs(EfsVolume),
}

impl EbsVolume {
    /// Whether the bootstrap may create a filesystem on it when it holds none: only a volume
    /// mounted read-write (the kubelet's rule too: a read-only volume is never formatted).
    pub fn may_format(&self) -> bool {
        !self.read_only
    }
}

/// The filesystems orca mounts an EBS volume with (the EBS CSI driver's `fsType` values that
/// Linux AMIs ship `mkfs` for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsType {
    Ext2,
    Ext3,
    Ext4,
    Xfs,
}

impl FsType {
    fn parse(value: &str) -> Option<FsType> {
        match value {
            "ext2" => Some(FsType::Ext2),
            "ext3" => Some(FsType::Ext3),
            "" | "ext4" => Some(FsType::Ext4),
            "xfs" => Some(FsType::Xfs),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FsType::Ext2 => "ext2",
            FsType::Ext3 => "ext3",
            FsType::Ext4 => "ext4",
            FsType::Xfs => "xfs",
        }
    }
}

impl fmt::Display for FsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a claim's volume is not there yet: each may change without the pod changing, so the
/// pod waits (the kubelet waits for the same).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimWait {
    #[error("not found")]
    NotFound,
    #[error("is not bound to a PersistentVolume yet (phase {phase})")]
    NotBound { phase: String },
    #[error("is bound to PersistentVolume {volume:?}, which does not exist")]
    VolumeNotFound { volume: String },
    #[error("is bound to PersistentVolume {volume:?}, which is bound to another claim")]
    VolumeBoundElsewhere { volume: String },
    #[error("could not be read: {message}")]
    ReadFailed { message: String },
}

/// Why a claim's volume cannot be used on an orca node; only another volume can change that.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimRefusal {
    #[error("was not created for this pod: an ephemeral volume's claim is owned by its pod")]
    NotThePods,
    #[error(
        "its PersistentVolume {volume:?} is of {kind}; orca nodes mount EBS volumes \
         ({EBS_CSI_DRIVER} or awsElasticBlockStore) and EFS file systems ({EFS_CSI_DRIVER})"
    )]
    Kind { volume: String, kind: String },
    #[error(
        "its PersistentVolume {volume:?} names {handle:?}, which is not an EFS volume handle \
         (fs-…, fs-…:/path or fs-…:/path:fsap-…)"
    )]
    EfsHandle { volume: String, handle: String },
    #[error(
        "its PersistentVolume {volume:?} has volumeMode Block; orca nodes mount volumes as \
         filesystems only (volumeMode Filesystem)"
    )]
    Block { volume: String },
    #[error("its PersistentVolume {volume:?} names {handle:?}, which is not an EBS volume id")]
    Handle { volume: String, handle: String },
    #[error(
        "its PersistentVolume {volume:?} asks for fsType {fs_type:?}; orca mounts ext2, ext3, \
         ext4 and xfs"
    )]
    FsType { volume: String, fs_type: String },
    #[error(
        "its PersistentVolume {volume:?} names partition {partition}; orca mounts whole volumes"
    )]
    Partition { volume: String, partition: i32 },
}

/// The volume of claim `claim_name` (read from `claim` and the PersistentVolume `volume`,
/// `None` when absent), mounted read-only when `read_only` (the pod's volume source says so).
///
/// # Errors
/// [`ClaimProblem::Wait`] while the claim or its volume are not there yet;
/// [`ClaimProblem::Refused`] for a volume orca cannot mount.
pub fn claimed_volume(
    claim_name: &str,
    claim: Option<&PersistentVolumeClaim>,
    volume: Option<&PersistentVolume>,
    read_only: bool,
) -> Result<ClaimedVolume, ClaimProblem> {
    let claim = claim.ok_or(ClaimWait::NotFound)?;
    let phase = claim
        .status
        .as_ref()
        .and_then(|status| status.phase.clone())
        .unwrap_or_else(|| "Pending".to_owned());
    let bound_to = claim
        .spec
        .as_ref()
        .and_then(|spec| spec.volume_name.clone())
        .filter(|name| !name.is_empty());
    let Some(volume_name) = bound_to.filter(|_| phase == "Bound") else {
        return Err(ClaimWait::NotBound { phase }.into());
    };
    let volume = volume.ok_or_else(|| ClaimWait::VolumeNotFound {
        volume: volume_name.clone(),
    })?;
    let claimed_by = volume
        .spec
        .as_ref()
        .and_then(|spec| spec.claim_ref.as_ref());
    let same_claim = claimed_by.is_some_and(|reference| {
        reference.name.as_deref() == Some(claim_name)
            && reference.namespace == claim.metadata.namespace
            && (reference.uid.is_none() || reference.uid == claim.metadata.uid)
    });
    if !same_claim {
        return Err(ClaimWait::VolumeBoundElsewhere {
            volume: volume_name,
        }
        .into());
    }
    let spec = volume.spec.as_ref();
    let read_only_many = spec
        .and_then(|spec| spec.access_modes.as_ref())
        .is_some_and(|modes| !modes.is_empty() && modes.iter().all(|m| m == "ReadOnlyMany"));
    let read_only = read_only || read_only_many;
    Ok(match volume_source(&volume_name, volume)? {
        Source::Ebs(source) => ClaimedVolume::Ebs(EbsVolume {
            volume_id: source.volume_id,
            fs_type: source.fs_type,
            read_only: read_only || source.read_only,
            zones: affinity_zones(volume)
                .into_iter()
                .chain(source.zone)
                .collect(),
            claim: claim_name.to_owned(),
        }),
        Source::Efs(efs) => ClaimedVolume::Efs(EfsVolume {
            read_only: read_only || efs.read_only,
            claim: claim_name.to_owned(),
            ..efs
        }),
    })
}

/// The EFS file system a CSI volume handle names: `fs-…`, `fs-…:/path`, `fs-…:/path:fsap-…`
/// (an empty path is `/`).
fn efs_handle(handle: &str) -> Option<(String, String, Option<String>)> {
    let mut parts = handle.split(':');
    let file_system = parts.next().filter(|id| is_resource_id(id, "fs-"))?;
    let path = match parts.next() {
        None | Some("") => "/",
        Some(path) => path,
    };
    let access_point = match parts.next() {
        None | Some("") => None,
        Some(id) if is_resource_id(id, "fsap-") => Some(id.to_owned()),
        Some(_) => return None,
    };
    let clean =
        path.starts_with('/') && !path.split('/').any(|part| part == "..") && !path.contains('\0');
    (clean && parts.next().is_none())
        .then(|| (file_system.to_owned(), path.to_owned(), access_point))
}

/// Why a claim gives no volume now: the pod waits, or is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimProblem {
    Wait(ClaimWait),
    Refused(ClaimRefusal),
}

impl From<ClaimWait> for ClaimProblem {
    fn from(wait: ClaimWait) -> ClaimProblem {
        ClaimProblem::Wait(wait)
    }
}

impl From<ClaimRefusal> for ClaimProblem {
    fn from(refusal: ClaimRefusal) -> ClaimProblem {
        ClaimProblem::Refused(refusal)
    }
}

/// What a PersistentVolume's source is.
enum Source {
    Ebs(EbsSource),
    /// Claim and read-only of the pod still to be added.
    Efs(EfsVolume),
}

/// What a PersistentVolume's source says of its EBS volume.
struct EbsSource {
    volume_id: String,
    fs_type: FsType,
    read_only: bool,
    /// The zone an in-tree `aws://zone/vol-…` id names.
    zone: Option<String>,
}

fn volume_source(name: &str, volume: &PersistentVolume) -> Result<Source, ClaimRefusal> {
    let spec = volume.spec.as_ref();
    if spec.and_then(|spec| spec.volume_mode.as_deref()) == Some("Block") {
        return Err(ClaimRefusal::Block {
            volume: name.to_owned(),
        });
    }
    let fs_type = |value: Option<&str>| {
        FsType::parse(value.unwrap_or_default()).ok_or_else(|| ClaimRefusal::FsType {
            volume: name.to_owned(),
            fs_type: value.unwrap_or_default().to_owned(),
        })
    };
    let handle = |handle: &str| {
        is_resource_id(handle, "vol-")
            .then(|| handle.to_owned())
            .ok_or_else(|| ClaimRefusal::Handle {
                volume: name.to_owned(),
                handle: handle.to_owned(),
            })
    };
    if let Some(csi) = spec.and_then(|spec| spec.csi.as_ref()) {
        return match csi.driver.as_str() {
            EBS_CSI_DRIVER => Ok(Source::Ebs(EbsSource {
                volume_id: handle(&csi.volume_handle)?,
                fs_type: fs_type(csi.fs_type.as_deref())?,
                read_only: csi.read_only == Some(true),
                zone: None,
            })),
            EFS_CSI_DRIVER => {
                let (file_system_id, path, access_point) = efs_handle(&csi.volume_handle)
                    .ok_or_else(|| ClaimRefusal::EfsHandle {
                        volume: name.to_owned(),
                        handle: csi.volume_handle.clone(),
                    })?;
                Ok(Source::Efs(EfsVolume {
                    file_system_id,
                    path,
                    access_point,
                    read_only: csi.read_only == Some(true),
                    claim: String::new(),
                }))
            }
            driver => Err(ClaimRefusal::Kind {
                volume: name.to_owned(),
                kind: format!("CSI driver {driver}"),
            }),
        };
    }
    if let Some(ebs) = spec.and_then(|spec| spec.aws_elastic_block_store.as_ref()) {
        if let Some(partition) = ebs.partition.filter(|&p| p != 0) {
            return Err(ClaimRefusal::Partition {
                volume: name.to_owned(),
                partition,
            });
        }
        // `vol-…`, or `aws://us-west-2a/vol-…` (the zone may be empty: `aws:///vol-…`).
        let (zone, id) = match ebs.volume_id.strip_prefix("aws://") {
            Some(rest) => match rest.split_once('/') {
                Some((zone, id)) => ((!zone.is_empty()).then(|| zone.to_owned()), id),
                None => (None, rest),
            },
            None => (None, ebs.volume_id.as_str()),
        };
        return Ok(Source::Ebs(EbsSource {
            volume_id: handle(id)?,
            fs_type: fs_type(ebs.fs_type.as_deref())?,
            read_only: ebs.read_only == Some(true),
            zone,
        }));
    }
    Err(ClaimRefusal::Kind {
        volume: name.to_owned(),
        kind: source_kind(volume),
    })
}

/// The zones a PersistentVolume's required node affinity admits: per term, the zones every
/// zone requirement's `In` list allows; terms are ORed. Empty when it names no zone (or a
/// term admits every zone).
fn affinity_zones(volume: &PersistentVolume) -> BTreeSet<String> {
    let terms = volume
        .spec
        .as_ref()
        .and_then(|spec| spec.node_affinity.as_ref())
        .and_then(|affinity| affinity.required.as_ref())
        .map(|required| required.node_selector_terms.as_slice())
        .unwrap_or_default();
    let mut zones = BTreeSet::new();
    for term in terms {
        let mut admitted: Option<BTreeSet<String>> = None;
        for requirement in term.match_expressions.iter().flatten() {
            if !ZONE_KEYS.contains(&requirement.key.as_str()) || requirement.operator != "In" {
                continue;
            }
            let listed: BTreeSet<String> = requirement.values.iter().flatten().cloned().collect();
            admitted = Some(match admitted {
                None => listed,
                Some(before) => before.intersection(&listed).cloned().collect(),
            });
        }
        match admitted {
            // A term that names no zone admits them all.
            None => return BTreeSet::new(),
            Some(admitted) => zones.extend(admitted),
        }
    }
    zones
}

/// The PersistentVolume's source kind as its spec spells it (`nfs`, `hostPath`, …).
fn source_kind(volume: &PersistentVolume) -> String {
    const NOT_SOURCES: [&str; 9] = [
        "accessModes",
        "capacity",
        "claimRef",
        "mountOptions",
        "nodeAffinity",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "volumeAttributesClassName",
        "volumeMode",
    ];
    serde_json::to_value(&volume.spec)
        .ok()
        .and_then(|value| {
            value
                .as_object()?
                .keys()
                .find(|key| !NOT_SOURCES.contains(&key.as_str()))
                .cloned()
        })
        .unwrap_or_else(|| "no volume source".to_owned())
}

#[cfg(test)]
mod tests;
