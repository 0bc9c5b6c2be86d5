//! Test plugin components, built from the workspace for wasm32-wasip2 (once per process).

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::{Context, Result, ensure};

/// `tests/plugins/hostile` as a component: misbehaves per pod annotation
/// `hostile.orca.research/mode` (see its docs).
pub fn hostile_wasm() -> Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build("orca-test-plugin-hostile").map_err(|e| format!("{e:#}")))
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
