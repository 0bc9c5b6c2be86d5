//! Test plugin components, built from the workspace for wasm32-wasip2 (once per process), and
//! delivered into a directory the way the kubelet delivers a ConfigMap volume.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result, ensure};

/// `tests/plugins/hostile` as a component: misbehaves per pod annotation
/// `hostile.orca.research/mode` (see its docs).
pub fn hostile_wasm() -> Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    built_once(&BUILT, "orca-test-plugin-hostile")
}

/// The custom plugin example `deploy/examples/custom-plugin` (`team-selector`) as a component.
pub fn team_selector_wasm() -> Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    built_once(&BUILT, "orca-example-team-selector")
}

/// Publishes `files` as the kubelet updates a ConfigMap volume: a new timestamped directory,
/// a `..data_tmp` symlink renamed over `..data`, and each key a symlink through `..data`.
pub fn publish_like_kubelet(
    root: &Path,
    version: &str,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<()> {
    let data_dir = format!("..{version}");
    std::fs::create_dir(root.join(&data_dir))?;
    for (name, bytes) in files {
        std::fs::write(root.join(&data_dir).join(name), bytes)?;
    }
    symlink(&data_dir, root.join("..data_tmp"))?;
    std::fs::rename(root.join("..data_tmp"), root.join("..data"))?;
    for name in files.keys() {
        let link = root.join(name);
        if link.symlink_metadata().is_err() {
            symlink(format!("..data/{name}"), link)?;
        }
    }
    Ok(())
}

fn built_once(cell: &OnceLock<Result<PathBuf, String>>, package: &str) -> Result<PathBuf> {
    cell.get_or_init(|| build(package).map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn build(package: &str) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let root = crate::cluster::repo_root();
    let status = std::process::Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--release",
            "--target",
            "wasm32-wasip2",
            "-p",
            package,
        ])
        .current_dir(root)
        .status()
        .context("running cargo")?;
    ensure!(
        status.success(),
        "building {package} for wasm32-wasip2 failed"
    );
    // <target>/debug/deps/<test binary> → <target>, whatever CARGO_TARGET_DIR was.
    let exe = std::env::current_exe().context("locating the test binary")?;
    let target = exe
        .ancestors()
        .nth(3)
        .context("the test binary is not in a cargo target directory")?;
    Ok(target
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", package.replace('-', "_"))))
}
