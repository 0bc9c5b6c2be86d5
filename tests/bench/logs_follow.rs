//! The cost of `kubectl logs -f` on orca with `provider.aws.logs` (issue 43): one pod whose
//! stream gets ten lines a second, then per round
//!
//! 1. **quiet**: orca's CPU and the `GetLogEvents` calls per second with no follower;
//! 2. **followed**: N `kubectl logs -f` of that pod at once (through the apiserver, as users
//!    run it) for S seconds: orca's CPU, its memory (RSS), the `GetLogEvents` calls per second
//!    it sent to CloudWatch Logs (counted by a recording proxy in front of moto), and whether
//!    every follower received every line written meanwhile.
//!
//!     cargo run --release -p orca-e2e --bin logs-follow-bench -- [--rounds R] [--followers N] [--seconds S]
//!
//! Defaults: 3 rounds, 100 followers for 30 s; `kubeletApi.followPollInterval` is the test
//! config's 500ms. Measuring starts once every follower has printed its first line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::container_logs::put_lines;
use orca_e2e::pods::{self, burst_pod};
use orca_e2e::proxy::Proxy;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

const MIB: f64 = 1024.0 * 1024.0;
const LINES_PER_SECOND: usize = 10;

struct Settings {
    rounds: usize,
    followers: usize,
    seconds: u64,
}

#[derive(Debug)]
struct Round {
    quiet_cpu: f64,
    quiet_calls: f64,
    cpu: f64,
    rss: f64,
    calls: f64,
    written: usize,
    complete_followers: usize,
}

#[tokio::main]
async fn main() -> Result<()> {
    let settings = settings()?;
    println!(
        "round | quiet: orca CPU | quiet: GetLogEvents/s | {} followers: orca CPU | RSS | GetLogEvents/s | lines written | followers that got them all",
        settings.followers
    );
    let mut rounds = Vec::new();
    for round in 1..=settings.rounds {
        let r = one_round(&settings)
            .await
            .with_context(|| format!("round {round}"))?;
        println!(
            "{round} | {:.1} % | {:.2} | {:.1} % | {:.1} MiB | {:.2} | {} | {}/{}",
            r.quiet_cpu * 100.0,
            r.quiet_calls,
            r.cpu * 100.0,
            r.rss,
            r.calls,
            r.written,
            r.complete_followers,
            settings.followers
        );
        rounds.push(r);
    }
    let median = |value: &dyn Fn(&Round) -> f64| {
        let mut values: Vec<f64> = rounds.iter().map(value).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!(
        "median | {:.1} % | {:.2} | {:.1} % | {:.1} MiB | {:.2} | |",
        median(&|r| r.quiet_cpu) * 100.0,
        median(&|r| r.quiet_calls),
        median(&|r| r.cpu) * 100.0,
        median(&|r| r.rss),
        median(&|r| r.calls),
    );
    Ok(())
}

fn settings() -> Result<Settings> {
    let mut settings = Settings {
        rounds: 3,
        followers: 100,
        seconds: 30,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let number: u64 = given
            .next()
            .and_then(|value| value.parse().ok())
            .with_context(|| format!("{flag} needs a number"))?;
        match flag.as_str() {
            "--rounds" => settings.rounds = usize::try_from(number)?,
            "--followers" => settings.followers = usize::try_from(number)?,
            "--seconds" => settings.seconds = number,
            other => bail!("unknown flag {other}"),
        }
    }
    if settings.rounds == 0 || settings.followers == 0 || settings.seconds == 0 {
        bail!("at least one round, one follower and one second");
    }
    Ok(settings)
}

/// The pod's stream in moto's CloudWatch Logs.
struct Stream<'a> {
    logs: &'a aws_sdk_cloudwatchlogs::Client,
    group: &'a str,
    name: &'a str,
}

