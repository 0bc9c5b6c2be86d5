//! The instance metadata service of one instance, on loopback: IMDSv2 as the bootstrap reads
//! it (a session token from `PUT /latest/api/token`, then metadata only with that token), so
//! a test can run an instance's real user data with the real `curl` (`ORCA_IMDS` points the
//! bootstrap here).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const TOKEN: &str = "orca-test-imds-token";

/// An IMDS answering `metadata` (path under `/latest/meta-data/` → value); stopped when
/// dropped.
pub struct Imds {
    url: String,
    task: JoinHandle<()>,
}

impl Imds {
    /// Serves `metadata` on a free loopback port.
    ///
    /// # Errors
    /// No port could be bound.
    pub async fn start(metadata: BTreeMap<String, String>) -> Result<Imds> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let metadata = Arc::new(metadata);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let metadata = metadata.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let answer = answer(&metadata, &request);
                        async move { Ok::<_, Infallible>(answer) }
                    });
                    // A connection curl closes is no news to a test.
                    let served = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    drop(served);
                });
            }
        });
        Ok(Imds { url, task })
    }

    /// Its base URL (the bootstrap's `ORCA_IMDS`).
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Imds {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// IMDSv2: a token for a PUT that asks for one with a TTL; metadata only with that token (401
/// without, as IMDS answers when `HttpTokens` is `required`); 404 for a path it does not have.
fn answer(
    metadata: &BTreeMap<String, String>,
    request: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let headers = request.headers();
    let (status, body) = if request.method() == Method::PUT {
        if path == "/latest/api/token"
            && headers.contains_key("x-aws-ec2-metadata-token-ttl-seconds")
        {
            (StatusCode::OK, TOKEN.to_owned())
        } else {
            (StatusCode::BAD_REQUEST, String::new())
        }
    } else if headers
        .get("x-aws-ec2-metadata-token")
        .is_none_or(|token| token != TOKEN)
    {
        (StatusCode::UNAUTHORIZED, String::new())
    } else {
        match path
            .strip_prefix("/latest/meta-data/")
            .and_then(|key| metadata.get(key))
        {
            Some(value) => (StatusCode::OK, value.clone()),
            None => (StatusCode::NOT_FOUND, String::new()),
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}
