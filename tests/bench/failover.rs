//! Failover of shared nodes (issue 20): two orca replicas share K nodes through Leases, on
//! moto, with P pods running; the replica holding the nodes is SIGKILLed. Per round: the time
//! from the SIGKILL to every node held again (its Lease by the other replica, its Node
//! advertising that replica's kubelet API, that replica ready: every node registered and its
//! pods listed), the pods affected (seen not Running, or with another instance, from the kill
//! until 5 s after the takeover), and the instances launched twice (by the pod-UID tag, in any
//! state).
//!
//!     cargo run --release -p orca-e2e --bin failover-bench -- [--rounds R] [--nodes K] [P]
//!
//! Defaults: 3 rounds, 3 nodes, 30 pods. The Lease settings are orca's defaults (8 s, renewed
//! 5 s before expiry, every 3 s).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use orca_e2e::pods::{self, instance_id, phase};
use orca_e2e::replicas::Replicas;

struct Round {
    takeover: Duration,
    affected: usize,
    doubled: usize,
}

#[tokio::main]
async fn main() -> Result<()> {
    let (mut rounds, mut nodes, mut pods) = (3usize, 3usize, 30usize);
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        let mut number = |flag: &str| -> Result<usize> {
            given
                .next()
                .with_context(|| format!("{flag} needs a number"))?
                .parse()
                .with_context(|| format!("{flag} needs a number"))
        };
        match arg.as_str() {
            "--rounds" => rounds = number("--rounds")?,
            "--nodes" => nodes = number("--nodes")?,
            count => {
                pods = count
                    .parse()
                    .with_context(|| format!("{count:?} is not a pod count"))?
            }
        }
    }
    if rounds == 0 || nodes == 0 {
        bail!("at least one round and one node");
    }
    println!("round | nodes | pods | SIGKILL to every node held | pods affected | launched twice");
    let mut measured = Vec::new();
    for round in 1..=rounds {
        let result = one_round(nodes, pods)
            .await
            .with_context(|| format!("round {round}"))?;
        println!(
            "{round} | {nodes} | {pods} | {:.1} s | {} | {}",
            result.takeover.as_secs_f64(),
            result.affected,
            result.doubled
        );
        measured.push(result);
    }
    let mut times: Vec<f64> = measured.iter().map(|r| r.takeover.as_secs_f64()).collect();
    times.sort_by(f64::total_cmp);
    println!();
    println!(
        "| nodes | pods | rounds | SIGKILL to every node held, median (min–max) | pods affected (all rounds) | instances launched twice (all rounds) |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {nodes} | {pods} | {rounds} | {:.1} s ({:.1}–{:.1}) | {} | {} |",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        measured.iter().map(|r| r.affected).sum::<usize>(),
        measured.iter().map(|r| r.doubled).sum::<usize>()
    );
    Ok(())
}

async fn one_round(nodes: usize, count: usize) -> Result<Round> {
    let mut replicas = Replicas::start("failover", nodes).await?;
    for i in 0..count {
        pods::create(&replicas.pods, &replicas.pod_on(&format!("p{i:04}"), i)).await?;
    }
    let before: BTreeMap<String, String> = replicas
        .wait_all_running(count, Duration::from_secs(120))
        .await?
        .iter()
        .map(|pod| (uid(pod), instance_id(pod).unwrap_or_default()))
        .collect();
    let looking = Arc::new(AtomicBool::new(true));
    let watcher = tokio::spawn(affected_pods(
        replicas.pods.clone(),
        before,
        looking.clone(),
    ));
    let killed = Instant::now();
    replicas.a.kill()?;
    replicas
        .wait_held_by("replica-b", &replicas.b, Duration::from_secs(60))
        .await?;
    let takeover = killed.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    looking.store(false, Ordering::Release);
    let affected = watcher.await??.len();
    let doubled = replicas
        .launches_per_pod()
        .await?
        .values()
        .filter(|&&launches| launches > 1)
        .count();
    replicas.finish().await?;
    Ok(Round {
        takeover,
        affected,
        doubled,
    })
}

/// The pods seen not Running, or naming an instance other than `before`'s, while `looking`.
async fn affected_pods(
    api: Api<Pod>,
    before: BTreeMap<String, String>,
    looking: Arc<AtomicBool>,
) -> Result<BTreeSet<String>> {
    let mut affected = BTreeSet::new();
    while looking.load(Ordering::Acquire) {
        for pod in api.list(&ListParams::default()).await?.items {
            let uid = uid(&pod);
            let moved = before.get(&uid) != instance_id(&pod).as_ref();
            if phase(&pod) != "Running" || moved {
                affected.insert(uid);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(affected)
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}
