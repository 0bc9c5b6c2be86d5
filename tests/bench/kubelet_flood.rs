//! The kubelet port under abuse (issue 40): orca with its default connection bounds, one pod
//! running, then per round
//!
//! 1. **idle**: N TLS connections opened (handshake done) and left silent, as any pod could;
//!    how many orca holds (its open file descriptors above the baseline, and its
//!    `orca_kubelet_api_connections_open`), how many it refused at its cap, its memory, and
//!    whether `kubectl logs` (the apiserver, with its kubelet client certificate) still
//!    answers while they are held; then how long until orca has closed them all;
//! 2. **flood**: C clients sending requests without credentials as fast as orca answers them
//!    (401s, keep-alive, reconnecting when closed) for S seconds; the answers per second,
//!    orca's CPU and memory, and `kubectl logs` sent once a second meanwhile: how many
//!    answered and how long they took.
//!
//!     cargo run --release -p orca-e2e --bin kubelet-flood-bench -- [--rounds R] [--idle N] [--clients C] [--seconds S]
//!
//! Defaults: 3 rounds, 3000 idle connections, 64 flooding clients for 20 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::kubelet_conn::{closed_by_peer, connector, get_status, open};
use orca_e2e::pods::{self, burst_pod, phase};
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, test_config, unique_node_name};

const MIB: f64 = 1024.0 * 1024.0;

struct Settings {
    rounds: usize,
    idle: usize,
    clients: usize,
    seconds: u64,
}

#[derive(Debug)]
struct Round {
    baseline_rss: f64,
    held_fds: usize,
    held_gauge: f64,
    refused: usize,
    idle_rss: f64,
    idle_logs: (usize, usize),
    released_in: Duration,
    answers_per_second: f64,
    flood_cpu: f64,
    flood_rss: f64,
    flood_logs: (usize, usize),
    flood_logs_median: Duration,
}

