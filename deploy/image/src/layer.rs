//! A [`Tree`] as an OCI layer: a tar (entries sorted, timestamps 0, numeric owners) compressed
//! with gzip, with the two digests the image needs: the compressed blob's (the manifest names
//! it) and the tar's own, the diff ID (the config's `rootfs.diff_ids`). The same tree always
//! makes the same bytes, as ko's and BuildKit's reproducible builds do.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use crate::tree::{Entry, Tree};

/// Why a layer could not be written (in memory: only a malformed path can fail).
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("writing {path} into the layer: {source}")]
    EntryFailed {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("finishing the layer: {0}")]
    FinishFailed(#[source] std::io::Error),
}

/// One layer, compressed.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The gzip-compressed tar.
    pub blob: Vec<u8>,
    /// `sha256:…` of the uncompressed tar.
    pub diff_id: String,
    /// The uncompressed tar's size in bytes.
    pub unpacked_bytes: u64,
    /// What made it, for the config's history.
    pub created_by: String,
}

impl Layer {
    /// `tree` as a layer.
    ///
    /// # Errors
    /// [`LayerError`]: an entry the tar format cannot hold.
    pub fn of(tree: &Tree, created_by: &str) -> Result<Layer, LayerError> {
        let counted = Counted {
            inner: GzEncoder::new(Vec::new(), Compression::default()),
            hasher: Sha256::new(),
            bytes: 0,
        };
        let mut tar = tar::Builder::new(counted);
        for (path, entry) in tree.entries() {
            append(&mut tar, path, entry).map_err(|source| LayerError::EntryFailed {
                path: format!("/{path}"),
                source,
            })?;
        }
        let counted = tar.into_inner().map_err(LayerError::FinishFailed)?;
        let blob = counted.inner.finish().map_err(LayerError::FinishFailed)?;
        Ok(Layer {
            blob,
            diff_id: format!("sha256:{}", hex(&counted.hasher.finalize())),
            unpacked_bytes: counted.bytes,
            created_by: created_by.to_owned(),
        })
    }

    /// `sha256:…` of the compressed blob.
    pub fn digest(&self) -> String {
        format!("sha256:{}", hex(&Sha256::digest(&self.blob)))
    }
}

fn append<W: Write>(tar: &mut tar::Builder<W>, path: &str, entry: &Entry) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_mtime(0);
    match entry {
        Entry::Directory { mode, owner } => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(*mode);
            header.set_uid(u64::from(*owner));
            header.set_gid(u64::from(*owner));
            header.set_size(0);
            tar.append_data(&mut header, format!("{path}/"), std::io::empty())
        }
        Entry::File { bytes, mode, owner } => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(*mode);
            header.set_uid(u64::from(*owner));
            header.set_gid(u64::from(*owner));
            header.set_size(bytes.len() as u64);
            tar.append_data(&mut header, path, bytes.as_slice())
        }
        Entry::Symlink { target } => {
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_mode(0o777);
            header.set_uid(0);
            header.set_gid(0);
            header.set_size(0);
            tar.append_link(&mut header, path, target)
        }
    }
}

/// Passes bytes through to `inner`, hashing and counting them on the way.
struct Counted<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.hasher.update(&buf[..written]);
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn sample() -> Tree {
        let mut tree = Tree::default();
        tree.file("/usr/local/bin/orca", b"binary".to_vec(), 0o755);
        tree.directory("/home/nonroot", 0o700, 65532);
        tree.symlink("/lib", std::path::Path::new("usr/lib"));
        tree
    }

    #[test]
    fn the_same_files_make_the_same_layer_byte_for_byte() {
        let first = Layer::of(&sample(), "x").unwrap();
        let second = Layer::of(&sample(), "x").unwrap();
        assert_eq!(first.digest(), second.digest());
        assert_eq!(first.diff_id, second.diff_id);
    }

    #[test]
    fn the_diff_id_is_the_digest_of_the_uncompressed_tar_and_entries_keep_modes_and_owners() {
        let layer = Layer::of(&sample(), "x").unwrap();
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(layer.blob.as_slice())
            .read_to_end(&mut tar)
            .unwrap();
        assert_eq!(
            layer.diff_id,
            format!("sha256:{}", hex(&Sha256::digest(&tar)))
        );
        assert_eq!(layer.unpacked_bytes, tar.len() as u64);

        let mut archive = tar::Archive::new(tar.as_slice());
        let entries: Vec<(String, u32, u64, u64)> = archive
            .entries()
            .unwrap()
            .map(|entry| {
                let header = entry.unwrap().header().clone();
                (
                    header.path().unwrap().display().to_string(),
                    header.mode().unwrap(),
                    header.uid().unwrap(),
                    header.mtime().unwrap(),
                )
            })
            .collect();
        // Sorted, parents before children, every timestamp 0.
        let paths: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            paths,
            [
                "home/",
                "home/nonroot/",
                "lib",
                "usr/",
                "usr/local/",
                "usr/local/bin/",
                "usr/local/bin/orca"
            ]
        );
        assert!(entries.contains(&("home/nonroot/".into(), 0o700, 65532, 0)));
        assert!(entries.contains(&("usr/local/bin/orca".into(), 0o755, 0, 0)));
        assert!(entries.iter().all(|e| e.3 == 0));
    }
}
