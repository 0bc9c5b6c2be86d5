//! A pod's EBS volumes end to end (issue 44): the real orca binary, the real scheduler and
//! controller-manager binding claims, moto's EC2 behind the real AWS SDK (AttachVolume with
//! EC2's refusals, added by the harness's moto wrapper). The bootstrap's side of a volume
//! (waiting for the device, formatting only when allowed, mounting) runs against fakes in
//! `bootstrap/runs.rs`, since no instance boots here.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::VolumeState;
use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use orca_e2e::ec2::{default_subnets_by_zone, tags_of};
use orca_e2e::pods::{self, instance_id, phase};
use orca_e2e::volumes::{Claimed, pod_with_claim};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(250);

/// The user data instance `id` was launched with.
async fn user_data(ec2: &aws_sdk_ec2::Client, id: &str) -> Result<String> {
    Ok(ec2
        .describe_instance_attribute()
        .instance_id(id)
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
        .send()
        .await?
        .user_data()
        .and_then(|value| value.value())
        .map(|encoded| base64::engine::general_purpose::STANDARD.decode(encoded))
        .transpose()?
        .map(String::from_utf8)
        .transpose()?
        .unwrap_or_default())
}

async fn volume(ec2: &aws_sdk_ec2::Client, id: &str) -> Result<aws_sdk_ec2::types::Volume> {
    ec2.describe_volumes()
        .volume_ids(id)
        .send()
        .await?
        .volumes()
        .first()
        .cloned()
        .context("the volume exists")
}

