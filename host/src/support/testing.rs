//! Fixtures the unit tests of several modules share.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::task::JoinError;

/// An apiserver that answers every request with `status` and an empty JSON object, counting
/// the requests: a client of it, and its count.
pub fn counting_apiserver(status: u16) -> (kube::Client, Arc<AtomicUsize>) {
    let requests = Arc::new(AtomicUsize::new(0));
    let service = tower::service_fn({
        let requests = requests.clone();
        move |_request: hyper::Request<kube::client::Body>| {
            requests.fetch_add(1, Ordering::SeqCst);
            std::future::ready(
                hyper::Response::builder()
                    .status(status)
                    .body(kube::client::Body::from(b"{}".to_vec())),
            )
        }
    });
    (kube::Client::new(service, "default"), requests)
}

/// What joining a task that panicked answers.
pub async fn panicked() -> JoinError {
    tokio::spawn(async { panic!("a bug in the task") })
        .await
        .expect_err("the task panicked")
}

/// What joining a task the runtime cancelled answers.
pub async fn cancelled() -> JoinError {
    let task = tokio::spawn(std::future::pending::<()>());
    task.abort();
    task.await.expect_err("the task was aborted")
}
