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
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

mod pod_writes;

pub use pod_writes::{PodWrites, PodWriting};

/// Events waiting to go out (a few hundred bytes each). A reconcile that finds the queue full
/// waits for room: every Event is kept, and a burst's Events cannot pile up in memory without
/// bound.
const QUEUE: usize = 8192;
/// Past this many Events waiting, they go out without waiting for a pause in the pod writes: a
/// long burst then neither holds up reconciles on a full queue nor keeps every Event in memory.
const BACKLOG: usize = QUEUE / 2;
/// Events one node's sender takes at once from its queue; how many are sent at once over the
/// whole process is bounded by [`PodWrites`].
const IN_FLIGHT: usize = 32;

/// Publishes the pods' Events, as the `orca` controller of this node. They go out from one
/// background task, in order, many at a time: a reconcile does not wait for an Event to be
/// sent (as the kubelet's recorder does not), and Events yield to pod writes. The apiserver is
/// what a burst waits on, and a pod's status (and its removal) is what its owner acts on; so an
/// Event starts only once no pod write is in flight and none has begun for a moment
/// ([`pod_writes::QUIET`]). A burst's Events go out as it ends, or as soon as [`BACKLOG`] of
/// them wait.
pub struct PodEvents {
    client: kube::Client,
    queue: mpsc::Sender<Outgoing>,
    reporter: Reporter,
    /// Events queued and not yet answered, so shutdown can let them go out first.
    pending: Arc<AtomicUsize>,
    /// Pod writes in flight and when the last began, which Events wait out.
    pod_writes: Arc<PodWrites>,
}

/// One Event waiting to go out. A burst queues thousands, so it is kept small: the pod's
/// reference and the Event are built only when it is sent.
struct Outgoing {
    /// A pod's Warnings share its recorder (so repeats fold into one Event); a Normal Event
    /// gets a recorder of its own when it is sent.
    recorder: Option<Box<Recorder>>,
    pod: PodRef,
    warning: bool,
    reason: &'static str,
    action: &'static str,
    note: Box<str>,
}

/// The pod an Event is about.
struct PodRef {
    namespace: Box<str>,
    name: Box<str>,
    uid: Box<str>,
}

impl PodRef {
    fn of(pod: &Pod) -> PodRef {
        let text = |field: &Option<String>| field.as_deref().unwrap_or_default().into();
        PodRef {
            namespace: text(&pod.metadata.namespace),
            name: text(&pod.metadata.name),
            uid: text(&pod.metadata.uid),
        }
    }

    /// The reference an Event names its pod by (`Resource::object_ref` of the pod).
    fn object_reference(&self) -> ObjectReference {
        let text = |field: &str| (!field.is_empty()).then(|| field.to_owned());
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            namespace: text(&self.namespace),
            name: text(&self.name),
            uid: text(&self.uid),
            resource_version: None,
            field_path: None,
        }
    }
}

/// An Event about a pod, as a step asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}

/// One pod's Warnings: repeats of the same Warning become one Event with a count.
#[derive(Clone)]
pub struct PodRecorder(Box<Recorder>);

impl std::fmt::Debug for PodRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PodRecorder")
    }
}

impl PodEvents {
    /// Starts the sending task; it ends once this and every queued Event are gone. Events
    /// wait out `pod_writes`: one for the whole process, so one node's Events do not compete
    /// with another node's status writes on the same apiserver.
    pub fn new(client: kube::Client, node_name: &str, pod_writes: Arc<PodWrites>) -> PodEvents {
        let (queue, mut outgoing) = mpsc::channel::<Outgoing>(QUEUE);
        let pending = Arc::new(AtomicUsize::new(0));
        let reporter = Reporter {
            controller: "orca".to_owned(),
            instance: Some(node_name.to_owned()),
        };
        let sender = Sender {
            client: client.clone(),
            reporter: reporter.clone(),
            sent: pending.clone(),
            pod_writes: pod_writes.clone(),
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
            pod_writes,
        }
    }

    /// Marks a pod write (a status patch, a removal) in flight until the answer is dropped:
    /// Events wait it out, and a pause after it.
    pub fn pod_write(&self) -> PodWriting {
        self.pod_writes.begin()
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
        PodRecorder(Box::new(self.new_recorder()))
    }

    fn new_recorder(&self) -> Recorder {
        Recorder::new(self.client.clone(), self.reporter.clone())
    }

    /// Queues one Event about `pod`. A Warning goes through the pod's `recorder`, so a repeat
    /// (a retry failing the same way) folds into one Event; a Normal Event marks a step that
    /// happens once, and nothing is kept of it.
    pub async fn publish(&self, pod: &Pod, recorder: Option<PodRecorder>, event: PodEvent) {
        let PodEvent {
            warning,
            reason,
            action,
            note,
        } = event;
        let outgoing = Outgoing {
            recorder: recorder.map(|r| r.0),
            pod: PodRef::of(pod),
            warning,
            reason,
            action,
            // The events API caps notes at 1 KiB.
            note: truncate(note, 1024).into_boxed_str(),
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
    pod_writes: Arc<PodWrites>,
}

impl Sender {
    fn send(&self, out: Outgoing) -> impl Future<Output = ()> + use<> {
        let client = self.client.clone();
        let reporter = self.reporter.clone();
        let sent = self.sent.clone();
        let pod_writes = self.pod_writes.clone();
        async move {
            let _slot = pod_writes
                .event_slot(|| sent.load(Ordering::Relaxed) >= BACKLOG)
                .await;
            let recorder = out
                .recorder
                .unwrap_or_else(|| Box::new(Recorder::new(client, reporter)));
            let event = Event {
                type_: if out.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: out.reason.to_owned(),
                note: Some(out.note.into_string()),
                action: out.action.to_owned(),
                secondary: None,
            };
            if let Err(error) = recorder.publish(&event, &out.pod.object_reference()).await {
                tracing::warn!(pod = %out.pod.name, reason = out.reason, %error, "publishing event failed");
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
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::Resource;

    use super::*;

    /// The queued reference names the pod as kube's own `object_ref` does.
    #[test]
    fn a_queued_pod_reference_is_the_pods_object_reference() {
        let pod = Pod {
            metadata: ObjectMeta {
                namespace: Some("team-a".into()),
                name: Some("train-0".into()),
                uid: Some("5f1c0e2a-0000-4000-8000-000000000001".into()),
                resource_version: Some("4711".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        assert_eq!(PodRef::of(&pod).object_reference(), pod.object_ref(&()));
    }

    #[test]
    fn a_long_note_is_cut_on_a_character_boundary() {
        let note = truncate("é".repeat(600), 1024);
        assert!(
            note.len() <= 1024 && note.ends_with("..."),
            "{}",
            note.len()
        );
        assert_eq!(truncate("short".into(), 1024), "short");
    }
}
