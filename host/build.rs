//! Builds the default policy plugins (`plugins/`) as `wasm32-wasip2` components and embeds them
//! in the `orca` binary, so a bare `orca` has a working policy with no files beside it.
//!
//! The nested cargo uses its own target directory: the outer build holds the lock on its own.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (package, artifact stem) of each embedded plugin, in pipeline order.
const PLUGINS: &[(&str, &str)] = &[
    ("orca-plugin-selector", "orca_plugin_selector"),
    ("orca-plugin-market", "orca_plugin_market"),
    ("orca-plugin-tagger", "orca_plugin_tagger"),
];

const WASM_TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("host/ sits in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for watched in [
        "plugins/selector",
        "plugins/market",
        "plugins/tagger",
        "plugin-sdk",
        "Cargo.lock",
    ] {
        println!(
            "cargo::rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }

    let target_dir = plugin_target_dir(&out_dir);
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&workspace)
        .args(["build", "--release", "--locked", "--target", WASM_TARGET])
        .arg("--target-dir")
        .arg(&target_dir);
    for (package, _) in PLUGINS {
        command.args(["-p", package]);
    }
    // What the outer build set for itself must not leak into the wasm build: host rustflags,
    // clippy's wrapper, a forced target.
    for variable in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CLIPPY_ARGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        command.env_remove(variable);
    }
    let output = command
        .output()
        .expect("running cargo for the embedded plugins");
    if !output.status.success() {
        panic!(
            "building the default plugins for {WASM_TARGET} failed ({}):\n{}\n(install the target with `rustup target add {WASM_TARGET}`)",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let mut listing = String::from("&[\n");
    for (package, stem) in PLUGINS {
        let built = target_dir
            .join(WASM_TARGET)
            .join("release")
            .join(format!("{stem}.wasm"));
        let embedded = out_dir.join(format!("{stem}.wasm"));
        std::fs::copy(&built, &embedded)
            .unwrap_or_else(|error| panic!("copying {}: {error}", built.display()));
        listing.push_str(&format!(
            "    EmbeddedPlugin {{ package: {package:?}, bytes: include_bytes!({:?}) }},\n",
            embedded.display().to_string()
        ));
    }
    listing.push_str("]\n");
    std::fs::write(out_dir.join("embedded_plugins.rs"), listing)
        .expect("writing embedded_plugins.rs");
}

/// `<target root>/embedded-plugins`: found by walking up from OUT_DIR to the directory cargo
/// marks with `CACHEDIR.TAG`, so every profile shares one wasm build.
fn plugin_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(|root| root.join("embedded-plugins"))
        .unwrap_or_else(|| out_dir.join("embedded-plugins"))
}
