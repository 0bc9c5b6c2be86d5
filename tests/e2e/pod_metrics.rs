//! A pod's usage through CloudWatch (issue 43) end to end: the real orca with
//! `provider.aws.metrics`, moto's CloudWatch and EC2, the apiserver's node proxy and `kubectl`.
//! The test publishes what a pod's instance samples (its bootstrap's own publishing is tested
//! against fakes in `bootstrap/runs.rs`) and reads it back as metrics-server does: straight from
//! the node's kubelet port (the apiserver's node proxy refuses the harness's loopback address),
//! as a ServiceAccount holding what metrics-server's ClusterRole holds (`nodes/metrics`,
//! `nodes/stats`).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::http::curl_status;
use orca_e2e::node_reader::NodeReader;
use orca_e2e::pods::{self, burst_pod};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(500);

fn datum(
    name: &str,
    uid: &str,
    container: Option<&str>,
    at: jiff::Timestamp,
    value: f64,
    unit: StandardUnit,
) -> MetricDatum {
    let mut dimensions = vec![Dimension::builder().name("PodUID").value(uid).build()];
    if let Some(container) = container {
        dimensions.push(
            Dimension::builder()
                .name("Container")
                .value(container)
                .build(),
        );
    }
    MetricDatum::builder()
        .metric_name(name)
        .set_dimensions(Some(dimensions))
        .timestamp(DateTime::from_secs(at.as_second()))
        .value(value)
        .unit(unit)
        .storage_resolution(1)
        .build()
}

/// With `provider.aws.metrics`, what a pod's instance publishes (two CPU samples 10 s apart,
/// the working set) is read back within a period and served on the node as the kubelet serves
/// it, through the apiserver: `/metrics/resource` with the container's cumulative CPU and
/// working set and the pod's and node's totals, `/stats/summary` with the CPU rate. A pod that
/// is deleted is gone from the next read.
#[tokio::test]
async fn a_pods_usage_published_to_cloudwatch_is_served_on_its_node() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let cloudwatch = cluster.cloudwatch_client().await;
    let node = unique_node_name("metrics");
    let namespace_name = format!("Orca/E2E/{node}");
    let moto = cluster.var("AWS_ENDPOINT_URL");
    let extra = format!(
        "metrics:\n  namespace: {namespace_name}\n  interval: 10s\n  endpointUrl: {moto}\n"
    );
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, &extra))?;
    orca.wait_ready(Duration::from_secs(20)).await?;

    let namespace = TestNamespace::create(&client, "e2e-metrics").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client, &ns);
    pods::create(&pods_api, &burst_pod("busy", &node, &[])).await?;
    let pod = pods::wait_for_phase(&pods_api, "busy", "Running", Duration::from_secs(60)).await?;
    let uid = pod.metadata.uid.clone().context("uid")?;

    // What the instance's sampler publishes: CPU seconds 10 s apart (1.5 cores in between),
    // and the working set.
    let now = jiff::Timestamp::now();
    let earlier = now - jiff::SignedDuration::from_secs(10);
    cloudwatch
        .put_metric_data()
        .namespace(&namespace_name)
        .metric_data(datum(
            "CpuUsageSeconds",
            &uid,
            Some("main"),
            earlier,
            100.0,
            StandardUnit::Seconds,
        ))
        .metric_data(datum(
            "CpuUsageSeconds",
            &uid,
            Some("main"),
            now,
            115.0,
            StandardUnit::Seconds,
        ))
        .metric_data(datum(
            "MemoryWorkingSetBytes",
            &uid,
            Some("main"),
            now,
            734_003_200.0,
            StandardUnit::Bytes,
        ))
        .send()
        .await?;

    // A reader with what metrics-server's ClusterRole grants.
    let reader = NodeReader::create(
        &ns,
        &format!("{node}-metrics-reader"),
        "nodes/metrics,nodes/stats",
    )?;
    let bearer = reader.bearer();
    let port = orca.kubelet_port;
    let get = |path: &str| -> Result<String> {
        let url = format!("https://127.0.0.1:{port}{path}");
        let (status, body) = curl_status(&url, &["-k", "-H", &bearer])?;
        ensure!(status == 200, "GET {path}: {status} {body}");
        Ok(body)
    };
    let anonymous = curl_status(
        &format!("https://127.0.0.1:{port}/metrics/resource"),
        &["-k"],
    )?;
    ensure!(anonymous.0 == 401, "anonymous: {anonymous:?}");

    let wanted = format!(
        "container_cpu_usage_seconds_total{{container=\"main\",namespace=\"{ns}\",pod=\"busy\"}} 115 "
    );
    let text = poll_until(
        "the pod's usage served on /metrics/resource",
        Duration::from_secs(40),
        TICK,
        || async {
            let text = get("/metrics/resource")?;
            Ok(text.contains(&wanted).then_some(text))
        },
    )
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", orca.log()))?;
    for line in [
        format!(
            "container_memory_working_set_bytes{{container=\"main\",namespace=\"{ns}\",pod=\"busy\"}} 734003200 "
        ),
        format!("pod_cpu_usage_seconds_total{{namespace=\"{ns}\",pod=\"busy\"}} 115 "),
        "node_cpu_usage_seconds_total 115 ".to_owned(),
        "node_memory_working_set_bytes 734003200 ".to_owned(),
        "scrape_error 0".to_owned(),
    ] {
        ensure!(
            text.lines().any(|l| l.starts_with(&line)),
            "{line:?} in\n{text}"
        );
    }

    let summary: serde_json::Value = serde_json::from_str(&get("/stats/summary")?)?;
    let served = &summary["pods"][0];
    ensure!(served["podRef"]["uid"] == uid.as_str(), "{summary:#}");
    let main = &served["containers"][0];
    ensure!(
        main["cpu"]["usageCoreNanoSeconds"] == 115_000_000_000_u64,
        "{summary:#}"
    );
    // 15 CPU seconds over 10 s, within the seconds CloudWatch's periods round to.
    let rate = main["cpu"]["usageNanoCores"]
        .as_u64()
        .context("a CPU rate")?;
    ensure!(
        (1_000_000_000..=2_000_000_000).contains(&rate),
        "{summary:#}"
    );
    ensure!(
        main["memory"]["workingSetBytes"] == 734_003_200_u64,
        "{summary:#}"
    );
    ensure!(summary["node"]["nodeName"] == node.as_str(), "{summary:#}");

    // A stopped pod's figures are gone at the next read.
    pods_api.delete("busy", &Default::default()).await?;
    poll_until(
        "the deleted pod gone from /metrics/resource",
        Duration::from_secs(60),
        TICK,
        || async {
            let text = get("/metrics/resource")?;
            Ok((!text.contains("pod=\"busy\"")).then_some(()))
        },
    )
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", orca.log()))?;
    drop(reader);
    Ok(())
}
