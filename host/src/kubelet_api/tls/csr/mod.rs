//! The `csr` source: a serving certificate from the `kubernetes.io/kubelet-serving` signer,
//! requested, renewed and stored the way the kubelet's server certificate manager does.
//!
//! While a request waits, the next configured source serves; the issued certificate fills
//! the `csr` slot of the resolver, which outranks it, as soon as it arrives.

pub(crate) mod api;
mod issued;
mod request;
pub(crate) mod store;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::api::{CsrApi, CsrApiError, CsrOutcome};
use self::issued::Issued;
use self::store::CertStore;
use super::ServingIdentity;
use super::error::KeyMaterialError;
use super::resolver::ServingCertResolver;
use super::validity::Validity;
use crate::config::TlsSource;
use crate::support::Backoff;

/// Retry and wake-up intervals; tests shorten them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CsrTiming {
    /// The waits after a denied, failed or refused request, doubling per failure in a row.
    pub(crate) retry: Backoff,
    /// The longest single sleep before the renewal point, so a clock that jumps (a suspended
    /// host) is noticed within this.
    pub(crate) max_sleep: Duration,
}

impl Default for CsrTiming {
    fn default() -> Self {
        CsrTiming {
            retry: Backoff::new(Duration::from_secs(60), Duration::from_secs(3600)),
            max_sleep: Duration::from_secs(3600),
        }
    }
}

/// Why one request produced no certificate. Logged; the flow retries with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CsrError {
    #[error("cannot build the certificate signing request: {0}")]
    BuildFailed(#[source] rcgen::Error),
    #[error(transparent)]
    ApiFailed(#[from] CsrApiError),
    #[error("CertificateSigningRequest {name} was denied ({reason}): {message}")]
    Denied {
        name: String,
        reason: String,
        message: String,
    },
    #[error("CertificateSigningRequest {name} failed ({reason}): {message}")]
    Failed {
        name: String,
        reason: String,
        message: String,
    },
    #[error("CertificateSigningRequest {name} was issued an unusable certificate: {source}")]
    UnusableCertificate {
        name: String,
        #[source]
        source: KeyMaterialError,
    },
}

/// Everything the CSR flow needs.
pub(crate) struct CsrSource {
    pub(crate) api: Arc<dyn CsrApi>,
    pub(crate) identity: ServingIdentity,
    pub(crate) resolver: Arc<ServingCertResolver>,
    pub(crate) store: Option<CertStore>,
    pub(crate) renew_fraction: f64,
    pub(crate) timing: CsrTiming,
}

impl CsrSource {
    /// Installs the certificate stored in `certDir`, if it has not expired, and returns its
    /// validity; a certificate past its renewal point is still served while it is renewed.
    pub(crate) fn restore(&self) -> Option<Validity> {
        let issued = self.store.as_ref()?.load(Timestamp::now())?;
        self.resolver.install(TlsSource::Csr, issued.key.clone());
        tracing::info!(not_after = %issued.validity.not_after, "serving the stored kubelet API certificate");
        Some(issued.validity)
    }

    /// Runs the request/renew loop in the background until `shutdown`. The receiver turns
    /// `true` once a certificate has been issued (or was already restored).
    pub(crate) fn spawn(
        self,
        current: Option<Validity>,
        shutdown: CancellationToken,
    ) -> watch::Receiver<bool> {
        let (issued, receiver) = watch::channel(current.is_some());
        tokio::spawn(self.run(current, issued, shutdown));
        receiver
    }

    async fn run(
        self,
        mut current: Option<Validity>,
        issued_once: watch::Sender<bool>,
        shutdown: CancellationToken,
    ) {
        loop {
            if let Some(validity) = current
                && !self
                    .sleep_until(validity.renewal_point(self.renew_fraction), &shutdown)
                    .await
            {
                return;
            }
            let mut retries = self.timing.retry.delays();
            let issued = loop {
                let attempt = tokio::select! {
                    () = shutdown.cancelled() => return,
                    attempt = self.request_once() => attempt,
                };
                match attempt {
                    Ok(issued) => break issued,
                    Err(error) => {
                        let delay = retries.next_delay();
                        tracing::warn!(
                            %error,
                            retry_in = ?delay,
                            "no kubelet API certificate from the CSR API yet; the next source in \
                             kubeletApi.tls.sources (or the current certificate) keeps serving"
                        );
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            () = tokio::time::sleep(delay) => {}
                        }
                    }
                }
            };
            self.resolver.install(TlsSource::Csr, issued.key.clone());
            if let Some(store) = &self.store
                && let Err(error) = store.save(&issued)
            {
                tracing::warn!(path = %store.path().display(), %error, "cannot store the issued kubelet API certificate; a restart will request a new one");
            }
            tracing::info!(not_after = %issued.validity.not_after, "serving a kubelet API certificate issued through the CSR API");
            current = Some(issued.validity);
            issued_once.send_replace(true);
        }
    }

    /// Sleeps until `when` in bounded steps; false when shut down first.
    async fn sleep_until(&self, when: Timestamp, shutdown: &CancellationToken) -> bool {
        loop {
            let remaining = when.as_second() - Timestamp::now().as_second();
            if remaining <= 0 {
                return true;
            }
            let step = Duration::from_secs(remaining.unsigned_abs()).min(self.timing.max_sleep);
            tokio::select! {
                () = shutdown.cancelled() => return false,
                () = tokio::time::sleep(step) => {}
            }
        }
    }

    /// One request: a new key, a new CSR, and its outcome.
    pub(crate) async fn request_once(&self) -> Result<Issued, CsrError> {
        let request = request::build(&self.identity).map_err(CsrError::BuildFailed)?;
        let name = self.api.create(&request.object).await?;
        tracing::info!(csr = %name, signer = request::SIGNER, "requested a kubelet API serving certificate; waiting for approval");
        match self.api.wait(&name).await? {
            CsrOutcome::Issued(chain) => Issued::from_pem(&chain, &request.key_pem)
                .map_err(|source| CsrError::UnusableCertificate { name, source }),
            CsrOutcome::Denied { reason, message } => Err(CsrError::Denied {
                name,
                reason,
                message,
            }),
            CsrOutcome::Failed { reason, message } => Err(CsrError::Failed {
                name,
                reason,
                message,
            }),
        }
    }
}
