//! The `files` source: `certFile` and `keyFile`, re-read when they change (cert-manager, a
//! mounted Secret).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use super::error::TlsError;
use super::file_watch;
use super::pem;
use super::resolver::ServingCertResolver;
use crate::config::TlsSource;

/// Reads and pairs the certificate chain and key. Errors name the config field and path.
pub(crate) fn load(cert_path: &Path, key_path: &Path) -> Result<CertifiedKey, TlsError> {
    // Blocking reads: two small local files, at startup or once per change.
    let cert_pem = std::fs::read(cert_path).map_err(|source| TlsError::CertFileUnreadable {
        path: cert_path.to_owned(),
        source,
    })?;
    let key_pem = std::fs::read(key_path).map_err(|source| TlsError::KeyFileUnreadable {
        path: key_path.to_owned(),
        source,
    })?;
    let chain = pem::certificates(&cert_pem).map_err(|source| TlsError::CertFileInvalid {
        path: cert_path.to_owned(),
        source,
    })?;
    let key = pem::private_key(&key_pem).map_err(|source| TlsError::KeyFileInvalid {
        path: key_path.to_owned(),
        source,
    })?;
    pem::certified_key(chain, key).map_err(|source| TlsError::KeyMismatch {
        cert_path: cert_path.to_owned(),
        key_path: key_path.to_owned(),
        source,
    })
}

/// Re-reads the pair whenever either file changes, until `shutdown`. A pair that fails to load
/// (half-written, mismatched while cert-manager swaps them) is logged and the certificate
/// already serving stays; the next change is tried again.
pub(crate) fn reload_on_change(
    cert_path: PathBuf,
    key_path: PathBuf,
    resolver: Arc<ServingCertResolver>,
    interval: Duration,
    shutdown: CancellationToken,
) -> impl Future<Output = ()> + Send {
    let paths = vec![cert_path.clone(), key_path.clone()];
    file_watch::on_change(paths, interval, shutdown, move || {
        match load(&cert_path, &key_path) {
            Ok(key) => {
                resolver.install(TlsSource::Files, Arc::new(key));
                tracing::info!(cert_file = %cert_path.display(), "reloaded the kubelet API serving certificate");
            }
            Err(error) => {
                tracing::warn!(%error, "kept the previous kubelet API serving certificate");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rcgen::{CertificateParams, KeyPair};

    use super::*;

    /// A self-signed pair for `name`, as PEM (certificate, key).
    fn pair(name: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn write_pair(dir: &Path, (cert, key): &(String, String)) -> (PathBuf, PathBuf) {
        let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        (cert_path, key_path)
    }

    fn serving_der(resolver: &ServingCertResolver) -> Vec<u8> {
        resolver.current().unwrap().1.cert[0].to_vec()
    }

    fn der_of(cert_pem: &str) -> Vec<u8> {
        pem::certificates(cert_pem.as_bytes()).unwrap()[0].to_vec()
    }

    #[tokio::test]
    async fn a_changed_pair_is_picked_up_and_a_bad_replacement_keeps_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let first = pair("first.example");
        let (cert_path, key_path) = write_pair(dir.path(), &first);
        let resolver = Arc::new(ServingCertResolver::new(&[TlsSource::Files]));
        resolver.install(
            TlsSource::Files,
            Arc::new(load(&cert_path, &key_path).unwrap()),
        );
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(reload_on_change(
            cert_path.clone(),
            key_path.clone(),
            resolver.clone(),
            Duration::from_millis(20),
            shutdown.clone(),
        ));

        // Different lengths guarantee the stamp changes even on a coarse-mtime filesystem.
        let second = pair("second-and-longer.example");
        write_pair(dir.path(), &second);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while serving_der(&resolver) != der_of(&second.0) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the new pair was not picked up"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        std::fs::write(&cert_path, "not a certificate at all").unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(serving_der(&resolver), der_of(&second.0));

        shutdown.cancel();
        task.await.unwrap();
    }

    #[test]
    fn unreadable_or_invalid_files_are_errors_naming_the_field_and_path() {
        let dir = tempfile::tempdir().unwrap();
        let (cert_path, key_path) = write_pair(dir.path(), &pair("node.example"));
        let missing = dir.path().join("missing.pem");

        let error = load(&missing, &key_path).unwrap_err().to_string();
        assert!(error.starts_with("kubeletApi.tls.certFile "), "{error}");
        assert!(error.contains("missing.pem"), "{error}");

        let error = load(&cert_path, &missing).unwrap_err().to_string();
        assert!(error.starts_with("kubeletApi.tls.keyFile "), "{error}");

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "hello").unwrap();
        let error = load(&garbage, &key_path).unwrap_err().to_string();
        assert!(error.starts_with("kubeletApi.tls.certFile "), "{error}");
        assert!(error.contains("no CERTIFICATE block"), "{error}");
        let error = load(&cert_path, &garbage).unwrap_err().to_string();
        assert!(error.starts_with("kubeletApi.tls.keyFile "), "{error}");
        assert!(error.contains("no PRIVATE KEY block"), "{error}");

        let other_key = dir.path().join("other.key");
        std::fs::write(&other_key, pair("other.example").1).unwrap();
        let error = load(&cert_path, &other_key).unwrap_err().to_string();
        assert!(
            error.contains("does not belong to kubeletApi.tls.certFile"),
            "{error}"
        );
    }

    #[test]
    fn sec1_and_pkcs1_keys_load_as_well_as_pkcs8() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kubelet_api/tls/testdata");
        for name in ["sec1", "rsa"] {
            let cert = dir.join(format!("{name}.crt"));
            let key = dir.join(format!("{name}.key"));
            if let Err(error) = load(&cert, &key) {
                panic!("{name}: {error}");
            }
        }
    }
}
