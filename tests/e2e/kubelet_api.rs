//! orca's kubelet API and metrics port end to end: `kubectl logs` and `kubectl exec` through
//! the real apiserver (which calls orca with its kubelet client certificate), requests with no
//! or too few credentials, and `/metrics` after a pod's life, on the simulated provider and
//! on moto.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use orca_e2e::cluster::kubectl_ok;
use orca_e2e::http::curl_status;
use orca_e2e::pods::{self, burst_pod, phase};
use orca_e2e::{
    OrcaProcess, Scenario, TestCluster, TestNamespace, aws_test_config, unique_node_name,
};

const EXEC_REFUSAL: &str = "exec is not supported by this node";

fn kubectl(args: &[&str]) -> Result<std::process::Output> {
    Ok(TestCluster::shared().kubectl().args(args).output()?)
}

/// `curl -k` against orca's kubelet port: (HTTP status, body).
fn kubelet_get(orca: &OrcaProcess, path: &str, token: Option<&str>) -> Result<(u16, String)> {
    let url = format!("https://127.0.0.1:{}{path}", orca.kubelet_port);
    let bearer = token.map(|token| format!("Authorization: Bearer {token}"));
    match &bearer {
        Some(header) => curl_status(&url, &["-k", "-H", header]),
        None => curl_status(&url, &["-k"]),
    }
}

/// The metrics port's `/metrics`, parsed with a Prometheus text parser.
fn scrape(orca: &OrcaProcess) -> Result<prometheus_parse::Scrape> {
    let url = format!("http://127.0.0.1:{}/metrics", orca.metrics_port);
    let output = Command::new("curl")
        .args(["-sf", "--max-time", "10", &url])
        .output()?;
    if !output.status.success() {
        bail!("GET {url} failed");
    }
    let text = String::from_utf8(output.stdout)?;
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    prometheus_parse::Scrape::parse(lines).context("parsing /metrics")
}

/// The value of the sample `name` whose labels include all of `labels`.
fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .find(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(ref buckets) => {
                buckets.last().map_or(0.0, |b| b.count)
            }
            prometheus_parse::Value::Summary(_) => 0.0,
        })
}

async fn running_pod(pods_api: &Api<Pod>, pod: Pod) -> Result<Pod> {
    let name = pod.metadata.name.clone().context("name")?;
    pods::create(pods_api, &pod).await?;
    pods::wait_for(pods_api, &name, "Running", Duration::from_secs(60), |p| {
        phase(p) == "Running"
    })
    .await
}

