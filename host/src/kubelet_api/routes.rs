//! The kubelet API's routes, every one behind authentication and authorization.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Extension, Router};
use k8s_openapi::api::core::v1::Pod;

use super::auth::{Refusal, User};
use super::exec::exec;
use super::logs::{container_logs, refuse};
use super::state::{Admitted, ApiState};
use super::target::Check;
use super::unsupported::unsupported;
use super::usage::{resource_metrics, stats_summary};

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
        .route("/metrics/resource", get(resource_metrics))
        .route("/stats/summary", get(stats_summary))
        .route("/healthz", get(|| async { "ok" }))
        .route("/exec/{*rest}", any(exec))
        .route("/attach/{*rest}", any(unsupported))
        .route("/portForward/{*rest}", any(unsupported))
        .route("/run/{*rest}", any(unsupported))
        .fallback(|| async { (StatusCode::NOT_FOUND, "404 page not found\n") })
        .layer(middleware::from_fn_with_state(state.clone(), admit))
        .with_state(state)
}

/// Authenticates and authorizes every request before any route runs, as the kubelet does,
/// on the node whose data it reads (see [`Check`]); unknown paths are refused the same way,
/// so probing reveals nothing to strangers.
async fn admit(State(state): State<Arc<ApiState>>, mut request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<PeerUser>()
        .and_then(|peer| peer.0.clone());
    let path = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_owned(),
        |p| p.as_str().to_owned(),
    );
    let user = match state
        .gate
        .authenticate(peer, request.headers().get(header::AUTHORIZATION))
        .await
    {
        Ok(user) => user,
        Err(refusal) => return refused(&path, &refusal),
    };
    let (check, pod) = state.check_for(request.uri().path());
    let mut answers = Vec::new();
    for node in check.nodes() {
        let answer = state
            .gate
            .authorize(node, &user, request.method(), &path)
            .await;
        let refused = answer.is_err();
        answers.push((node.clone(), answer));
        if refused && matches!(check, Check::Every(_)) {
            break;
        }
    }
    match check.verdict(answers) {
        Ok(nodes) => {
            tracing::debug!(user = %user.name, %path, ?nodes, "kubelet API request");
            request.extensions_mut().insert(Admitted { pod, nodes });
            next.run(request).await
        }
        Err(refusal) => refused(&path, &refusal),
    }
}

fn refused(path: &str, refusal: &Refusal) -> Response {
    tracing::debug!(%path, message = refusal.message(), "kubelet API request refused");
    refuse(refusal.status(), refusal.message().to_owned())
}

/// `GET /pods`: the pods bound to the served nodes the caller may see, as the kubelet lists
/// the pods it runs.
async fn pods(
    State(state): State<Arc<ApiState>>,
    admitted: Option<Extension<Admitted>>,
) -> Response {
    let Some(Extension(admitted)) = admitted else {
        return refuse(StatusCode::FORBIDDEN, "Forbidden".to_owned());
    };
    let items: Vec<Pod> = state
        .served
        .pods_on(&admitted.nodes)
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
