//! The EBS volumes of a pod: checked against EC2 before its instance is launched (each exists,
//! is not attached elsewhere, and the pod launches in its zone), and attached once the instance
//! runs. orca never detaches or deletes a volume: terminating the instance detaches it (after
//! the instance's shutdown unmounted it), and its data stays the user's.

use super::AwsProvider;
use super::api::{ApiError, Ec2Volume, VolumeState};
use super::classify::provider_error;
use super::workload::Attachment;
use crate::provider::zones::ZoneConstraint;
use crate::provider::{Attached, InstanceStatus, ProviderError};

/// What EC2's answer about a pod's volumes means for its launch: the zones it may launch in,
/// or why it cannot launch now.
///
/// # Errors
/// `VolumeNotFound` and `VolumeNotReady` (transient: a volume may yet appear or finish being
/// created), `VolumeInUse` (transient: attached to another instance, which must let it go
/// first), `VolumeUnusable` (permanent: deleted or failed).
pub fn launch_zones(
    zones: ZoneConstraint,
    attachments: &[Attachment],
    found: &[Ec2Volume],
) -> Result<ZoneConstraint, ProviderError> {
    let mut zones = zones;
    for attachment in attachments {
        let id = &attachment.volume_id;
        let Some(volume) = found.iter().find(|volume| &volume.volume_id == id) else {
            return Err(ProviderError::transient(
                "VolumeNotFound",
                format!("EBS volume {id} does not exist (in this region and account)"),
            ));
        };
        match volume.state {
            VolumeState::Available | VolumeState::InUse if volume.attached_to.is_empty() => {}
            VolumeState::Available | VolumeState::InUse => {
                return Err(ProviderError::transient(
                    "VolumeInUse",
                    format!(
                        "EBS volume {id} is attached to instance {}; the pod launches once it \
                         is detached there",
                        volume.attached_to.join(", ")
                    ),
                ));
            }
            VolumeState::Creating => {
                return Err(ProviderError::transient(
                    "VolumeNotReady",
                    format!("EBS volume {id} is still being created"),
                ));
            }
            VolumeState::Deleting | VolumeState::Deleted | VolumeState::Error => {
                return Err(ProviderError::permanent(
                    "VolumeUnusable",
                    format!("EBS volume {id} is {}", volume.state.as_str()),
                ));
            }
        }
        zones = zones.with_volume(id, [volume.zone.clone()]);
    }
    Ok(zones)
}

/// What a refused `AttachVolume` means: the instance not running yet passes; a volume in
/// another zone or gone does not.
fn attach_error(error: ApiError, volume_id: &str, instance_id: &str) -> ProviderError {
    match error.code.as_str() {
        "InvalidVolume.ZoneMismatch" => ProviderError::permanent(
            "VolumeZoneMismatch",
            format!("EBS volume {volume_id} is not in the zone of instance {instance_id}"),
        ),
        "InvalidVolume.NotFound" => ProviderError::transient(
            "VolumeNotFound",
            format!("EBS volume {volume_id} does not exist (any more)"),
        ),
        "IncorrectState" => ProviderError::transient(
            "InstanceNotRunning",
            format!(
                "instance {instance_id} cannot take volumes yet: {}",
                error.message
            ),
        ),
        _ => provider_error(error),
    }
}

impl AwsProvider {
    /// The zones `request`'s pod may launch in, its volumes' zones included, after asking
    /// EC2 where each volume is and whether another instance holds it. No volumes: no call.
    pub(super) async fn volume_zones(
        &self,
        zones: &ZoneConstraint,
        attachments: &[Attachment],
    ) -> Result<ZoneConstraint, ProviderError> {
        if attachments.is_empty() {
            return Ok(zones.clone());
        }
        let ids: Vec<String> = attachments.iter().map(|a| a.volume_id.clone()).collect();
        let found = self
            .api
            .describe_volumes(&ids)
            .await
            .map_err(provider_error)?;
        launch_zones(zones.clone(), attachments, &found)
    }

