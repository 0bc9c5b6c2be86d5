//! `orca plugin bench`: latency of whole decisions (three hooks, a fresh sandbox per call), and
//! of the default policy run natively as the denominator.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{PluginCommandError, inputs};
use crate::policy::native::NativePolicy;
use crate::policy::{Pipeline, Planner};
use crate::process::cli::PipelineArgs;

pub fn run(args: &PipelineArgs, iterations: usize) -> Result<(), PluginCommandError> {
    let iterations = iterations.max(1);
    let (pipeline, catalogue) = inputs::pipeline(&args.spec())?;
    let pod = inputs::read_pod(&args.pod)?;
    let pod_bytes = serde_json::to_vec(&pod).map(|json| json.len()).unwrap_or(0);
    pipeline
        .decide(&pod)
        .map_err(PluginCommandError::PodWouldFail)?;

    let sandboxed = measure(iterations, || {
        let _ = pipeline.decide(&pod);
    });
    println!(
        "pod: {} ({pod_bytes} bytes as JSON); {iterations} decisions each",
        args.pod.display()
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9}",
        "", "p50", "p90", "p99", "max"
    );
    let sandboxed_label = if args.config.is_some() {
        "the config's chains (wasm)"
    } else if args.plugin.is_none() {
        "pipeline (wasm, 3 hooks)"
    } else {
        "pipeline with the plugin (wasm)"
    };
    print_row(sandboxed_label, &sandboxed);

    // The denominator is always the default policy run natively: with --plugin or --config it
    // is what those plugins cost over deciding with no sandbox at all.
    let native = NativePolicy::new(catalogue, inputs::NODE_NAME, inputs::CLUSTER_NAME);
    let native_times = measure(iterations, || {
        let _ = native.decide(&pod);
    });
    let baseline = if args.plugin.is_none() && args.config.is_none() {
        "same policy, native Rust"
    } else {
        "default policy, native Rust"
    };
    print_row(baseline, &native_times);
    let ratio = |p: f64| {
        percentile(&sandboxed, p).as_secs_f64() / percentile(&native_times, p).as_secs_f64()
    };
    println!(
        "{:<34} {:>8.1}x {:>8.1}x {:>8.1}x",
        "ratio",
        ratio(0.50),
        ratio(0.90),
        ratio(0.99)
    );
    if let Some(candidate) = pipeline.shadow_plugin().map(str::to_owned) {
        shadow_rows(args, pipeline, &candidate, &pod, iterations)?;
    }
    Ok(())
}

/// A pod's decision as its launch waits for it (the planner: a blocking thread per decision,
/// the candidate's beside it in a slot of its own and waited for), without the shadow and
/// with it.
fn shadow_rows(
    args: &PipelineArgs,
    shadowed: Pipeline,
    candidate: &str,
    pod: &k8s_openapi::api::core::v1::Pod,
    iterations: usize,
) -> Result<(), PluginCommandError> {
    let runtime = tokio::runtime::Handle::current();
    let alone = Arc::new(inputs::pipeline(&args.spec())?.0.with_shadow(None));
    let shadowed = Arc::new(shadowed);
    let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
    let mut plan = |pipeline: &Arc<Pipeline>, count: bool| {
        let decision = runtime.block_on(pipeline.plan(pod));
        if count
            && let Ok(decision) = decision
            && let Some(shadow) = decision.record.shadow
        {
            *outcomes.entry(shadow.outcome.as_str()).or_default() += 1;
        }
    };
    let without = measure(iterations, || plan(&alone, false));
    let with = measure(iterations, || plan(&shadowed, true));
    println!("a pod's decision as its launch waits for it (planner, blocking thread)");
    print_row("  without a shadow", &without);
    print_row(&format!("  with shadow {candidate}"), &with);
    let outcomes: Vec<String> = outcomes
        .iter()
        .map(|(outcome, count)| format!("{outcome} {count}"))
        .collect();
    println!("  shadow outcomes: {}", outcomes.join(", "));
    Ok(())
}

/// Sorted durations of `iterations` runs after a warm-up.
fn measure(iterations: usize, mut run: impl FnMut()) -> Vec<Duration> {
    for _ in 0..iterations / 10 {
        run();
    }
    let mut times: Vec<Duration> = (0..iterations)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    times.sort();
    times
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn print_row(label: &str, sorted: &[Duration]) {
    let us = |d: Duration| format!("{:.1}µs", d.as_secs_f64() * 1e6);
    println!(
        "{label:<34} {:>9} {:>9} {:>9} {:>9}",
        us(percentile(sorted, 0.50)),
        us(percentile(sorted, 0.90)),
        us(percentile(sorted, 0.99)),
        us(*sorted.last().unwrap_or(&Duration::ZERO)),
    );
}
