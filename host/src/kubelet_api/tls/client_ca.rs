//! Where the client CA comes from: `kubeletApi.clientCaFile`, or the `client-ca-file` key the
//! apiserver publishes in `kube-system/extension-apiserver-authentication`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::error::TlsError;
use super::file_watch;
use super::pem;
use super::verifier::SwappableClientVerifier;

const NAMESPACE: &str = "kube-system";
const CONFIGMAP: &str = "extension-apiserver-authentication";
const KEY: &str = "client-ca-file";
/// The apiserver rewrites the ConfigMap when its client CA rotates, which is rare.
const CONFIGMAP_REFRESH: Duration = Duration::from_secs(300);

/// Where the client CA bundle is read from.
pub(crate) enum ClientCaSource {
    File(PathBuf),
    ConfigMap(kube::Client),
}

/// Loads the bundle into `verifier` and keeps it current in the background until `shutdown`.
///
/// # Errors
/// Only for a configured file that cannot be read or holds no certificate at startup. The
/// ConfigMap being absent or forbidden is a warning: client certificates are then refused and
/// bearer tokens still work.
pub(crate) async fn start(
    source: ClientCaSource,
    verifier: Arc<SwappableClientVerifier>,
    file_poll: Duration,
    shutdown: CancellationToken,
) -> Result<(), TlsError> {
    match source {
        ClientCaSource::File(path) => {
            verifier
                .set_ca(Some(&read_file(&path)?))
                .map_err(|source| TlsError::ClientCaFileInvalid {
                    path: path.clone(),
                    source,
                })?;
            let paths = vec![path.clone()];
            tokio::spawn(file_watch::on_change(
                paths,
                file_poll,
                shutdown,
                move || {
                    reload_file(&path, &verifier);
                },
            ));
        }
        ClientCaSource::ConfigMap(client) => {
            let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
            let mut last = refresh_from_configmap(&api, &verifier, None).await;
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(CONFIGMAP_REFRESH) => {}
                    }
                    last = refresh_from_configmap(&api, &verifier, last).await;
                }
            });
        }
    }
    Ok(())
}

/// Re-reads the file after a change; a bad file is logged and the CA in use stays.
fn reload_file(path: &Path, verifier: &SwappableClientVerifier) {
    let loaded = read_file(path).and_then(|bundle| {
        verifier
            .set_ca(Some(&bundle))
            .map_err(|source| TlsError::ClientCaFileInvalid {
                path: path.to_owned(),
                source,
            })
    });
    match loaded {
        Ok(()) => tracing::info!(path = %path.display(), "reloaded the kubelet API client CA"),
        Err(error) => tracing::warn!(%error, "kept the previous kubelet API client CA"),
    }
}

/// The certificates in a client CA file.
fn read_file(path: &Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, TlsError> {
    let bundle = std::fs::read(path).map_err(|source| TlsError::ClientCaFileUnreadable {
        path: path.to_owned(),
        source,
    })?;
    pem::certificates(&bundle).map_err(|source| TlsError::ClientCaFileInvalid {
        path: path.to_owned(),
        source,
    })
}

/// Reads the ConfigMap and installs its bundle if it changed since `last`; returns the bundle
/// now in use. Every failure keeps what is in use (possibly nothing) and is logged.
async fn refresh_from_configmap(
    api: &Api<ConfigMap>,
    verifier: &SwappableClientVerifier,
    last: Option<String>,
) -> Option<String> {
    let bundle = match api.get_opt(CONFIGMAP).await {
        Ok(Some(configmap)) => configmap.data.and_then(|mut data| data.remove(KEY)),
        Ok(None) => None,
        Err(kube::Error::Api(status)) if status.code == 403 => {
            tracing::warn!(
                "orca may not get configmaps in {NAMESPACE} ({CONFIGMAP}): client certificates \
                 are refused until kubeletApi.clientCaFile is set or the permission is granted; \
                 bearer tokens still work"
            );
            return last;
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read {NAMESPACE}/{CONFIGMAP}; keeping the client CA in use");
            return last;
        }
    };
    let Some(bundle) = bundle else {
        if last.is_none() {
            tracing::warn!(
                "{NAMESPACE}/{CONFIGMAP} has no {KEY}: client certificates are refused until \
                 kubeletApi.clientCaFile is set; bearer tokens still work"
            );
        }
        return last;
    };
    if last.as_ref() == Some(&bundle) {
        return last;
    }
    let installed = pem::certificates(bundle.as_bytes())
        .and_then(|certificates| verifier.set_ca(Some(&certificates)));
    match installed {
        Ok(()) => {
            tracing::info!("loaded the kubelet API client CA from {NAMESPACE}/{CONFIGMAP}");
            Some(bundle)
        }
        Err(reason) => {
            tracing::warn!(%reason, "{NAMESPACE}/{CONFIGMAP} {KEY} is unusable; keeping the client CA in use");
            last
        }
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, IsCa, KeyPair};

    use super::*;

    fn ca_pem(name: &str) -> String {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .pem()
    }

    #[tokio::test]
    async fn a_missing_or_empty_client_ca_file_is_an_error_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let shutdown = CancellationToken::new();
        for (name, contents) in [("missing.pem", None), ("empty.pem", Some(""))] {
            let path = dir.path().join(name);
            if let Some(contents) = contents {
                std::fs::write(&path, contents).unwrap();
            }
            let verifier = Arc::new(SwappableClientVerifier::new());
            let error = start(
                ClientCaSource::File(path),
                verifier.clone(),
                Duration::from_millis(20),
                shutdown.clone(),
            )
            .await
            .unwrap_err()
            .to_string();
            assert!(error.starts_with("kubeletApi.clientCaFile "), "{error}");
            assert!(error.contains(name), "{error}");
            assert!(!verifier.has_ca());
        }
        shutdown.cancel();
    }

    #[tokio::test]
    async fn a_client_ca_file_is_loaded_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, ca_pem("first-ca")).unwrap();
        let verifier = Arc::new(SwappableClientVerifier::new());
        let shutdown = CancellationToken::new();
        start(
            ClientCaSource::File(path.clone()),
            verifier.clone(),
            Duration::from_millis(20),
            shutdown.clone(),
        )
        .await
        .unwrap();
        assert!(verifier.has_ca());
        let before = Arc::as_ptr(&verifier.current_for_tests());
        std::fs::write(&path, ca_pem("second-and-longer-ca")).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while Arc::as_ptr(&verifier.current_for_tests()) == before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the new CA was not picked up"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        shutdown.cancel();
    }
}
