//! The registry's HTTP API as a plugin pull uses it (`HEAD`/`GET` of manifests and blobs),
//! with every answer bounded: a connection or an answer silent for the stall timeout is given
//! up, and a body is read only up to a limit the caller sets, never buffered whole first. A
//! registry can therefore neither hold a pull for ever nor fill orca's memory.
//!
//! oci-client reads manifests, and error answers, whole and without a limit, and has no
//! timeouts unless given; these requests are made here instead, with reqwest (the client
//! oci-client itself uses), and oci-client only obtains the credentials they carry.

use std::error::Error as _;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue};

use super::client_error::ClientError;
use super::pull_error::{Fetched, PullError};

/// Bytes of a refusal's body quoted in the message.
const QUOTED_ERROR_BYTES: u64 = 512;

pub(super) struct RegistryHttp {
    client: reqwest::Client,
    stall_timeout: Duration,
}

impl RegistryHttp {
    /// # Errors
    /// [`ClientError::CaRefused`]: `ca_pem` holds no usable certificate;
    /// [`ClientError::StartFailed`]: the TLS backend cannot start.
    pub fn new(
        ca_pem: Option<&[u8]>,
        stall_timeout: Duration,
    ) -> Result<RegistryHttp, ClientError> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(stall_timeout)
            .read_timeout(stall_timeout)
            // Blobs are often served from elsewhere (a CDN, object storage); credentials are
            // not sent to another host (reqwest drops them on a redirect that leaves it).
            .redirect(reqwest::redirect::Policy::limited(5))
            .user_agent(concat!("orca/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|source| ClientError::CaRefused { source })?;
            builder = builder.tls_certs_merge(certificates);
        }
        let client = builder
            .build()
            .map_err(|source| ClientError::StartFailed { source })?;
        Ok(RegistryHttp {
            client,
            stall_timeout,
        })
    }

    /// The headers of a `HEAD` of `url`.
    ///
    /// # Errors
    /// [`PullError`]: the registry refused, failed or stalled.
    pub async fn head(
        &self,
        url: &str,
        accept: &str,
        authorization: Option<&HeaderValue>,
        what: Fetched,
    ) -> Result<HeaderMap, PullError> {
        let response = self
            .send(self.client.head(url), accept, authorization, what)
            .await?;
        Ok(response.headers().clone())
    }

    /// The headers and body of a `GET` of `url`, the body at most `limit` bytes: an answer
    /// announcing more is refused before its body is read, and one sending more is cut off
    /// at `limit`.
    ///
    /// # Errors
    /// [`PullError::Oversized`] past `limit`; [`PullError`] when the registry refused, failed
    /// or stalled.
    pub async fn get(
        &self,
        url: &str,
        accept: &str,
        authorization: Option<&HeaderValue>,
        what: Fetched,
        limit: u64,
    ) -> Result<(HeaderMap, Vec<u8>), PullError> {
        let response = self
            .send(self.client.get(url), accept, authorization, what)
            .await?;
        let headers = response.headers().clone();
        let announced = response.content_length();
        if announced.is_some_and(|length| length > limit) {
            return Err(PullError::Oversized { what, limit });
        }
        let capacity = announced.unwrap_or(0).min(limit);
        match read_capped(response.bytes_stream(), limit, capacity).await {
            Ok(body) => Ok((headers, body)),
            Err(Capped::Over) => Err(PullError::Oversized { what, limit }),
            Err(Capped::Failed(error)) => Err(self.failed(what, &error)),
        }
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        accept: &str,
        authorization: Option<&HeaderValue>,
        what: Fetched,
    ) -> Result<reqwest::Response, PullError> {
        let mut request = request.header(ACCEPT, accept);
        if let Some(value) = authorization {
            request = request.header(AUTHORIZATION, value.clone());
        }
        let response = request
            .send()
            .await
            .map_err(|error| self.failed(what, &error))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        // The refusal's own words, a few of them: an error body is bounded like any other.
        let body = read_capped(response.bytes_stream(), QUOTED_ERROR_BYTES, 0)
            .await
            .unwrap_or_default();
        let said: String = String::from_utf8_lossy(&body)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        Err(PullError::Registry {
            what,
            message: format!("{status}: {}", said.trim()),
        })
    }

    fn failed(&self, what: Fetched, error: &reqwest::Error) -> PullError {
        if error.is_timeout() {
            return PullError::Stalled {
                what,
                after: self.stall_timeout,
            };
        }
        // reqwest's own message names the URL only; the causes say what happened.
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        PullError::Registry { what, message }
    }
}

/// Why [`read_capped`] stopped early.
#[derive(Debug)]
enum Capped<E> {
    /// More than the limit came.
    Over,
    Failed(E),
}

/// `body` read into memory, stopping as soon as it passes `limit` bytes.
async fn read_capped<E>(
    body: impl Stream<Item = Result<Bytes, E>>,
    limit: u64,
    capacity: u64,
) -> Result<Vec<u8>, Capped<E>> {
    let mut body = std::pin::pin!(body);
    let mut out = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(Capped::Failed)?;
        if (out.len() + chunk.len()) as u64 > limit {
            return Err(Capped::Over);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(sizes: &[usize]) -> impl Stream<Item = Result<Bytes, &'static str>> {
        futures::stream::iter(
            sizes
                .iter()
                .map(|&n| Ok(Bytes::from(vec![7u8; n])))
                .collect::<Vec<_>>(),
        )
    }

    #[tokio::test]
    async fn a_body_is_read_up_to_its_limit_and_no_further() {
        for (sizes, limit, read) in [
            (&[][..], 10, Some(0)),
            (&[4, 6][..], 10, Some(10)),
            (&[10][..], 10, Some(10)),
            (&[4, 7][..], 10, None),
            (&[11][..], 10, None),
            (&[1][..], 0, None),
        ] {
            let got = read_capped(chunks(sizes), limit, 0).await;
            match (read, got) {
                (Some(n), Ok(body)) => assert_eq!(body.len(), n, "{sizes:?} under {limit}"),
                (None, Err(Capped::Over)) => {}
                (want, got) => panic!("{sizes:?} under {limit}: wanted {want:?}, got {got:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_body_without_end_is_cut_off_at_the_limit() {
        // Issue 40: a registry streaming without end made every replica run out of memory.
        let endless = futures::stream::repeat_with(|| Ok::<_, ()>(Bytes::from(vec![0u8; 4096])));
        assert!(matches!(
            read_capped(endless, 1 << 20, 1 << 20).await,
            Err(Capped::Over)
        ));
    }

    #[tokio::test]
    async fn a_failed_read_is_the_failure_not_a_short_body() {
        let failing = futures::stream::iter(vec![Ok(Bytes::from_static(b"ab")), Err("reset")]);
        assert!(matches!(
            read_capped(failing, 10, 0).await,
            Err(Capped::Failed("reset"))
        ));
    }
}
