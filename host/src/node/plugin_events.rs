//! Plugin reloads as Events on the Node (`kubectl describe node` shows them): an operator who
//! applied a broken plugin sees why it was refused and which version still serves.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::pods::events::truncate;
use crate::policy::decision::short;
use crate::policy::registry::ReloadEvent;
use crate::policy::reload::ReloadReporter;

/// Distinct notes remembered for folding repeats; past it, the memory starts again (a repeat
/// then makes one more Event).
const MAX_RECORDERS: usize = 64;

/// Queues reload events for a task that publishes them (reporting must not block a rescan).
pub struct NodePluginEvents {
    queue: mpsc::UnboundedSender<ReloadEvent>,
}

impl NodePluginEvents {
    /// The reporter, and the loop that publishes what it is told, for its owner to spawn: it
    /// runs until `shutdown`, publishing what was queued by then, even once every reporter
    /// is gone (its owner counts a loop that ends by itself as a failure).
    pub fn start(
        client: kube::Client,
        node_name: &str,
        shutdown: CancellationToken,
    ) -> (NodePluginEvents, impl Future<Output = ()> + Send + 'static) {
        let (queue, mut events) = mpsc::unbounded_channel::<ReloadEvent>();
        let reporter = Reporter {
            controller: "orca".to_owned(),
            instance: Some(node_name.to_owned()),
        };
        // A recorder folds every Event of one reason into the first one's series for six
        // minutes, note and all: one recorder per note, so a repeat folds and a different
        // refusal (another file, another digest, another reason) is an Event of its own.
        let mut recorders: HashMap<String, Recorder> = HashMap::new();
        // The kubelet refers to its Node this way (the Node's UID is its name).
        let node = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(node_name.to_owned()),
            uid: Some(node_name.to_owned()),
            ..ObjectReference::default()
        };
        let publishing = async move {
            let mut stopping = false;
            loop {
                let event = if stopping {
                    events.try_recv().ok()
                } else {
                    tokio::select! {
                        event = events.recv() => event,
                        () = shutdown.cancelled() => {
                            stopping = true;
                            continue;
                        }
                    }
                };
                let Some(event) = event else {
                    // Every reporter is gone (no plugin source is left to report): nothing
                    // more comes, and the loop ends with the process.
                    if !stopping {
                        shutdown.cancelled().await;
                    }
                    break;
                };
                let Some(event) = node_event(&event) else {
                    continue;
                };
                let key = format!(
                    "{}\n{}",
                    event.reason,
                    event.note.as_deref().unwrap_or_default()
                );
                if recorders.len() >= MAX_RECORDERS && !recorders.contains_key(&key) {
                    recorders.clear();
                }
                let recorder = recorders
                    .entry(key)
                    .or_insert_with(|| Recorder::new(client.clone(), reporter.clone()));
                if let Err(error) = recorder.publish(&event, &node).await {
                    tracing::warn!(%error, reason = %event.reason, "publishing a plugin event on the node failed");
                }
            }
        };
        (NodePluginEvents { queue }, publishing)
    }
}

impl ReloadReporter for NodePluginEvents {
    fn report(&self, event: &ReloadEvent) {
        let _ = self.queue.send(event.clone());
    }
}

fn node_event(event: &ReloadEvent) -> Option<Event> {
    let (type_, reason, note) = match event {
        ReloadEvent::Loaded {
            path,
            name,
            version,
            sha256,
        } => (
            EventType::Normal,
            "PluginLoaded",
            format!(
                "plugin {name} {version} ({}) loaded from {}",
                short(sha256),
                path.display()
            ),
        ),
        ReloadEvent::Rejected { path, error, kept } => (
            EventType::Warning,
            "PluginRejected",
            match kept {
                Some(kept) => format!(
                    "{} was not loaded: {error}; {kept} keeps serving",
                    path.display()
                ),
                None => format!("{} was not loaded: {error}", path.display()),
            },
        ),
        ReloadEvent::Removed { path, name } => (
            EventType::Normal,
            "PluginRemoved",
            format!("plugin {name} unloaded: {} was removed", path.display()),
        ),
        ReloadEvent::Shadowed { .. } => return None,
    };
    Some(Event {
        type_,
        reason: reason.to_owned(),
        // The events API caps notes at 1 KiB.
        note: Some(truncate(note, 1024)),
        action: "Reload".to_owned(),
        secondary: None,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::Ordering;

    use super::*;

    #[tokio::test]
    async fn the_loop_runs_until_shutdown_even_once_every_reporter_is_gone_and_publishes_what_was_queued()
     {
        let (client, requests) = crate::support::testing::counting_apiserver(201);
        let shutdown = CancellationToken::new();
        let (events, publishing) = NodePluginEvents::start(client, "gpu", shutdown.clone());
        let publishing = tokio::spawn(publishing);
        events.report(&ReloadEvent::Removed {
            path: PathBuf::from("/plugins/team.wasm"),
            name: "team".to_owned(),
        });
        drop(events);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(
            !publishing.is_finished(),
            "with no reporter left the loop still waits for shutdown"
        );
        assert_eq!(
            requests.load(Ordering::SeqCst),
            1,
            "the queued Event went out"
        );
        shutdown.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), publishing)
            .await
            .expect("the loop ends at shutdown")
            .expect("the loop did not panic");
    }
}
