//! Why the serving TLS could not be set up. Each message names the config field to fix.

use std::path::PathBuf;

/// A startup failure of the kubelet API's TLS. Failures after startup (a bad replacement file,
/// a denied renewal) are logged instead, and the previous certificate keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("kubeletApi.tls.certFile {}: cannot read the file: {source}", path.display())]
    CertFileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("kubeletApi.tls.certFile {}: {reason}; expected a PEM certificate chain, leaf first", path.display())]
    CertFileInvalid { path: PathBuf, reason: String },
    #[error("kubeletApi.tls.keyFile {}: cannot read the file: {source}", path.display())]
    KeyFileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("kubeletApi.tls.keyFile {}: {reason}; expected a PEM private key (PKCS#8, SEC1 EC or PKCS#1 RSA)", path.display())]
    KeyFileInvalid { path: PathBuf, reason: String },
    #[error(
        "kubeletApi.tls.keyFile {} does not belong to kubeletApi.tls.certFile {}: {source}",
        key_path.display(),
        cert_path.display()
    )]
    KeyMismatch {
        cert_path: PathBuf,
        key_path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("kubeletApi.tls.sources selfSigned: cannot generate the certificate: {reason}")]
    SelfSignedFailed { reason: String },
    #[error(
        "kubeletApi.tls.sources: csr is the last source and orca shut down before the \
         CertificateSigningRequest was issued"
    )]
    ShutdownBeforeIssued,
    #[error(
        "kubeletApi.tls.sources {sources}: no source yielded a certificate (files needs \
         kubeletApi.tls.certFile and kubeletApi.tls.keyFile; add selfSigned as a fallback)"
    )]
    NoCertificate { sources: String },
    #[error("kubeletApi.clientCaFile {}: cannot read the file: {source}", path.display())]
    ClientCaFileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("kubeletApi.clientCaFile {}: {reason}; expected a PEM bundle of CA certificates", path.display())]
    ClientCaFileInvalid { path: PathBuf, reason: String },
    #[error("cannot build the TLS server configuration: {0}")]
    ServerConfigFailed(#[source] rustls::Error),
}
