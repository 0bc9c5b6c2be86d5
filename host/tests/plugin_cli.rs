//! `orca plugin …` as an author runs it: the real binary, real plugin components.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use support::{components, with_extra_memories};

fn orca() -> Command {
    // A compile cache of its own, so runs do not depend on what the user's holds.
    orca_caching_in(&std::env::temp_dir().join(format!("orca-plugin-cli-{}", std::process::id())))
}

/// `orca` whose compile cache is under `cache` (as `XDG_CACHE_HOME`), for a test that looks
/// into it.
fn orca_caching_in(cache: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orca"));
    command.env("XDG_CACHE_HOME", cache);
    command
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `orca plugin check FILE` with the cache under `cache`: where it says the compiled plugin
/// is.
fn check_compiled(cache: &Path, file: &Path) -> PathBuf {
    let output = orca_caching_in(cache)
        .args(["plugin", "check"])
        .arg(file)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("compiled:"))
        .unwrap_or_else(|| panic!("check does not say where it is compiled: {stdout}"));
    PathBuf::from(line.trim())
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
    assert_eq!(evaluation["decided"], false, "{evaluation} {stderr}");
    assert_eq!(
        evaluation["error"]["reason"], "GuardrailViolation",
        "{evaluation} {stderr}"
    );
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

#[test]
fn check_prints_where_the_compiled_plugin_is_cached() {
    let cache = tempfile::tempdir().unwrap();
    // A copy of its own: another test binary's build of the components may replace the shared
    // file (with other bytes, when it builds another set of packages) between check and hash.
    let hostile = cache.path().join("orca_test_plugin_hostile.wasm");
    std::fs::copy(components().join("orca_test_plugin_hostile.wasm"), &hostile).unwrap();
    let compiled = check_compiled(cache.path(), &hostile);
    assert!(
        compiled.starts_with(cache.path().join("orca/plugins")),
        "{}",
        compiled.display()
    );
    assert!(compiled.is_file(), "{}", compiled.display());
    let sha256 = orca::policy::wasm::sha256_hex(&std::fs::read(&hostile).unwrap());
    let name = compiled.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with(&sha256), "{name}");
}

/// Issue 46: `eval --max-memory` below what a plugin needs to start deleted its valid compiled
/// entry (the next `check` compiled it again, 40 s for a Python plugin), and the message did not
/// say what would do.
#[test]
fn a_max_memory_too_small_names_the_minimum_and_keeps_the_compiled_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // The test plugin with one more memory of 40 MiB.
    let big = dir.path().join("big.wasm");
    let hostile = std::fs::read(components().join("orca_test_plugin_hostile.wasm")).unwrap();
    std::fs::write(&big, with_extra_memories(&hostile, 1, 640)).unwrap();
    let compiled = check_compiled(&cache, &big);
    let entry = std::fs::read(&compiled).unwrap();

    let eval = |max_memory: &str| {
        orca_caching_in(&cache)
            .args(["plugin", "eval", "--max-memory", max_memory, "--plugin"])
            .arg(&big)
            .arg("--pod")
            .arg(pod_file(dir.path(), "well-behaved"))
            .output()
            .unwrap()
    };
    let output = eval("16Mi");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let needed: u64 = stderr
        .split("at least ")
        .nth(1)
        .and_then(|rest| rest.split(" MiB").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no minimum in MiB: {stderr}"));
    assert!(needed > 40, "{stderr}");
    assert!(
        stderr.contains(&format!("maxMemory: {needed}Mi or more")),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&compiled).ok(),
        Some(entry),
        "the compiled plugin was removed or changed"
    );

    // The minimum named is enough.
    let output = eval(&format!("{needed}Mi"));
    assert!(output.status.success(), "{}", text(&output));

    // Too small for orca's own default plugins: a setting to change, not a build defect.
    let output = eval("1Mi");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("under policy.limits: it needs at least "),
        "{stderr}"
    );
    assert!(!stderr.contains("build defect"), "{stderr}");
}

/// Issue 46: the first `eval --config` removed compiled plugins of the shared cache that the
/// config does not load. Only the serving orca prunes.
#[test]
fn eval_with_a_config_prunes_nothing_of_the_shared_compile_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let compiled = check_compiled(&cache, &components().join("orca_test_plugin_hostile.wasm"));
    // Unused for an hour: what a node prunes when it no longer loads the plugin.
    std::fs::File::options()
        .write(true)
        .open(&compiled)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("policy:\n  pluginsDir: {}\n", plugins.display()),
    )
    .unwrap();
    let output = orca_caching_in(&cache)
        .args(["plugin", "eval", "--config"])
        .arg(&config)
        .arg("--pod")
        .arg(pod_file(dir.path(), "well-behaved"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        compiled.is_file(),
        "eval removed {} from the shared compile cache",
        compiled.display()
    );
}

/// Issue 46: a chain where a team plugin's hook crashed and fell back while its other hook
/// answered is a decision mixed from two policies: `eval` prints it in the decision's summary
/// and exits 1, naming the plugin and the hooks; the JSON record holds it too.
#[test]
fn eval_of_a_decision_mixed_from_two_policies_says_so_and_exits_1() {
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
            "policy:\n  pluginsDir: {}\n  selectInstance:\n    - plugin: hostile\n      \
             settings: trap\n      onError: fallback\n    - plugin: orca-default-selector\n  \
             buildTags:\n    - plugin: hostile\n    - plugin: orca-default-tagger\n",
            plugins.display()
        ),
    )
    .unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "metadata: {name: p}\nspec:\n  containers:\n  - {name: main, image: busybox}\n",
    )
    .unwrap();
    let eval = |json: bool| {
        let mut command = orca();
        command.args(["plugin", "eval"]);
        if json {
            command.args(["-o", "json"]);
        }
        command
            .arg("--config")
            .arg(&config)
            .arg("--pod")
            .arg(&pod)
            .output()
            .unwrap()
    };
    let output = eval(false);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains(
            "mixed policy: hostile answered build-tags but fell back on select-instance (crashed)"
        ),
        "{said}"
    );
    assert!(
        said.contains("the pod would launch on a plan mixed from two policies"),
        "{said}"
    );
    let output = eval(true);
    assert_eq!(output.status.code(), Some(1));
    let evaluation: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(evaluation["decided"], true);
    assert_eq!(
        evaluation["decision"]["mixedPolicies"][0]["fellBack"][0],
        "select-instance (crashed)"
    );
}
