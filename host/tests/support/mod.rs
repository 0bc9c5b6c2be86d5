//! Shared by the host's integration tests: the plugin components, built from this
//! workspace's source for wasm32-wasip2 once per test process.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use orca::config::{Config, PolicyConfig};
use orca::policy::Pipeline;
use orca::policy::pipeline::HookChains;
use orca::policy::registry::PluginRegistry;
use orca::policy::setup::build_registry;

/// A registry as orca builds one (embedded defaults, no compile cache), with `dir` scanned.
pub fn registry(dir: Option<&Path>) -> Arc<PluginRegistry> {
    let policy = PolicyConfig {
        compile_cache_dir: None,
        ..PolicyConfig::default()
    };
    let (_, registry) = build_registry(&policy, "us-east-1").unwrap();
    if let Some(dir) = dir {
        registry.rescan(dir);
    }
    registry
}

/// The default config's chains on `registry`, for node `orca-aws-node` of cluster `research`.
pub fn defaults(registry: Arc<PluginRegistry>) -> Pipeline {
    Pipeline::new(
        registry,
        HookChains::from_config(&Config::default().policy),
        "orca-aws-node",
        "research",
    )
}

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

/// `component` with `count` more core module instances, each owning a linear memory of
/// `pages` 64 KiB pages, created when the component is instantiated: what a component made of
/// several core modules (as componentize-py or a composition produces) holds per call. A Rust
/// guest cannot express it, so the sections are appended to a real plugin's binary; the
/// plugin answers as before.
pub fn with_extra_memories(component: &[u8], count: usize, pages: u32) -> Vec<u8> {
    let module = wat::parse_str(format!("(module (memory {pages}))")).unwrap();
    let first = top_level_core_modules(component);
    let mut out = component.to_vec();
    let mut instances = leb128(count as u64);
    for index in 0..count {
        // core module section (1): the module's bytes.
        append_section(&mut out, 1, &module);
        // instantiate (0x00) module `first + index` with no arguments.
        instances.push(0x00);
        instances.extend(leb128((first + index) as u64));
        instances.push(0);
    }
    // core instance section (2).
    append_section(&mut out, 2, &instances);
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&out)
        .expect("the extended component is valid");
    out
}

/// Core modules the component itself defines (not those of nested components).
fn top_level_core_modules(component: &[u8]) -> usize {
    let mut depth = 0usize;
    let mut count = 0;
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        match payload.unwrap() {
            wasmparser::Payload::Version { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth -= 1,
            wasmparser::Payload::ModuleSection { .. } if depth == 1 => count += 1,
            _ => {}
        }
    }
    count
}

fn append_section(out: &mut Vec<u8>, id: u8, content: &[u8]) {
    out.push(id);
    out.extend(leb128(content.len() as u64));
    out.extend_from_slice(content);
}

fn leb128(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}
