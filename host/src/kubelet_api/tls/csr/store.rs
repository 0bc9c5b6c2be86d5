//! `kubeletApi.tls.certDir`: the issued certificate kept across restarts, so a restart does
//! not wait for approval again.

use std::io::Write;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use super::issued::Issued;

/// The kubelet's `kubelet-server-current.pem`, under orca's name: chain then key, one file.
pub(crate) const FILE_NAME: &str = "orca-serving-current.pem";

pub(crate) struct CertStore {
    dir: PathBuf,
}

impl CertStore {
    pub(crate) fn new(dir: &Path) -> Self {
        CertStore {
            dir: dir.to_owned(),
        }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The stored certificate, if there is one that has not expired. A missing, unreadable or
    /// expired file is not an error: orca asks for a new certificate instead.
    pub(crate) fn load(&self, now: Timestamp) -> Option<Issued> {
        let path = self.path();
        let contents = match std::fs::read_to_string(&path) {
            Ok(contents) => contents,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read the stored kubelet API certificate; requesting a new one");
                return None;
            }
        };
        match Issued::from_pem(contents.as_bytes(), &contents) {
            Ok(issued) if issued.validity.is_expired(now) => {
                tracing::info!(path = %path.display(), not_after = %issued.validity.not_after, "the stored kubelet API certificate has expired; requesting a new one");
                None
            }
            Ok(issued) => Some(issued),
            Err(reason) => {
                tracing::warn!(path = %path.display(), %reason, "the stored kubelet API certificate is unusable; requesting a new one");
                None
            }
        }
    }

    /// Writes chain and key to a private temporary file and renames it into place, so a crash
    /// never leaves half a key behind and no other user can read it.
    pub(crate) fn save(&self, issued: &Issued) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        set_private(file.path())?;
        file.write_all(issued.chain_pem.as_bytes())?;
        if !issued.chain_pem.ends_with('\n') {
            file.write_all(b"\n")?;
        }
        file.write_all(issued.key_pem.as_bytes())?;
        file.as_file().sync_all()?;
        file.persist(self.path()).map_err(|error| error.error)?;
        Ok(())
    }
}

#[cfg(unix)]
fn set_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn set_private(_path: &Path) -> std::io::Result<()> {
    Ok(())
}
