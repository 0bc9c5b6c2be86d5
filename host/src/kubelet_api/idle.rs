//! When a kubelet API connection is idle: no request in flight, from the moment its handler is
//! called until its response body has been sent or dropped. A `kubectl logs -f` is one request
//! in flight for as long as it streams, however long between lines, so it is never idle; a
//! connection that never sends a request, or sits between requests, is.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, SizeHint};
use tokio::sync::watch;

/// The requests of one connection in flight.
#[derive(Clone)]
pub struct InFlight(Arc<watch::Sender<usize>>);

impl InFlight {
    /// None in flight yet, and the watch that [`idle_for`] waits on.
    pub fn new() -> (InFlight, watch::Receiver<usize>) {
        let (sender, receiver) = watch::channel(0);
        (InFlight(Arc::new(sender)), receiver)
    }

    /// A request has reached its handler; it is in flight until the guard drops.
    pub fn start(&self) -> RequestInFlight {
        self.0.send_modify(|count| *count += 1);
        RequestInFlight(self.0.clone())
    }

    /// `body`, keeping its request in flight until it has been sent or dropped.
    pub fn until_sent(request: RequestInFlight, body: Body) -> Body {
        Body::new(SentBody {
            body,
            _request: request,
        })
    }
}

/// One request in flight; dropping it ends it.
pub struct RequestInFlight(Arc<watch::Sender<usize>>);

impl Drop for RequestInFlight {
    fn drop(&mut self) {
        self.0.send_modify(|count| *count = count.saturating_sub(1));
    }
}

/// Resolves once no request has been in flight for `timeout`: since the connection began, or
/// since its last request ended. Never resolves while one is in flight.
pub async fn idle_for(mut requests: watch::Receiver<usize>, timeout: Duration) {
    loop {
        if *requests.borrow_and_update() > 0 {
            if requests.changed().await.is_err() {
                // Every sender gone: the connection's service is gone with it.
                return;
            }
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(timeout) => return,
            changed = requests.changed() => if changed.is_err() { return },
        }
    }
}

/// A response body that holds its request in flight.
struct SentBody {
    body: Body,
    _request: RequestInFlight,
}

impl HttpBody for SentBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    /// Lets spawned and timer work run at the paused clock's current time.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_sends_nothing_is_idle_after_the_timeout() {
        let (_requests, watch) = InFlight::new();
        let idle = tokio::spawn(idle_for(watch, TIMEOUT));
        settle().await;
        tokio::time::advance(TIMEOUT - Duration::from_millis(1)).await;
        settle().await;
        assert!(!idle.is_finished());
        tokio::time::advance(Duration::from_millis(2)).await;
        settle().await;
        assert!(idle.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_is_never_idle_and_its_end_restarts_the_clock() {
        let (requests, watch) = InFlight::new();
        let idle = tokio::spawn(idle_for(watch, TIMEOUT));
        settle().await;
        tokio::time::advance(TIMEOUT / 2).await;
        // A `kubectl logs -f` that streams for ten timeouts.
        let follow = requests.start();
        for _ in 0..10 {
            tokio::time::advance(TIMEOUT).await;
            settle().await;
            assert!(!idle.is_finished());
        }
        drop(follow);
        settle().await;
        tokio::time::advance(TIMEOUT - Duration::from_millis(1)).await;
        settle().await;
        assert!(
            !idle.is_finished(),
            "the clock starts when the request ends"
        );
        tokio::time::advance(Duration::from_millis(2)).await;
        settle().await;
        assert!(idle.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn the_request_lasts_until_its_body_is_sent_or_dropped() {
        let (requests, watch) = InFlight::new();
        let body = InFlight::until_sent(requests.start(), Body::from("last lines\n"));
        assert_eq!(*watch.borrow(), 1);
        let mut idle = Box::pin(idle_for(watch.clone(), TIMEOUT));
        tokio::time::advance(TIMEOUT * 3).await;
        assert!((&mut idle).now_or_never().is_none());
        let sent = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        assert_eq!(&sent[..], b"last lines\n");
        assert_eq!(*watch.borrow(), 0);
        let dropped = InFlight::until_sent(requests.start(), Body::empty());
        assert_eq!(*watch.borrow(), 1);
        drop(dropped);
        assert_eq!(*watch.borrow(), 0);
    }
}
