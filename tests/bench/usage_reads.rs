//! The cost of reading the pods' usage back from CloudWatch (issue 43): orca with
//! `provider.aws.metrics` (interval 10 s) with N pods Running. Every interval the bench publishes what each pod's instance would (its
//! container's CPU seconds and working set), then for S seconds measures:
//!
//! - the reads orca makes per interval, the `GetMetricData` calls per read and the metrics
//!   each call asks for (one call per 500 metrics, whatever N is; a read's first call is the
//!   one whose first metric is `q0`);
//! - orca's CPU share while reading, and its memory (RSS);
//! - that every pod's figures are served on `/metrics/resource` (the pods counted there).
//!
//! The pods' instances are listed before orca starts (each pod held back by a scheduling gate
//! until its instance, tagged for it as orca tags its own, is listed), so orca finds them
//! Running in its first listing; launching is what `scale-bench` measures, not this. orca lists
//! its instances every 5 s (`pods.syncInterval`'s default).
//!
//! The instances are listed by a stand-in, [`Ec2Listing`], which orca uses as its EC2 endpoint:
//! moto 5.2.5 takes over 30 s to answer one `DescribeInstances` of 1,000 instances, past orca's
//! 30 s call timeout, so against moto alone orca never sees 1,000 pods Running. The stand-in
//! answers `DescribeInstances` from memory in EC2's XML and passes every other EC2 call to
//! moto, counting them by action (the report's last column: orca launches and terminates
//! nothing here). Still real: orca (the binary, its SDK client and the SDK's wire format), the
//! apiserver, kube-scheduler, and every EC2 call but the listing.
//!
//! CloudWatch is a stand-in too, [`MetricStore`], which records every call as a proxy would:
//! moto 5.2.5's `GetMetricData` scans every datum it holds for each query, so one call of 500
//! queries takes seconds and a read of 1,000 pods' figures does not finish within an
//! interval (at most 498 of 1,000 pods were served). The store keeps each series by time;
//! the bench publishes to it with the real SDK's `PutMetricData`, and orca reads it with its
//! own `GetMetricData`, so both wire formats are the real ones.
//!
//!     cargo run --release -p orca-e2e --bin usage-reads-bench -- [--rounds R] [--seconds S] [PODS ...]
//!
//! Defaults: 3 rounds of 60 s, for 100 pods.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit};
use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use orca::provider::PodKey;
use orca::provider::ownership::{TAG_CLUSTER_ID, ownership_tags, read_cluster_id};
use orca_e2e::ec2_listing::Ec2Listing;
use orca_e2e::http::curl_status;
use orca_e2e::metric_store::MetricStore;
use orca_e2e::node_reader::NodeReader;
use orca_e2e::orca::aws_test_config_at;
use orca_e2e::pods::{self, burst_pod};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, unique_node_name};

/// The scheduling gate that holds the bench's pods until their instances exist.
const GATE: &str = "orca.research/bench-instance";

const MIB: f64 = 1024.0 * 1024.0;
const INTERVAL_SECONDS: u64 = 10;

struct Settings {
    rounds: usize,
    seconds: u64,
    pods: Vec<usize>,
}

