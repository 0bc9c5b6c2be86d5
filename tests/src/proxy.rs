//! An HTTP proxy in front of one orca process's apiserver or AWS endpoint: it passes every
//! request on, answers 503 to (or never answers) the requests a rule picks while a fault is
//! on, and records what went through. Faults that must hit one replica only (its Lease writes
//! fail for minutes while the other replica's succeed) and an audit of one replica's own calls
//! (which `TerminateInstances` and `DeleteMessageBatch` it sent, and when) both need it.
//!
//! orca talks plain HTTP to the proxy (a kubeconfig whose server is `http://127.0.0.1:<port>`,
//! without credentials; an `endpointUrl` for AWS), and the proxy talks to the apiserver as
//! orca's harness user, over TLS with that user's client certificate (a kube client from the
//! harness's kubeconfig), or to moto over plain HTTP. Responses stream through, so watches
//! work.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use jiff::Timestamp;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub(crate) type Body = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// What the requests a proxy's rule picks get while the fault is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 503 Service Unavailable at once (kube's client retries it with backoff, for minutes).
    Unavailable,
    /// No answer, ever (the connection stays open).
    Hang,
    /// 403 Forbidden at once (what a gateway that allows only the API paths answers the
    /// rest), which kube's client does not retry.
    Forbidden,
}

/// One request that reached the proxy.
#[derive(Debug, Clone)]
pub struct Seen {
    pub at: Timestamp,
    pub method: Method,
    pub path: String,
    /// The AWS operation (`TerminateInstances`, `DeleteMessageBatch`): the query protocol's
    /// `Action`, or the JSON protocol's `X-Amz-Target`.
    pub operation: Option<String>,
    /// Answered by the fault, not passed on.
    pub faulted: bool,
    /// The request's body, as text (AWS query and JSON bodies are).
    pub body: String,
}

/// Which requests a fault applies to.
pub type Rule = Box<dyn Fn(&Method, &str) -> bool + Send + Sync>;

enum Upstream {
    /// The apiserver, through a kube client (TLS, orca's client certificate).
    Kube(kube::Client),
    /// A plain HTTP server (moto), at this base URL.
    Http {
        base: String,
        client: Box<PlainClient>,
    },
}

struct State {
    upstream: Upstream,
    rule: Rule,
    fault: Mutex<Option<Fault>>,
    seen: Mutex<Vec<Seen>>,
}

/// A running proxy; it stops when dropped.
pub struct Proxy {
    /// Where orca reaches it: `http://127.0.0.1:<port>`.
    pub url: String,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// A proxy in front of the apiserver of `kubeconfig` (its cluster and its user's
    /// credentials); `rule` picks the requests a fault applies to.
    ///
    /// # Errors
    /// The kubeconfig cannot be read, or no port can be bound.
    pub async fn apiserver(kubeconfig: &Path, rule: Rule) -> Result<Proxy> {
        let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Self::start(Upstream::Kube(kube::Client::try_from(config)?), rule).await
    }

    /// A proxy in front of the plain-HTTP server at `base` (moto); it records every request.
    ///
    /// # Errors
    /// No port can be bound.
    pub async fn http(base: &str) -> Result<Proxy> {
        let client = Box::new(HttpClient::builder(TokioExecutor::new()).build_http());
        let upstream = Upstream::Http {
            base: base.trim_end_matches('/').to_owned(),
            client,
        };
        Self::start(upstream, Box::new(|_, _| false)).await
    }

    async fn start(upstream: Upstream, rule: Rule) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(State {
            upstream,
            rule,
            fault: Mutex::new(None),
            seen: Mutex::new(Vec::new()),
        });
        let task = serve(listener, {
            let state = state.clone();
            move |request| {
                let state = state.clone();
                async move { state.handle(request).await }
            }
        });
        Ok(Proxy { url, state, task })
    }

    /// Turns the fault on (`Some`) or off for the requests the rule picks.
    pub fn set_fault(&self, fault: Option<Fault>) {
        *self.state.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }

    /// Every request so far, in the order they arrived.
    pub fn seen(&self) -> Vec<Seen> {
        self.state
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The AWS operations named `operations` that reached the proxy after `since` (and were
    /// passed on).
    pub fn calls_since(&self, since: Timestamp, operations: &[&str]) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|seen| seen.at >= since && !seen.faulted)
            .filter(|seen| {
                seen.operation
                    .as_deref()
                    .is_some_and(|operation| operations.contains(&operation))
            })
            .collect()
    }

    /// A kubeconfig that sends orca here (no credentials: the proxy has them), written in
    /// `dir`.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn kubeconfig_in(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join("proxied.kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1
kind: Config
clusters:
- name: proxied
  cluster:
    server: {url}
users:
- name: proxied
  user: {{}}
contexts:
- name: proxied
  context:
    cluster: proxied
    user: proxied
current-context: proxied
",
                url = self.url
            ),
        )
        .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Headers that belong to one connection, not to the request or response passed on.
