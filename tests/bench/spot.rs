//! `spot-bench`: what a launch costs in EC2 requests, through EC2 Fleet against the walk of
//! one `RunInstances` per offering, with part of the capacity pools short.
//!
//!   cargo run -p orca-e2e --bin spot-bench -- [--rounds R] [--short F] N...
//!
//! (Requests are counted, not timed: a debug build gives the same figures.)
//!
//! For each N (pods launched at once) and each launch API, a fresh EC2 model (seeded by the
//! round; no lags, no throttling, no lost answers: only capacity, so the count is the launch's
//! own) where each pool (type × zone × market) is short with probability F (default 0.3) for
//! the whole run. Every pod is a spot pod with four candidate types, three subnets and
//! on-demand fallback, launched through orca's aws provider exactly as orca launches it.
//! Prints per API: EC2 requests per pod to launch (median, min–max over rounds) and how many
//! pods failed for want of capacity.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use futures::future::join_all;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::Pod;
use orca::config::{AwsConfig, LaunchApi};
use orca::metrics::Ec2Metrics;
use orca::provider::aws::{AwsProvider, Identity, Measured};
use orca::provider::plan::{InstanceCandidate, LaunchPlan, Market, MarketDecision};
use orca::provider::zones::ZoneConstraint;
use orca::provider::{PodKey, Provider};
use orca::workload::{NoObjects, launch_request};
use orca_e2e::model_ec2::ModelEc2;
use orca_ec2_model::{Behaviour, Ec2Model};
use prometheus_client::registry::Registry;

const TYPES: [&str; 4] = ["m5.large", "m6i.large", "m6a.large", "m7i.large"];
const SUBNETS: [&str; 3] = [
    "subnet-0a0a0a0a0a0a0a0a0",
    "subnet-0b0b0b0b0b0b0b0b0",
    "subnet-0c0c0c0c0c0c0c0c0",
];

struct Tally {
    requests_per_pod: f64,
    failed: usize,
}

async fn round(pods: usize, api: LaunchApi, short: f64, seed: u64) -> Result<Tally> {
    let behaviour = Behaviour {
        capacity_error_probability: short,
        // One answer per pool for the whole run.
        capacity_window: SignedDuration::from_hours(1),
        ..Behaviour::calm()
    };
    let model = Arc::new(Ec2Model::new(seed, behaviour));
    let mut registry = Registry::default();
    let metrics = Arc::new(Ec2Metrics::register(&mut registry));
    let ec2 = Arc::new(Measured::new(ModelEc2::new(model), metrics));
    let node = "orca-spot-bench".to_owned();
    let provider = AwsProvider::new(
        ec2,
        Identity {
            node: node.clone(),
            cluster: "bench".to_owned(),
            cluster_id: "00000000-0000-4000-8000-00000000be7c".to_owned(),
        },
        AwsConfig {
            default_ami: Some("ami-0123456789abcdef0".to_owned()),
            subnet_ids: SUBNETS.map(str::to_owned).to_vec(),
            launch_api: api,
            ..AwsConfig::default()
        },
    );
    let launches = (0..pods).map(|n| {
        let provider = &provider;
        let node = &node;
        async move {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": format!("p{n}"), "namespace": "bench", "uid": format!("uid-{seed}-{n}"),
                    "creationTimestamp": (jiff::Timestamp::now() + SignedDuration::from_secs(5)).to_string(),
                },
                "spec": { "containers": [ { "name": "main", "image": "busybox" } ] }
            }))?;
            let key = PodKey::of(&pod).context("pod key")?;
            let tags = orca::provider::ownership::ownership_tags(node, "bench", &key)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            let plan = LaunchPlan {
                candidates: TYPES
                    .map(|t| InstanceCandidate {
                        instance_type: t.to_owned(),
                        reason: "bench".to_owned(),
                    })
                    .to_vec(),
                market: MarketDecision {
                    market: Market::Spot,
                    max_price: None,
                    fallback_to_on_demand: true,
                    reason: "bench".to_owned(),
                    allocation_strategy: None,
                    mark_on_rebalance: false,
                },
                tags,
            };
            let request =
                launch_request(&pod, &plan, ZoneConstraint::of(&pod), &NoObjects).await?;
            anyhow::Ok(provider.create(&request).await.is_ok())
        }
    });
    let launched = join_all(launches).await;
    let mut failed = 0;
    for result in launched {
        if !result? {
            failed += 1;
        }
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    let requests: f64 = text
        .lines()
        .filter(|line| line.starts_with("orca_ec2_calls_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    Ok(Tally {
        requests_per_pod: requests / pods as f64,
        failed,
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    orca::support::tls::install_crypto_provider();
    let mut args = std::env::args().skip(1);
    let mut rounds = 3u64;
    let mut short = 0.3;
    let mut sizes = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => rounds = args.next().context("--rounds R")?.parse()?,
            "--short" => short = args.next().context("--short F")?.parse()?,
            size => sizes.push(size.parse::<usize>().context("N: pods at once")?),
        }
    }
    if sizes.is_empty() {
        bail!("usage: spot-bench [--rounds R] [--short F] N...");
    }
    println!("pools short: {short}; {rounds} rounds; median (min-max)");
    println!("| pods | launch API | EC2 requests per pod | pods failed (per round) |");
    println!("|---|---|---|---|");
    for pods in sizes {
        for (api, name) in [
            (LaunchApi::Fleet, "fleet"),
            (LaunchApi::RunInstances, "runInstances (walk)"),
        ] {
            let mut per_pod = Vec::new();
            let mut failed: BTreeMap<u64, usize> = BTreeMap::new();
            for seed in 1..=rounds {
                let tally = round(pods, api, short, seed).await?;
                per_pod.push(tally.requests_per_pod);
                failed.insert(seed, tally.failed);
            }
            let low = per_pod.iter().copied().fold(f64::INFINITY, f64::min);
            let high = per_pod.iter().copied().fold(0.0, f64::max);
            println!(
                "| {pods} | {name} | {:.2} ({low:.2}-{high:.2}) | {:?} |",
                median(per_pod),
                failed.values().collect::<Vec<_>>()
            );
        }
    }
    Ok(())
}
