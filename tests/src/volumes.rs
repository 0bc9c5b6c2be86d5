//! EBS volumes for tests of pods with claims: a volume made in moto, the PersistentVolume of
//! the EBS CSI driver naming it, and a claim bound to it.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::pods::burst_pod;
use crate::wait::poll_until;

/// An EBS volume made in moto, and the PersistentVolume and claim bound to it; the
/// PersistentVolume (cluster-scoped) is deleted on drop, the claim with its namespace.
pub struct Claimed {
    /// The EBS volume's id, or the EFS volume handle.
    pub volume_id: String,
    persistent_volume: String,
    client: kube::Client,
}

impl Claimed {
    /// A 10 GiB volume in `zone`, its PersistentVolume of the EBS CSI driver, and claim
    /// `claim` in `namespace` bound to it (by the controller-manager).
    pub async fn make(
        client: &kube::Client,
        ec2: &aws_sdk_ec2::Client,
        namespace: &str,
        claim: &str,
        zone: &str,
    ) -> Result<Claimed> {
        let volume_id = ec2
            .create_volume()
            .availability_zone(zone)
            .size(10)
            .send()
            .await?
            .volume_id()
            .context("a volume id")?
            .to_owned();
        let csi = json!({"driver": "ebs.csi.aws.com", "volumeHandle": volume_id, "fsType": "ext4"});
        Claimed::bind(client, namespace, claim, csi, volume_id).await
    }

    /// The PersistentVolume of EFS `handle` (`fs-…[:path[:fsap-…]]`), and claim `claim` in
    /// `namespace` bound to it. No EFS API is called: the file system need not exist.
    pub async fn efs(
        client: &kube::Client,
        namespace: &str,
        claim: &str,
        handle: &str,
    ) -> Result<Claimed> {
        let csi = json!({"driver": "efs.csi.aws.com", "volumeHandle": handle});
        Claimed::bind(client, namespace, claim, csi, handle.to_owned()).await
    }

    /// A PersistentVolume of the CSI source `csi` and claim `claim` bound to it.
    async fn bind(
        client: &kube::Client,
        namespace: &str,
        claim: &str,
        csi: serde_json::Value,
        volume_id: String,
    ) -> Result<Claimed> {
        let persistent_volume = format!("{namespace}-{claim}");
        let volume: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": persistent_volume},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "csi": csi,
                "claimRef": {"namespace": namespace, "name": claim},
            },
        }))?;
        Api::<PersistentVolume>::all(client.clone())
            .create(&PostParams::default(), &volume)
            .await?;
        let made = Claimed {
            volume_id,
            persistent_volume: persistent_volume.clone(),
            client: client.clone(),
        };
        let claim_object: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": claim},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": persistent_volume,
                "resources": {"requests": {"storage": "10Gi"}},
            },
        }))?;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
        claims.create(&PostParams::default(), &claim_object).await?;
        poll_until(
            "the claim bound",
            Duration::from_secs(60),
            Duration::from_millis(250),
            || async {
                let now = claims.get(claim).await?;
                let bound = now.status.and_then(|s| s.phase).as_deref() == Some("Bound");
                Ok(bound.then_some(()))
            },
        )
        .await?;
        Ok(made)
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        let (client, name) = (self.client.clone(), self.persistent_volume.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = Api::<PersistentVolume>::all(client)
                    .delete(&name, &DeleteParams::default())
                    .await;
            });
        }
    }
}

/// A pod on `node` that mounts claim `claim` at `/data`.
pub fn pod_with_claim(name: &str, node: &str, claim: &str) -> Pod {
    mounting_claim(burst_pod(name, node, &[]), claim)
}

/// `pod` with claim `claim` mounted at `/data` in its first container.
pub fn mounting_claim(mut pod: Pod, claim: &str) -> Pod {
    let spec = pod.spec.as_mut().expect("spec");
    spec.volumes = Some(vec![
        serde_json::from_value(json!({
            "name": "data", "persistentVolumeClaim": {"claimName": claim}
        }))
        .expect("a volume"),
    ]);
    spec.containers[0].volume_mounts = Some(vec![
        serde_json::from_value(json!({
            "name": "data", "mountPath": "/data"
        }))
        .expect("a mount"),
    ]);
    pod
}
