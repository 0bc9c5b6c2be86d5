//! The EBS volumes a pod's instance attaches: one device per distinct volume, `/dev/sdf` to
//! `/dev/sdp` (the names AWS recommends for EBS volumes on Linux), in the order the pod lists
//! its volumes. The instance carries them as tags (`orca.research/volume/sdf = vol-…`), set
//! at launch, so that whoever serves the pod later (a restarted orca, another replica) attaches
//! what the instance waits for, from a listing alone.

use std::collections::BTreeMap;

use crate::provider::VolumeAttachment;
use crate::workload::{FsType, VolumeSpec, WorkloadSpec};

/// The prefix of the instance tags naming the volumes it attaches: the device's name
/// (`sdf`) follows, the value is the volume's id.
pub const TAG_VOLUME_PREFIX: &str = "orca.research/volume/";
/// The device letters orca attaches volumes at: `/dev/sdf` to `/dev/sdp`.
const LETTERS: std::ops::RangeInclusive<char> = 'f'..='p';

/// One EBS volume attached to the pod's instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub volume_id: String,
    /// The device it is attached at is `/dev/sd<letter>`.
    pub letter: char,
    /// The pod's first volume of it: where it is mounted; the pod's other volumes of the same
    /// EBS volume are bind mounts of that directory.
    pub volume: String,
    pub fs_type: FsType,
    /// Mounted read-only: every volume of the pod that uses it is read-only. Only a volume
    /// mounted read-write may be formatted.
    pub read_only: bool,
}

impl Attachment {
    /// The device name `AttachVolume` is given.
    pub fn device(&self) -> String {
        format!("/dev/sd{}", self.letter)
    }

    /// The instance tag that names it.
    pub fn tag(&self) -> (String, String) {
        (
            format!("{TAG_VOLUME_PREFIX}sd{}", self.letter),
            self.volume_id.clone(),
        )
    }
}

/// Why a pod's volumes cannot all be attached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the pod uses {count} EBS volumes; orca attaches at most {max} to one instance \
     (/dev/sdf to /dev/sdp)"
)]
pub struct TooManyVolumes {
    pub count: usize,
    pub max: usize,
}

/// The EBS volumes `spec` attaches, each once, with its device.
///
/// # Errors
/// [`TooManyVolumes`] past the eleven device names orca uses.
pub fn attachments(spec: &WorkloadSpec) -> Result<Vec<Attachment>, TooManyVolumes> {
    let mut attachments: Vec<Attachment> = Vec::new();
    for (name, ebs) in spec.volumes.iter().filter_map(|volume| match volume {
        VolumeSpec::Ebs { name, volume } => Some((name, volume)),
        _ => None,
    }) {
        if let Some(known) = attachments
            .iter_mut()
            .find(|known| known.volume_id == ebs.volume_id)
        {
            known.read_only &= ebs.read_only;
            continue;
        }
        attachments.push(Attachment {
            volume_id: ebs.volume_id.clone(),
            letter: 'f',
            volume: name.clone(),
            fs_type: ebs.fs_type,
            read_only: ebs.read_only,
        });
    }
    let max = LETTERS.count();
    if attachments.len() > max {
        return Err(TooManyVolumes {
            count: attachments.len(),
            max,
        });
    }
    for (attachment, letter) in attachments.iter_mut().zip(LETTERS) {
        attachment.letter = letter;
    }
    Ok(attachments)
}

/// The volumes an instance's tags say it attaches, each with whether `attached` (the
/// volume ids the instance's block devices show) holds it, in device order.
pub fn wanted_volumes(
    tags: &BTreeMap<String, String>,
    attached: &[String],
) -> Vec<VolumeAttachment> {
    tags.iter()
        .filter_map(|(key, volume_id)| {
            let device = key.strip_prefix(TAG_VOLUME_PREFIX)?;
            let letter = device.strip_prefix("sd")?;
            let valid = letter.len() == 1 && letter.chars().all(|c| LETTERS.contains(&c));
            valid.then(|| VolumeAttachment {
                volume_id: volume_id.clone(),
                device: format!("/dev/{device}"),
                attached: attached.contains(volume_id),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::workload::{EbsVolume, RestartPolicy};

    fn spec(volumes: &[(&str, &str, bool)]) -> WorkloadSpec {
        WorkloadSpec {
            pod: "ml/train".into(),
            restart_policy: RestartPolicy::Never,
            init_containers: Vec::new(),
            containers: Vec::new(),
            volumes: volumes
                .iter()
                .map(|(name, id, read_only)| VolumeSpec::Ebs {
                    name: (*name).to_owned(),
                    volume: EbsVolume {
                        volume_id: (*id).to_owned(),
                        fs_type: FsType::Ext4,
                        read_only: *read_only,
                        zones: BTreeSet::new(),
                        claim: "c".into(),
                    },
                })
                .chain([VolumeSpec::Directory {
                    name: "scratch".into(),
                }])
                .collect(),
            gpu: false,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn each_volume_attaches_once_at_the_next_device_writable_if_any_use_writes() {
        let got = attachments(&spec(&[
            ("data", "vol-0000000000000000a", true),
            ("ckpt", "vol-0000000000000000b", false),
            ("data-rw", "vol-0000000000000000a", false),
        ]))
        .unwrap();
        let summary: Vec<(&str, String, &str, bool)> = got
            .iter()
            .map(|a| {
                (
                    a.volume_id.as_str(),
                    a.device(),
                    a.volume.as_str(),
                    a.read_only,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "vol-0000000000000000a",
                    "/dev/sdf".to_owned(),
                    "data",
                    false
                ),
                (
                    "vol-0000000000000000b",
                    "/dev/sdg".to_owned(),
                    "ckpt",
                    false
                ),
            ]
        );
        assert_eq!(
            got[1].tag(),
            (
                "orca.research/volume/sdg".to_owned(),
                "vol-0000000000000000b".to_owned()
            )
        );
    }

    #[test]
    fn eleven_volumes_attach_and_a_twelfth_is_refused() {
        let ids: Vec<(String, String)> = (0..12)
            .map(|i| (format!("v{i}"), format!("vol-{i:017x}")))
            .collect();
        let volumes: Vec<(&str, &str, bool)> = ids
            .iter()
            .map(|(name, id)| (name.as_str(), id.as_str(), false))
            .collect();
        let eleven = attachments(&spec(&volumes[..11])).unwrap();
        assert_eq!(eleven.last().unwrap().device(), "/dev/sdp");
        assert_eq!(
            attachments(&spec(&volumes)),
            Err(TooManyVolumes { count: 12, max: 11 })
        );
    }

    #[test]
    fn the_tags_say_what_is_wanted_and_the_block_devices_what_is_attached() {
        let tags: BTreeMap<String, String> = [
            ("orca.research/volume/sdf", "vol-0000000000000000a"),
            ("orca.research/volume/sdg", "vol-0000000000000000b"),
            // Not a device orca uses: someone else's tag.
            ("orca.research/volume/sda1", "vol-0000000000000000c"),
            ("orca.research/pod-uid", "u-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let got = wanted_volumes(&tags, &["vol-0000000000000000b".to_owned()]);
        assert_eq!(
            got,
            [
                VolumeAttachment {
                    volume_id: "vol-0000000000000000a".into(),
                    device: "/dev/sdf".into(),
                    attached: false,
                },
                VolumeAttachment {
                    volume_id: "vol-0000000000000000b".into(),
                    device: "/dev/sdg".into(),
                    attached: true,
                },
            ]
        );
    }
}
