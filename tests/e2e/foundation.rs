//! The foundation every later test stands on: the harness's real control plane schedules (or
//! refuses to schedule) pods, the real kubectl talks to it, and moto answers the real AWS SDK.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use orca_e2e::wait::poll_until;
use orca_e2e::{TestCluster, TestNamespace};

#[tokio::test]
async fn kubectl_reports_the_kubernetes_release_the_harness_built() -> Result<()> {
    let cluster = TestCluster::shared();
    let output = cluster.kubectl().args(["version", "-o", "json"]).output()?;
    assert!(
        output.status.success(),
        "kubectl version failed: {output:?}"
    );
    let version: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let expected = cluster.var("K8S_VERSION");
    assert_eq!(version["serverVersion"]["gitVersion"], expected);
    assert_eq!(version["clientVersion"]["gitVersion"], expected);

    let readyz = cluster
        .kubectl()
        .args(["get", "--raw", "/readyz"])
        .output()?;
    assert_eq!(String::from_utf8_lossy(&readyz.stdout), "ok");
    Ok(())
}

#[tokio::test]
async fn real_scheduler_reports_a_pod_unschedulable_when_no_node_fits() -> Result<()> {
    let client = TestCluster::shared().kube_client().await?;
    let namespace = TestNamespace::create(&client, "e2e-foundation").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("nowhere-to-go".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".to_owned(),
                image: Some("registry.k8s.io/pause:3.10".to_owned()),
                ..Container::default()
            }],
            // Nothing in this cluster carries this label: the scheduler must refuse.
            node_selector: Some(
                [(
                    "orca.research/e2e-no-such-node".to_owned(),
                    "true".to_owned(),
                )]
                .into(),
            ),
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    // Admission needs the namespace's default service account, which the controller-manager
    // creates moments after the namespace: retry creation until it is there.
    poll_until(
        "pod admission",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || async {
            match pods.create(&PostParams::default(), &pod).await {
                Ok(created) => Ok(Some(created)),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    Ok(Some(pods.get("nowhere-to-go").await?))
                }
                Err(err) => Err(err.into()),
            }
        },
    )
    .await?;

    let condition = poll_until(
        "PodScheduled=False",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || async {
            let pod = pods.get("nowhere-to-go").await?;
            let scheduled = pod
                .status
                .and_then(|status| status.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|condition| condition.type_ == "PodScheduled" && condition.status == "False");
            Ok(scheduled)
        },
    )
    .await?;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    let message = condition.message.unwrap_or_default();
    // With no node at all the scheduler says so; once other tests registered nodes (they share
    // this cluster) it says none of them fit.
    let no_nodes = message.contains("no nodes available to schedule pods");
    let none_fit = message.starts_with("0/") && message.contains("nodes are available");
    assert!(
        no_nodes || none_fit,
        "unexpected scheduler message: {message}"
    );

    let pod = pods.get("nowhere-to-go").await?;
    assert_eq!(
        pod.spec.and_then(|spec| spec.node_name),
        None,
        "the pod must not be bound"
    );
    namespace.delete().await
}

#[tokio::test]
async fn moto_answers_describe_instances_through_the_aws_sdk() -> Result<()> {
    let ec2 = TestCluster::shared().ec2_client().await;
    let answer = ec2
        .describe_instances()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:ManagedBy")
                .values("orca-e2e-foundation-nothing-has-this")
                .build(),
        )
        .send()
        .await?;
    assert_eq!(
        answer.reservations().len(),
        0,
        "no instance carries this tag: {answer:?}"
    );

    // The endpoint is EC2 with its catalogue: a real instance type is described.
    let types = ec2
        .describe_instance_types()
        .instance_types(aws_sdk_ec2::types::InstanceType::M5Large)
        .send()
        .await?;
    let m5 = &types.instance_types()[0];
    assert_eq!(m5.v_cpu_info().and_then(|v| v.default_v_cpus()), Some(2));
    Ok(())
}
