//! One measurement: one peer, N pods created through the real scheduler until all are Running,
//! then deleted until all are gone; the peer's and the apiserver's CPU, the peer's peak RSS,
//! and the peer's apiserver requests from the audit log.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Toleration};
use kube::Api;
use kube::api::DeleteParams;
use orca_e2e::audit::{self, AuditedRequest};
use orca_e2e::pods::{self, burst_pod};
use orca_e2e::{TestCluster, TestNamespace, procfs};

use crate::census::{Census, Counts};
use crate::peer::{Peer, PeerBinaries, PeerKind};

/// Concurrent clients creating (and deleting) the pods.
const CLIENTS: usize = 32;
/// How long one phase may take before the round is called failed: 15 minutes, or longer for
/// pod counts at which a peer's client-side rate limit alone takes longer (virtual-kubelet keeps
/// client-go's default of 5 requests/s, two writes per pod to delete one).
fn phase_limit(pods: usize) -> Duration {
    Duration::from_secs(900).max(Duration::from_millis(pods as u64 * 600))
}

#[derive(Debug, Clone)]
pub struct Measurement {
    pub peer: PeerKind,
    /// Nodes the one peer process serves; the pods are spread evenly over them.
    pub nodes: usize,
    pub pods: usize,
    pub all_running: Duration,
    pub delete_all: Duration,
    /// The peer's CPU seconds from the first create to all Running.
    pub cpu_to_running: f64,
    /// The peer's CPU seconds from the first create to all gone and the peer idle.
    pub cpu_total: f64,
    pub peak_rss_mib: f64,
    /// The apiserver's CPU seconds from the first create to all Running.
    pub apiserver_cpu_to_running: f64,
    /// The peer's requests from the first create to all Running, by "verb resource".
    pub requests_to_running: BTreeMap<String, u64>,
    /// The peer's requests from the first create to all gone and the peer idle.
    pub requests_total: BTreeMap<String, u64>,
    /// Writes the apiserver refused with 409 Conflict, all run long.
    pub conflicts: u64,
}

const WRITE_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];

impl Measurement {
    /// Writes (create, update, patch, delete) per pod on the way to Running.
    pub fn writes_per_pod_to_running(&self) -> f64 {
        let writes: u64 = self
            .requests_to_running
            .iter()
            .filter(|(key, _)| WRITE_VERBS.iter().any(|verb| key.starts_with(verb)))
            .map(|(_, count)| count)
            .sum();
        writes as f64 / self.pods as f64
    }
}

pub async fn measure(
    kind: PeerKind,
    count: usize,
    nodes: usize,
    binaries: &PeerBinaries,
) -> Result<Measurement> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let base = format!("bench-{kind}-{:08x}", fastrand::u32(..));
    let node_names: Vec<String> = if nodes == 1 {
        vec![base]
    } else {
        (0..nodes).map(|i| format!("{base}-{i}")).collect()
    };
    let peer = Peer::start(kind, &node_names, count * 2, binaries).await?;
    let namespace = TestNamespace::create(&client, "bench-peers").await?;
    let result = run(&peer, &client, &namespace.name, count).await;
    let stopped = peer.stop().await;
    namespace.delete().await?;
    let measurement = result?;
    stopped?;
    Ok(measurement)
}