/// Writes `LINES_PER_SECOND` lines a second into the stream for `seconds` (counting them in
/// `written`) while measuring orca: its CPU share, and its `GetLogEvents` calls per second.
async fn measured(
    orca: &OrcaProcess,
    proxy: &Proxy,
    stream: &Stream<'_>,
    seconds: Duration,
    written: &mut usize,
) -> Result<(f64, f64)> {
    let cpu_before = orca.cpu_seconds().context("CPU")?;
    let (at, started) = (Timestamp::now(), Instant::now());
    while started.elapsed() < seconds {
        let lines: Vec<(Timestamp, String)> = (0..LINES_PER_SECOND)
            .map(|_| {
                *written += 1;
                (Timestamp::now(), format!("line {:06}", *written))
            })
            .collect();
        put_lines(stream.logs, stream.group, stream.name, &lines).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = (orca.cpu_seconds().context("CPU")? - cpu_before) / elapsed;
    let calls = proxy.calls_since(at, &["GetLogEvents"]).len() as f64 / elapsed;
    Ok((cpu, calls))
}

/// A `kubectl logs -f` whose lines are counted on a thread of its own.
/// A follower's process, the thread reading its lines, and how many it has read so far.
struct Follower {
    child: Child,
    lines: std::thread::JoinHandle<Vec<String>>,
    read: Arc<AtomicUsize>,
}

/// A `kubectl logs -f` from the last line, whose lines are read on a thread of its own.
fn follower(ns: &str) -> Result<Follower> {
    let mut child = TestCluster::shared()
        .kubectl()
        .args(["logs", "-f", "-n", ns, "talker", "--tail=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let read = Arc::new(AtomicUsize::new(0));
    let counted = read.clone();
    let lines = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .inspect(|_| {
                counted.fetch_add(1, Ordering::SeqCst);
            })
            .collect::<Vec<String>>()
    });
    Ok(Follower { child, lines, read })
}

async fn one_round(settings: &Settings) -> Result<Round> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let logs = cluster.logs_client().await;
    let proxy = Proxy::http(cluster.var("AWS_ENDPOINT_URL")).await?;
    let node = unique_node_name("logs-follow");
    let group = format!("/orca/bench/{node}");
    let extra = format!("logs:\n  group: {group}\n  endpointUrl: {}\n", proxy.url);
    let orca = OrcaProcess::start(&node, |_| {
        format!(
            "{}logging:\n  level: warn\n",
            aws_test_config(&node, &extra)
        )
    })?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    let namespace = TestNamespace::create(&client, "bench-logs-follow").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client, &ns);
    pods::create(&pods_api, &burst_pod("talker", &node, &[])).await?;
    let pod = pods::wait_for_phase(&pods_api, "talker", "Running", Duration::from_secs(60)).await?;
    let stream = format!("{}/main", pod.metadata.uid.context("uid")?);
    logs.create_log_stream()
        .log_group_name(&group)
        .log_stream_name(&stream)
        .send()
        .await?;
    let mut written = 0;
    let seconds = Duration::from_secs(settings.seconds);

    // Quiet: the stream grows, nobody follows.
    let stream = Stream {
        logs: &logs,
        group: &group,
        name: &stream,
    };
    let (quiet_cpu, quiet_calls) = measured(&orca, &proxy, &stream, seconds, &mut written).await?;

    // Followed: N followers from the tail, the same writing.
    let mut followers = Vec::new();
    for _ in 0..settings.followers {
        followers.push(follower(&ns)?);
    }
    // Every follower has had its first answer (the last line): from here each reads at the
    // end of the stream. Starting a hundred kubectl takes a while on a small machine.
    orca_e2e::wait::poll_until(
        "every follower's first line",
        Duration::from_secs(180),
        Duration::from_millis(500),
        || async {
            let started = followers
                .iter()
                .all(|follower| follower.read.load(Ordering::SeqCst) > 0);
            Ok(started.then_some(()))
        },
    )
    .await?;
    let first_followed = written + 1;
    let (cpu, calls) = measured(&orca, &proxy, &stream, seconds, &mut written).await?;
    let rss = orca.rss_bytes().context("RSS")? as f64 / MIB;
    // The last lines reach every follower within a poll or two.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut complete_followers = 0;
    for Follower {
        mut child, lines, ..
    } in followers
    {
        let _ = child.kill();
        let _ = child.wait();
        let lines = lines
            .join()
            .map_err(|_| anyhow::anyhow!("a follower's reader panicked"))?;
        let expected = (first_followed..=written).map(|n| format!("line {n:06}"));
        if expected.clone().all(|line| lines.contains(&line)) {
            complete_followers += 1;
        }
    }
    ensure!(
        written > first_followed,
        "lines were written while followed"
    );
    namespace.delete().await?;
    Ok(Round {
        quiet_cpu,
        quiet_calls,
        cpu,
        rss,
        calls,
        written: written + 1 - first_followed,
        complete_followers,
    })
}
