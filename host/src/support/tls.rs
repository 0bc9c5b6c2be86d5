//! One process-wide TLS crypto provider.
//!
//! kube and the AWS SDK both use rustls; when more than one crypto backend is compiled in,
//! rustls refuses to guess and panics on first use. orca settles it once, at startup.

/// Installs aws-lc-rs as rustls' default provider. Idempotent: later calls are no-ops.
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is the state we want.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
