//! A registry that misbehaves on demand: an HTTPS proxy in front of a [`TestRegistry`], serving
//! with the registry's own certificate (so orca trusts it through the same `caFile`), that
//! passes every request on until a fault is set. The faults are what a broken or hostile
//! registry can do to a client that pulls from it: stall in the middle of a blob, send a blob
//! without end, trickle one byte at a time, answer nothing at all, or serve a manifest of its
//! own making for a tag.
//!
//! Requests are passed on with their headers (orca's basic-auth credentials included, so the
//! real registry decides), and the registry's answer is read whole before it is passed back:
//! the registry behind is a test's, with small blobs.

use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest as _, Sha256};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::registry::TestRegistry;

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// What the proxy does instead of passing a request on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryFault {
    /// Blob downloads get the registry's headers and the blob's first `after` bytes, then
    /// nothing more; the connection stays open.
    StallBlob { after: usize },
    /// Blob downloads get the registry's headers, then the blob one byte per `every`: never
    /// silent for long, never done.
    DripBlob { every: Duration },
    /// Blob downloads get `200 OK` and zeros without end (no length announced).
    EndlessBlob,
    /// No request gets an answer, ever; connections and TLS still succeed.
    Hang,
    /// Manifest requests for `tag`, or for the digest of `body`, get `body` as an OCI image
    /// manifest, its sha256 as `Docker-Content-Digest`.
    Manifest { tag: String, body: Vec<u8> },
}

struct State {
    /// `https://127.0.0.1:PORT` of the registry behind.
    upstream: String,
    client: reqwest::Client,
    fault: Mutex<Option<RegistryFault>>,
}

/// A running proxy; it stops when dropped.
pub struct RegistryProxy {
    /// `127.0.0.1:PORT`: where orca pulls from (`oci://<addr>/…`).
    pub addr: String,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl RegistryProxy {
    /// A proxy in front of `registry`, passing everything on.
    ///
    /// # Errors
    /// The registry's certificate or key cannot be read, or no port can be bound.
    pub async fn start(registry: &TestRegistry) -> Result<RegistryProxy> {
        let pki = registry
            .ca
            .parent()
            .context("the registry's CA is in its pki directory")?;
        let acceptor = acceptor(pki)?;
        let ca = std::fs::read(&registry.ca)?;
        let client = reqwest::Client::builder()
            .tls_certs_merge([reqwest::Certificate::from_pem(&ca)?])
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let state = Arc::new(State {
            upstream: format!("https://{}", registry.addr),
            client,
            fault: Mutex::new(None),
        });
        let task = tokio::spawn({
            let state = state.clone();
            async move {
                // Each connection's task ends with its connection, or with the test's runtime.
                while let Ok((stream, _)) = listener.accept().await {
                    let state = state.clone();
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let Ok(stream) = acceptor.accept(stream).await else {
                            return;
                        };
                        let service = hyper::service::service_fn(move |request| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(state.handle(request).await) }
                        });
                        // A connection the client gave up on is what some faults are for.
                        let served = auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        drop(served);
                    });
                }
            }
        });
        Ok(RegistryProxy { addr, state, task })
    }

    /// Sets the fault (`None`: pass everything on). Requests already being answered keep
    /// the fault they started with.
    pub fn set_fault(&self, fault: Option<RegistryFault>) {
        *self.state.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }
}

