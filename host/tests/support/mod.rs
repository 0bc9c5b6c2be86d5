//! Shared by the host's integration tests: the plugin components, built from this
//! workspace's source for wasm32-wasip2 once per test process.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
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

/// The component with one more custom section: same behaviour, different sha256, as a
/// rebuilt plugin would be.
pub fn variant(component: &[u8], marker: &str) -> Vec<u8> {
    let name = b"orca-test-variant";
    let mut content = vec![u8::try_from(name.len()).unwrap()];
    content.extend_from_slice(name);
    content.extend_from_slice(marker.as_bytes());
    let mut out = component.to_vec();
    out.push(0);
    let mut size = content.len();
    loop {
        let byte = u8::try_from(size & 0x7f).unwrap();
        size >>= 7;
        if size == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(&content);
    out
}

/// Replaces `path` as `mv` does: write beside it, then rename over it.
pub fn write_atomically(path: &Path, contents: &[u8]) {
    let staged = path.with_extension("staged");
    std::fs::write(&staged, contents).unwrap();
    std::fs::rename(&staged, path).unwrap();
}
