//! EC2 requests per pod: the aws provider (with its real SDK client, batching and rate limit)
//! against moto's EC2 server, counting every HTTP request by operation (pages and retries
//! included) with an SDK interceptor.
//!
//! ```sh
//! set -a; . "$(tests/cluster/up | tail -n1)"; set +a     # moto's endpoint and dummy credentials
//! cargo bench -p orca --bench ec2_calls [-- PODS [STEADY_SECONDS]]
//! ```
//!
//! Three phases, each counted on its own: PODS pods launched at once (through the production
//! rate limit, 5 launches/s); STEADY_SECONDS (600: ten minutes) of steady state, one status
//! sync per `pods.syncInterval` (5 s) or, when the endpoint answers slower than that, back to
//! back; every pod deleted at once. Then one pod's whole lifecycle alone. moto is reset first so earlier runs' instances
//! do not inflate the describe pages.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use orca::config::{AwsConfig, RateLimitConfig};
use orca::provider::aws::sdk::SdkEc2;
use orca::provider::aws::{AwsProvider, Ec2Calls, Identity, RateLimited};
use orca::provider::ownership::ownership_tags;
use orca::provider::plan::{InstanceCandidate, LaunchPlan, Market, MarketDecision};
use orca::provider::zones::ZoneConstraint;
use orca::provider::{LaunchRequest, PodKey, Provider};
use orca::workload::{NoObjects, launch_request};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .filter_map(|arg| arg.parse::<usize>().ok());
    let pods = args.next().unwrap_or(1000);
    let steady = Duration::from_secs(args.next().unwrap_or(600) as u64);
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL: source the harness env file (see the doc comment)");
    let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".to_owned());
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(reset_moto(&endpoint));
    runtime.block_on(run(&endpoint, &region, pods, steady));
    // And after: the run's thousand terminated instances would slow every later test.
    runtime.block_on(reset_moto(&endpoint));
}