#[tokio::test]
async fn kubectl_logs_and_exec_go_through_the_apiserver_to_orca() -> Result<()> {
    let scenario = Scenario::start("kubelet-logs").await?;
    let ns = scenario.namespace.name.clone();
    let pod = burst_pod(
        "talker",
        scenario.node(),
        &[("simulated.orca.research/run-time", "forever")],
    );
    running_pod(&scenario.pods, pod).await?;
    // The simulated workload writes a heartbeat line a second: wait for a few.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let all = kubectl_ok(&["logs", "-n", &ns, "talker"])?;
    assert!(all.contains("[orca-sim] container main started"), "{all}");
    let tail = kubectl_ok(&["logs", "-n", &ns, "talker", "--tail=2"])?;
    assert_eq!(tail.lines().count(), 2, "--tail=2 gave:\n{tail}");
    let stamped = kubectl_ok(&["logs", "-n", &ns, "talker", "--tail=1", "--timestamps"])?;
    let stamp = stamped.split_whitespace().next().unwrap_or_default();
    assert!(
        stamp.parse::<jiff::Timestamp>().is_ok(),
        "--timestamps gave {stamped:?}"
    );
    let limited = kubectl_ok(&["logs", "-n", &ns, "talker", "--limit-bytes=10"])?;
    assert_eq!(limited.len(), 10, "--limit-bytes=10 gave {limited:?}");

    // `kubectl logs -f` streams: lines written after it started arrive while it runs.
    let mut follow = TestCluster::shared()
        .kubectl()
        .args(["logs", "-f", "-n", &ns, "talker", "--tail=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = follow.stdout.take().context("stdout")?;
    let reader = std::thread::spawn(move || {
        let started = Instant::now();
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            lines.push((started.elapsed(), line));
            if lines.len() >= 4 {
                break;
            }
        }
        lines
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while !reader.is_finished() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = follow.kill();
    let _ = follow.wait();
    let streamed = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))?;
    assert_eq!(streamed.len(), 4, "kubectl logs -f gave {streamed:?}");
    assert!(
        streamed[3].0 >= Duration::from_secs(1),
        "the later lines must arrive over time, not at once: {streamed:?}"
    );

    // exec is refused at once with the documented message, shown by kubectl as it is.
    let started = Instant::now();
    let exec = kubectl(&["exec", "-n", &ns, "talker", "--", "ls"])?;
    let stderr = String::from_utf8_lossy(&exec.stderr);
    assert!(!exec.status.success());
    assert!(
        stderr.contains(EXEC_REFUSAL),
        "kubectl exec printed: {stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "exec must not hang"
    );

    // A container the pod does not have: the kubelet's kind of answer.
    let wrong = kubectl(&["logs", "-n", &ns, "talker", "-c", "sidecar"])?;
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("sidecar"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    scenario.finish().await
}

#[tokio::test]
async fn strangers_get_401_and_the_unauthorized_403() -> Result<()> {
    let scenario = Scenario::start("kubelet-auth").await?;
    let ns = scenario.namespace.name.clone();
    let (status, body) = kubelet_get(&scenario.orca, "/pods", None)?;
    assert_eq!(status, 401, "anonymous /pods: {body}");
    let (status, _) = kubelet_get(&scenario.orca, "/pods", Some("not-a-token"))?;
    assert_eq!(status, 401, "a bad token");

    // A service account with no rights at all: authenticated, then refused.
    kubectl_ok(&["create", "serviceaccount", "-n", &ns, "nobody"])?;
    let token = kubectl_ok(&["create", "token", "-n", &ns, "nobody"])?;
    let path = format!("/containerLogs/{ns}/absent/main");
    let (status, body) = kubelet_get(&scenario.orca, &path, Some(token.trim()))?;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("nodes") && body.contains("proxy"), "{body}");

    // Granted nodes/proxy on nodes, as the kubelet requires for these paths: allowed.
    let reader = format!("{}-reader", scenario.node());
    kubectl_ok(&[
        "create",
        "clusterrole",
        &reader,
        "--verb=get",
        "--resource=nodes/proxy",
    ])?;
    kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &reader,
        &format!("--clusterrole={reader}"),
        &format!("--serviceaccount={ns}:reader"),
    ])?;
    kubectl_ok(&["create", "serviceaccount", "-n", &ns, "reader"])?;
    let token = kubectl_ok(&["create", "token", "-n", &ns, "reader"])?;
    let (status, body) = kubelet_get(&scenario.orca, "/pods", Some(token.trim()))?;
    let _ = kubectl(&["delete", "clusterrolebinding,clusterrole", &reader]);
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(list["kind"], "PodList");
    scenario.finish().await
}

#[tokio::test]
async fn metrics_show_a_pods_life_and_the_probes_answer() -> Result<()> {
    let scenario = Scenario::start("kubelet-metrics").await?;
    let pod = burst_pod(
        "short",
        scenario.node(),
        &[("simulated.orca.research/run-time", "1s")],
    );
    pods::create(&scenario.pods, &pod).await?;
    pods::wait_for(
        &scenario.pods,
        "short",
        "Succeeded",
        Duration::from_secs(60),
        |p| phase(p) == "Succeeded",
    )
    .await?;
    let health = |path: &str| -> Result<bool> {
        let url = format!("http://127.0.0.1:{}{path}", scenario.orca.metrics_port);
        Ok(Command::new("curl")
            .args(["-sf", "-o", "/dev/null", &url])
            .status()?
            .success())
    };
    assert!(health("/healthz")?);
    assert!(health("/readyz")?);

    let scrape = orca_e2e::wait::poll_until(
        "the Succeeded pod counted",
        Duration::from_secs(10),
        Duration::from_millis(250),
        || async {
            let scrape = scrape(&scenario.orca)?;
            Ok(
                (sample(&scrape, "orca_pods", &[("phase", "Succeeded")]) == Some(1.0))
                    .then_some(scrape),
            )
        },
    )
    .await?;
    for (name, labels) in [
        ("orca_pods", vec![("phase", "Running")]),
        (
            "orca_reconcile_duration_seconds_count",
            vec![("result", "ok")],
        ),
        (
            "orca_plugin_evaluation_seconds_count",
            vec![
                ("plugin", "orca-default-selector"),
                ("hook", "select-instance"),
            ],
        ),
        (
            "orca_plugin_info",
            vec![("plugin", "orca-default-selector")],
        ),
        ("orca_plugin_reloads_total", vec![("result", "rejected")]),
        ("orca_lease_renewals_total", vec![("result", "ok")]),
    ] {
        assert!(
            sample(&scrape, name, &labels).is_some(),
            "no {name}{labels:?} in /metrics"
        );
    }
    assert!(
        sample(
            &scrape,
            "orca_reconcile_duration_seconds_count",
            &[("result", "ok")]
        ) >= Some(1.0)
    );
    assert!(sample(&scrape, "orca_lease_renewals_total", &[("result", "ok")]) >= Some(1.0));
    let info = scrape
        .samples
        .iter()
        .find(|s| s.metric == "orca_plugin_info")
        .context("plugin info")?;
    assert_eq!(info.labels.get("sha256").map(str::len), Some(64));
    scenario.finish().await
}

