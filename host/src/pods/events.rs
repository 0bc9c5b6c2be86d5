//! Kubernetes Events on pods for each lifecycle step (`kubectl describe pod` shows them).
//!
//! kube's `Recorder` folds a repeated event (same type, reason and action on the same object)
//! into one Event whose series count rises, from a cache it clears only when it next publishes,
//! six minutes on. One recorder for the whole node would hold every pod's events long after
//! the pods are gone; so a pod's Warnings (what repeats: a retry failing the same way) go
//! through its own recorder, kept in the pod's record and dropped with it, and its Normal
//! Events (each step once) through a recorder made for that one Event.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

/// Events waiting to go out (about half a KiB each). A reconcile that finds the queue full
/// waits for room: every Event is kept, and a burst's Events cannot pile up in memory without
/// bound.
const QUEUE: usize = 4096;
/// Events sent at once.
const IN_FLIGHT: usize = 32;

/// Publishes the pods' Events, as the `orca` controller of this node. They go out from one
/// background task, in order, many at a time: a reconcile does not wait for an Event to be
/// sent (as the kubelet's recorder does not), and Events yield to status writes. The
/// apiserver is what a burst waits on, and a pod's status is what its owner acts on; so while
/// any status write is in flight no Event starts, and a burst's Events go out as it ends (or
/// as soon as the queue is full, which holds up reconciles until there is room again).
pub struct PodEvents {
    client: kube::Client,
    queue: mpsc::Sender<Outgoing>,
    reporter: Reporter,
    /// Events queued and not yet answered, so shutdown can let them go out first.
    pending: Arc<AtomicUsize>,
    /// Status writes in flight, which Events wait out.
    status_writes: Arc<StatusWrites>,
}

struct Outgoing {
    /// A pod's Warnings share its recorder (so repeats fold into one Event); a Normal Event
    /// gets a recorder of its own when it is sent.
    recorder: Option<Recorder>,
    reference: ObjectReference,
    event: Event,
}

/// Status writes in flight, and a wake-up for whoever waits for there to be none.
#[derive(Default)]
pub struct StatusWrites {
    in_flight: AtomicUsize,
    none_left: tokio::sync::Notify,
}

/// A status write in flight, until dropped.
pub struct StatusWriting(Arc<StatusWrites>);

impl Drop for StatusWriting {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none_left.notify_waiters();
        }
    }
}

impl StatusWrites {
    fn begin(self: &Arc<Self>) -> StatusWriting {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        StatusWriting(self.clone())
    }

    /// Returns once no status write is in flight.
    async fn none_in_flight(&self) {
        loop {
            let notified = self.none_left.notified();
            tokio::pin!(notified);
            // Registered before the check, so a write ending in between still wakes us.
            notified.as_mut().enable();
            if self.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One pod's Warnings: repeats of the same Warning become one Event with a count.
#[derive(Clone)]
pub struct PodRecorder(Recorder);

impl std::fmt::Debug for PodRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PodRecorder")
    }
}

impl PodEvents {
    /// Starts the sending task; it ends once this and every queued Event are gone.
    pub fn new(client: kube::Client, node_name: &str) -> PodEvents {
        let (queue, mut outgoing) = mpsc::channel::<Outgoing>(QUEUE);
        let pending = Arc::new(AtomicUsize::new(0));
        let status_writes = Arc::new(StatusWrites::default());
        let reporter = Reporter {
            controller: "orca".to_owned(),
            instance: Some(node_name.to_owned()),
        };
        let sender = Sender {
            client: client.clone(),
            reporter: reporter.clone(),
            sent: pending.clone(),
            status_writes: status_writes.clone(),
        };
        tokio::spawn(async move {
            futures::stream::poll_fn(move |cx| outgoing.poll_recv(cx))
                .map(|out| sender.send(out))
                .buffered(IN_FLIGHT)
                .for_each(|()| async {})
                .await;
        });
        PodEvents {
            client,
            queue,
            reporter,
            pending,
            status_writes,
        }
    }

    /// Marks a status write in flight until the answer is dropped: Events wait it out.
    pub fn status_write(&self) -> StatusWriting {
        self.status_writes.begin()
    }

    /// Waits, at most `limit`, for the queued Events to go out (on shutdown).
    pub async fn drain(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.pending.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left = self.pending.load(Ordering::Relaxed);
        if left > 0 {
            tracing::warn!(left, "shutting down with Events not sent");
        }
    }

    /// A recorder for one pod's Warnings, kept in the pod's record and dropped with it.
    pub fn recorder(&self) -> PodRecorder {
        PodRecorder(self.new_recorder())
    }

    fn new_recorder(&self) -> Recorder {
        Recorder::new(self.client.clone(), self.reporter.clone())
    }

    /// Queues one Event about `pod`. A Warning goes through the pod's `recorder`, so a repeat
    /// (a retry failing the same way) folds into one Event; a Normal Event marks a step that
    /// happens once, and nothing is kept of it.
    pub async fn publish(
        &self,
        pod: &Pod,
        recorder: Option<PodRecorder>,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            // The events API caps notes at 1 KiB.
            note: Some(truncate(note, 1024)),
            action: action.to_owned(),
            secondary: None,
        };
        let outgoing = Outgoing {
            recorder: recorder.map(|r| r.0),
            reference: pod.object_ref(&()),
            event,
        };
        self.pending.fetch_add(1, Ordering::Relaxed);
        if self.queue.send(outgoing).await.is_err() {
            // The sending task is gone: the controller is shutting down.
            self.pending.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// What the sending task needs to send one Event.
struct Sender {
    client: kube::Client,
    reporter: Reporter,
    sent: Arc<AtomicUsize>,
    status_writes: Arc<StatusWrites>,
}

impl Sender {
    fn send(&self, out: Outgoing) -> impl Future<Output = ()> + use<> {
        let recorder = out
            .recorder
            .unwrap_or_else(|| Recorder::new(self.client.clone(), self.reporter.clone()));
        let sent = self.sent.clone();
        let status_writes = self.status_writes.clone();
        async move {
            status_writes.none_in_flight().await;
            if let Err(error) = recorder.publish(&out.event, &out.reference).await {
                tracing::warn!(pod = out.reference.name.as_deref().unwrap_or_default(), reason = %out.event.reason, %error, "publishing event failed");
            }
            sent.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked with `...`.
pub(crate) fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max - 3;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod status_write_tests {
    use std::time::Duration;

    use super::*;

    /// An Event waits while any status write is in flight and goes as soon as the last ends.
    #[tokio::test]
    async fn events_wait_for_every_status_write_in_flight() {
        let writes = Arc::new(StatusWrites::default());
        // None in flight: no wait at all.
        tokio::time::timeout(Duration::from_secs(10), writes.none_in_flight())
            .await
            .expect("nothing to wait for");

        let first = writes.begin();
        let second = writes.begin();
        let waiter = tokio::spawn({
            let writes = writes.clone();
            async move { writes.none_in_flight().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished(), "two writes in flight");
        drop(first);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished(), "one write still in flight");
        drop(second);
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the last write's end wakes the waiter")
            .unwrap();

        // A write that begins and ends again is waited for the same way.
        let third = writes.begin();
        let waiter = tokio::spawn({
            let writes = writes.clone();
            async move { writes.none_in_flight().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        drop(third);
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken")
            .unwrap();
    }
}
