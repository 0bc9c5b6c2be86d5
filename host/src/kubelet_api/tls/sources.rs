//! Walking `kubeletApi.tls.sources` in order until one yields a certificate.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::csr::api::CsrApi;
use super::csr::store::CertStore;
use super::csr::{CsrSource, CsrTiming};
use super::error::TlsError;
use super::resolver::ServingCertResolver;
use super::{ServingIdentity, files, self_signed};
use crate::config::{ServingTlsConfig, TlsSource};

/// What the sources need besides the config.
pub(crate) struct SourceDeps {
    pub(crate) csr_api: Arc<dyn CsrApi>,
    pub(crate) file_poll: Duration,
    pub(crate) csr_timing: CsrTiming,
}

/// Fills the resolver from the first source that yields a certificate, starting the
/// background work each source needs (file reload, CSR renewal) until `shutdown`.
///
/// `files` without `certFile`/`keyFile` is skipped. `csr` without a stored certificate leaves
/// its request pending and moves on; if nothing after it yields, this waits for issuance.
///
/// # Errors
/// A configured file pair that does not load; no source yielding; shutdown while waiting for
/// a CSR that nothing else stands in for.
pub(crate) async fn start(
    tls: &ServingTlsConfig,
    identity: &ServingIdentity,
    deps: SourceDeps,
    shutdown: &CancellationToken,
) -> Result<Arc<ServingCertResolver>, TlsError> {
    let resolver = Arc::new(ServingCertResolver::new(&tls.sources));
    let mut pending_csr = None;
    for source in &tls.sources {
        match source {
            TlsSource::Files => {
                let (Some(cert_path), Some(key_path)) = (&tls.cert_file, &tls.key_file) else {
                    continue;
                };
                let key = files::load(cert_path, key_path)?;
                resolver.install(TlsSource::Files, Arc::new(key));
                tokio::spawn(files::reload_on_change(
                    cert_path.to_owned(),
                    key_path.to_owned(),
                    resolver.clone(),
                    deps.file_poll,
                    shutdown.clone(),
                ));
                break;
            }
            TlsSource::Csr => {
                let csr = CsrSource {
                    api: deps.csr_api.clone(),
                    identity: identity.clone(),
                    resolver: resolver.clone(),
                    store: tls.cert_dir.as_deref().map(CertStore::new),
                    renew_fraction: tls.renew_fraction,
                    timing: deps.csr_timing,
                };
                let restored = csr.restore();
                let issued = csr.spawn(restored, shutdown.clone());
                if restored.is_some() {
                    break;
                }
                pending_csr = Some(issued);
            }
            TlsSource::SelfSigned => {
                let key = self_signed::generate(identity).map_err(TlsError::SelfSignedFailed)?;
                resolver.install(TlsSource::SelfSigned, Arc::new(key));
                break;
            }
        }
    }
    if resolver.current().is_some() {
        return Ok(resolver);
    }
    let Some(mut issued) = pending_csr else {
        return Err(TlsError::NoCertificate {
            sources: format!("{:?}", tls.sources),
        });
    };
    tracing::info!(
        "no source after csr in kubeletApi.tls.sources yields a certificate: waiting for the \
         CertificateSigningRequest to be issued before serving"
    );
    tokio::select! {
        () = shutdown.cancelled() => Err(TlsError::ShutdownBeforeIssued),
        waited = issued.wait_for(|issued| *issued) => match waited {
            Ok(_) => Ok(resolver),
            Err(_) => Err(TlsError::ShutdownBeforeIssued),
        },
    }
}
