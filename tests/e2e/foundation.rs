//! The foundation every later test stands on: the harness's real control plane schedules (or
//! refuses to schedule) pods, the real kubectl talks to it, and moto answers the real AWS SDK.

use std::time::Duration;

use anyhow::{Context, Result};
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

/// The harness's moto sends a command only to the instances it names, as SSM does: moto alone
/// sent one to every instance it ever launched (terminated ones too), and the harness ran the
/// script on each, so `kubectl exec` slowed with every instance a test run had left. And it
/// reads an instance's tags by its id: a tag filter over thousands of instances stays fast
/// (tests/cluster/moto-server-with-client-tokens.py, `_tags_of`, `_instances_targeted`).
#[tokio::test]
async fn moto_sends_a_command_to_the_instances_it_names_only() -> Result<()> {
    let cluster = TestCluster::shared();
    let ec2 = cluster.ec2_client().await;
    let ssm = cluster.ssm_client().await;
    let image = ec2.describe_images().send().await?;
    let image = image.images()[0].image_id().context("an image")?.to_owned();
    let launched = ec2
        .run_instances()
        .image_id(&image)
        .min_count(3)
        .max_count(3)
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Instance)
                .tags(orca_e2e::ec2::tag("orca-e2e-foundation", "ssm"))
                .build(),
        )
        .send()
        .await?;
    let ids: Vec<String> = launched
        .instances()
        .iter()
        .filter_map(|i| i.instance_id().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 3, "{launched:?}");
    let sent = ssm
        .send_command()
        .instance_ids(&ids[0])
        .document_name("AWS-RunShellScript")
        .parameters("commands", vec!["true".to_owned()])
        .send()
        .await?;
    let command = sent.command().context("the command")?;
    assert_eq!(command.instance_ids(), &ids[..1], "{command:?}");
    assert_eq!(command.target_count(), 1, "{command:?}");
    // Each instance's tags, read by a filter, are its own.
    let tagged = ec2
        .describe_instances()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:orca-e2e-foundation")
                .values("ssm")
                .build(),
        )
        .instance_ids(&ids[1])
        .send()
        .await?;
    let instance = &tagged.reservations()[0].instances()[0];
    assert_eq!(instance.instance_id(), Some(ids[1].as_str()));
    assert_eq!(instance.tags().len(), 1, "{instance:?}");
    ec2.terminate_instances()
        .set_instance_ids(Some(ids))
        .send()
        .await?;
    Ok(())
}

/// The harness's moto answers the spot price history a test sets as EC2 documents it: the
/// changes in the window asked for and the price in effect at its start, newest first, for the
/// product asked; pools nobody set keep moto's constant price, and the set pools go when the
/// test is done.
#[tokio::test]
async fn moto_answers_the_spot_price_history_a_test_sets() -> Result<()> {
    use aws_sdk_ec2::primitives::DateTime;
    use aws_sdk_ec2::types::InstanceType;
    use orca_e2e::spot_prices::{PriceChange, SetPrices};

    let cluster = TestCluster::shared();
    let ec2 = cluster.ec2_client().await;
    // A type no other test launches, so the tests running at once never see these prices.
    let kind = "u-6tb1.112xlarge";
    let hour = |h: i64| jiff::Timestamp::from_second(1_795_000_000 + h * 3600).unwrap();
    let set = SetPrices::set(
        cluster,
        vec![
            PriceChange::new(kind, "us-west-2a", "4.2000", hour(0)),
            PriceChange::new(kind, "us-west-2a", "3.9000", hour(2)),
            PriceChange::new(kind, "us-west-2a", "5.1000", hour(4)),
            PriceChange::new(kind, "us-west-2b", "4.4000", hour(1)),
        ],
    )?;
    let history = |start: jiff::Timestamp| {
        ec2.describe_spot_price_history()
            .instance_types(InstanceType::from(kind))
            .product_descriptions("Linux/UNIX")
            .start_time(DateTime::from_secs(start.as_second()))
            .send()
    };
    let prices = |answer: &aws_sdk_ec2::operation::describe_spot_price_history::DescribeSpotPriceHistoryOutput| {
        answer
            .spot_price_history()
            .iter()
            .map(|e| {
                (
                    e.availability_zone().unwrap_or_default().to_owned(),
                    e.spot_price().unwrap_or_default().to_owned(),
                )
            })
            // The zones of the type the test did not set keep moto's price.
            .filter(|(zone, price)| {
                assert!(
                    zone == "us-west-2a" || zone == "us-west-2b" || price == "0.00001",
                    "{zone} {price}"
                );
                zone == "us-west-2a" || zone == "us-west-2b"
            })
            .collect::<Vec<_>>()
    };

    // From hour 3: 2a's price in effect then (3.90) and its change at hour 4; 2b's in effect.
    let answer = history(hour(3)).await?;
    let pairs = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(z, p)| (z.to_string(), p.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        prices(&answer),
        pairs(&[
            ("us-west-2a", "5.1000"),
            ("us-west-2a", "3.9000"),
            ("us-west-2b", "4.4000"),
        ])
    );
    assert!(
        answer
            .spot_price_history()
            .iter()
            .all(|e| e.product_description().map(|p| p.as_str()) == Some("Linux/UNIX")),
        "{answer:?}"
    );
    // From after the last change: only the prices in effect.
    let answer = history(hour(10)).await?;
    assert_eq!(
        prices(&answer),
        pairs(&[("us-west-2a", "5.1000"), ("us-west-2b", "4.4000")])
    );

    // A pool nobody set keeps moto's one price.
    let other = ec2
        .describe_spot_price_history()
        .instance_types(InstanceType::M5Large)
        .start_time(DateTime::from_secs(hour(10).as_second()))
        .send()
        .await?;
    assert!(
        !other.spot_price_history().is_empty()
            && other
                .spot_price_history()
                .iter()
                .all(|e| e.spot_price() == Some("0.00001")),
        "{other:?}"
    );

    drop(set);
    let after = history(hour(10)).await?;
    assert!(
        after
            .spot_price_history()
            .iter()
            .all(|e| e.spot_price() == Some("0.00001")),
        "the set prices are gone: {after:?}"
    );
    Ok(())
}
