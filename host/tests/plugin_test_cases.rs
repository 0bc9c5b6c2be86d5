//! `orca plugin test` as an author (or CI) runs it: the real binary, real plugin components,
//! case files on disk; what it prints and its exit status.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::components;

/// `orca plugin test ARGS…` with a compile cache of this process's own.
fn plugin_test(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_orca"))
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join(format!("orca-plugin-test-{}", std::process::id())),
        )
        .args(["plugin", "test"])
        .args(args)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const WEB_POD: &str = "pod:\n  metadata: {name: web}\n  spec:\n    containers:\n      - {name: \
                       main, image: nginx, resources: {requests: {cpu: \"2\", memory: 4Gi}}}\n";

/// The cases shipped with the default plugins pass on the embedded defaults they are built
/// into orca from.
#[test]
fn the_default_plugins_pass_the_cases_they_ship_with() {
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
    let folders: Vec<PathBuf> = ["selector", "market", "tagger"]
        .iter()
        .map(|plugin| plugins.join(plugin).join("cases"))
        .collect();
    let args: Vec<&std::ffi::OsStr> = folders.iter().map(|f| f.as_os_str()).collect();
    let output = plugin_test(&args);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}{}", stderr(&output));
    assert!(
        out.contains("cheapest-fit.yaml: a pod that names no type gets the cheapest one"),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok    ")).count(),
        9,
        "{out}"
    );
    assert!(out.ends_with("9 cases: 9 passed, 0 failed\n"), "{out}");
}

/// A case whose expectation does not hold is named with what it expected and what orca
/// decided, the others still run, and the exit status is 1.
#[test]
fn a_failing_case_is_named_with_expected_and_actual_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a-right.yaml",
        &format!("{WEB_POD}expect: {{instanceType: t3a.medium, market: on-demand}}\n"),
    );
    let wrong = write(
        dir.path(),
        "b-wrong.yaml",
        &format!(
            "description: expects a type the default would not choose\n{WEB_POD}expect:\n  \
             instanceType: m5.large\n  tags: {{team: web}}\n"
        ),
    );
    write(
        dir.path(),
        "c-should-fail.yaml",
        &format!("{WEB_POD}expect: {{failure: {{reason: PolicyError, kind: noMatch}}}}\n"),
    );
    let output = plugin_test(&[dir.path().as_os_str()]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}{}", stderr(&output));
    let expected = format!(
        "FAIL  {}: expects a type the default would not choose\n      \
         expected: decided: m5.large tags including team=web\n      \
         actual:   decided: t3a.medium on-demand by orca-default-selector, tags ManagedBy=ORCA \
         Name=default/web",
        wrong.display()
    );
    assert!(out.contains(&expected), "{out}");
    assert!(
        out.contains("      - instanceType: expected m5.large, got t3a.medium\n"),
        "{out}"
    );
    assert!(
        out.contains("      - tags.team: expected web, got no such tag\n"),
        "{out}"
    );
    assert!(
        out.contains("      - the pod is decided (t3a.medium) instead of failing\n"),
        "{out}"
    );
    assert!(out.contains("a-right.yaml\n"), "{out}");
    assert!(out.ends_with("3 cases: 1 passed, 2 failed\n"), "{out}");
    assert!(
        stderr(&output).contains("2 of 3 test cases failed"),
        "{}",
        stderr(&output)
    );
}

/// A malformed case file is an error naming the file and the field, with exit status 2, and
/// no case runs: a typo must not make a case check nothing and pass.
#[test]
fn a_malformed_case_file_names_the_file_and_field_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a-good.yaml",
        &format!("{WEB_POD}expect: {{instanceType: t3a.medium}}\n"),
    );
    let typo = write(
        dir.path(),
        "b-typo.yaml",
        &format!("{WEB_POD}expect: {{instancetype: m5.large}}\n"),
    );
    let output = plugin_test(&[dir.path().as_os_str()]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert_eq!(
        stdout(&output),
        "",
        "no case runs before every file is read"
    );
    let err = stderr(&output);
    assert!(
        err.contains(&format!("{}: not a test case", typo.display())),
        "{err}"
    );
    assert!(err.contains("unknown field `instancetype`"), "{err}");

    std::fs::remove_file(&typo).unwrap();
    let missing = write(
        dir.path(),
        "c-missing-pod.yaml",
        "podFile: nowhere.yaml\nexpect: {instanceType: t3a.medium}\n",
    );
    let output = plugin_test(&[missing.as_os_str()]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("nowhere.yaml"),
        "{}",
        stderr(&output)
    );

    let empty = tempfile::tempdir().unwrap();
    let output = plugin_test(&[empty.path().as_os_str()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no case files"),
        "{}",
        stderr(&output)
    );
}

/// With `--plugin`, a case's settings reach the plugin; a case's config runs that config's
/// chains, which name the plugin under test, and its guardrails: a guardrail's refusal is a
/// failure no plugin caused.
#[test]
fn the_plugin_under_test_runs_with_a_cases_settings_or_in_its_configs_chains() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = components().join("orca_test_plugin_hostile.wasm");
    write(
        dir.path(),
        "config.yaml",
        "policy:\n  selectInstance:\n    - plugin: hostile\n  guardrails:\n    \
         denyFamilies: [\"p5*\"]\n",
    );
    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    let pod = "pod: {metadata: {name: p}, spec: {containers: [{name: main, image: busybox}]}}\n";
    write(
        &cases,
        "dear.yaml",
        &format!(
            "{pod}settings: {{}}\nexpect: {{instanceType: p5.48xlarge, selectedBy: hostile}}\n"
        ),
    );
    write(
        &cases,
        "no-match.yaml",
        &format!(
            "{pod}settings: {{}}\nexpect:\n  failure: {{reason: PolicyError, kind: noMatch, \
             plugin: hostile, messageContains: nothing hostile fits}}\n"
        ),
    );
    write(
        &cases,
        "guarded.yaml",
        &format!(
            "{pod}config: ../config.yaml\nexpect: {{instanceType: m7i.large, selectedBy: \
             hostile}}\n"
        ),
    );
    write(
        &cases,
        "refused.yaml",
        &format!(
            "{pod}config: ../config.yaml\nexpect:\n  failure: {{reason: GuardrailViolation, \
             messageContains: denyFamilies}}\n"
        ),
    );
    // The mode each case asks of the plugin, by the pod annotation it reads.
    for (case, mode) in [
        ("dear", "dear-first"),
        ("no-match", "no-match"),
        ("guarded", "dear-first"),
        ("refused", "dear-only"),
    ] {
        let path = cases.join(format!("{case}.yaml"));
        let text = std::fs::read_to_string(&path).unwrap().replace(
            "metadata: {name: p}",
            &format!("metadata: {{name: p, annotations: {{hostile.orca.research/mode: {mode}}}}}"),
        );
        std::fs::write(&path, text).unwrap();
    }
    let output = plugin_test(&["--plugin".as_ref(), hostile.as_os_str(), cases.as_os_str()]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}{}", stderr(&output));
    assert!(out.ends_with("4 cases: 4 passed, 0 failed\n"), "{out}");

    // Settings without --plugin have no plugin to reach: the case cannot run.
    let output = plugin_test(&[cases.join("dear.yaml").as_os_str()]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("dear.yaml: settings: settings are the plugin's"),
        "{}",
        stderr(&output)
    );
}