#[tokio::test]
async fn logs_of_a_pod_on_moto_come_from_its_console_and_ec2_calls_are_measured() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let node = unique_node_name("kubelet-moto");
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, ""))?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-kubelet-moto").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client, &ns);
    running_pod(&pods_api, burst_pod("on-ec2", &node, &[])).await?;

    // moto's console output is a fixed boot log and orca's bootstrap never ran there, so the
    // boot log is what the pod's logs show.
    let all = kubectl_ok(&["logs", "-n", &ns, "on-ec2"])?;
    assert!(all.starts_with("Linux version"), "{all}");
    let tail = kubectl_ok(&["logs", "-n", &ns, "on-ec2", "--tail=1"])?;
    assert_eq!(
        tail,
        format!("{}\n", all.lines().last().unwrap_or_default())
    );

    pods_api
        .delete("on-ec2", &DeleteParams::default().grace_period(0))
        .await?;
    let scrape = orca_e2e::wait::poll_until(
        "the termination measured",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || async {
            let scrape = scrape(&orca)?;
            Ok(sample(
                &scrape,
                "orca_ec2_calls_total",
                &[("operation", "TerminateInstances"), ("code", "ok")],
            )
            .is_some()
            .then_some(scrape))
        },
    )
    .await?;
    for (name, labels) in [
        (
            "orca_ec2_calls_total",
            vec![("operation", "CreateFleet"), ("code", "ok")],
        ),
        (
            "orca_ec2_calls_total",
            vec![("operation", "GetConsoleOutput"), ("code", "ok")],
        ),
        (
            "orca_ec2_call_duration_seconds_count",
            vec![("operation", "DescribeInstances")],
        ),
        (
            "orca_ec2_requests_total",
            vec![("operation", "CreateFleet")],
        ),
    ] {
        assert!(
            sample(&scrape, name, &labels).is_some(),
            "no {name}{labels:?} in /metrics"
        );
    }
    namespace.delete().await
}

#[tokio::test]
async fn the_serving_certificate_is_requested_through_the_csr_api() -> Result<()> {
    let cluster = TestCluster::shared();
    let node = unique_node_name("kubelet-csr");
    let orca = OrcaProcess::start(&node, |dir| {
        format!(
            "{}kubeletApi:\n  bindAddress: 127.0.0.1\n  tls:\n    sources: [csr]\n",
            orca_e2e::test_config(&node, dir, "")
        )
    })?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let readyz = || -> Result<(u16, String)> {
        curl_status(
            &format!("http://127.0.0.1:{}/readyz", orca.metrics_port),
            &[],
        )
    };
    // With the CSR as the only source, the kubelet API waits for approval, and says so.
    let (status, body) = readyz()?;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("kubelet API"), "{body}");

    let selector = format!("orca.research/node={node}");
    let csr = orca_e2e::wait::poll_until(
        "orca's CSR",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || async {
            let names = kubectl_ok(&["get", "csr", "-l", &selector, "-o", "name"])?;
            Ok(names.lines().next().map(str::to_owned))
        },
    )
    .await?;
    let spec = kubectl_ok(&[
        "get",
        &csr,
        "-o",
        "jsonpath={.spec.signerName} {.spec.usages}",
    ])?;
    assert!(spec.starts_with("kubernetes.io/kubelet-serving "), "{spec}");
    kubectl_ok(&[
        "certificate",
        "approve",
        csr.trim_start_matches("certificatesigningrequest.certificates.k8s.io/"),
    ])?;

    // Once signed, orca serves the issued certificate: the cluster CA verifies it for the
    // node's address (an anonymous request, so the answer itself is 401).
    let url = format!("https://127.0.0.1:{}/healthz", orca.kubelet_port);
    let ca = cluster.var("ORCA_CLUSTER_CA").to_owned();
    orca_e2e::wait::poll_until(
        "the issued certificate served",
        Duration::from_secs(30),
        Duration::from_millis(500),
        // Verified against the cluster CA, the anonymous request gets as far as 401.
        || async {
            Ok(matches!(curl_status(&url, &["--cacert", &ca]), Ok((401, _))).then_some(()))
        },
    )
    .await?;
    let (status, body) = readyz()?;
    assert_eq!(status, 200, "{body}");
    let _ = kubectl(&["delete", &csr]);
    Ok(())
}
