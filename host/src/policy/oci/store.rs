//! Pulled components on disk, by digest, and the manifest each reference last resolved to: a
//! digest already here is not downloaded again, and a restart while the registry is
//! unreachable serves the last verified version instead of nothing.
//!
//! Guarded like the compile cache: a directory private to orca's user, and every component
//! checked against its digest when read, so a damaged or swapped file is discarded. Files are
//! named by [`ContentDigest`]s only, so no name from outside reaches a path.

use std::path::{Path, PathBuf};

use super::digest::ContentDigest;
use super::signature::Signer;
use crate::policy::wasm::cache::private_dir;
use crate::policy::wasm::sha256_hex;

pub struct ArtifactStore {
    dir: PathBuf,
}

/// What a reference last resolved to, and its verified component.
pub struct Remembered {
    pub manifest_digest: ContentDigest,
    pub bytes: Vec<u8>,
    /// Who signed it, when it was verified (a third line, JSON).
    pub signer: Option<Signer>,
}

impl ArtifactStore {
    /// Creates `dir` (0700) if needed. `None` (with a warning) when it cannot be used:
    /// pulling every time is slower and needs the registry at startup, not wrong.
    pub fn open(dir: &Path) -> Option<ArtifactStore> {
        for sub in ["", "components", "references"] {
            if let Err(error) = private_dir(&dir.join(sub)) {
                tracing::warn!(dir = %dir.display(), %error, "pulled plugins are not kept on disk; a restart needs the registry");
                return None;
            }
        }
        Some(ArtifactStore {
            dir: dir.to_path_buf(),
        })
    }

    fn component_path(&self, digest: &ContentDigest) -> PathBuf {
        self.dir
            .join("components")
            .join(format!("{}.wasm", digest.file_stem()))
    }

    fn reference_path(&self, reference: &str) -> PathBuf {
        self.dir
            .join("references")
            .join(sha256_hex(reference.as_bytes()))
    }

    /// The component with `digest`, if it is here and its bytes match.
    pub fn component(&self, digest: &ContentDigest) -> Option<Vec<u8>> {
        let path = self.component_path(digest);
        let bytes = std::fs::read(&path).ok()?;
        if ContentDigest::of(&bytes) == *digest {
            return Some(bytes);
        }
        tracing::warn!(path = %path.display(), "a kept component does not match its digest; discarded");
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Keeps a verified component and what `reference` resolved to. Failures only cost a
    /// download later, so they are logged.
    pub fn keep(
        &self,
        reference: &str,
        manifest_digest: &ContentDigest,
        layer_digest: &ContentDigest,
        bytes: &[u8],
        signer: Option<&Signer>,
    ) {
        let signer = signer
            .and_then(|s| serde_json::to_string(s).ok())
            .unwrap_or_default();
        let result = write_atomically(&self.component_path(layer_digest), bytes).and_then(|()| {
            write_atomically(
                &self.reference_path(reference),
                format!("{manifest_digest}\n{layer_digest}\n{signer}\n").as_bytes(),
            )
        });
        if let Err(error) = result {
            tracing::warn!(%reference, %error, "keeping a pulled plugin on disk failed");
        }
    }

    /// What `reference` last resolved to, with its component, when both are still here.
    pub fn remembered(&self, reference: &str) -> Option<Remembered> {
        let path = self.reference_path(reference);
        let text = std::fs::read_to_string(&path).ok()?;
        let mut lines = text.lines();
        let digests = (lines.next(), lines.next());
        let (Some(Ok(manifest_digest)), Some(Ok(layer_digest))) = (
            digests.0.map(ContentDigest::parse),
            digests.1.map(ContentDigest::parse),
        ) else {
            tracing::warn!(path = %path.display(), %reference, "a kept reference does not name two digests; ignored");
            return None;
        };
        let bytes = self.component(&layer_digest)?;
        let signer = lines
            .next()
            .and_then(|line| serde_json::from_str(line).ok());
        Some(Remembered {
            manifest_digest,
            bytes,
            signer,
        })
    }
}

/// Write then rename, so a reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut staged = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut staged, bytes)?;
    staged.persist(path).map_err(|error| error.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_component_comes_back_only_while_it_matches_its_digest() {
        let root = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(&root.path().join("pulled")).unwrap();
        let bytes = b"\0asm component".to_vec();
        let layer = ContentDigest::of(&bytes);
        let manifest = ContentDigest::of(b"manifest");
        let reference = "oci://127.0.0.1:5000/team/p:stable";
        assert!(store.remembered(reference).is_none());
        store.keep(reference, &manifest, &layer, &bytes, None);
        let remembered = store.remembered(reference).unwrap();
        assert_eq!(remembered.manifest_digest, manifest);
        assert_eq!(remembered.bytes, bytes);
        assert_eq!(store.component(&layer).unwrap(), bytes);
        // Swapped bytes on disk are discarded, not loaded.
        std::fs::write(store.component_path(&layer), b"\0asm other").unwrap();
        assert!(store.component(&layer).is_none());
        assert!(store.remembered(reference).is_none());
        assert!(!store.component_path(&layer).exists());
    }

    #[test]
    fn a_kept_reference_naming_a_path_is_ignored_and_touches_nothing() {
        // Issue 40: a digest from outside was joined onto the store's path as it came, and the
        // file there read and deleted when it did not match.
        let root = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(&root.path().join("pulled")).unwrap();
        let outside = root.path().join("victim");
        std::fs::write(outside.with_extension("wasm"), b"not orca's").unwrap();
        let reference = "oci://127.0.0.1:5000/team/p:stable";
        let manifest = ContentDigest::of(b"manifest");
        std::fs::write(
            store.reference_path(reference),
            format!("{manifest}\n{}\n", outside.display()),
        )
        .unwrap();
        assert!(store.remembered(reference).is_none());
        assert_eq!(
            std::fs::read(outside.with_extension("wasm")).unwrap(),
            b"not orca's"
        );
    }
}
