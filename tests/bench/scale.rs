//! Scale benchmark for the virtual node (issue 3): N pods, not pre-bound, through the real
//! scheduler onto orca with the simulated provider at zero boot delay. Reports the time until
//! all are Running, orca's CPU seconds and peak RSS, and orca's apiserver requests per pod
//! (from the audit log, by orca's own identity).
//!
//!     cargo run --release -p orca-e2e --bin scale-bench -- 100 1000

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use orca_e2e::pods::{self, burst_pod};
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, unique_node_name};

struct Measurement {
    pods: usize,
    all_running: Duration,
    cpu_seconds: f64,
    peak_rss_mib: f64,
    requests_per_pod: f64,
    breakdown: String,
}

#[tokio::main]
async fn main() -> Result<()> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().context("pod counts are numbers"))
        .collect::<Result<_>>()?;
    let sizes = if sizes.is_empty() {
        vec![100, 1000]
    } else {
        sizes
    };
    // The table header first, then each row as soon as it is measured.
    println!("| pods | all Running | orca CPU | orca peak RSS | apiserver requests per pod |");
    println!("|---|---|---|---|---|");
    for pods in sizes {
        let row = run(pods).await?;
        println!(
            "| {} | {:.1} s | {:.2} s | {:.1} MiB | {:.2} ({}) |",
            row.pods,
            row.all_running.as_secs_f64(),
            row.cpu_seconds,
            row.peak_rss_mib,
            row.requests_per_pod,
            row.breakdown
        );
    }
    Ok(())
}

async fn run(count: usize) -> Result<Measurement> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let name = unique_node_name("scale");
    let mut orca = OrcaProcess::start(&name, |_| {
        format!(
            "node:\n  name: {name}\n  pods: \"{capacity}\"\npods:\n  syncInterval: 1s\nprovider:\n  simulated:\n    bootDelay: 0s\nlogging:\n  level: warn\n",
            capacity = count * 2
        )
    })?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    let namespace = TestNamespace::create(&client, "bench-scale").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    // The default service account must exist before pods are admitted.
    pods::create(&api, &burst_pod("warmup", &name, &[])).await?;
    orca_e2e::wait::poll_until(
        "warmup Running",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || async { Ok((pods::phase(&api.get("warmup").await?) == "Running").then_some(())) },
    )
    .await?;

    let cpu_before = orca.cpu_seconds().unwrap_or_default();
    let window_start = Timestamp::now();
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let pod = burst_pod(&format!("p{i:05}"), &name, &[]);
            async move { pods::create(&api, &pod).await.map(|_| ()) }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    let all_running = loop {
        let listed = api.list(&ListParams::default()).await?;
        let running = listed
            .items
            .iter()
            .filter(|p| pods::phase(p) == "Running")
            .count();
        // The warm-up pod is Running too.
        if running > count {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("only {running} of {count} pods Running after 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let window_end = Timestamp::now();
    let cpu_seconds = orca.cpu_seconds().unwrap_or_default() - cpu_before;
    let peak_rss_mib = orca.peak_rss_bytes().unwrap_or_default() as f64 / (1024.0 * 1024.0);
    // The audit log is written asynchronously; give the last events a moment to land.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let requests = orca_e2e::audit::requests_by(
        std::path::Path::new(cluster.var("AUDIT_LOG")),
        "orca",
        window_start,
        window_end,
    );
    let total: u64 = requests.values().sum();
    let breakdown = requests
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join(", ");

    namespace.delete().await?;
    let _ = orca.stop();
    Ok(Measurement {
        pods: count,
        all_running,
        cpu_seconds,
        peak_rss_mib,
        requests_per_pod: total as f64 / count as f64,
        breakdown,
    })
}
