//! `interruption-bench`: the time from a spot interruption warning landing in the queue to
//! the pod's `DisruptionTarget` condition, for N pods warned at once, or for one pod warned
//! behind a flood of messages that are not its orca's.
//!
//!   set -a; . "$(tests/cluster/up | tail -n1)"; set +a
//!   cargo run --release -p orca-e2e --bin interruption-bench -- [--rounds R] N...
//!   cargo run --release -p orca-e2e --bin interruption-bench -- [--rounds R] \
//!       --flood F [--warn-after S]
//!
//! Each round: an orca in this process (aws provider over a calm EC2 model, the interruption
//! queue over an in-memory SQS with SQS's long-poll semantics), N spot pods Running on the
//! local cluster, then N warnings sent at once; the bench polls the pods every 10 ms and
//! takes, per pod, the first poll that shows the condition. Prints median, p99 and max per
//! round.
//!
//! `--flood F` (see [`flood`]): the queue is a queue of moto's SQS, as the docs' stack makes
//! it (30 s visibility timeout, 5-minute retention); F messages that are not this orca's go in
//! first, the one warning for the pod's instance S seconds after the last of them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use orca::interruption::NoticeQueue;
use orca_e2e::inprocess::InProcessOrca;
use orca_e2e::model_ec2::ModelEc2;
use orca_e2e::model_queue::ModelQueue;
use orca_e2e::notices::spot_warning;
use orca_e2e::orca::free_port;
use orca_e2e::pods::{self, burst_pod, instance_id};
use orca_e2e::wait::poll_until;
use orca_e2e::{TestCluster, TestNamespace, unique_node_name};
use orca_ec2_model::{Behaviour, Ec2Model};

mod flood;

fn config(node: &str) -> Result<String> {
    Ok(format!(
        "node:
  name: {node}
  clusterName: {node}
  daemonPort: {kubelet}
pods:
  syncInterval: 1s
provider:
  kind: aws
  region: us-west-2
  aws:
    defaultAmi: ami-0123456789abcdef0
    catalogueRefresh: 0s
    subnetIds: [subnet-0a0a0a0a0a0a0a0a0, subnet-0b0b0b0b0b0b0b0b0, subnet-0c0c0c0c0c0c0c0c0]
    rateLimit:
      mutatingPerSecond: 1000
      mutatingBurst: 1000
      describePerSecond: 1000
      describeBurst: 1000
kubeletApi:
  bindAddress: 127.0.0.1
  tls:
    sources: [selfSigned]
metrics:
  bindAddress: 127.0.0.1
  port: {metrics}
logging:
  level: warn
",
        kubelet = free_port()?,
        metrics = free_port()?,
    ))
}

fn warned(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        })
}

/// One spot pod per name on `node`; answers once every pod is Running, with each pod's name
/// and instance id.
async fn running_pods(
    api: &Api<Pod>,
    node: &str,
    names: &[String],
) -> Result<Vec<(String, String)>> {
    for name in names {
        let pod = burst_pod(
            name,
            node,
            &[
                ("orca.research/instance-type", "m5.large"),
                ("orca.research/launch-type", "spot"),
            ],
        );
        pods::create(api, &pod).await?;
    }
    let count = names.len();
    poll_until(
        "every pod Running",
        Duration::from_secs(120),
        Duration::from_millis(200),
        || async {
            let listed = api.list(&ListParams::default()).await?.items;
            let ids: Vec<(String, String)> = listed
                .iter()
                .filter(|p| pods::phase(p) == "Running")
                .filter_map(|p| Some((p.metadata.name.clone()?, instance_id(p)?)))
                .collect();
            Ok((ids.len() == count).then_some(ids))
        },
    )
    .await
}

/// One round: the latencies of `count` pods, sorted.
async fn round(count: usize, seed: u64) -> Result<Vec<Duration>> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let namespace = TestNamespace::create(&client, "interruption-bench").await?;
    let node = unique_node_name("ibench");
    let queue = Arc::new(ModelQueue::default());
    let model = Arc::new(Ec2Model::new(seed, Behaviour::calm()));
    let notices: Arc<dyn NoticeQueue> = queue.clone();
    let orca = InProcessOrca::start(
        &config(&node)?,
        &PathBuf::from(cluster.var("ORCA_KUBECONFIG")),
        Arc::new(ModelEc2::new(model)),
        Some(notices),
    )?;
    let api: Api<Pod> = Api::namespaced(client, &namespace.name);
    let names: Vec<String> = (0..count).map(|n| format!("w{n}")).collect();
    let running = running_pods(&api, &node, &names).await?;
    // The pods have settled: no write of orca's is still on its way.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = Instant::now();
    for (_, id) in &running {
        queue.send(spot_warning(id, jiff::Timestamp::now()));
    }
    let mut seen: BTreeMap<String, Duration> = BTreeMap::new();
    let deadline = sent + Duration::from_secs(60);
    while seen.len() < count {
        if Instant::now() > deadline {
            bail!(
                "only {} of {count} pods got the condition in 60 s",
                seen.len()
            );
        }
        for pod in api.list(&ListParams::default()).await?.items {
            if let Some(name) = pod.metadata.name.clone()
                && warned(&pod)
            {
                seen.entry(name).or_insert_with(|| sent.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Its runtime cannot be waited for from inside this one; nothing is left to finish.
    orca.crash();
    namespace.delete().await?;
    let mut latencies: Vec<Duration> = seen.into_values().collect();
    latencies.sort();
    Ok(latencies)
}

fn at(sorted: &[Duration], quantile: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * quantile).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    orca::support::tls::install_crypto_provider();
    let mut args = std::env::args().skip(1);
    let mut rounds = 3u64;
    let mut sizes = Vec::new();
    let mut flooded: Option<usize> = None;
    let mut warn_after = Duration::ZERO;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => rounds = args.next().context("--rounds R")?.parse()?,
            "--flood" => {
                flooded = Some(
                    args.next()
                        .context("--flood F: messages that are not this orca's")?
                        .parse()?,
                );
            }
            "--warn-after" => {
                warn_after = Duration::from_secs(
                    args.next()
                        .context("--warn-after S: seconds after the flood")?
                        .parse()?,
                );
            }
            size => sizes.push(size.parse::<usize>().context("N: pods warned at once")?),
        }
    }
    if let Some(foreign) = flooded {
        return flood::run(foreign, warn_after, rounds).await;
    }
    if sizes.is_empty() {
        bail!(
            "usage: interruption-bench [--rounds R] N... | [--rounds R] --flood F [--warn-after S]"
        );
    }
    println!("| pods warned at once | round | median | p99 | max |");
    println!("|---|---|---|---|---|");
    for count in sizes {
        for seed in 1..=rounds {
            let latencies = round(count, seed).await?;
            println!(
                "| {count} | {seed} | {} ms | {} ms | {} ms |",
                at(&latencies, 0.5).as_millis(),
                at(&latencies, 0.99).as_millis(),
                at(&latencies, 1.0).as_millis()
            );
        }
    }
    Ok(())
}
