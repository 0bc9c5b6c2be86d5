//! orca's kubelet API and metrics port end to end: `kubectl logs` and `kubectl exec` through
//! the real apiserver (which calls orca with its kubelet client certificate), requests with no
//! or too few credentials, and `/metrics` after a pod's life, on the simulated provider and
//! on moto.

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use orca_e2e::cluster::kubectl_ok;
use orca_e2e::http::curl_status;
use orca_e2e::kubelet_conn::{closed_by_peer, connector, open};
use orca_e2e::node_reader::NodeReader;
use orca_e2e::pods::{self, burst_pod, phase};
use orca_e2e::{
    OrcaProcess, Scenario, TestCluster, TestNamespace, aws_test_config, unique_node_name,
};
use tokio::io::AsyncWriteExt;

const ATTACH_REFUSAL: &str = "attach is not supported by this node";

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
async fn kubectl_logs_exec_and_attach_go_through_the_apiserver_to_orca() -> Result<()> {
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

    // exec runs through the apiserver's WebSocket, passed on to orca (the node declares
    // ExtendWebSocketsToKubelet): output, input and the exit code come back as from a kubelet.
    let exec = kubectl(&["exec", "-n", &ns, "talker", "--", "echo", "hello", "there"])?;
    assert!(exec.status.success(), "{exec:?}");
    assert_eq!(String::from_utf8_lossy(&exec.stdout), "hello there\n");
    let failed = kubectl(&[
        "exec",
        "-n",
        &ns,
        "talker",
        "--",
        "sh",
        "-c",
        "echo out; exit 3",
    ])?;
    assert_eq!(failed.status.code(), Some(3), "{failed:?}");
    assert_eq!(String::from_utf8_lossy(&failed.stdout), "out\n");
    let mut cat = TestCluster::shared()
        .kubectl()
        .args(["exec", "-i", "-n", &ns, "talker", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    cat.stdin
        .take()
        .context("stdin")?
        .write_all(b"line one\nline 'two'\n")?;
    let cat = cat.wait_with_output()?;
    assert!(cat.status.success(), "{cat:?}");
    assert_eq!(
        String::from_utf8_lossy(&cat.stdout),
        "line one\nline 'two'\n"
    );
    let missing = kubectl(&["exec", "-n", &ns, "talker", "--", "nvidia-smi"])?;
    assert_eq!(missing.status.code(), Some(127), "{missing:?}");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nvidia-smi: not found"));

    // attach is still refused at once with the documented message, shown by kubectl as it is.
    let started = Instant::now();
    let attach = kubectl(&["attach", "-n", &ns, "talker"])?;
    let stderr = String::from_utf8_lossy(&attach.stderr);
    assert!(!attach.status.success());
    assert!(
        stderr.contains(ATTACH_REFUSAL),
        "kubectl attach printed: {stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "attach must not hang"
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
    for path in [
        format!("/containerLogs/{ns}/absent/main"),
        format!("/exec/{ns}/absent/main?command=ls&output=1"),
    ] {
        let (status, body) = kubelet_get(&scenario.orca, &path, Some(token.trim()))?;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("nodes") && body.contains("proxy"), "{body}");
    }

    // Granted nodes/proxy on nodes, as the kubelet requires for these paths: allowed.
    let reader = NodeReader::create(&ns, &format!("{}-reader", scenario.node()), "nodes/proxy")?;
    let (status, body) = kubelet_get(&scenario.orca, "/pods", Some(&reader.token))?;
    drop(reader);
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

/// Issue 40: one orca serves nodes `a` and `b`; a user granted `nodes/proxy` on `a` only reads
/// `a`'s pods, and nothing of `b`'s: not by its plain name, not by a percent-encoded one
/// (which once was authorized against `a` and served from `b`), and not in `/pods`. A pod on
/// no node answers as one on `b` does, so refusals say nothing of what exists.
#[tokio::test]
async fn a_user_allowed_one_node_sees_nothing_of_another() -> Result<()> {
    let client = TestCluster::shared().kube_client().await?;
    let base = unique_node_name("kubelet-two");
    let (a, b) = (format!("{base}-a"), format!("{base}-b"));
    let orca = OrcaProcess::start(&base, |dir| {
        format!(
            "{}nodes:\n  - name: {a}\n  - name: {b}\n",
            orca_e2e::test_config(&base, dir, "")
        )
    })?
    .declaring(&[a.clone(), b.clone()]);
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-kubelet-two").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client, &ns);
    let forever = [("simulated.orca.research/run-time", "forever")];
    running_pod(&pods_api, burst_pod("on-a", &a, &forever)).await?;
    running_pod(&pods_api, burst_pod("on-b", &b, &forever)).await?;

    let role = format!("{base}-a-proxy");
    kubectl_ok(&[
        "create",
        "clusterrole",
        &role,
        "--verb=get",
        "--resource=nodes/proxy",
        &format!("--resource-name={a}"),
    ])?;
    kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &role,
        &format!("--clusterrole={role}"),
        &format!("--serviceaccount={ns}:a-reader"),
    ])?;
    kubectl_ok(&["create", "serviceaccount", "-n", &ns, "a-reader"])?;
    let token = kubectl_ok(&["create", "token", "-n", &ns, "a-reader"])?;
    let get = |path: &str| kubelet_get(&orca, path, Some(token.trim()));
    let checks = (|| -> Result<()> {
        for path in [
            format!("/containerLogs/{ns}/on-a/main"),
            format!("/containerLogs/{ns}/on%2Da/main"),
        ] {
            let (status, body) = get(&path)?;
            assert_eq!(status, 200, "{path}: {body}");
            assert!(body.contains("[orca-sim]"), "{path}: {body}");
        }
        for path in [
            format!("/containerLogs/{ns}/on-b/main"),
            format!("/containerLogs/{ns}/on%2Db/main"),
            format!("/containerLogs/{ns}/%6Fn-b/main"),
            format!("/containerLogs/{ns}/absent/main"),
            format!("/exec/{ns}/on%2Db/main?command=ls"),
        ] {
            let (status, body) = get(&path)?;
            assert_eq!(status, 403, "{path}: {body}");
            assert!(!body.contains("[orca-sim]"), "{path}: {body}");
        }
        let (status, body) = get("/pods")?;
        assert_eq!(status, 200, "/pods: {body}");
        let list: serde_json::Value = serde_json::from_str(&body)?;
        let names: Vec<&str> = list["items"]
            .as_array()
            .context("items")?
            .iter()
            .filter_map(|pod| pod["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["on-a"], "/pods: {body}");
        Ok(())
    })();
    let _ = kubectl(&["delete", "clusterrolebinding,clusterrole", &role]);
    checks?;
    namespace.delete().await
}

/// orca with the harness's listeners and `bounds` (lines under `kubeletApi:`).
fn orca_with_bounds(test: &str, bounds: &str) -> Result<OrcaProcess> {
    let node = unique_node_name(test);
    OrcaProcess::start(&node, |dir| {
        format!(
            "{}kubeletApi:\n  bindAddress: 127.0.0.1\n  followPollInterval: 500ms\n  tls:\n    sources: [selfSigned]\n{bounds}",
            orca_e2e::test_config(&node, dir, "")
        )
    })
}

/// `orca_kubelet_api_connections_closed_total` by reason.
fn closed_by_orca(orca: &OrcaProcess) -> Result<std::collections::BTreeMap<String, f64>> {
    let page = orca_e2e::metrics::scrape(orca.metrics_port)?;
    Ok(orca_e2e::metrics::by_label(
        &page,
        "orca_kubelet_api_connections_closed_total",
        "reason",
    ))
}

/// Issue 40: TLS connections that never send a request, and requests whose headers never end,
/// once lived for ever; any pod could hold thousands and exhaust orca's file descriptors.
/// Now each is closed after `idleTimeout` (or `headerReadTimeout`), while a `kubectl logs -f`
/// on the same port, a request in flight all along, keeps streaming.
#[tokio::test]
async fn idle_and_slow_connections_are_closed_and_a_follow_is_not() -> Result<()> {
    const IDLE: usize = 300;
    const SLOW: usize = 20;
    let client = TestCluster::shared().kube_client().await?;
    let orca = orca_with_bounds(
        "kubelet-idle",
        "  idleTimeout: 3s\n  headerReadTimeout: 2s\n",
    )?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-kubelet-idle").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client, &ns);
    let forever = [("simulated.orca.research/run-time", "forever")];
    running_pod(&pods_api, burst_pod("talker", &orca.node_name, &forever)).await?;

    let mut follow = TestCluster::shared()
        .kubectl()
        .args(["logs", "-f", "-n", &ns, "talker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = follow.stdout.take().context("stdout")?;
    let lines = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if line.is_err() {
                break;
            }
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });

    // Silent connections over each protocol a client may choose, and HTTP/1 requests whose
    // headers never end.
    let offers: [&[&[u8]]; 3] = [&[b"h2"], &[b"http/1.1"], &[]];
    let connectors: Vec<_> = offers.iter().map(|alpn| connector(alpn)).collect();
    let mut silent = Vec::new();
    for i in 0..IDLE {
        silent.push(open(&connectors[i % connectors.len()], orca.kubelet_port).await?);
    }
    let mut slow = Vec::new();
    for _ in 0..SLOW {
        let mut stream = open(&connectors[1], orca.kubelet_port).await?;
        stream
            .write_all(b"GET /pods HTTP/1.1\r\nHost: orca\r\n")
            .await?;
        slow.push(stream);
    }
    let closing = futures::future::join_all(
        silent
            .into_iter()
            .map(|stream| tokio::spawn(closed_by_peer(stream)))
            .chain(
                slow.into_iter()
                    .map(|stream| tokio::spawn(closed_by_peer(stream))),
            ),
    );
    // A generous deadline for all to be closed, not a measure of how soon.
    let closed = tokio::time::timeout(Duration::from_secs(120), closing)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "orca had not closed the {IDLE} silent and {SLOW} slow connections after 120 s \
                 (idleTimeout 3s, headerReadTimeout 2s)"
            )
        })?;
    anyhow::ensure!(closed.iter().all(Result::is_ok), "a watcher failed");
    let by_reason = closed_by_orca(&orca)?;
    assert!(
        by_reason.get("idle").copied().unwrap_or_default() >= (IDLE + SLOW) as f64,
        "{by_reason:?}"
    );

    // The follow, in flight all along, was not cut: it is running and still gets lines.
    let seen = lines.load(std::sync::atomic::Ordering::Relaxed);
    orca_e2e::wait::poll_until(
        "more lines from kubectl logs -f",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || async { Ok((lines.load(std::sync::atomic::Ordering::Relaxed) > seen).then_some(())) },
    )
    .await?;
    let running = follow.try_wait()?.is_none();
    let _ = follow.kill();
    let _ = follow.wait();
    assert!(
        running,
        "kubectl logs -f ended while idle connections were closed"
    );
    namespace.delete().await
}