async fn run(endpoint: &str, region: &str, pods: usize, steady_for: Duration) {
    let run_id = format!("{:x}", std::process::id());
    let (provider, calls) = connect(endpoint, region, &format!("bench-{run_id}")).await;
    let all: Vec<Pod> = (0..pods).map(|i| pod(&format!("p{i}-{run_id}"))).collect();
    let node = format!("bench-{run_id}");
    let requests: Vec<LaunchRequest> =
        futures::future::join_all(all.iter().map(|p| request(p, &node))).await;

    let started = Instant::now();
    let launched =
        futures::future::join_all(requests.iter().map(|request| provider.create(request))).await;
    let failed = launched.iter().filter(|r| r.is_err()).count();
    let launch = phase(&calls, &BTreeMap::new());
    println!(
        "{pods} pods launched at once in {:.1} s ({failed} failed)",
        started.elapsed().as_secs_f64()
    );
    print_phase("launch", &launch, pods, "pod");

    let before = calls.snapshot();
    let steady_started = Instant::now();
    let mut listed = 0;
    let mut failed_syncs = 0;
    let mut slowest = Duration::ZERO;
    let mut ticks = tokio::time::interval(SYNC_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut periods = 0;
    while steady_started.elapsed() < steady_for {
        ticks.tick().await;
        periods += 1;
        let sync_started = Instant::now();
        match provider.statuses().await {
            Ok(statuses) => listed = statuses.len(),
            Err(error) => {
                failed_syncs += 1;
                eprintln!("status sync failed: {error}");
            }
        }
        slowest = slowest.max(sync_started.elapsed());
    }
    let steady = phase(&calls, &before);
    println!(
        "{periods} status syncs ({failed_syncs} failed), at most one per {} s, over {listed} instances in {:.0} s (slowest sync {:.2} s):",
        SYNC_PERIOD.as_secs(),
        steady_started.elapsed().as_secs_f64(),
        slowest.as_secs_f64()
    );
    print_phase("steady state", &steady, periods, "sync period");

    let before = calls.snapshot();
    let ids: Vec<String> = launched
        .iter()
        .filter_map(|launched| launched.as_ref().ok())
        .map(|launched| launched.instance_id.clone())
        .collect();
    futures::future::join_all(ids.iter().map(|id| provider.terminate(id))).await;
    let delete = phase(&calls, &before);
    print_phase("delete", &delete, pods, "pod");

    let (alone, calls) = connect(endpoint, region, &format!("bench-one-{run_id}")).await;
    let one = pod(&format!("single-{run_id}"));
    let launched = alone
        .create(&request(&one, &format!("bench-one-{run_id}")).await)
        .await;
    let _ = alone.statuses().await;
    if let Ok(launched) = launched {
        let _ = alone.terminate(&launched.instance_id).await;
    }
    println!("one pod alone: launch, one status sync, delete:");
    print_phase("lifecycle", &calls.snapshot(), 1, "pod");
}

/// The default `pods.syncInterval`.
const SYNC_PERIOD: Duration = Duration::from_secs(5);

/// moto keeps every instance it ever launched (terminated ones included) in its describe
/// answers, so a previous run would make each page slower and the page count higher.
async fn reset_moto(endpoint: &str) {
    let url = format!("{}/moto-api/reset", endpoint.trim_end_matches('/'));
    let reset = tokio::process::Command::new("curl")
        .args(["-fsS", "-X", "POST", &url])
        .status()
        .await;
    if !matches!(reset, Ok(status) if status.success()) {
        eprintln!("could not reset moto at {url}; counts may include earlier runs' instances");
    }
}

async fn connect(endpoint: &str, region: &str, node: &str) -> (AwsProvider, Arc<Ec2Calls>) {
    let calls = Arc::new(Ec2Calls::default());
    // moto needs about 10 s to filter a describe of 1000 instances (EC2 about 1 s): longer
    // timeouts than production's 10 s per attempt, so the bench counts requests, not retries
    // of moto's slowness.
    let sdk = SdkEc2::connect_with_timeouts(
        region,
        Some(endpoint),
        calls.clone(),
        Duration::from_secs(60),
        Duration::from_secs(180),
    )
    .await;
    // The production limits: they are what keeps a burst of 1000 launches from tripping
    // RequestLimitExceeded (and from flooding moto's single process).
    let limits = RateLimitConfig::default();
    let provider = AwsProvider::new(
        Arc::new(RateLimited::new(sdk, limits)),
        Identity {
            node: node.to_owned(),
            cluster: node.to_owned(),
            cluster_id: "00000000-0000-4000-8000-0000000bec2c".to_owned(),
        },
        AwsConfig {
            default_ami: Some("ami-0123456789abcdef0".to_owned()),
            ..AwsConfig::default()
        },
    );
    (provider, calls)
}

fn phase(calls: &Ec2Calls, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    calls
        .snapshot()
        .into_iter()
        .map(|(op, n)| {
            let earlier = before.get(&op).copied().unwrap_or(0);
            (op, n - earlier)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn print_phase(name: &str, counts: &BTreeMap<String, u64>, units: usize, unit: &str) {
    let total: u64 = counts.values().sum();
    let detail: Vec<String> = counts.iter().map(|(op, n)| format!("{op} {n}")).collect();
    println!(
        "  {name}: {total} requests ({:.3} per {unit}): {}",
        total as f64 / units.max(1) as f64,
        detail.join(", ")
    );
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "namespace": "bench", "uid": format!("uid-{name}") },
        "spec": { "containers": [ { "name": "main", "image": "busybox", "command": ["true"] } ] }
    }))
    .expect("bench pod")
}

/// The pod's launch request, as the Launch step builds it (no ConfigMaps or Secrets exist).
async fn request(pod: &Pod, node: &str) -> LaunchRequest {
    launch_request(pod, &plan(pod, node), ZoneConstraint::of(pod), &NoObjects)
        .await
        .expect("a launchable bench pod")
}

fn plan(pod: &Pod, node: &str) -> LaunchPlan {
    let key = PodKey::of(pod).expect("key");
    LaunchPlan {
        candidates: vec![InstanceCandidate {
            instance_type: "m5.large".to_owned(),
            reason: "bench".to_owned(),
        }],
        market: MarketDecision {
            market: Market::OnDemand,
            max_price: None,
            fallback_to_on_demand: false,
            reason: "bench".to_owned(),
            allocation_strategy: None,
            mark_on_rebalance: false,
        },
        tags: ownership_tags(node, node, &key)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    }
}
