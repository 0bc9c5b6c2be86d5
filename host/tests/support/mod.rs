//! Shared by the host's integration tests: the plugin components, built from this
//! workspace's source for wasm32-wasip2 once per test process.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

const PLUGINS: [&str; 4] = [
    "orca-plugin-selector",
    "orca-plugin-market",
    "orca-plugin-tagger",
    "orca-test-plugin-hostile",
];

/// Builds the plugin components once per test process and returns the directory holding them.
pub fn components() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut command = std::process::Command::new(cargo);
        command.args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"]);
        for plugin in PLUGINS {
            command.args(["-p", plugin]);
        }
        let status = command
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .status()
            .expect("running cargo");
        assert!(status.success(), "building the plugin components failed");
        // <target>/debug/deps/<this test> → <target>
        let exe = std::env::current_exe().expect("test executable");
        let target = exe
            .ancestors()
            .nth(3)
            .expect("target directory")
            .to_path_buf();
        target.join("wasm32-wasip2/release")
    })
}

pub fn bytes(crate_name: &str) -> Vec<u8> {
    let file = components().join(format!("{}.wasm", crate_name.replace('-', "_")));
    std::fs::read(&file).unwrap_or_else(|error| panic!("reading {}: {error}", file.display()))
}
