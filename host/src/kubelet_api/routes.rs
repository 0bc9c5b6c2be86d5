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

use super::auth::{Gate, User};
use super::logs::{container_logs, refuse};
use super::unsupported::unsupported;
use crate::served_nodes::{FoundPod, ServedNodes};

/// What every handler reads.
pub struct ApiState {
    pub gate: Gate,
    /// The nodes this process serves: one listener answers for all of them.
    pub served: Arc<ServedNodes>,
    /// The node a request about no pod (`/pods`, `/healthz`, an unknown path) is authorized
    /// against: the first declared.
    pub first_node: String,
    pub follow_poll_interval: Duration,
}

impl ApiState {
    /// A pod bound to a served node, from that node's pod cache.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<FoundPod> {
        self.served.pod(namespace, name)
    }

    /// The served nodes' names, for messages.
    pub fn node_names(&self) -> String {
        let names = self.served.names();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    /// The node a request is about, as the kubelet it stands in for would be: the pod's node
    /// for a pod's path, else the first declared node.
    fn node_of(&self, path: &str) -> String {
        let mut parts = path.trim_start_matches('/').split('/');
        let pod_path = matches!(
            parts.next(),
            Some("containerLogs" | "exec" | "attach" | "portForward" | "run")
        );
        if pod_path
            && let (Some(namespace), Some(name)) = (parts.next(), parts.next())
            && let Some(found) = self.pod(namespace, name.split('?').next().unwrap_or(name))
        {
            return found.node;
        }
        self.first_node.clone()
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
    let node = state.node_of(&path);
    let admitted = state
        .gate
        .admit(
            &node,
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

/// `GET /pods`: the pods bound to the served nodes, as the kubelet lists the pods it runs.
async fn pods(State(state): State<Arc<ApiState>>) -> Response {
    let items: Vec<Pod> = state
        .served
        .pods()
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
