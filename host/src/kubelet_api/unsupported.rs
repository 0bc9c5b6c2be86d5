//! `attach`, `portForward` and `run`: a pod here is an EC2 instance with no container
//! runtime orca can reach, so these are refused at once with an answer `kubectl` prints as it
//! is: a `Status` object (client-go shows its message) with code 400, never a hang or a 500.

use axum::http::Uri;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The message `kubectl attach` (and port-forward) prints.
pub fn message(operation: &str) -> String {
    format!(
        "{operation} is not supported by this node: orca runs each pod as its own EC2 instance \
         and has no container runtime to {operation} into. Use `kubectl logs` for output, or \
         reach the instance over SSM or SSH (its ID is in the pod's containerID)"
    )
}

pub async fn unsupported(uri: Uri) -> Response {
    let operation = uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let operation = match operation.as_str() {
        "portForward" => "port-forward",
        other => other,
    };
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message(operation),
        "reason": "BadRequest",
        "code": 400,
    });
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        status.to_string(),
    )
        .into_response()
}
