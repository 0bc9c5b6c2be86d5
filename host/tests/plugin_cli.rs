//! `orca plugin …` as an author runs it: the real binary, real plugin components.

mod support;

use std::process::Command;

use support::components;

fn orca() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orca"));
    // A compile cache of its own, so runs do not depend on what the user's holds.
    let cache = std::env::temp_dir().join(format!("orca-plugin-cli-{}", std::process::id()));
    command.env("XDG_CACHE_HOME", cache);
    command
}

fn pod_file(dir: &std::path::Path, mode: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{mode}.yaml"));
    std::fs::write(
        &path,
        format!(
            "metadata: {{name: p, annotations: {{hostile.orca.research/mode: {mode}}}}}\n\
             spec:\n  containers:\n  - {{name: main, image: busybox}}\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_plugin_that_writes_to_stderr_or_panics_is_reported_not_a_crash_of_orca() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = components().join("orca_test_plugin_hostile.wasm");
    for (mode, expected) in [
        ("trap", "hostile plugin panics on purpose"),
        ("grow", "memory budget"),
    ] {
        // A small budget: growing the default 64 MiB a megabyte at a time in a debug build can
        // take longer than the call's 100 ms on a busy machine, and the time limit answers
        // first.
        let output = orca()
            .args(["plugin", "eval", "--max-memory", "8Mi", "--plugin"])
            .arg(&hostile)
            .arg("--pod")
            .arg(pod_file(dir.path(), mode))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{mode}: {stderr}");
        // (The plugin's panic is logged as its stderr; orca's own would be on thread main.)
        assert!(
            !stderr.contains("thread 'main'") && !stderr.contains("Cannot start a runtime"),
            "{mode}: orca itself panicked: {stderr}"
        );
        assert!(
            stderr.contains("the pod would fail with PolicyError"),
            "{mode}: {stderr}"
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains("crashed, the pod fails"),
            "{mode}: {stdout}"
        );
        // The plugin's own words (its panic message on stderr) reach the author.
        assert!(
            stdout.contains(expected) || stderr.contains(expected),
            "{mode}: {stdout}{stderr}"
        );
    }
}

#[test]
fn eval_shows_a_decline_passed_to_the_default_and_answers_in_json_for_a_failure_too() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = components().join("orca_test_plugin_hostile.wasm");
    let eval = |mode: &str| {
        let output = orca()
            .args(["plugin", "eval", "-o", "json", "--plugin"])
            .arg(&hostile)
            .arg("--pod")
            .arg(pod_file(dir.path(), mode))
            .output()
            .unwrap();
        let evaluation: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.code(), evaluation)
    };

    // The plugin declines: the default selector, asked after it, decides.
    let (status, evaluation) = eval("decline");
    assert_eq!(status, Some(0), "{evaluation}");
    assert_eq!(evaluation["asked"][0]["failure"]["kind"], "declined");
    assert_eq!(evaluation["asked"][0]["outcome"], "passedOn");
    assert_eq!(evaluation["asked"][1]["plugin"], "orca-default-selector");
    assert_eq!(evaluation["asked"][1]["outcome"], "answered");
    assert!(
        evaluation["candidates"][0]["reason"].is_string(),
        "{evaluation}"
    );
    assert_eq!(evaluation["decision"]["fallbacks"][0]["kind"], "declined");

    // The plugin refuses the pod: it fails, and the JSON says who and why.
    let (status, evaluation) = eval("no-match");
    assert_eq!(status, Some(1), "{evaluation}");
    assert_eq!(evaluation["decided"], false);
    assert_eq!(evaluation["asked"][0]["failure"]["kind"], "noMatch");
    assert_eq!(evaluation["asked"][0]["outcome"], "failedThePod");
    assert_eq!(evaluation["asked"].as_array().unwrap().len(), 1);
    let message = evaluation["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no match: nothing hostile fits"),
        "{message}"
    );
}

/// `orca plugin eval --config` applies the config's `policy.guardrails` as a node would: a
/// denied type the plugin answers is dropped (and recorded), and a plan of denied types only
/// is the pod's `GuardrailViolation`, naming the guardrail, the plugin and the value.
#[test]
fn eval_with_a_config_applies_its_guardrails_and_shows_a_violation() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::copy(
        components().join("orca_test_plugin_hostile.wasm"),
        plugins.join("hostile.wasm"),
    )
    .unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "policy:\n  pluginsDir: {}\n  selectInstance:\n    - plugin: hostile\n  \
             guardrails:\n    denyFamilies: [\"p5*\"]\n",
            plugins.display()
        ),
    )
    .unwrap();
    let eval = |mode: &str| {
        let output = orca()
            .args(["plugin", "eval", "-o", "json", "--config"])
            .arg(&config)
            .arg("--pod")
            .arg(pod_file(dir.path(), mode))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let evaluation: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("{mode}: {error}: {stderr}"));
        (output.status.code(), evaluation, stderr)
    };

    let (status, evaluation, stderr) = eval("dear-first");
    assert_eq!(status, Some(0), "{evaluation} {stderr}");
    assert_eq!(evaluation["candidates"].as_array().unwrap().len(), 1);
    assert_eq!(evaluation["candidates"][0]["instanceType"], "m7i.large");
    let dropped = &evaluation["decision"]["guardrails"][0];
    assert_eq!(dropped["guardrail"], "denyFamilies", "{evaluation}");
    assert_eq!(dropped["effect"], "dropped");
    assert_eq!(dropped["plugin"], "hostile 0.0.1");
    assert_eq!(dropped["value"], "p5.48xlarge");

    let (status, evaluation, stderr) = eval("dear-only");
    assert_eq!(status, Some(1), "{evaluation}");
    assert_eq!(evaluation["decided"], false);
    assert_eq!(evaluation["error"]["reason"], "GuardrailViolation");
    let message = evaluation["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "policy.guardrails.denyFamilies (p5*) refused p5.48xlarge, chosen by plugin hostile \
             0.0.1"
        ),
        "{message}"
    );
    assert_eq!(evaluation["decision"]["guardrails"][0]["effect"], "refused");
    assert!(
        stderr.contains("the pod would fail with GuardrailViolation"),
        "{stderr}"
    );
}

#[test]
fn bench_prints_the_native_baseline_beside_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = components().join("orca_test_plugin_hostile.wasm");
    let output = orca()
        .args(["plugin", "bench", "--iterations", "20", "--plugin"])
        .arg(&hostile)
        .arg("--pod")
        .arg(pod_file(dir.path(), "well-behaved"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("pipeline with the plugin (wasm)"),
        "{stdout}"
    );
    assert!(stdout.contains("default policy, native Rust"), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("compiled plugins are cached in"),
        "{stderr}"
    );
}