/// Issue 40: connections beyond `maxConnections` are closed as they are accepted, while those
/// within it stay (here: in their handshake, which they are given ten minutes for), and the
/// port answers again once they are gone.
#[tokio::test]
async fn connections_beyond_the_cap_are_closed_as_accepted() -> Result<()> {
    const CAP: usize = 50;
    const OVER: usize = 30;
    let orca = orca_with_bounds(
        "kubelet-cap",
        &format!("  maxConnections: {CAP}\n  handshakeTimeout: 10m\n  idleTimeout: 10m\n"),
    )?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let mut streams = Vec::new();
    for _ in 0..CAP + OVER {
        let stream = std::net::TcpStream::connect(("127.0.0.1", orca.kubelet_port))?;
        stream.set_nonblocking(true)?;
        streams.push(stream);
    }
    let closed = |streams: &[std::net::TcpStream]| {
        streams
            .iter()
            .filter(|stream| {
                let mut stream: &std::net::TcpStream = stream;
                let mut buffer = [0u8; 16];
                // EOF (or a reset): closed by orca; WouldBlock: open, in its handshake.
                match std::io::Read::read(&mut stream, &mut buffer) {
                    Ok(read) => read == 0,
                    Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
                }
            })
            .count()
    };
    orca_e2e::wait::poll_until(
        "the connections over the cap closed",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || async { Ok((closed(&streams) >= OVER).then_some(())) },
    )
    .await?;
    assert_eq!(closed(&streams), OVER, "only those over the cap are closed");
    let by_reason = closed_by_orca(&orca)?;
    assert_eq!(
        by_reason.get("at_capacity"),
        Some(&(OVER as f64)),
        "{by_reason:?}"
    );
    let page = orca_e2e::metrics::scrape(orca.metrics_port)?;
    assert!(
        page.contains(&format!("orca_kubelet_api_connections_open {CAP}\n")),
        "{page}"
    );

    // Once they hang up, the port answers again (401: no credentials).
    drop(streams);
    orca_e2e::wait::poll_until(
        "the kubelet port answering",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || async { Ok(matches!(kubelet_get(&orca, "/healthz", None), Ok((401, _))).then_some(())) },
    )
    .await?;
    Ok(())
}