struct Round {
    reads_per_interval: f64,
    calls_per_read: f64,
    metrics_per_call: f64,
    cpu: f64,
    rss: f64,
    served: usize,
    /// The `DescribeInstances` the stand-in answered, in the whole round.
    listings: usize,
    /// The EC2 calls passed on to moto in the whole round, by action.
    passed: BTreeMap<String, usize>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let settings = settings()?;
    println!(
        "pods | round | reads per interval | GetMetricData calls per read | metrics per call | orca CPU | RSS | pods served | listings answered | EC2 calls passed to moto"
    );
    for &count in &settings.pods {
        let mut rounds = Vec::new();
        for round in 1..=settings.rounds {
            let r = one_round(count, settings.seconds)
                .await
                .with_context(|| format!("{count} pods, round {round}"))?;
            println!(
                "{count} | {round} | {:.2} | {:.2} | {:.0} | {:.1} % | {:.1} MiB | {}/{count} | {} | {}",
                r.reads_per_interval,
                r.calls_per_read,
                r.metrics_per_call,
                r.cpu * 100.0,
                r.rss,
                r.served,
                r.listings,
                by_action(&r.passed),
            );
            rounds.push(r);
        }
        let median = |value: &dyn Fn(&Round) -> f64| {
            let mut values: Vec<f64> = rounds.iter().map(value).collect();
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        println!(
            "{count} | median | {:.2} | {:.2} | {:.0} | {:.1} % | {:.1} MiB | | |",
            median(&|r| r.reads_per_interval),
            median(&|r| r.calls_per_read),
            median(&|r| r.metrics_per_call),
            median(&|r| r.cpu) * 100.0,
            median(&|r| r.rss),
        );
    }
    Ok(())
}

/// `calls` as `Action ×N, …` (`none` when empty), for the report line.
fn by_action(calls: &BTreeMap<String, usize>) -> String {
    if calls.is_empty() {
        return "none".to_owned();
    }
    calls
        .iter()
        .map(|(action, count)| format!("{action} ×{count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn settings() -> Result<Settings> {
    let mut settings = Settings {
        rounds: 3,
        seconds: 60,
        pods: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let number = |value: Option<String>| -> Result<u64> {
            value
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("{arg} needs a number"))
        };
        match arg.as_str() {
            "--rounds" => settings.rounds = usize::try_from(number(args.next())?)?,
            "--seconds" => settings.seconds = number(args.next())?,
            count => settings
                .pods
                .push(count.parse().context("pod counts are numbers")?),
        }
    }
    if settings.pods.is_empty() {
        settings.pods = vec![100];
    }
    if settings.rounds == 0 || settings.seconds < 2 * INTERVAL_SECONDS {
        bail!("at least one round of two intervals");
    }
    Ok(settings)
}

fn datum(name: &str, uid: &str, at: Timestamp, value: f64, unit: StandardUnit) -> MetricDatum {
    MetricDatum::builder()
        .metric_name(name)
        .dimensions(Dimension::builder().name("PodUID").value(uid).build())
        .dimensions(Dimension::builder().name("Container").value("main").build())
        .timestamp(DateTime::from_secs(at.as_second()))
        .value(value)
        .unit(unit)
        .storage_resolution(1)
        .build()
}

/// What every pod's instance publishes once an interval: CPU seconds and the working set,
/// 1,000 data to a call as the bootstrap sends them.
async fn publish(
    cloudwatch: &aws_sdk_cloudwatch::Client,
    namespace: &str,
    uids: &[String],
    tick: u64,
) -> Result<()> {
    let at = Timestamp::now();
    let data: Vec<MetricDatum> = uids
        .iter()
        .flat_map(|uid| {
            [
                datum(
                    "CpuUsageSeconds",
                    uid,
                    at,
                    5.0 * tick as f64,
                    StandardUnit::Seconds,
                ),
                datum("MemoryWorkingSetBytes", uid, at, 1.0e8, StandardUnit::Bytes),
            ]
        })
        .collect();
    for chunk in data.chunks(1000) {
        cloudwatch
            .put_metric_data()
            .namespace(namespace)
            .set_metric_data(Some(chunk.to_vec()))
            .send()
            .await?;
    }
    Ok(())
}

/// The instance orca would have launched for the `index`th pod, `pod`, on `node`: listed
/// running by `listing`, tagged as orca tags its own, of type m5.large at 10.1.x.y.
fn list_for(
    listing: &Ec2Listing,
    node: &str,
    cluster_id: &str,
    index: usize,
    pod: &Pod,
) -> Result<()> {
    let key = PodKey::of(pod).context("a created pod has a name and uid")?;
    let tags: BTreeMap<String, String> = ownership_tags(node, node, &key)
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .chain([(TAG_CLUSTER_ID.to_owned(), cluster_id.to_owned())])
        .collect();
    let instance_id = format!("i-{:017x}", fastrand::u64(..) >> 4);
    let private_ip = format!("10.1.{}.{}", index / 250, index % 250 + 1);
    listing.add(&instance_id, "m5.large", &private_ip, tags);
    Ok(())
}

async fn one_round(count: usize, seconds: u64) -> Result<Round> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let store = MetricStore::start().await?;
    let cloudwatch = aws_sdk_cloudwatch::Client::from_conf(
        aws_sdk_cloudwatch::config::Builder::from(&cluster.aws_config().await)
            .endpoint_url(store.url())
            .build(),
    );
    let node = unique_node_name("usage-reads");
    let namespace_name = format!("Orca/Bench/{node}");
    let extra = format!(
        "metrics:\n  namespace: {namespace_name}\n  interval: {INTERVAL_SECONDS}s\n  endpointUrl: {}\n",
        store.url()
    );
    let namespace = TestNamespace::create(&client, "bench-usage-reads").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let created = futures::stream::iter(0..count)
        .map(|i| {
            let api = pods_api.clone();
            let mut pod = burst_pod(&format!("p{i:04}"), &node, &[]);
            pod.spec.as_mut().expect("spec").scheduling_gates =
                Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                    name: GATE.to_owned(),
                }]);
            async move { pods::create(&api, &pod).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    // Listed before orca starts, so its first listing finds every pod's instance running.
    let cluster_id = read_cluster_id(&client).await?;
    let zone = format!("{}a", cluster.var("AWS_REGION"));
    let listing = Ec2Listing::start(cluster.var("AWS_ENDPOINT_URL"), &zone).await?;
    for (index, pod) in created.iter().enumerate() {
        list_for(&listing, &node, &cluster_id, index, pod)?;
    }
    // The instances wait for their pods longer than the bench takes to lift the gates; orca
    // lists every 5 s, its default.
    let orca = OrcaProcess::start(&node, |_| {
        format!(
            "{}logging:\n  level: warn\n",
            aws_test_config_at(&node, listing.url(), &extra)
                .replace("orphanGracePeriod: 3s", "orphanGracePeriod: 1h")
                .replace("syncInterval: 1s", "syncInterval: 5s")
        )
    })?;
    orca.wait_ready(Duration::from_secs(60)).await?;
    futures::stream::iter(&created)
        .map(|pod| {
            let api = pods_api.clone();
            let name = pod.metadata.name.clone().unwrap_or_default();
            async move {
                let patch = serde_json::json!({"spec": {"schedulingGates": null}});
                api.patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    let uids = poll_until(
        "every pod Running",
        Duration::from_secs(600),
        Duration::from_secs(1),
        || async {
            let pods = pods_api.list(&ListParams::default()).await?;
            let running: Vec<String> = pods
                .items
                .iter()
                .filter(|p| pods::phase(p) == "Running")
                .filter_map(|p| p.metadata.uid.clone())
                .collect();
            Ok((running.len() == count).then_some(running))
        },
    )
    .await?;

    // A reader of /metrics/resource, as metrics-server is.
    let reader = NodeReader::create(&ns, &format!("{node}-reader"), "nodes/metrics")?;
    let bearer = reader.bearer();
    let url = format!("https://127.0.0.1:{}/metrics/resource", orca.kubelet_port);
    let served = || -> Result<usize> {
        let (status, body) = curl_status(&url, &["-k", "-H", &bearer])?;
        ensure!(status == 200, "/metrics/resource: {status} {body}");
        Ok(body
            .lines()
            .filter(|l| l.starts_with("pod_cpu_usage_seconds_total{"))
            .count())
    };

    // Published for two intervals before measuring, so every pod has figures to read.
    let mut tick = 0;
    for _ in 0..2 {
        tick += 1;
        publish(&cloudwatch, &namespace_name, &uids, tick).await?;
        tokio::time::sleep(Duration::from_secs(INTERVAL_SECONDS)).await;
    }
    let cpu_before = orca.cpu_seconds().context("CPU")?;
    let (at, started) = (Timestamp::now(), Instant::now());
    while started.elapsed() < Duration::from_secs(seconds) {
        tick += 1;
        publish(&cloudwatch, &namespace_name, &uids, tick).await?;
        tokio::time::sleep(Duration::from_secs(INTERVAL_SECONDS)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = (orca.cpu_seconds().context("CPU")? - cpu_before) / elapsed;
    let rss = orca.rss_bytes().context("RSS")? as f64 / MIB;
    let calls = store.calls_since(at, &["GetMetricData"]);
    // The query protocol names each metric of a call `MetricDataQueries.member.N.Id=…`.
    let metrics_in = |body: &str| {
        body.split('&')
            .filter(|pair| pair.starts_with("MetricDataQueries.member.") && pair.contains(".Id="))
            .count()
    };
    let largest = calls
        .iter()
        .map(|call| metrics_in(&call.body))
        .max()
        .unwrap_or(0);
    let queries_per_call = calls
        .iter()
        .map(|call| metrics_in(&call.body))
        .sum::<usize>() as f64
        / calls.len().max(1) as f64;
    let served = served()?;
    drop(reader);
    ensure!(
        largest <= 500,
        "{largest} metrics in one call, over CloudWatch's 500"
    );
    // Whole reads only: from the first read that began in the window to the last one that
    // began there (which may still be under way, so it is left out).
    let firsts: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(_, call)| {
            call.body
                .split('&')
                .any(|pair| pair == "MetricDataQueries.member.1.Id=q0")
        })
        .map(|(index, _)| index)
        .collect();
    let (reads, calls_in_reads, between) = match (firsts.first(), firsts.last()) {
        (Some(&first), Some(&last)) if first < last => (
            firsts.len() - 1,
            last - first,
            calls[last].at.duration_since(calls[first].at).as_secs_f64(),
        ),
        _ => bail!("fewer than two reads in {seconds} s"),
    };
    Ok(Round {
        reads_per_interval: reads as f64 / (between / INTERVAL_SECONDS as f64),
        calls_per_read: calls_in_reads as f64 / reads as f64,
        metrics_per_call: queries_per_call,
        cpu,
        rss,
        served,
        listings: listing.listings(),
        passed: listing.passed(),
    })
}