async fn run(
    peer: &Peer,
    client: &kube::Client,
    namespace: &str,
    count: usize,
) -> Result<Measurement> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pid = peer.pid().context("the peer is not running")?;
    let apiserver = apiserver_pid()?;
    let mut census = Census::start(api.clone());
    // The namespace's service account must exist before pods are admitted, and every code
    // path of the peer is warm: one pod per node first, Running, before the clock starts.
    let nodes = peer.node_names.len();
    let warmups: Vec<String> = (0..nodes).map(|i| format!("warmup-{i}")).collect();
    for (warmup, node) in warmups.iter().zip(&peer.node_names) {
        pods::create(&api, &bench_pod(warmup, node)).await?;
    }
    within("the warm-up pods Running", count, &mut census, |c| {
        c.running >= nodes
    })
    .await?;

    let audit_log = PathBuf::from(TestCluster::shared().var("AUDIT_LOG"));
    let audit_offset = audit::log_length(&audit_log);
    let cpu_start = procfs::cpu_seconds(pid).unwrap_or_default();
    let apiserver_start = procfs::cpu_seconds(apiserver).unwrap_or_default();
    let window_start = Timestamp::now();
    let started = Instant::now();
    for_each_concurrently(0..count, |i| {
        let api = api.clone();
        let pod = bench_pod(&format!("p{i:05}"), &peer.node_names[i % nodes]);
        async move { pods::create(&api, &pod).await.map(|_| ()) }
    })
    .await?;
    within("every pod Running", count, &mut census, |c| {
        c.running >= count + nodes
    })
    .await?;
    let all_running = started.elapsed();
    let running_at = Timestamp::now();
    let cpu_to_running = procfs::cpu_seconds(pid).unwrap_or_default() - cpu_start;
    let apiserver_cpu_to_running =
        procfs::cpu_seconds(apiserver).unwrap_or_default() - apiserver_start;

    let deleting = Instant::now();
    let names: Vec<String> = warmups
        .into_iter()
        .chain((0..count).map(|i| format!("p{i:05}")))
        .collect();
    for_each_concurrently(names, |name| {
        let api = api.clone();
        async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                Err(error) => Err(error.into()),
            }
        }
    })
    .await?;
    within("every pod gone", count, &mut census, |c| c.present == 0).await?;
    let delete_all = deleting.elapsed();
    // What a peer still does once the pods are gone (Events it queued, say) is part of its
    // cost: the totals are taken once it is idle.
    settle(pid).await;
    let window_end = Timestamp::now();
    let cpu_total = procfs::cpu_seconds(pid).unwrap_or_default() - cpu_start;
    let peak_rss_mib = procfs::peak_rss_bytes(pid).unwrap_or_default() as f64 / (1024.0 * 1024.0);

    // The audit log is written asynchronously; give the last events a moment to land.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let requests = audit::requests_after(
        &audit_log,
        audit_offset,
        peer.kind.audit_user(),
        window_start,
        window_end,
    );
    let to_running: Vec<&AuditedRequest> = requests.iter().filter(|r| r.at <= running_at).collect();
    Ok(Measurement {
        peer: peer.kind,
        nodes,
        pods: count,
        all_running,
        delete_all,
        cpu_to_running,
        cpu_total,
        peak_rss_mib,
        apiserver_cpu_to_running,
        requests_to_running: by_key(to_running),
        requests_total: by_key(requests.iter()),
        conflicts: requests.iter().filter(|r| r.code == 409).count() as u64,
    })
}

/// The same pod for every peer: placed by the scheduler on one of the peer's nodes, tolerating the
/// bench's taint and virtual-kubelet's own.
fn bench_pod(name: &str, node: &str) -> Pod {
    let mut pod = burst_pod(name, node, &[]);
    if let Some(tolerations) = pod.spec.as_mut().and_then(|s| s.tolerations.as_mut()) {
        tolerations.push(Toleration {
            key: Some("virtual-kubelet.io/provider".to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some("NoSchedule".to_owned()),
            ..Toleration::default()
        });
    }
    pod
}

async fn within(
    what: &str,
    pods: usize,
    census: &mut Census,
    done: impl Fn(Counts) -> bool,
) -> Result<()> {
    let limit = phase_limit(pods);
    match tokio::time::timeout(limit, census.until(done)).await {
        Ok(_) => Ok(()),
        Err(_) => bail!("not {what} after {} s: {:?}", limit.as_secs(), census.now()),
    }
}

async fn for_each_concurrently<T, F, Fut>(items: impl IntoIterator<Item = T>, call: F) -> Result<()>
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    futures::stream::iter(items)
        .map(call)
        .buffer_unordered(CLIENTS)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

fn by_key<'a>(requests: impl IntoIterator<Item = &'a AuditedRequest>) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for request in requests {
        *counts.entry(request.key()).or_insert(0) += 1;
    }
    counts
}

/// Waits until the process uses under 2 % of a core over a second (at most a minute).
async fn settle(pid: u32) {
    let mut last = procfs::cpu_seconds(pid).unwrap_or_default();
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = procfs::cpu_seconds(pid).unwrap_or_default();
        if now - last < 0.02 {
            return;
        }
        last = now;
    }
}

/// The harness's kube-apiserver (tests/cluster/up records its pid).
fn apiserver_pid() -> Result<u32> {
    let state = PathBuf::from(TestCluster::shared().var("ORCA_CLUSTER_STATE"));
    let path = state.join("pids/kube-apiserver.pid");
    std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .parse()
        .with_context(|| format!("{} holds no pid", path.display()))
}
