//! Memory over time (issue 16): 10,000 pods through their whole life on the simulated
//! provider, in waves (create, run to completion, delete), against the real apiserver. orca's
//! resident memory once they are all gone, against its idle baseline: per-pod state must leave
//! with the pods (records, write tracking, termination requests, event series).
//!
//! The simulated provider stands in for EC2 inside orca's process; it keeps terminated
//! instances listed for `terminatedRetention` as EC2 does for about an hour. The bench sets
//! that to 30 s and lets orca settle longer than that before each reading, so what is measured
//! is orca's own memory, not the simulated EC2's. (Much shorter, and an instance can vanish
//! before a busy orca has seen its workload exit: the pod then ends `InstanceLost`, honestly,
//! and the wave never succeeds.)
//!
//!     cargo run --release -p orca-e2e --bin memory-bench -- [PODS] [WAVE]
//!
//! Defaults: 10000 pods in waves of 500.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use orca_e2e::pods::{self, burst_pod};
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, unique_node_name};

const MIB: f64 = 1024.0 * 1024.0;
/// How long orca is left alone before a memory reading: longer than the simulated provider's
/// `terminatedRetention` (30 s) plus several sync periods, so the simulated EC2 has forgotten
/// the instances, records of pods gone are dropped and caches settle.
const SETTLE: Duration = Duration::from_secs(45);

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let wave: usize = args.next().map_or(Ok(500), |a| a.parse())?;
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let name = unique_node_name("memory");
    let mut orca = OrcaProcess::start(&name, |_| {
        format!(
            "node:\n  name: {name}\n  pods: \"{capacity}\"\npods:\n  syncInterval: 1s\nprovider:\n  simulated:\n    bootDelay: 0s\n    runTime: 1s\n    exitCode: 0\n    terminatedRetention: 30s\nlogging:\n  level: warn\n",
            capacity = wave * 2
        )
    })?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    let namespace = TestNamespace::create(&client, "bench-memory").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);

    // Baseline: orca after one pod's whole life (every code path warm), then idle.
    run_wave(&api, &name, "warmup", 1).await?;
    tokio::time::sleep(SETTLE).await;
    let baseline = orca.rss_bytes().context("orca's RSS")? as f64 / MIB;
    let baseline_anon = orca.anon_rss_bytes().unwrap_or_default() as f64 / MIB;
    println!("idle baseline after one pod: {baseline:.1} MiB ({baseline_anon:.1} MiB anonymous)");
    print_anon_breakdown("idle", &orca);

    let started = Instant::now();
    let mut done = 0;
    let mut wave_index = 0;
    while done < total {
        let size = wave.min(total - done);
        run_wave(&api, &name, &format!("w{wave_index:03}"), size).await?;
        done += size;
        wave_index += 1;
        println!(
            "{done} pods done in {:.0} s; RSS {:.1} MiB, peak {:.1} MiB",
            started.elapsed().as_secs_f64(),
            orca.rss_bytes().unwrap_or_default() as f64 / MIB,
            orca.peak_rss_bytes().unwrap_or_default() as f64 / MIB
        );
    }
    tokio::time::sleep(SETTLE).await;
    let after = orca.rss_bytes().context("orca's RSS")? as f64 / MIB;
    let after_anon = orca.anon_rss_bytes().unwrap_or_default() as f64 / MIB;
    let peak = orca.peak_rss_bytes().unwrap_or_default() as f64 / MIB;
    print_anon_breakdown("after", &orca);
    println!();
    println!(
        "| pods | waves | took | idle baseline | peak | after all gone | after / baseline | anonymous: idle → after |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {total} | {wave_index} of {wave} | {:.0} s | {baseline:.1} MiB | {peak:.1} MiB | {after:.1} MiB | {:+.1} % | {baseline_anon:.1} → {after_anon:.1} MiB |",
        started.elapsed().as_secs_f64(),
        (after / baseline - 1.0) * 100.0
    );
    namespace.delete().await?;
    let _ = orca.stop();
    Ok(())
}

/// Where orca's anonymous memory is (glibc's heap and arenas, stacks, jemalloc's extents and
/// the rest), read from smaps.
fn print_anon_breakdown(when: &str, orca: &OrcaProcess) {
    if let Some(b) = orca.pid().and_then(orca_e2e::procfs::anon_breakdown) {
        println!(
            "anonymous {when}: glibc heap {:.1}, glibc arenas {:.1}, stacks {:.1}, jemalloc and other {:.1} MiB",
            b.heap as f64 / MIB,
            b.arenas as f64 / MIB,
            b.stacks as f64 / MIB,
            b.other as f64 / MIB
        );
    }
}

/// `count` pods bound to the node, each runs for 1 s and succeeds; then all are deleted and
/// gone.
async fn run_wave(api: &Api<Pod>, node: &str, prefix: &str, count: usize) -> Result<()> {
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let pod = burst_pod(&format!("{prefix}-{i:05}"), node, &[]);
            async move { pods::create(&api, &pod).await.map(|_| ()) }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let listed = api.list(&ListParams::default()).await?;
        let finished = listed
            .items
            .iter()
            .filter(|p| pods::phase(p) == "Succeeded")
            .count();
        if finished >= count {
            break;
        }
        // A pod that failed never succeeds: stop now, naming it, rather than at the deadline.
        if let Some(failed) = listed.items.iter().find(|p| pods::phase(p) == "Failed") {
            bail!(
                "{prefix}: pod {} failed: {}",
                failed.metadata.name.as_deref().unwrap_or_default(),
                failed
                    .status
                    .as_ref()
                    .and_then(|status| status.reason.as_deref())
                    .unwrap_or("no reason")
            );
        }
        if Instant::now() > deadline {
            bail!("{prefix}: only {finished} of {count} pods Succeeded after 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    loop {
        if api.list(&ListParams::default()).await?.items.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{prefix}: pods still there after 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
