//! The HTTPS listener: TLS with the serving certificate, the client certificate's user put on
//! each request, HTTP/1.1 (with upgrades, which exec asks for) and HTTP/2.
//!
//! Any pod can reach this port, so every connection is bounded (issue 40: idle TLS connections
//! once lived for ever, and thousands of them would exhaust the file descriptors of the process
//! that launches and terminates instances): at most `maxConnections` open, the rest closed as
//! accepted; a TLS handshake within `handshakeTimeout`; HTTP/1 request headers within
//! `headerReadTimeout`; closed after `idleTimeout` with no request in flight; HTTP/2 peers
//! pinged every `keepAliveInterval` and dropped when a ping goes unanswered.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::auth::User;
use super::idle::{InFlight, idle_for};
use super::routes::PeerUser;
use super::tls::client_identity;
use crate::config::KubeletApiConfig;
use crate::metrics::{ConnectionClose, KubeletApiMetrics};

/// How long an HTTP/2 ping may go unanswered before the connection is dropped.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a connection closed by orca (idle, or at shutdown) has to finish what it is doing.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The bounds every connection is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub handshake_timeout: Duration,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub keep_alive_interval: Duration,
    pub max_connections: usize,
}

impl Bounds {
    pub fn of(config: &KubeletApiConfig) -> Bounds {
        Bounds {
            handshake_timeout: config.handshake_timeout.get(),
            header_read_timeout: config.header_read_timeout.get(),
            idle_timeout: config.idle_timeout.get(),
            keep_alive_interval: config.keep_alive_interval.get(),
            max_connections: config.max_connections,
        }
    }
}

/// What the listener serves with.
pub struct Listening {
    pub listener: TcpListener,
    pub tls: Arc<rustls::ServerConfig>,
    pub router: Router,
    pub bounds: Bounds,
    pub metrics: Arc<KubeletApiMetrics>,
}

/// What every connection task shares.
struct Shared {
    acceptor: TlsAcceptor,
    router: Router,
    http: auto::Builder<TokioExecutor>,
    bounds: Bounds,
    metrics: Arc<KubeletApiMetrics>,
}

/// Serves until `shutdown`; open connections (log follows) are then asked to finish, and
/// given [`CLOSE_GRACE`] to.
pub async fn serve(listening: Listening, shutdown: CancellationToken) {
    let Listening {
        listener,
        tls,
        router,
        bounds,
        metrics,
    } = listening;
    let shared = Arc::new(Shared {
        acceptor: TlsAcceptor::from(tls),
        router,
        http: http_builder(&bounds),
        bounds,
        metrics,
    });
    let capacity = Arc::new(Semaphore::new(bounds.max_connections));
    // Each connection's task, awaited here as it ends: one that panicked is logged.
    let mut connections = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            Some(ended) = connections.join_next(), if !connections.is_empty() => {
                connection_ended(ended);
                continue;
            }
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // EMFILE and the like: back off instead of spinning.
                    tracing::warn!(%error, "kubelet API accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // At the cap, the connection is closed at once: accepting never waits on the others.
        let Ok(permit) = capacity.clone().try_acquire_owned() else {
            shared.metrics.closed(ConnectionClose::AtCapacity);
            tracing::debug!(%peer, max = bounds.max_connections, "kubelet API at its connection cap; closed");
            drop(stream);
            continue;
        };
        connections.spawn(connection(
            stream,
            peer,
            permit,
            shared.clone(),
            shutdown.clone(),
        ));
    }
    while let Some(ended) = connections.join_next().await {
        connection_ended(ended);
    }
}

fn connection_ended(ended: Result<(), tokio::task::JoinError>) {
    if let Err(error) = ended {
        tracing::error!(%error, "a kubelet API connection's task failed");
    }
}

/// HTTP/1.1 and HTTP/2 with the bounds hyper applies itself; both need a timer, without which
/// hyper silently skips its timeouts.
fn http_builder(bounds: &Bounds) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(bounds.keep_alive_interval)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT);
    builder
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) {
    let _permit = permit;
    let _open = shared.metrics.opened();
    let handshake = shared.acceptor.accept(stream);
    let tls = match tokio::time::timeout(shared.bounds.handshake_timeout, handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            shared.metrics.closed(ConnectionClose::HandshakeFailed);
            tracing::debug!(%peer, %error, "kubelet API TLS handshake failed");
            return;
        }
        Err(_) => {
            shared.metrics.closed(ConnectionClose::HandshakeTimedOut);
            tracing::debug!(%peer, "kubelet API TLS handshake timed out");
            return;
        }
    };
    let user = client_identity(tls.get_ref().1)
        .map(|identity| User::from_certificate(identity.user, identity.groups));
    let peer_user = PeerUser(user);
    let (requests, in_flight) = InFlight::new();
    let router = shared.router.clone();
    let service =
        hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(peer_user.clone());
            let request_in_flight = requests.start();
            let response = router.clone().oneshot(request);
            async move {
                let response = response.await?;
                Ok::<_, std::convert::Infallible>(
                    response.map(|body| InFlight::until_sent(request_in_flight, body)),
                )
            }
        });
    let served = shared
        .http
        .serve_connection_with_upgrades(TokioIo::new(tls), service);
    tokio::pin!(served);
    tokio::select! {
        result = served.as_mut() => {
            if let Err(error) = result {
                let timed_out = error
                    .downcast_ref::<hyper::Error>()
                    .is_some_and(hyper::Error::is_timeout);
                if timed_out {
                    shared.metrics.closed(ConnectionClose::Idle);
                }
                tracing::debug!(%peer, %error, "kubelet API connection ended with an error");
            }
            return;
        }
        () = idle_for(in_flight, shared.bounds.idle_timeout) => {
            shared.metrics.closed(ConnectionClose::Idle);
            tracing::debug!(%peer, "kubelet API connection idle; closing");
        }
        () = shutdown.cancelled() => {}
    }
    served.as_mut().graceful_shutdown();
    if tokio::time::timeout(CLOSE_GRACE, served).await.is_err() {
        tracing::debug!(%peer, "kubelet API connection did not finish in time; dropped");
    }
}
