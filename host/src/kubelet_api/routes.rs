//! The kubelet API's routes, every one behind authentication and authorization.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};

use super::auth::{Gate, User};
use super::logs::{container_logs, refuse};
use super::unsupported::unsupported;
use crate::provider::Provider;

/// What every handler reads.
pub struct ApiState {
    pub gate: Gate,
    pub pods: Store<Pod>,
    pub provider: Arc<dyn Provider>,
    pub node_name: String,
    pub follow_poll_interval: Duration,
}

impl ApiState {
    /// A pod bound to this node, from the pod controller's cache.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.get(&ObjectRef::new(name).within(namespace))
    }
}

/// The user a verified client certificate names, put on each request by the connection.
#[derive(Debug, Clone, Default)]
pub struct PeerUser(pub Option<User>);

pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs),
        )
        .route("/pods", get(pods))
        .route("/healthz", get(|| async { "ok" }))
        .route("/exec/{*rest}", any(unsupported))
        .route("/attach/{*rest}", any(unsupported))
        .route("/portForward/{*rest}", any(unsupported))
        .route("/run/{*rest}", any(unsupported))
        .fallback(|| async { (StatusCode::NOT_FOUND, "404 page not found\n") })
        .layer(middleware::from_fn_with_state(state.clone(), admit))
        .with_state(state)
}

/// Authenticates and authorizes every request before any route runs, as the kubelet does;
/// unknown paths are refused the same way, so probing reveals nothing to strangers.
async fn admit(State(state): State<Arc<ApiState>>, request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<PeerUser>()
        .and_then(|peer| peer.0.clone());
    let path = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_owned(),
        |p| p.as_str().to_owned(),
    );
    let admitted = state
        .gate
        .admit(
            peer,
            request.headers().get(header::AUTHORIZATION),
            request.method(),
            &path,
        )
        .await;
    match admitted {
        Ok(user) => {
            tracing::debug!(user = %user.name, %path, "kubelet API request");
            next.run(request).await
        }
        Err(refusal) => {
            tracing::debug!(%path, message = refusal.message(), "kubelet API request refused");
            refuse(refusal.status(), refusal.message().to_owned())
        }
    }
}

/// `GET /pods`: the pods bound to this node, as the kubelet lists the pods it runs.
async fn pods(State(state): State<Arc<ApiState>>) -> Response {
    let items: Vec<Pod> = state
        .pods
        .state()
        .iter()
        .map(|pod| (**pod).clone())
        .collect();
    let list = serde_json::json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {},
        "items": items,
    });
    axum::Json(list).into_response()
}
