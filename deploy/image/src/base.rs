//! The stand-in for the Dockerfile's base, `gcr.io/distroless/cc-debian12:nonroot`, made from
//! the build machine without pulling it: what distroless's `common/BUILD.bazel` and
//! `base/base.bzl` put in (the users root, nobody and nonroot 65532 with their groups and home
//! directories, `/tmp` 1777, `nsswitch.conf`, the CA bundle, `os-release`), its image settings
//! (PATH, SSL_CERT_FILE, user 65532, workdir /home/nonroot), and, in place of the libc6 and
//! libgcc-s1 packages the cc variant installs, the libraries the image's executables load.

use std::path::{Path, PathBuf};

use crate::tree::{Tree, TreeError};

/// The only base this builder stands in for.
pub const DISTROLESS_CC_NONROOT: &str = "gcr.io/distroless/cc-debian12:nonroot";

/// distroless's nonroot user and group.
pub const NONROOT: u32 = 65532;

/// Where distroless (Debian) keeps the CA bundle, and `SSL_CERT_FILE` says so.
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Where other distributions keep the same bundle, tried after Debian's.
const CA_BUNDLE_ELSEWHERE: &[&str] = &[
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\n\
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";

const GROUP: &str = "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n";

const NSSWITCH: &str = "passwd: files\ngroup: files\nshadow: files\ngshadow: files\n\n\
hosts: files dns\nnetworks: files\n\nprotocols: files\nservices: files\nethers: files\nrpc: files\n";

/// Why the base could not be made on this machine.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    #[error("the final stage is FROM {0}; this builder stands in for {DISTROLESS_CC_NONROOT} only")]
    UnknownBase(String),
    #[error(
        "no CA bundle on this machine (looked for {CA_BUNDLE} and {CA_BUNDLE_ELSEWHERE:?}; Debian's ca-certificates package provides it)"
    )]
    NoCaBundle,
    #[error(transparent)]
    HostFile(#[from] TreeError),
}

/// The base's image settings, which the final stage's may override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseSettings {
    pub env: Vec<(String, String)>,
    pub user: String,
    pub workdir: String,
}

/// The base's settings, for `FROM base`.
///
/// # Errors
/// [`BaseError::UnknownBase`] for any base but [`DISTROLESS_CC_NONROOT`].
pub fn settings(base: &str) -> Result<BaseSettings, BaseError> {
    if base != DISTROLESS_CC_NONROOT {
        return Err(BaseError::UnknownBase(base.to_owned()));
    }
    Ok(BaseSettings {
        env: vec![
            (
                "PATH".into(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            ),
            ("SSL_CERT_FILE".into(), CA_BUNDLE.into()),
        ],
        user: NONROOT.to_string(),
        workdir: "/home/nonroot".into(),
    })
}

/// The base layer: distroless's files, and `libraries` (absolute paths on this machine, with
/// the links on their way).
///
/// # Errors
/// [`BaseError`]: no CA bundle here, or a library that cannot be read.
pub fn tree(libraries: &[PathBuf]) -> Result<Tree, BaseError> {
    let mut tree = Tree::default();
    tree.directory("/root", 0o700, 0);
    tree.directory("/home", 0o755, 0);
    tree.directory("/home/nonroot", 0o700, NONROOT);
    tree.directory("/tmp", 0o1777, 0);
    tree.file("/etc/passwd", PASSWD.into(), 0o644);
    tree.file("/etc/group", GROUP.into(), 0o644);
    tree.file("/etc/nsswitch.conf", NSSWITCH.into(), 0o644);
    let bundle = std::iter::once(CA_BUNDLE)
        .chain(CA_BUNDLE_ELSEWHERE.iter().copied())
        .find(|path| Path::new(path).is_file())
        .ok_or(BaseError::NoCaBundle)?;
    let bytes = std::fs::read(bundle).map_err(|source| TreeError::Unreadable {
        path: bundle.into(),
        source,
    })?;
    tree.file(CA_BUNDLE, bytes, 0o644);
    // Which distribution the libraries came from, for scanners; not every machine has one.
    if Path::new("/etc/os-release").exists() {
        tree.host_file(Path::new("/etc/os-release"))?;
    }
    for library in libraries {
        tree.host_file(library)?;
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Entry;

    #[test]
    fn the_nonroot_user_and_group_are_65532_with_their_home() {
        let tree = tree(&[]).unwrap();
        let Some(Entry::File { bytes, .. }) = tree.get("/etc/passwd") else {
            panic!("no /etc/passwd");
        };
        let passwd = String::from_utf8_lossy(bytes);
        assert!(passwd.contains("nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"));
        let Some(Entry::File { bytes, .. }) = tree.get("/etc/group") else {
            panic!("no /etc/group");
        };
        assert!(String::from_utf8_lossy(bytes).contains("nonroot:x:65532:\n"));
        assert_eq!(
            tree.get("/home/nonroot"),
            Some(&Entry::Directory {
                mode: 0o700,
                owner: NONROOT
            })
        );
        assert_eq!(
            tree.get("/tmp"),
            Some(&Entry::Directory {
                mode: 0o1777,
                owner: 0
            })
        );
        assert!(
            matches!(tree.get(CA_BUNDLE), Some(Entry::File { bytes, .. }) if !bytes.is_empty())
        );
    }

    #[test]
    fn another_base_is_refused_by_name() {
        let error = settings("debian:bookworm").unwrap_err();
        assert!(error.to_string().contains("debian:bookworm"), "{error}");
        assert_eq!(settings(DISTROLESS_CC_NONROOT).unwrap().user, "65532");
    }
}