impl Drop for RegistryProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// TLS with the registry's own certificate (for 127.0.0.1 and localhost, any port).
fn acceptor(pki: &Path) -> Result<TlsAcceptor> {
    let certificates = CertificateDer::pem_file_iter(pki.join("server.crt"))?
        .collect::<Result<Vec<_>, _>>()
        .context("reading the registry's certificate")?;
    let key = PrivateKeyDer::from_pem_file(pki.join("server.key"))
        .context("reading the registry's key")?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certificates, key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// `/v2/<name>/blobs/<digest>` or `/v2/<name>/manifests/<reference>`: which, and the last part.
fn route(path: &str) -> Option<(&'static str, &str)> {
    let (rest, last) = path.rsplit_once('/')?;
    if rest.ends_with("/blobs") {
        Some(("blobs", last))
    } else if rest.ends_with("/manifests") {
        Some(("manifests", last))
    } else {
        None
    }
}

fn sha256_digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

impl State {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let fault = self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let path = request.uri().path().to_owned();
        let route = route(&path);
        let is_blob_get = request.method() == Method::GET && matches!(route, Some(("blobs", _)));
        match &fault {
            Some(RegistryFault::Hang) => std::future::pending::<()>().await,
            Some(RegistryFault::EndlessBlob) if is_blob_get => return endless(),
            Some(RegistryFault::Manifest { tag, body }) => {
                let digest = sha256_digest(body);
                if let Some(("manifests", reference)) = route
                    && (reference == tag || reference == digest)
                {
                    return manifest(request.method(), body, &digest);
                }
            }
            _ => {}
        }
        let (status, headers, body) = match self.forward(request).await {
            Ok(answer) => answer,
            Err(error) => {
                let mut response = full(Bytes::from(format!("{error:#}")));
                *response.status_mut() = StatusCode::BAD_GATEWAY;
                return response;
            }
        };
        let body = match &fault {
            Some(RegistryFault::StallBlob { after }) if is_blob_get => {
                let head = body.slice(..(*after).min(body.len()));
                let stalled =
                    futures::stream::once(async move { head }).chain(futures::stream::pending());
                stream(stalled)
            }
            Some(RegistryFault::DripBlob { every }) if is_blob_get => {
                let every = *every;
                let drip = futures::stream::iter((0..body.len()).map(move |i| body.slice(i..=i)))
                    .then(move |byte| async move {
                        tokio::time::sleep(every).await;
                        byte
                    });
                stream(drip)
            }
            _ => Full::new(body).boxed_unsync(),
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        response
    }

    /// The registry's answer to `request`: status, end-to-end headers, whole body.
    async fn forward(&self, request: Request<Incoming>) -> Result<(StatusCode, HeaderMap, Bytes)> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await?.to_bytes();
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), ToString::to_string);
        let mut headers = parts.headers;
        headers.remove(header::HOST);
        let upstream = self
            .client
            .request(parts.method, format!("{}{path}", self.upstream))
            .headers(headers)
            .body(body)
            .send()
            .await?;
        let status = upstream.status();
        let mut headers = upstream.headers().clone();
        for name in [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::TE,
            header::TRAILER,
            header::UPGRADE,
        ] {
            headers.remove(name);
        }
        let body = upstream.bytes().await?;
        Ok((status, headers, body))
    }
}

fn full(bytes: Bytes) -> Response<Body> {
    Response::new(Full::new(bytes).boxed_unsync())
}

fn stream(chunks: impl futures::Stream<Item = Bytes> + Send + 'static) -> Body {
    StreamBody::new(chunks.map(|chunk| Ok::<_, Infallible>(Frame::data(chunk)))).boxed_unsync()
}

/// `200 OK` and zeros, 64 KiB at a time, for as long as the client reads.
fn endless() -> Response<Body> {
    let zeros = Bytes::from(vec![0u8; 64 << 10]);
    let mut response = Response::new(stream(futures::stream::repeat(zeros)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    response
}

/// `body` as an OCI image manifest named `digest` (no body for a HEAD).
fn manifest(method: &Method, body: &[u8], digest: &str) -> Response<Body> {
    let mut response = if method == Method::HEAD {
        full(Bytes::new())
    } else {
        full(Bytes::copy_from_slice(body))
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json"),
    );
    if let Ok(value) = HeaderValue::from_str(digest) {
        headers.insert("docker-content-digest", value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_and_manifest_paths_are_told_apart() {
        assert_eq!(
            route("/v2/team/hostile/blobs/sha256:abc"),
            Some(("blobs", "sha256:abc"))
        );
        assert_eq!(
            route("/v2/team/hostile/manifests/stable"),
            Some(("manifests", "stable"))
        );
        assert_eq!(route("/v2/"), None);
        assert_eq!(route("/v2/team/hostile/tags/list"), None);
    }
}
