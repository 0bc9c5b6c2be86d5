//! The plain-HTTP port: `/metrics` for Prometheus, `/healthz` and `/readyz` for the
//! Deployment's probes. No credentials, so it binds where the operator says (config).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::process::health::Health;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct Shared {
    registry: Arc<Registry>,
    health: Arc<Health>,
}

/// Binds the listener (so a taken port fails startup) and serves until `shutdown`.
///
/// # Errors
/// The bind error.
pub async fn serve(
    address: SocketAddr,
    registry: Arc<Registry>,
    health: Arc<Health>,
    shutdown: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(%address, "metrics and health listening");
    let app = router(registry, health);
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "metrics listener failed");
        }
    }))
}

fn router(registry: Arc<Registry>, health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(Shared { registry, health })
}

async fn metrics(State(shared): State<Shared>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &shared.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {error}"),
        )
            .into_response(),
    }
}

async fn readyz(State(shared): State<Shared>) -> Response {
    let waiting = shared.health.waiting_for();
    if waiting.is_empty() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("waiting for {}", waiting.join(", ")),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get_text(address: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        let status = answer[9..12].parse().unwrap();
        let body = answer
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        (status, body)
    }

    #[tokio::test]
    async fn serves_metrics_and_probes() {
        let mut registry = Registry::default();
        let lease = crate::metrics::LeaseMetrics::register(&mut registry);
        lease.record(true);
        let health = Arc::new(Health::new(
            crate::process::served_nodes::ServedNodes::serving(&["orca"]),
        ));
        let shutdown = CancellationToken::new();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let task = serve(
            address,
            Arc::new(registry),
            health.clone(),
            shutdown.clone(),
        )
        .await
        .unwrap();
        let (status, body) = get_text(address, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            body.contains(r#"orca_lease_renewals_total{result="ok"} 1"#),
            "{body}"
        );
        assert_eq!(get_text(address, "/healthz").await.0, 200);
        let (status, body) = get_text(address, "/readyz").await;
        assert_eq!(status, 503);
        assert!(body.contains("node registration"), "{body}");
        health.node_registered("orca");
        health.pods_listed("orca");
        health.kubelet_api_serving();
        assert_eq!(get_text(address, "/readyz").await, (200, "ok".to_owned()));
        shutdown.cancel();
        task.await.unwrap();
    }
}
