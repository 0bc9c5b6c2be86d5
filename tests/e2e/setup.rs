//! `tests/setup`, the one place that makes a machine ready for the README's two commands: on a
//! ready machine it installs nothing, and what it cannot install it names, with the version
//! needed and where to get it, all at once.
//!
//! A machine that lacks a tool is made by a PATH of symlinks to everything on the real PATH but
//! that tool, so the script runs as it would there; a tool too old is a stand-in script that
//! reports an old version. Installing for real (a removed wasm target) is what `.ci/run` proves on
//! every run with `tests/quickstart`.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use orca_e2e::cluster::repo_root;

/// A PATH directory holding every command of the real PATH except `without`, plus `stand_ins`
/// (name → bash script body).
fn machine_path(without: &[&str], stand_ins: &[(&str, &str)]) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for (name, body) in stand_ins {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    let real_path = std::env::var_os("PATH").context("PATH is not set")?;
    for entry in std::env::split_paths(&real_path).filter_map(|d| std::fs::read_dir(d).ok()) {
        for command in entry.flatten() {
            let name = command.file_name();
            let link = dir.path().join(&name);
            if without.iter().any(|w| name == *w) || link.exists() {
                continue;
            }
            symlink(command.path(), &link)?;
        }
    }
    Ok(dir)
}

fn run_setup(path: &Path) -> Result<Output> {
    Ok(Command::new(repo_root().join("tests/setup"))
        .env("PATH", path)
        .output()?)
}

fn versions() -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(repo_root().join("tests/cluster/versions.env"))?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

#[test]
fn on_a_ready_machine_setup_installs_nothing_and_says_nothing() -> Result<()> {
    // tests/run ran setup before the tests: the machine is ready.
    let output = Command::new(repo_root().join("tests/setup")).output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "setup failed: {stderr}");
    ensure!(
        stderr.is_empty(),
        "setup did something on a ready machine: {stderr}"
    );
    Ok(())
}

#[test]
fn what_setup_cannot_install_is_named_all_at_once_with_its_version_and_source() -> Result<()> {
    let versions = versions()?;
    let go = &versions["GO_MIN_VERSION"];
    let python = &versions["PYTHON_MIN_VERSION"];
    // No rustup, no go, no apt-get to install curl with, and a Python too old for moto.
    let path = machine_path(
        &["rustup", "go", "apt-get", "curl", "sudo"],
        &[("python3", "echo 3.8")],
    )?;
    let output = run_setup(path.path())?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        output.status.code() == Some(1),
        "setup did not fail: {stderr}"
    );
    for expected in [
        "this machine lacks what tests/setup cannot install by itself".to_string(),
        "rustup (any version)".to_string(),
        "https://rustup.rs".to_string(),
        format!("Go {go} or newer"),
        "https://go.dev/doc/install".to_string(),
        format!("Python {python} or newer; found 3.8"),
        "the packages curl ca-certificates".to_string(),
        "apt-get install curl ca-certificates".to_string(),
    ] {
        ensure!(stderr.contains(&expected), "{expected:?} not in:\n{stderr}");
    }
    Ok(())
}

#[test]
fn a_go_too_old_to_fetch_the_needed_release_is_named_with_its_version() -> Result<()> {
    let go = versions()?["GO_MIN_VERSION"].clone();
    let path = machine_path(&["go"], &[("go", "echo go1.20.14")])?;
    let output = run_setup(path.path())?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        output.status.code() == Some(1),
        "setup did not fail: {stderr}"
    );
    let expected =
        format!("Go {go} or newer (Go 1.21+ will do: it fetches {go} itself); found 1.20.14");
    ensure!(stderr.contains(&expected), "{expected:?} not in:\n{stderr}");
    Ok(())
}

/// Which Go builds the control plane, for each local go: the local one when new enough, else
/// the needed release through GOTOOLCHAIN (Go 1.21+ fetches it from the module proxy), else
/// none. The harness's build and tests/setup share this decision.
#[test]
fn the_control_plane_is_built_with_the_local_go_or_the_release_it_fetches() -> Result<()> {
    let go = versions()?["GO_MIN_VERSION"].clone();
    let (major_minor, _) = go.rsplit_once('.').context("GO_MIN_VERSION is x.y.z")?;
    let (major, minor) = major_minor
        .split_once('.')
        .context("GO_MIN_VERSION is x.y.z")?;
    let newer = format!("go{major}.{}.0", minor.parse::<u32>()? + 1);
    let cases = [
        (newer.clone(), Some("local".to_string())),
        (format!("go{go}"), Some("local".to_string())),
        ("devel go1.99-abcdef".to_string(), Some("local".to_string())),
        ("go1.22.3".to_string(), Some(format!("go{go}"))),
        ("go1.21.0".to_string(), Some(format!("go{go}"))),
        ("go1.20.14".to_string(), None),
    ];
    let common = repo_root().join("tests/cluster/lib/common.sh");
    for (reported, expected) in cases {
        let path = machine_path(&["go"], &[("go", &format!("echo '{reported}'"))])?;
        let output = Command::new("bash")
            .arg("-c")
            .arg(format!(". '{}' && go_toolchain", common.display()))
            .env("PATH", path.path())
            .output()?;
        let chosen = output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string());
        ensure!(
            chosen == expected,
            "local {reported}: chose {chosen:?}, expected {expected:?}"
        );
    }
    Ok(())
}
