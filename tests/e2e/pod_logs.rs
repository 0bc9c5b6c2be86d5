//! A pod's logs through CloudWatch Logs (issue 43) end to end: the real orca with
//! `provider.aws.logs`, moto's CloudWatch Logs and EC2, the apiserver and `kubectl logs`.
//! Apart from `kubelet_api.rs` because it loads moto hard (12,000 events put and read back):
//! a test binary runs alone, so the other files' deadlines are not measured against it.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::cluster::kubectl_ok;
use orca_e2e::container_logs::put_lines;
use orca_e2e::pods::{self, burst_pod};
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

/// With `provider.aws.logs`, orca creates the group (with its retention) at startup, a pod's
/// logs show its boot log until its container's stream exists, then the stream: history far
/// past the console's 64 KiB and CloudWatch's 10,000-event page, `--tail`, `--since`,
/// `--timestamps`, `--limit-bytes`, and `-f` receiving lines written after it started until
/// the container exits.
#[tokio::test]
async fn logs_of_a_pod_on_moto_come_from_cloudwatch_logs_with_history_and_follow() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let logs = cluster.logs_client().await;
    let ec2 = cluster.ec2_client().await;
    let node = unique_node_name("kubelet-cwl");
    let group = format!("/orca/e2e/{node}");
    let moto = cluster.var("AWS_ENDPOINT_URL");
    let extra = format!("logs:\n  group: {group}\n  retentionDays: 7\n  endpointUrl: {moto}\n");
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, &extra))?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let groups = logs
        .describe_log_groups()
        .log_group_name_prefix(&group)
        .send()
        .await?;
    let made = groups
        .log_groups()
        .first()
        .context("the log group made at startup")?;
    assert_eq!(made.retention_in_days(), Some(7));

    let namespace = TestNamespace::create(&client, "e2e-kubelet-cwl").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client, &ns);
    pods::create(&pods_api, &burst_pod("talker", &node, &[])).await?;
    let pod = pods::wait_for_phase(&pods_api, "talker", "Running", Duration::from_secs(60)).await?;
    let uid = pod.metadata.uid.clone().context("uid")?;
    let instance = pods::instance_id(&pod).context("instance")?;
    // No stream yet (the container has not written): the boot log explains.
    let boot = kubectl_ok(&["logs", "-n", &ns, "talker"])?;
    assert!(boot.starts_with("Linux version"), "{boot}");

    // 12,000 lines over the last hour (two pages of CloudWatch, ~600 KB), the last ten in the
    // last minute.
    let stream = format!("{uid}/main");
    logs.create_log_stream()
        .log_group_name(&group)
        .log_stream_name(&stream)
        .send()
        .await?;
    let now = jiff::Timestamp::now();
    let lines: Vec<(jiff::Timestamp, String)> = (0..12_000)
        .map(|i: i64| {
            let ago = if i < 11_990 {
                3_600 - i / 4
            } else {
                12_010 - i
            };
            (
                now - jiff::SignedDuration::from_secs(ago),
                format!(
                    "step {i:05} loss={:.4} and some padding text",
                    1.0 / (i + 1) as f64
                ),
            )
        })
        .collect();
    put_lines(&logs, &group, &stream, &lines).await?;

    let all = kubectl_ok(&["logs", "-n", &ns, "talker"])?;
    let printed: Vec<&str> = all.lines().collect();
    assert_eq!(printed.len(), 12_000, "every line, in {} bytes", all.len());
    assert!(all.len() > 64 * 1024);
    assert_eq!(printed[0], lines[0].1);
    assert_eq!(printed[11_999], lines[11_999].1);
    let tail = kubectl_ok(&["logs", "-n", &ns, "talker", "--tail=3"])?;
    let expected: String = lines[11_997..]
        .iter()
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert_eq!(tail, expected);
    let recent = kubectl_ok(&["logs", "-n", &ns, "talker", "--since=60s"])?;
    assert_eq!(recent.lines().count(), 10, "--since=60s gave:\n{recent}");
    let stamped = kubectl_ok(&["logs", "-n", &ns, "talker", "--tail=1", "--timestamps"])?;
    let (stamp, text) = stamped
        .trim_end()
        .split_once(' ')
        .context("a stamped line")?;
    assert_eq!(
        stamp.parse::<jiff::Timestamp>()?.as_millisecond(),
        lines[11_999].0.as_millisecond()
    );
    assert_eq!(text, lines[11_999].1);
    let limited = kubectl_ok(&["logs", "-n", &ns, "talker", "--limit-bytes=20"])?;
    assert_eq!(limited, lines[0].1[..20]);

    // `-f` from the tail: lines written after it started arrive, more than the console's
    // 64 KiB of them, and the follow ends once the container has exited.
    let mut follow = cluster
        .kubectl()
        .args(["logs", "-f", "-n", &ns, "talker", "--tail=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = follow.stdout.take().context("stdout")?;
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut later = Vec::new();
    for round in 0..3 {
        let batch: Vec<(jiff::Timestamp, String)> = (0..1_000)
            .map(|i| {
                (
                    jiff::Timestamp::now(),
                    format!("later {round} {i:04} {}", "x".repeat(40)),
                )
            })
            .collect();
        put_lines(&logs, &group, &stream, &batch).await?;
        later.extend(batch.into_iter().map(|(_, line)| line));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    orca_e2e::ec2::finish_workload(&ec2, &instance, 0).await?;
    pods::wait_for_phase(&pods_api, "talker", "Succeeded", Duration::from_secs(60)).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reader.is_finished() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ended = reader.is_finished();
    let _ = follow.kill();
    let _ = follow.wait();
    let streamed = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))?;
    assert!(
        ended,
        "kubectl logs -f did not end after the container exited"
    );
    assert_eq!(streamed.first(), Some(&lines[11_999].1));
    assert_eq!(
        &streamed[1..],
        &later[..],
        "every later line, once, in order"
    );
    assert!(later.iter().map(|line| line.len() + 1).sum::<usize>() > 64 * 1024);
    namespace.delete().await
}
