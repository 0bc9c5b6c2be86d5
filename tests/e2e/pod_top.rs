//! Real consumers of a pod's usage on orca (issue 43): metrics-server (built from the Go module
//! proxy) scraping orca's `/metrics/resource` and serving `metrics.k8s.io` through the
//! apiserver's aggregation layer; `kubectl top pod`; and the controller-manager's
//! HorizontalPodAutoscaler scaling a Deployment whose pods run on orca, on CPU. The test
//! publishes to moto's CloudWatch what each pod's instance would (its sampler is tested against
//! fakes in `bootstrap/runs.rs`). Its own binary: the APIService it registers is cluster-wide.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use orca_e2e::cluster::{kubectl_ok, kubectl_ok_with_input};
use orca_e2e::metrics_server::MetricsServer;
use orca_e2e::pods;
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

/// The usage every pod of the Deployment reports: half a core, five times its request.
const CORES: f64 = 0.5;
const PUBLISH_EVERY: Duration = Duration::from_secs(5);

fn datum(
    name: &str,
    uid: &str,
    at: jiff::Timestamp,
    value: f64,
    unit: StandardUnit,
) -> MetricDatum {
    MetricDatum::builder()
        .metric_name(name)
        .dimensions(Dimension::builder().name("PodUID").value(uid).build())
        .dimensions(Dimension::builder().name("Container").value("web").build())
        .timestamp(DateTime::from_secs(at.as_second()))
        .value(value)
        .unit(unit)
        .storage_resolution(1)
        .build()
}

/// What each running pod's instance publishes, every 5 s until `stop`: CPU seconds used at
/// [`CORES`] since the pod started, and a working set of 50 MiB.
async fn publish_until(
    cloudwatch: aws_sdk_cloudwatch::Client,
    namespace: String,
    pods_api: Api<Pod>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    while !stop.load(Ordering::SeqCst) {
        let now = jiff::Timestamp::now();
        let running = pods_api.list(&ListParams::default()).await?;
        let data: Vec<MetricDatum> = running
            .items
            .iter()
            .filter(|pod| pods::phase(pod) == "Running")
            .filter_map(|pod| {
                let started = pod.status.as_ref()?.start_time.as_ref()?.0;
                Some((pod.metadata.uid.as_deref()?, started))
            })
            .flat_map(|(uid, started)| {
                let cpu = CORES * now.duration_since(started).as_secs_f64().max(0.0);
                [
                    datum("CpuUsageSeconds", uid, now, cpu, StandardUnit::Seconds),
                    datum(
                        "MemoryWorkingSetBytes",
                        uid,
                        now,
                        52_428_800.0,
                        StandardUnit::Bytes,
                    ),
                ]
            })
            .collect();
        if !data.is_empty() {
            cloudwatch
                .put_metric_data()
                .namespace(&namespace)
                .set_metric_data(Some(data))
                .send()
                .await?;
        }
        tokio::time::sleep(PUBLISH_EVERY).await;
    }
    Ok(())
}

/// metrics-server reads orca's pods: `kubectl top pod` shows the CPU and memory their
/// instances report, and an HPA on 50 % CPU scales the Deployment from 1 to 3 pods, which orca
/// launches.
#[tokio::test]
async fn kubectl_top_and_an_hpa_read_the_usage_of_pods_on_orca() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let node = unique_node_name("top");
    let metrics_namespace = format!("Orca/E2E/{node}");
    let moto = cluster.var("AWS_ENDPOINT_URL");
    let extra = format!(
        "metrics:\n  namespace: {metrics_namespace}\n  interval: 5s\n  endpointUrl: {moto}\n"
    );
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, &extra))?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-top").await?;
    let ns = namespace.name.clone();
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n\
         spec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n\
         \x20 template:\n    metadata:\n      labels: {{app: web}}\n\
         \x20   spec:\n      nodeSelector: {{kubernetes.io/hostname: {node}}}\n\
         \x20     tolerations:\n      - {{key: orca.research/burst-node, operator: Equal, value: \"true\", effect: NoSchedule}}\n\
         \x20     containers:\n      - name: web\n        image: nginx:1.27\n\
         \x20       resources:\n          requests: {{cpu: 100m, memory: 64Mi}}\n"
    );
    kubectl_ok_with_input(&["apply", "-f", "-"], deployment.as_bytes())?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    poll_until(
        "the Deployment's pod Running on orca",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let pods = pods_api.list(&ListParams::default()).await?;
            Ok(pods
                .items
                .iter()
                .any(|p| pods::phase(p) == "Running")
                .then_some(()))
        },
    )
    .await?;

    let stop = Arc::new(AtomicBool::new(false));
    let publishing = tokio::spawn(publish_until(
        cluster.cloudwatch_client().await,
        metrics_namespace.clone(),
        pods_api.clone(),
        stop.clone(),
    ));
    let server = MetricsServer::start(&ns, &format!("kubernetes.io/hostname={node}")).await?;

    // `kubectl top pod`: metrics-server's rate from two scrapes of orca.
    let top = poll_until(
        "kubectl top pod for the pod on orca",
        Duration::from_secs(90),
        Duration::from_secs(2),
        || async {
            let output = cluster
                .kubectl()
                .args(["top", "pod", "-n", &ns, "--no-headers"])
                .output()?;
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            Ok((output.status.success() && text.contains("web-")).then_some(text))
        },
    )
    .await
    .map_err(|error| {
        anyhow::anyhow!(
            "{error:#}\nmetrics-server log:\n{}\norca log:\n{}",
            server.log(),
            orca.log()
        )
    })?;
    let columns: Vec<&str> = top.split_whitespace().collect();
    let millicores: u32 = columns
        .get(1)
        .and_then(|cpu| cpu.strip_suffix('m'))
        .and_then(|m| m.parse().ok())
        .with_context(|| format!("CPU in {top:?}"))?;
    // Half a core, within what CloudWatch's periods and the scrapes' timing round to.
    ensure!((350..=650).contains(&millicores), "{top}");
    ensure!(columns.get(2) == Some(&"50Mi"), "{top}");

    // The HPA: 500 % of the request against a 50 % target scales to the maximum.
    kubectl_ok(&[
        "autoscale",
        "deployment",
        "web",
        "-n",
        &ns,
        "--cpu-percent=50",
        "--min=1",
        "--max=3",
    ])?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    poll_until(
        "the HPA scaled the Deployment to 3, and orca ran the new pods",
        Duration::from_secs(120),
        Duration::from_secs(2),
        || async {
            let scaled = deployments
                .get("web")
                .await?
                .spec
                .and_then(|spec| spec.replicas)
                == Some(3);
            let running = pods_api
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|p| pods::phase(p) == "Running")
                .count();
            Ok((scaled && running == 3).then_some(()))
        },
    )
    .await
    .map_err(|error| {
        let hpa = kubectl_ok(&["describe", "hpa", "web", "-n", &ns]).unwrap_or_default();
        anyhow::anyhow!(
            "{error:#}\nHPA:\n{hpa}\nmetrics-server log:\n{}",
            server.log()
        )
    })?;

    stop.store(true, Ordering::SeqCst);
    publishing.await??;
    drop(server);
    kubectl_ok(&["delete", "deployment", "web", "-n", &ns, "--wait=false"])?;
    Ok(())
}
