//! Why the serving TLS could not be set up. Each message names the config field to fix.

use std::path::PathBuf;

/// Why certificate or key material is unusable: what the PEM parsing, the X.509 reading, the
/// generation and the pairing of a chain with its key can refuse. Each message is fit for a log
/// line or a startup error after the field or file it came from.
#[derive(Debug, thiserror::Error)]
pub enum KeyMaterialError {
    #[error("malformed PEM: {0}")]
    MalformedPem(#[source] rustls::pki_types::pem::Error),
    #[error("no CERTIFICATE block found")]
    NoCertificate,
    #[error("no PRIVATE KEY block found")]
    NoPrivateKey,
    #[error("not an X.509 certificate: {0}")]
    NotX509(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    #[error("validity out of range: {0}")]
    ValidityOutOfRange(#[source] jiff::Error),
    #[error("time {seconds} out of range: {source}")]
    TimeOutOfRange {
        seconds: i64,
        #[source]
        source: x509_parser::error::X509Error,
    },
    #[error("the private key does not belong to the certificate: {0}")]
    KeyMismatch(#[source] rustls::Error),
    #[error("{0}")]
    Generation(#[source] rcgen::Error),
    #[error("no usable CA certificate in the bundle")]
    NoUsableCa,
    #[error("cannot build the client certificate verifier: {0}")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
}

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
    #[error("kubeletApi.tls.certFile {}: {source}; expected a PEM certificate chain, leaf first", path.display())]
    CertFileInvalid {
        path: PathBuf,
        #[source]
        source: KeyMaterialError,
    },
    #[error("kubeletApi.tls.keyFile {}: cannot read the file: {source}", path.display())]
    KeyFileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("kubeletApi.tls.keyFile {}: {source}; expected a PEM private key (PKCS#8, SEC1 EC or PKCS#1 RSA)", path.display())]
    KeyFileInvalid {
        path: PathBuf,
        #[source]
        source: KeyMaterialError,
    },
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
    #[error("kubeletApi.tls.sources selfSigned: cannot generate the certificate: {0}")]
    SelfSignedFailed(#[source] KeyMaterialError),
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
    #[error("kubeletApi.clientCaFile {}: {source}; expected a PEM bundle of CA certificates", path.display())]
    ClientCaFileInvalid {
        path: PathBuf,
        #[source]
        source: KeyMaterialError,
    },
    #[error("cannot build the TLS server configuration: {0}")]
    ServerConfigFailed(#[source] rustls::Error),
}
