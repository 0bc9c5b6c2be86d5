//! The name prefixes each test binary gives what it makes in the shared cluster, claimed by one
//! binary only (issue 60, part 2).
//!
//! Test binaries share one cluster (and moto) for a whole run, and are to run side by side on
//! it. Each test's node and namespace end in a random suffix, so two tests never make the same
//! object; but a test that looks its objects up by prefix (its nodes, its instances' tags, its
//! queue) would also see another binary's, left over or running beside it, with the same or a
//! longer prefix. So every prefix given to
//! [`crate::unique_node_name`] and [`crate::TestNamespace::create`] is claimed, in the cluster's
//! state directory (next to `ORCA_CLUSTER_ENV`; `down` removes it), for the binary that used it
//! first; another binary using it, or one that extends it (`top` and `top-2`), fails at once,
//! naming both. The claims last as long as the cluster, so this holds for binaries that ran one
//! after another too: a check of every run, not only of the ones that happened to overlap.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// What the prefix names: claims of different kinds never conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    Node,
    Namespace,
}

impl NameKind {
    fn as_str(self) -> &'static str {
        match self {
            NameKind::Node => "node",
            NameKind::Namespace => "namespace",
        }
    }
}

/// Claims `prefix` for this test binary, in the harness's state directory when
/// `ORCA_CLUSTER_ENV` names its env file (as `tests/run` sets it).
///
/// # Panics
/// When another test binary holds `prefix`, or a prefix one extends with `-`: that is a test
/// to rename, not a condition to handle.
pub fn claim(kind: NameKind, prefix: &str) {
    let Some(env_file) = std::env::var_os("ORCA_CLUSTER_ENV") else {
        return;
    };
    let Some(dir) = Path::new(&env_file).parent() else {
        return;
    };
    let claimant = claimant();
    if let Err(error) = claim_in(&dir.join("claimed-names"), kind, prefix, &claimant) {
        panic!("{error:#}");
    }
}

/// Who claims: the process's unit as tests/lib/test-binaries names it in `ORCA_TEST_UNIT`
/// (`e2e/aws.rs`: the e2e binary runs one process per module), else the test binary's name.
fn claimant() -> String {
    std::env::var("ORCA_TEST_UNIT")
        .ok()
        .filter(|unit| !unit.is_empty())
        .unwrap_or_else(|| binary_name(&std::env::current_exe().unwrap_or_default()))
}

/// A test binary's name: `aws` for `…/deps/aws-5f433c1e08eefec2`.
fn binary_name(exe: &Path) -> String {
    let stem = exe
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => stem,
    }
}

/// The claim itself, in `dir`: one file per kind and prefix, holding the binary's name, made
/// whole by a hard link (which fails when the file exists) so two binaries claiming at once
/// cannot both win.
fn claim_in(dir: &Path, kind: NameKind, prefix: &str, binary: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = claim_file(dir, kind, prefix);
    if !file.exists() {
        let mut staged = tempfile::NamedTempFile::new_in(dir)?;
        staged.write_all(binary.as_bytes())?;
        match std::fs::hard_link(staged.path(), &file) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => {
                return Err(error).with_context(|| format!("claiming {}", file.display()));
            }
        }
    }
    let holder = std::fs::read_to_string(&file)?;
    if holder != binary {
        bail!(
            "test binaries {holder} and {binary} both name {} with the prefix {prefix:?}: on one \
             cluster each could read the other's objects; give one of them a prefix of its own",
            kind.as_str()
        );
    }
    // A prefix another binary holds that extends this one (or that this one extends).
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(other) = name.strip_prefix(&format!("{}=", kind.as_str())) else {
            continue;
        };
        let other = decode(other);
        let overlaps =
            other.starts_with(&format!("{prefix}-")) || prefix.starts_with(&format!("{other}-"));
        if !overlaps {
            continue;
        }
        let other_holder = std::fs::read_to_string(dir.join(&name))?;
        if other_holder != binary {
            bail!(
                "test binary {binary} names {} with the prefix {prefix:?} and {other_holder} with \
                 {other:?}: looking its objects up by prefix, one would see the other's; give one \
                 of them a prefix of its own",
                kind.as_str()
            );
        }
    }
    Ok(())
}

/// `node=<prefix, '/' and '%' escaped>`.
fn claim_file(dir: &Path, kind: NameKind, prefix: &str) -> PathBuf {
    let escaped = prefix.replace('%', "%25").replace('/', "%2F");
    dir.join(format!("{}={escaped}", kind.as_str()))
}

fn decode(escaped: &str) -> String {
    escaped.replace("%2F", "/").replace("%25", "%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_one_binarys_and_an_extension_of_it_too() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        // The first claim wins; the same binary may claim again (another test, another run).
        claim_in(dir, NameKind::Node, "top", "pod_top").unwrap();
        claim_in(dir, NameKind::Node, "top", "pod_top").unwrap();
        claim_in(dir, NameKind::Node, "top-2", "pod_top").unwrap();
        // Another binary: not the same prefix, not one extending it, not one it extends.
        let same = claim_in(dir, NameKind::Node, "top", "aws").unwrap_err();
        assert!(format!("{same}").contains("pod_top and aws"), "{same}");
        let longer = claim_in(dir, NameKind::Node, "top-3", "aws").unwrap_err();
        assert!(format!("{longer}").contains("\"top\""), "{longer}");
        let shorter = claim_in(dir, NameKind::Node, "to", "aws");
        assert!(
            shorter.is_ok(),
            "`to-` is not a prefix of `top-`: {shorter:?}"
        );
        // Another kind never conflicts; a prefix with a slash is a file name still.
        claim_in(dir, NameKind::Namespace, "top", "aws").unwrap();
        claim_in(dir, NameKind::Node, "a/b", "aws").unwrap();
        let slash = claim_in(dir, NameKind::Node, "a/b-c", "iam").unwrap_err();
        assert!(format!("{slash}").contains("\"a/b\""), "{slash}");
    }

    #[test]
    fn a_binary_is_named_without_cargos_hash() {
        for (exe, name) in [
            ("/t/debug/deps/aws-5f433c1e08eefec2", "aws"),
            (
                "/t/debug/deps/apiserver_restart-0123456789abcdef",
                "apiserver_restart",
            ),
            ("/t/debug/deps/orca_e2e-0123456789abcdef", "orca_e2e"),
            // Not cargo's shape: the whole file name.
            ("/t/debug/deps/my-tool", "my-tool"),
            ("/t/debug/deps/x-0123456789abcdeg", "x-0123456789abcdeg"),
        ] {
            assert_eq!(binary_name(Path::new(exe)), name, "{exe}");
        }
    }
}
