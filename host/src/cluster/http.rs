//! The HTTP client orca talks to the apiserver with: kube's own stack (base URI, retries of
//! server errors, authentication, extra headers, connect and write timeouts), over HTTP/2 when
//! the apiserver offers it, as client-go does.
//!
//! kube's default client speaks HTTP/1.1 only, so every request in flight needs a connection of
//! its own: a burst of 500 pods left about a hundred TLS connections open to the apiserver
//! (3 MB of buffers and TLS state, measured by `memory-bench` under heaptrack), each kept
//! for hyper's 90 s idle timeout, and every new one paid a TLS handshake. Over HTTP/2 all
//! requests and watches share one connection; a ping every 30 s finds a dead one (the
//! apiserver's load balancer dropped it) within 45 s, as client-go's defaults do.

use std::time::Duration;

use hyper_rustls::{FixedServerNameResolver, HttpsConnectorBuilder};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt};
use tower::ServiceBuilder;
use tower::retry::RetryLayer;

/// How often an HTTP/2 connection that carried nothing is pinged, and how long the answer may
/// take before the connection is dropped (client-go: `ReadIdleTimeout`, `PingTimeout`).
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(15);
/// How long an unused connection stays open (HTTP/1.1 servers, or a second HTTP/2
/// connection opened while the first was still being set up).
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds the client for `config`. A config that names a proxy gets kube's default client,
/// which knows how to tunnel through it.
///
/// # Errors
/// When the TLS setup or the credentials in `config` are unusable.
pub fn client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    if config.proxy_url.is_some() {
        return kube::Client::try_from(config);
    }
    crate::support::tls::install_crypto_provider();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut https = HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = name.clone().try_into().map_err(|error| {
            kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(error))
        })?;
        https = https.with_server_name_resolver(FixedServerNameResolver::new(name));
    }
    let mut connector =
        TimeoutConnector::new(https.enable_http1().enable_http2().wrap_connector(http));
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);

    let hyper: HyperClient<_, Body> = HyperClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
        .http2_keep_alive_interval(PING_INTERVAL)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(connector);

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(hyper);
    Ok(ClientBuilder::new(service, config.default_namespace).build())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hyper::body::Incoming;
    use hyper::service::service_fn;
    use hyper::{Request, Response, Version};
    use hyper_util::rt::TokioIo;
    use hyper_util::server::conn::auto;
    use tokio::net::TcpListener;
    use tokio_rustls::TlsAcceptor;

    use super::*;

    /// An HTTPS server speaking HTTP/1.1 and HTTP/2 (as the apiserver does); answers each
    /// request with the HTTP version it came in and counts the connections it accepted.
    async fn server(alpn: &[&[u8]]) -> (u16, Vec<u8>, Arc<AtomicUsize>) {
        crate::support::tls::install_crypto_provider();
        let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let mut tls = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![certified.cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(
                    certified.signing_key.serialize_der().into(),
                ),
            )
            .unwrap();
        tls.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = connections.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                accepted.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let answer = service_fn(|request: Request<Incoming>| async move {
                        // Slow enough that the requests of a burst are all in flight at once.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let body = format!("{{\"version\":\"{:?}\"}}", request.version());
                        Ok::<_, std::convert::Infallible>(Response::new(body))
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), answer)
                        .await;
                });
            }
        });
        (port, certified.cert.der().to_vec(), connections)
    }

    fn config(port: u16, ca: Vec<u8>) -> kube::Config {
        let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
        config.root_cert = Some(vec![ca]);
        config
    }

    /// Sends `count` requests at once; the versions they were answered over.
    async fn burst(client: &kube::Client, count: usize) -> Vec<String> {
        let requests = (0..count).map(|_| {
            let request = Request::get("/version").body(Vec::new()).unwrap();
            client.request_text(request)
        });
        futures::future::try_join_all(requests).await.unwrap()
    }

    fn assert_all_answered_over(answers: &[String], version: Version) {
        let wanted = format!("{version:?}");
        assert!(
            answers.iter().all(|answer| answer.contains(&wanted)),
            "{answers:?}"
        );
    }

    #[tokio::test]
    async fn a_burst_of_requests_shares_one_http2_connection() {
        let (port, ca, connections) = server(&[b"h2", b"http/1.1"]).await;
        let client = client(config(port, ca)).unwrap();
        // One request first: the connection is set up before the burst needs it.
        burst(&client, 1).await;
        let answers = burst(&client, 100).await;
        assert_all_answered_over(&answers, Version::HTTP_2);
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_server_without_http2_is_spoken_to_over_http1() {
        let (port, ca, connections) = server(&[b"http/1.1"]).await;
        let client = client(config(port, ca)).unwrap();
        let answers = burst(&client, 5).await;
        assert_all_answered_over(&answers, Version::HTTP_11);
        assert_eq!(
            connections.load(Ordering::SeqCst),
            5,
            "one connection per request in flight"
        );
    }
}