    /// [`crate::provider::Provider::attach`]: each volume the instance waits for, in device
    /// order. A volume EBS says is in use is asked about: attached to this instance already
    /// (an answer lost, another replica), it counts as attached.
    pub(super) async fn attach_volumes(
        &self,
        instance: &InstanceStatus,
    ) -> Result<Vec<Attached>, ProviderError> {
        let mut attached = Vec::new();
        for volume in instance.volumes_to_attach() {
            let (id, instance_id) = (&volume.volume_id, &instance.instance_id);
            match self
                .api
                .attach_volume(id, instance_id, &volume.device)
                .await
            {
                Ok(()) => {}
                Err(error) if error.code == "VolumeInUse" => {
                    let now = self
                        .api
                        .describe_volumes(std::slice::from_ref(id))
                        .await
                        .map_err(provider_error)?;
                    let holders: Vec<String> = now
                        .into_iter()
                        .flat_map(|volume| volume.attached_to)
                        .collect();
                    if !holders.contains(instance_id) {
                        return Err(ProviderError::transient(
                            "VolumeInUse",
                            format!(
                                "EBS volume {id} is attached to instance {}; it attaches to \
                                 {instance_id} once it is detached there",
                                holders.join(", ")
                            ),
                        ));
                    }
                }
                Err(error) => return Err(attach_error(error, id, instance_id)),
            }
            attached.push(Attached {
                volume_id: id.clone(),
                device: volume.device.clone(),
                instance_id: instance_id.clone(),
            });
        }
        Ok(attached)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ErrorClass;
    use crate::workload::FsType;

    fn attachment(id: &str) -> Attachment {
        Attachment {
            volume_id: id.to_owned(),
            letter: 'f',
            volume: "data".to_owned(),
            fs_type: FsType::Ext4,
            read_only: false,
        }
    }

    fn volume(id: &str, zone: &str, state: VolumeState, attached_to: &[&str]) -> Ec2Volume {
        Ec2Volume {
            volume_id: id.to_owned(),
            zone: zone.to_owned(),
            state,
            attached_to: attached_to.iter().map(|i| (*i).to_owned()).collect(),
        }
    }

    fn free() -> ZoneConstraint {
        ZoneConstraint::of(&Default::default())
    }

    #[test]
    fn the_pod_launches_in_its_volumes_zone() {
        let zones = launch_zones(
            free(),
            &[attachment("vol-a")],
            &[volume("vol-a", "us-west-2b", VolumeState::Available, &[])],
        )
        .unwrap();
        assert_eq!(zones.named_zones(), ["us-west-2b"]);
        assert!(!zones.admits("us-west-2a"));
    }

    #[test]
    fn each_volume_state_has_its_answer() {
        let cases = [
            (None, "VolumeNotFound", ErrorClass::Transient),
            (
                Some(volume(
                    "vol-a",
                    "us-west-2a",
                    VolumeState::InUse,
                    &["i-other"],
                )),
                "VolumeInUse",
                ErrorClass::Transient,
            ),
            (
                Some(volume("vol-a", "us-west-2a", VolumeState::Creating, &[])),
                "VolumeNotReady",
                ErrorClass::Transient,
            ),
            (
                Some(volume("vol-a", "us-west-2a", VolumeState::Deleting, &[])),
                "VolumeUnusable",
                ErrorClass::Permanent,
            ),
            (
                Some(volume("vol-a", "us-west-2a", VolumeState::Error, &[])),
                "VolumeUnusable",
                ErrorClass::Permanent,
            ),
        ];
        for (found, code, class) in cases {
            let found: Vec<Ec2Volume> = found.into_iter().collect();
            let error = launch_zones(free(), &[attachment("vol-a")], &found).unwrap_err();
            assert_eq!((error.code.as_str(), error.class), (code, class), "{error}");
        }
        let in_use = launch_zones(
            free(),
            &[attachment("vol-a")],
            &[volume(
                "vol-a",
                "us-west-2a",
                VolumeState::InUse,
                &["i-0abc"],
            )],
        )
        .unwrap_err();
        assert!(
            in_use.message.contains("attached to instance i-0abc"),
            "{in_use}"
        );
    }

    mod launched {
        use std::sync::Arc;

        use k8s_openapi::api::core::v1::Pod;
        use serde_json::json;

        use crate::config::{AwsConfig, LaunchApi};
        use crate::provider::aws::fake::FakeEc2;
        use crate::provider::aws::tests::{plan, provider_with};
        use crate::provider::plan::Market;
        use crate::provider::zones::ZoneConstraint;
        use crate::provider::{ErrorClass, InstanceState, Provider};
        use crate::workload::launch_request;
        use crate::workload::source::fake::FakeSource;

        /// A pod `name` mounting claim `data`, bound to EBS volume `volume_id`.
        fn claimed(name: &str, volume_id: &str) -> (Pod, FakeSource) {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
                "spec": {
                    "containers": [{"name": "main", "image": "busybox",
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                },
            }))
            .unwrap();
            let source = FakeSource::default().with_bound_claim(
                "data",
                json!({"driver": "ebs.csi.aws.com", "volumeHandle": volume_id}),
            );
            (pod, source)
        }

        fn over(fake: &Arc<FakeEc2>) -> super::AwsProvider {
            provider_with(
                fake.clone(),
                AwsConfig {
                    launch_api: LaunchApi::RunInstances,
                    subnet_ids: vec!["subnet-0a".to_owned(), "subnet-0b".to_owned()],
                    ..AwsConfig::default()
                },
            )
        }

        async fn create(
            provider: &super::AwsProvider,
            name: &str,
            volume_id: &str,
        ) -> Result<crate::provider::Launched, crate::provider::LaunchFailed> {
            let (pod, source) = claimed(name, volume_id);
            let plan = plan(&pod, Market::OnDemand, false);
            let request = launch_request(&pod, &plan, ZoneConstraint::of(&pod), &source)
                .await
                .unwrap();
            provider.create(&request).await
        }

        #[tokio::test]
        async fn a_volume_decides_the_zone_travels_as_a_tag_and_attaches_once_running() {
            let fake = Arc::new(FakeEc2::default());
            let volume_id = fake.create_volume("us-west-2b");
            let provider = over(&fake);
            let launched = create(&provider, "trainer", &volume_id).await.unwrap();
            let instance = fake.instances().pop().unwrap();
            assert_eq!(instance.zone.as_deref(), Some("us-west-2b"));
            assert_eq!(
                instance.tags.get("orca.research/volume/sdf"),
                Some(&volume_id)
            );
            let listed = provider.statuses().await.unwrap().pop().unwrap();
            assert_eq!(listed.volumes_to_attach().count(), 1);
            // Still pending: EC2 refuses, and the pod tries again later.
            let early = provider.attach(&listed).await.unwrap_err();
            assert_eq!(
                (early.code.as_str(), early.class),
                ("InstanceNotRunning", ErrorClass::Transient)
            );
            fake.set_state(&launched.instance_id, InstanceState::Running);
            let attached = provider.attach(&listed).await.unwrap();
            assert_eq!(
                (attached[0].volume_id.as_str(), attached[0].device.as_str()),
                (volume_id.as_str(), "/dev/sdf")
            );
            // Asked again from a listing that did not show it yet: already ours.
            assert_eq!(provider.attach(&listed).await.unwrap(), attached);
            let now = provider.statuses().await.unwrap().pop().unwrap();
            assert_eq!(now.volumes_to_attach().count(), 0);
        }

        #[tokio::test]
        async fn a_volume_held_by_another_instance_launches_nothing_until_it_is_free() {
            let fake = Arc::new(FakeEc2::default());
            let volume_id = fake.create_volume("us-west-2a");
            let provider = over(&fake);
            let first = create(&provider, "first", &volume_id).await.unwrap();
            fake.set_state(&first.instance_id, InstanceState::Running);
            let listed = provider.statuses().await.unwrap().pop().unwrap();
            provider.attach(&listed).await.unwrap();

            let waiting = create(&provider, "second", &volume_id).await.unwrap_err();
            assert_eq!(
                (waiting.error.code.as_str(), waiting.error.class),
                ("VolumeInUse", ErrorClass::Transient)
            );
            assert!(waiting.error.message.contains(&first.instance_id));
            assert_eq!(fake.count("RunInstances"), 1);

            fake.set_state(&first.instance_id, InstanceState::Terminated);
            let freed = fake.volumes().pop().unwrap();
            assert_eq!(
                (freed.state, freed.attached_to.len()),
                (super::VolumeState::Available, 0)
            );
            create(&provider, "second", &volume_id).await.unwrap();
            assert_eq!(fake.count("RunInstances"), 2);
        }

        #[tokio::test]
        async fn a_volume_where_orca_does_not_launch_fails_the_pod_naming_both() {
            let fake = Arc::new(FakeEc2::default());
            let volume_id = fake.create_volume("us-west-2c");
            let failed = create(&over(&fake), "far", &volume_id).await.unwrap_err();
            assert_eq!(
                (failed.error.code.as_str(), failed.error.class),
                ("NoSubnetInZone", ErrorClass::Permanent)
            );
            let message = &failed.error.message;
            assert!(
                message.contains(&format!("us-west-2c (volume {volume_id})"))
                    && message.contains("subnet-0a (us-west-2a)"),
                "{message}"
            );
            assert_eq!(fake.count("RunInstances"), 0);
        }
    }

    #[test]
    fn attach_refusals_say_whether_they_pass() {
        let cases = [
            (
                "InvalidVolume.ZoneMismatch",
                "VolumeZoneMismatch",
                ErrorClass::Permanent,
            ),
            (
                "InvalidVolume.NotFound",
                "VolumeNotFound",
                ErrorClass::Transient,
            ),
            (
                "IncorrectState",
                "InstanceNotRunning",
                ErrorClass::Transient,
            ),
        ];
        for (code, ours, class) in cases {
            let error = attach_error(ApiError::service(code, "refused"), "vol-a", "i-a");
            assert_eq!((error.code.as_str(), error.class), (ours, class), "{code}");
        }
    }
}
