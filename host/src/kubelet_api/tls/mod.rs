//! The kubelet API's serving TLS: which certificate orca presents, which client certificates
//! it accepts, and who a client certificate says the caller is.
//!
//! Entry points: [`server_config`] for the listener, [`client_identity`] per connection.

mod client_ca;
mod csr;
mod error;
mod file_watch;
mod files;
mod identity;
mod peer;
mod pem;
mod resolver;
mod self_signed;
mod sources;
mod validity;
mod verifier;

#[cfg(test)]
mod handshake_tests;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use self::error::TlsError;
pub use self::identity::ServingIdentity;
pub use self::peer::{CertIdentity, client_identity};

use self::client_ca::ClientCaSource;
use self::csr::CsrTiming;
use self::csr::api::KubeCsrApi;
use self::sources::SourceDeps;
use self::verifier::SwappableClientVerifier;
use crate::config::KubeletApiConfig;

/// ALPN in preference order: the apiserver speaks HTTP/2 to kubelets when offered.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Builds the rustls server config: a certificate resolver fed by the configured sources
/// (swappable at runtime), a client-certificate verifier that offers client auth but allows
/// anonymous clients (tokens are checked later), ALPN `["h2", "http/1.1"]`. Spawns background
/// tasks (file reload, CSR renewal, client CA refresh) that stop on `shutdown`.
///
/// # Errors
/// See [`TlsError`]: unreadable or invalid `certFile`/`keyFile`/`clientCaFile`, no source
/// yielding a certificate, or shutdown while waiting for a CSR that is the only way to one.
///
/// # Caveats
/// Waits (until `shutdown`) for CSR issuance when `csr` is the last source that can yield.
pub async fn server_config(
    config: &KubeletApiConfig,
    client: kube::Client,
    identity: ServingIdentity,
    shutdown: CancellationToken,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let client_ca = match &config.client_ca_file {
        Some(path) => ClientCaSource::File(path.clone()),
        None => ClientCaSource::ConfigMap(client.clone()),
    };
    let deps = SourceDeps {
        csr_api: Arc::new(KubeCsrApi::new(client)),
        file_poll: file_watch::POLL_INTERVAL,
        csr_timing: CsrTiming::default(),
    };
    build(config, client_ca, deps, identity, shutdown).await
}

/// [`server_config`] with its apiserver dependencies passed in, for tests.
async fn build(
    config: &KubeletApiConfig,
    client_ca: ClientCaSource,
    deps: SourceDeps,
    identity: ServingIdentity,
    shutdown: CancellationToken,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    crate::support::tls::install_crypto_provider();
    let verifier = Arc::new(SwappableClientVerifier::new());
    client_ca::start(
        client_ca,
        verifier.clone(),
        deps.file_poll,
        shutdown.clone(),
    )
    .await?;
    let resolver = sources::start(&config.tls, &identity, deps, &shutdown).await?;
    let mut server = rustls::ServerConfig::builder_with_provider(pem::provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::ServerConfigFailed)?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(resolver);
    server.alpn_protocols = ALPN.iter().map(|protocol| protocol.to_vec()).collect();
    Ok(Arc::new(server))
}