const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    header::HOST,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// `headers` without those that belong to one connection.
pub(crate) fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let mut kept = headers.clone();
    for name in &HOP_BY_HOP {
        kept.remove(name);
    }
    kept.remove("keep-alive");
    kept.remove("proxy-connection");
    kept
}

impl State {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), ToString::to_string);
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) => return answer(StatusCode::BAD_REQUEST, &error.to_string()),
        };
        let operation = operation(&parts.headers, &body);
        let fault = *self.fault.lock().unwrap_or_else(|p| p.into_inner());
        let fault = fault.filter(|_| (self.rule)(&parts.method, &path));
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Seen {
                at: Timestamp::now(),
                method: parts.method.clone(),
                path: path.clone(),
                operation,
                faulted: fault.is_some(),
                body: String::from_utf8_lossy(&body).into_owned(),
            });
        match fault {
            Some(Fault::Unavailable) => {
                return answer(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the test proxy answers 503 to this request",
                );
            }
            Some(Fault::Hang) => std::future::pending::<()>().await,
            Some(Fault::Forbidden) => {
                return answer(
                    StatusCode::FORBIDDEN,
                    "the test proxy answers 403 to this request",
                );
            }
            None => {}
        }
        let headers = end_to_end(&parts.headers);
        let forwarded = match &self.upstream {
            Upstream::Kube(client) => {
                let mut upstream = Request::builder().method(parts.method).uri(&path);
                if let Some(map) = upstream.headers_mut() {
                    *map = headers;
                }
                let Ok(upstream) = upstream.body(kube::client::Body::from(body.to_vec())) else {
                    return answer(StatusCode::BAD_REQUEST, "cannot build the request");
                };
                client.send(upstream).await.map(|response| {
                    let (parts, body) = response.into_parts();
                    Response::from_parts(parts, body.map_err(Into::into).boxed_unsync())
                })
            }
            Upstream::Http { base, client } => {
                forward_http(client, base, parts.method, &path, headers, body)
                    .await
                    .map_err(|error| kube::Error::Service(format!("{error:#}").into()))
            }
        };
        match forwarded {
            Ok(mut response) => {
                let kept = end_to_end(response.headers());
                *response.headers_mut() = kept;
                response
            }
            Err(error) => answer(StatusCode::BAD_GATEWAY, &error.to_string()),
        }
    }
}

/// A plain-HTTP client to an upstream such as moto.
pub(crate) type PlainClient = HttpClient<HttpConnector, Full<Bytes>>;

/// Serves every connection `listener` accepts with `handle`, one task a connection, until the
/// returned task is aborted (a connection's task ends with its connection, or with the
/// runtime at the end of the test).
pub(crate) fn serve<H, F>(listener: TcpListener, handle: H) -> JoinHandle<()>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handle = handle.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let answered = handle(request);
                    async move { Ok::<_, Infallible>(answered.await) }
                });
                // A connection cut (orca killed mid-request) is no news to a test.
                let served = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                drop(served);
            });
        }
    })
}

/// Sends `method` `path` with `headers` (already [`end_to_end`]) and `body` to the
/// plain-HTTP server at `base`, and answers its response as it streams.
///
/// # Errors
/// The request cannot be built from these parts, or the upstream cannot be reached.
pub(crate) async fn forward_http(
    client: &PlainClient,
    base: &str,
    method: Method,
    path: &str,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response<Body>> {
    let mut upstream = Request::builder()
        .method(method)
        .uri(format!("{base}{path}"));
    if let Some(map) = upstream.headers_mut() {
        *map = headers;
    }
    let upstream = upstream
        .body(Full::new(body))
        .with_context(|| format!("building the request of {path} to {base}"))?;
    let response = client
        .request(upstream)
        .await
        .with_context(|| format!("passing {path} on to {base}"))?;
    let (parts, body) = response.into_parts();
    Ok(Response::from_parts(
        parts,
        body.map_err(Into::into).boxed_unsync(),
    ))
}

/// The AWS operation a request calls, if it is one.
pub(crate) fn operation(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    if let Some(target) = headers.get("x-amz-target").and_then(|v| v.to_str().ok()) {
        return target.rsplit('.').next().map(str::to_owned);
    }
    let body = std::str::from_utf8(body).ok()?;
    body.split('&')
        .find_map(|pair| pair.strip_prefix("Action="))
        .map(str::to_owned)
}

/// A response of the proxy's own, as a Kubernetes Status (kube reads its message).
fn answer(status: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": status.canonical_reason().unwrap_or_default().replace(' ', ""),
        "code": status.as_u16(),
    })
    .to_string();
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operation_is_read_from_the_query_body_or_the_json_target() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            operation(&headers, b"Action=TerminateInstances&Version=2016-11-15").as_deref(),
            Some("TerminateInstances")
        );
        headers.insert(
            "x-amz-target",
            header::HeaderValue::from_static("AmazonSQS.DeleteMessageBatch"),
        );
        assert_eq!(
            operation(&headers, b"{}").as_deref(),
            Some("DeleteMessageBatch")
        );
        assert_eq!(operation(&HeaderMap::new(), b"{\"kind\":\"Lease\"}"), None);
    }
}