/// A pod with an EBS claim launches in the volume's zone (orca may launch in every zone), gets
/// the volume attached at `/dev/sdf` (the device its user data waits for), says so in an
/// Event, and runs. Deleting the pod terminates the instance; the volume is then available
/// and kept.
#[tokio::test]
async fn an_ebs_claim_attaches_its_volume_in_its_zone_and_the_volume_outlives_the_pod() -> Result<()>
{
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let ec2 = cluster.ec2_client().await;
    let zones = default_subnets_by_zone(&ec2).await?;
    let subnets: Vec<&str> = zones.values().map(String::as_str).collect();
    let zone = zones.keys().nth(1).context("a second zone")?.clone();
    let node = unique_node_name("ebs");
    let extra = format!("subnetIds: [{}]\n", subnets.join(", "));
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, &extra))?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-ebs").await?;
    let claimed = Claimed::make(&client, &ec2, &namespace.name, "checkpoints", &zone).await?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    pods::create(&pods_api, &pod_with_claim("trainer", &node, "checkpoints")).await?;
    let running =
        pods::wait_for_phase(&pods_api, "trainer", "Running", Duration::from_secs(60)).await?;
    let id = instance_id(&running).context("the pod names its instance")?;

    let instance = orca_e2e::ec2::instance(&ec2, &id).await?;
    let placed = instance
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap_or_default();
    ensure!(
        placed == zone,
        "launched in {placed}, the volume is in {zone}"
    );
    let mapped = instance.block_device_mappings().iter().any(|mapping| {
        mapping.device_name() == Some("/dev/sdf")
            && mapping.ebs().and_then(|ebs| ebs.volume_id()) == Some(&claimed.volume_id)
    });
    ensure!(
        mapped,
        "the volume at /dev/sdf: {:?}",
        instance.block_device_mappings()
    );
    ensure!(
        tags_of(&instance).get("orca.research/volume/sdf") == Some(&claimed.volume_id),
        "the instance names the volume it attaches: {:?}",
        tags_of(&instance)
    );
    let user_data = user_data(&ec2, &id).await?;
    let expected = format!("orca_ebs data {} f ext4 rw", claimed.volume_id);
    ensure!(
        user_data.contains(&expected),
        "the bootstrap waits for the volume: no {expected:?} in the user data ({} bytes): {}",
        user_data.len(),
        user_data
            .lines()
            .filter(|line| line.contains("orca_ebs"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let attached = volume(&ec2, &claimed.volume_id).await?;
    ensure!(
        attached.state() == Some(&VolumeState::InUse),
        "{attached:?}"
    );
    let events = pods::events_about(&client, &namespace.name, "trainer").await?;
    let said = events.iter().any(|event| {
        event.reason.as_deref() == Some("SuccessfulAttachVolume")
            && event.note.as_deref().is_some_and(|note| {
                note.contains(&claimed.volume_id) && note.contains(&id) && note.contains("/dev/sdf")
            })
    });
    ensure!(
        said,
        "an Event says which volume was attached where: {events:?}"
    );
    let decision: serde_json::Value = serde_json::from_str(
        running
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get("orca.research/decision"))
            .context("the decision annotation")?,
    )?;
    ensure!(
        decision["launch"]["volumes"]
            == serde_json::json!([format!("{} at /dev/sdf", claimed.volume_id)])
            && decision["launch"]["instanceId"] == id.as_str(),
        "the decision record says which volume goes where: {decision}"
    );

    pods_api.delete("trainer", &DeleteParams::default()).await?;
    poll_until(
        "the volume available again",
        Duration::from_secs(60),
        TICK,
        || async {
            let now = volume(&ec2, &claimed.volume_id).await?;
            Ok((now.state() == Some(&VolumeState::Available)).then_some(()))
        },
    )
    .await?;
    drop(orca);
    drop(claimed);
    namespace.delete().await
}

/// A pod whose volume is in a zone orca does not launch into fails before anything is
/// launched, naming both; a second pod of a volume a running pod holds waits, launching
/// nothing, until the first is gone, then gets the volume.
#[tokio::test]
async fn a_volume_out_of_reach_fails_the_pod_and_a_volume_in_use_is_waited_for() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let ec2 = cluster.ec2_client().await;
    let zones = default_subnets_by_zone(&ec2).await?;
    let (first_zone, first_subnet) = zones.iter().next().context("a zone")?;
    let other_zone = zones.keys().nth(2).context("a third zone")?.clone();
    let node = unique_node_name("ebs-reach");
    let extra = format!("subnetIds: [{first_subnet}]\n");
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, &extra))?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-ebs-reach").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);

    let far = Claimed::make(&client, &ec2, &ns, "far", &other_zone).await?;
    pods::create(&pods_api, &pod_with_claim("far", &node, "far")).await?;
    let failed = pods::wait_for_phase(&pods_api, "far", "Failed", Duration::from_secs(60)).await?;
    let message = pods::message(&failed);
    ensure!(
        message.contains(&format!("{other_zone} (volume {})", far.volume_id))
            && message.contains(first_zone.as_str()),
        "the failure names the volume's zone and where orca launches: {message}"
    );
    ensure!(instance_id(&failed).is_none(), "nothing was launched");

    let near = Claimed::make(&client, &ec2, &ns, "near", first_zone).await?;
    pods::create(&pods_api, &pod_with_claim("first", &node, "near")).await?;
    let first =
        pods::wait_for_phase(&pods_api, "first", "Running", Duration::from_secs(60)).await?;
    pods::create(&pods_api, &pod_with_claim("second", &node, "near")).await?;
    let waiting = poll_until(
        "the second pod waiting for the volume",
        Duration::from_secs(30),
        TICK,
        || async {
            let pod = pods_api.get("second").await?;
            Ok(pods::message(&pod).contains("VolumeInUse").then_some(pod))
        },
    )
    .await?;
    ensure!(phase(&waiting) == "Pending", "{:?}", waiting.status);
    ensure!(
        pods::message(&waiting).contains(&near.volume_id)
            && pods::message(&waiting).contains(&instance_id(&first).unwrap_or_default()),
        "the wait names the volume and who holds it: {}",
        pods::message(&waiting)
    );
    ensure!(
        instance_id(&waiting).is_none(),
        "nothing launched while the volume is held"
    );

    pods_api.delete("first", &DeleteParams::default()).await?;
    let second =
        pods::wait_for_phase(&pods_api, "second", "Running", Duration::from_secs(60)).await?;
    let holder = volume(&ec2, &near.volume_id).await?;
    let attached_to: Vec<&str> = holder
        .attachments()
        .iter()
        .filter_map(|attachment| attachment.instance_id())
        .collect();
    ensure!(
        attached_to == [instance_id(&second).unwrap_or_default().as_str()],
        "the volume is the second pod's now: {attached_to:?}"
    );
    drop(orca);
    drop((far, near));
    namespace.delete().await
}

/// A pod with an EFS claim runs (orca calls no EFS API) with the file system's mount in its
/// user data: the file system, its directory, no access point, read-write.
#[tokio::test]
async fn an_efs_claim_is_mounted_by_the_user_data() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let ec2 = cluster.ec2_client().await;
    let node = unique_node_name("efs");
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, ""))?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-efs").await?;
    let claimed = Claimed::efs(
        &client,
        &namespace.name,
        "datasets",
        "fs-0123456789abcdef0:/imagenet",
    )
    .await?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    pods::create(&pods_api, &pod_with_claim("reader", &node, "datasets")).await?;
    let running =
        pods::wait_for_phase(&pods_api, "reader", "Running", Duration::from_secs(60)).await?;
    let id = instance_id(&running).context("the pod names its instance")?;
    let user_data = user_data(&ec2, &id).await?;
    let expected = "orca_efs data fs-0123456789abcdef0 /imagenet '' rw";
    ensure!(
        user_data.contains(expected),
        "no {expected:?} in the user data: {}",
        user_data
            .lines()
            .filter(|line| line.contains("orca_efs"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    drop(orca);
    drop(claimed);
    namespace.delete().await
}
