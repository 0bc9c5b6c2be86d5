//! Reload latency: from a new plugin file landing in the plugins directory to the first
//! decision made by it, through the same watcher orca runs (notify, the configured debounce,
//! a rescan that compiles and checks the new bytes, the atomic swap).
//!
//! `cargo bench -p orca --bench reload [-- ROUNDS]`
//!
//! Each round writes a new build of the default selector (the embedded one plus a custom
//! section, so its sha256 changes and it must be compiled anew, as a rebuilt plugin would)
//! while decisions run back to back; the clock stops at the first decision whose record
//! carries the new sha256. Rounds alternate between an atomic rename and an in-place write.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use orca::config::{Config, PolicyConfig};
use orca::policy::Pipeline;
use orca::policy::embedded::DEFAULT_PLUGINS;
use orca::policy::pipeline::HookChains;
use orca::policy::registry::{PluginSet, ReloadEvent};
use orca::policy::reload::{ReloadReporter, spawn_watcher};
use orca::policy::setup::build_registry;
use orca::policy::wasm::sha256_hex;
use tokio_util::sync::CancellationToken;

/// Gives up on a round after this long (a lost reload would otherwise hang the bench).
const ROUND_LIMIT: Duration = Duration::from_secs(10);

struct Quiet;

impl ReloadReporter for Quiet {
    fn report(&self, event: &ReloadEvent) {
        if let ReloadEvent::Rejected { error, .. } = event {
            eprintln!("rejected: {error}");
        }
    }

    fn rescanned(&self, _set: &PluginSet) {}
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with('-'))
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(20);
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let _guard = runtime.enter();

    let selector = DEFAULT_PLUGINS
        .iter()
        .find(|p| p.package == "orca-plugin-selector")
        .expect("the embedded selector")
        .bytes;
    let dir = tempfile::tempdir().expect("plugins directory");
    let path = dir.path().join("selector.wasm");
    // Compiles are what a reload pays for: no compile cache, as for bytes never seen before.
    let policy = PolicyConfig {
        compile_cache_dir: None,
        ..PolicyConfig::default()
    };
    let debounce = policy.reload_debounce.get();
    let (_, registry) = build_registry(&policy, "us-east-1").expect("policy stack");
    let pipeline = Pipeline::new(
        registry.clone(),
        HookChains::from_config(&Config::default().policy),
        "orca-aws-node",
        "bench",
    );
    let shutdown = CancellationToken::new();
    spawn_watcher(
        registry.clone(),
        dir.path().to_path_buf(),
        debounce,
        Arc::new(Quiet),
        shutdown.clone(),
    )
    .expect("watching the plugins directory");
    let pod = pod();

    let mut latencies = Vec::with_capacity(rounds);
    let mut decisions_during = 0usize;
    for round in 0..rounds {
        let bytes = support::variant(selector, &format!("reload-bench-{round}"));
        let expected = sha256_hex(&bytes);
        let started = Instant::now();
        if round % 2 == 0 {
            support::write_atomically(&path, &bytes);
        } else {
            std::fs::write(&path, &bytes).expect("writing the plugin in place");
        }
        loop {
            let decision = pipeline
                .decide(&pod)
                .expect("no decision fails during a reload");
            decisions_during += 1;
            if decision.record.select_instance.sha256 == expected {
                break;
            }
            assert!(
                started.elapsed() < ROUND_LIMIT,
                "round {round}: the new plugin never served"
            );
        }
        latencies.push(started.elapsed());
        // Let the watcher go quiet so the next round starts from a settled directory.
        std::thread::sleep(debounce * 4);
    }
    shutdown.cancel();

    latencies.sort();
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    println!(
        "reload latency, file write → first decision by the new plugin ({rounds} rounds, debounce {}):",
        ms(debounce)
    );
    println!(
        "  min {}  p50 {}  max {}   ({decisions_during} decisions made meanwhile, none failed)",
        ms(latencies[0]),
        ms(latencies[latencies.len() / 2]),
        ms(latencies[latencies.len() - 1]),
    );
    let compile = compile_time(&registry, dir.path(), selector);
    println!(
        "  of which compiling and checking the new bytes: {}",
        ms(compile)
    );
}

/// How long a rescan takes that finds one new file: the compile and checks inside a reload.
fn compile_time(
    registry: &orca::policy::registry::PluginRegistry,
    dir: &Path,
    selector: &[u8],
) -> Duration {
    let other = tempfile::tempdir_in(dir.parent().unwrap_or(dir)).expect("scratch directory");
    std::fs::write(
        other.path().join("selector.wasm"),
        support::variant(selector, "compile-only"),
    )
    .expect("writing the plugin");
    let started = Instant::now();
    registry.rescan(other.path());
    started.elapsed()
}

fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": "bench", "namespace": "default", "uid": "00000000-0000-4000-8000-000000000001" },
        "spec": { "containers": [ { "name": "main", "image": "busybox",
            "resources": { "requests": { "cpu": "2", "memory": "4Gi" } } } ] }
    }))
    .expect("bench pod")
}