#[tokio::main]
async fn main() -> Result<()> {
    let settings = settings()?;
    println!(
        "round | RSS idle | held (fds / gauge) of {} | refused | RSS held | kubectl logs ok while held | all closed after | 401s/s | orca CPU | RSS flood | kubectl logs ok in flood | its median",
        settings.idle
    );
    let mut rounds = Vec::new();
    for round in 1..=settings.rounds {
        let r = one_round(&settings)
            .await
            .with_context(|| format!("round {round}"))?;
        println!(
            "{round} | {:.1} MiB | {} / {} | {} | {:.1} MiB | {}/{} | {:.1} s | {:.0} | {:.0} % | {:.1} MiB | {}/{} | {:.2} s",
            r.baseline_rss,
            r.held_fds,
            r.held_gauge,
            r.refused,
            r.idle_rss,
            r.idle_logs.0,
            r.idle_logs.1,
            r.released_in.as_secs_f64(),
            r.answers_per_second,
            r.flood_cpu * 100.0,
            r.flood_rss,
            r.flood_logs.0,
            r.flood_logs.1,
            r.flood_logs_median.as_secs_f64(),
        );
        rounds.push(r);
    }
    let median = |value: &dyn Fn(&Round) -> f64| {
        let mut values: Vec<f64> = rounds.iter().map(value).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!();
    println!(
        "median of {} rounds: held {:.0} fds (gauge {:.0}), refused {:.0}, RSS {:.1} → {:.1} MiB held, all closed after {:.1} s; flood {:.0} answers/s, orca CPU {:.0} %, RSS {:.1} MiB, kubectl logs median {:.2} s; kubectl logs answered {}/{} while held, {}/{} in the flood (all rounds)",
        rounds.len(),
        median(&|r| r.held_fds as f64),
        median(&|r| r.held_gauge),
        median(&|r| r.refused as f64),
        median(&|r| r.baseline_rss),
        median(&|r| r.idle_rss),
        median(&|r| r.released_in.as_secs_f64()),
        median(&|r| r.answers_per_second),
        median(&|r| r.flood_cpu * 100.0),
        median(&|r| r.flood_rss),
        median(&|r| r.flood_logs_median.as_secs_f64()),
        rounds.iter().map(|r| r.idle_logs.0).sum::<usize>(),
        rounds.iter().map(|r| r.idle_logs.1).sum::<usize>(),
        rounds.iter().map(|r| r.flood_logs.0).sum::<usize>(),
        rounds.iter().map(|r| r.flood_logs.1).sum::<usize>(),
    );
    Ok(())
}

fn settings() -> Result<Settings> {
    let mut settings = Settings {
        rounds: 3,
        idle: 3000,
        clients: 64,
        seconds: 20,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let number: u64 = given
            .next()
            .and_then(|value| value.parse().ok())
            .with_context(|| format!("{flag} needs a number"))?;
        let count = usize::try_from(number)?;
        match flag.as_str() {
            "--rounds" => settings.rounds = count,
            "--idle" => settings.idle = count,
            "--clients" => settings.clients = count,
            "--seconds" => settings.seconds = number,
            other => bail!("unknown flag {other}"),
        }
    }
    if settings.rounds == 0 || settings.clients == 0 {
        bail!("at least one round and one client");
    }
    Ok(settings)
}

async fn one_round(settings: &Settings) -> Result<Round> {
    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name("kubelet-flood");
    // The harness's listeners and intervals, and orca's default connection bounds.
    let orca = OrcaProcess::start(&node, |dir| {
        format!("{}logging:\n  level: warn\n", test_config(&node, dir, ""))
    })?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    let namespace = TestNamespace::create(&client, "bench-kubelet-flood").await?;
    let api: Api<Pod> = Api::namespaced(client, &namespace.name);
    let pod = burst_pod(
        "talker",
        &node,
        &[("simulated.orca.research/run-time", "forever")],
    );
    pods::create(&api, &pod).await?;
    pods::wait_for(&api, "talker", "Running", Duration::from_secs(60), |p| {
        phase(p) == "Running"
    })
    .await?;
    let pid = orca.pid().context("orca's pid")?;
    let logs = Logs {
        namespace: namespace.name.clone(),
    };
    logs.once()?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let baseline_fds = open_fds(pid)?;
    let baseline_rss = orca.rss_bytes().context("RSS")? as f64 / MIB;

    // 1. Idle connections.
    let tls = connector(&[b"h2", b"http/1.1"]);
    let mut idle = Vec::new();
    let mut refused = 0;
    for _ in 0..settings.idle {
        match open(&tls, orca.kubelet_port).await {
            Ok(stream) => idle.push(stream),
            Err(_) => refused += 1,
        }
    }
    let held_fds = open_fds(pid)?.saturating_sub(baseline_fds);
    let page = orca_e2e::metrics::scrape(orca.metrics_port)?;
    let held_gauge = gauge(&page, "orca_kubelet_api_connections_open");
    let idle_rss = orca.rss_bytes().context("RSS")? as f64 / MIB;
    let idle_logs = logs.tries(5, Duration::from_millis(500)).await;
    let opened = Instant::now();
    let watched: Vec<_> = idle
        .into_iter()
        .map(|stream| tokio::spawn(closed_by_peer(stream)))
        .collect();
    for closed in watched {
        closed.await?;
    }
    let released_in = opened.elapsed();

    // 2. A flood of requests without credentials.
    let running = Arc::new(AtomicBool::new(true));
    let answers = Arc::new(AtomicU64::new(0));
    let flooders: Vec<_> = (0..settings.clients)
        .map(|_| {
            let (running, answers) = (running.clone(), answers.clone());
            let tls = connector(&[b"http/1.1"]);
            let port = orca.kubelet_port;
            tokio::spawn(async move {
                while running.load(Ordering::Relaxed) {
                    let Ok(mut stream) = open(&tls, port).await else {
                        continue;
                    };
                    while running.load(Ordering::Relaxed)
                        && matches!(get_status(&mut stream, "/pods").await, Ok(401))
                    {
                        answers.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let cpu_before = orca.cpu_seconds().context("CPU")?;
    let started = Instant::now();
    let mut latencies = Vec::new();
    let mut asked = 0;
    while started.elapsed() < Duration::from_secs(settings.seconds) {
        asked += 1;
        let sent = Instant::now();
        if logs.once().is_ok() {
            latencies.push(sent.elapsed());
        }
        tokio::time::sleep(Duration::from_secs(1).saturating_sub(sent.elapsed())).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let flood_cpu = (orca.cpu_seconds().context("CPU")? - cpu_before) / elapsed;
    let answered = answers.load(Ordering::Relaxed);
    let flood_rss = orca.rss_bytes().context("RSS")? as f64 / MIB;
    running.store(false, Ordering::Relaxed);
    for flooder in flooders {
        flooder.await?;
    }
    latencies.sort();
    let flood_logs_median = latencies
        .get(latencies.len() / 2)
        .copied()
        .unwrap_or_default();
    namespace.delete().await?;
    Ok(Round {
        baseline_rss,
        held_fds,
        held_gauge,
        refused,
        idle_rss,
        idle_logs,
        released_in,
        answers_per_second: answered as f64 / elapsed,
        flood_cpu,
        flood_rss,
        flood_logs: (latencies.len(), asked),
        flood_logs_median,
    })
}

/// `kubectl logs --tail=1 talker` through the apiserver, as the cluster admin.
struct Logs {
    namespace: String,
}

impl Logs {
    fn once(&self) -> Result<()> {
        let output = TestCluster::shared()
            .kubectl()
            .args([
                "logs",
                "-n",
                &self.namespace,
                "talker",
                "--tail=1",
                "--request-timeout=10s",
            ])
            .output()?;
        anyhow::ensure!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(())
    }

    /// (answered, asked) of `count` tries `every` apart.
    async fn tries(&self, count: usize, every: Duration) -> (usize, usize) {
        let mut answered = 0;
        for _ in 0..count {
            if self.once().is_ok() {
                answered += 1;
            }
            tokio::time::sleep(every).await;
        }
        (answered, count)
    }
}

fn open_fds(pid: u32) -> Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// A gauge without labels from a metrics page; 0 when absent.
fn gauge(page: &str, name: &str) -> f64 {
    page.lines()
        .find_map(|line| {
            line.strip_prefix(name)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}
