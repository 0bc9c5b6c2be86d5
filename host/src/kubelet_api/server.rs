//! The HTTPS listener: TLS with the serving certificate, the client certificate's user put on
//! each request, HTTP/1.1 (with upgrades, which exec asks for) and HTTP/2.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::auth::User;
use super::routes::PeerUser;
use super::tls::client_identity;

/// A handshake that takes longer is dropped, so idle sockets cannot pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `shutdown`; open connections (log follows) are asked
/// to finish and dropped with the process.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => return,
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
        tokio::spawn(connection(
            stream,
            peer,
            acceptor.clone(),
            router.clone(),
            shutdown.clone(),
        ));
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    router: Router,
    shutdown: CancellationToken,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "kubelet API TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "kubelet API TLS handshake timed out");
            return;
        }
    };
    let user = client_identity(tls.get_ref().1)
        .map(|identity| User::from_certificate(identity.user, identity.groups));
    let peer_user = PeerUser(user);
    let service =
        hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(peer_user.clone());
            router.clone().oneshot(request)
        });
    let builder = auto::Builder::new(TokioExecutor::new());
    let served = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
    tokio::pin!(served);
    tokio::select! {
        result = served.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%peer, %error, "kubelet API connection ended with an error");
            }
        }
        () = shutdown.cancelled() => {
            served.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), served).await;
        }
    }
}
