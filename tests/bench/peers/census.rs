//! How many of a namespace's pods exist and how many are Running, kept current by one watch
//! (polling lists of thousands of pods would load the apiserver the bench is measuring).

use std::collections::HashMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::watcher;
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub present: usize,
    pub running: usize,
}

/// A watch on one namespace's pods; dropped, it stops watching.
pub struct Census {
    counts: watch::Receiver<Counts>,
    task: tokio::task::JoinHandle<()>,
}

impl Census {
    pub fn start(api: Api<Pod>) -> Census {
        let (sender, counts) = watch::channel(Counts::default());
        let task = tokio::spawn(async move {
            let mut running_by_uid: HashMap<String, bool> = HashMap::new();
            let mut initial: HashMap<String, bool> = HashMap::new();
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(pod)) => {
                        running_by_uid.insert(uid(&pod), is_running(&pod));
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        running_by_uid.remove(&uid(&pod));
                    }
                    Ok(watcher::Event::Init) => initial.clear(),
                    Ok(watcher::Event::InitApply(pod)) => {
                        initial.insert(uid(&pod), is_running(&pod));
                    }
                    Ok(watcher::Event::InitDone) => {
                        running_by_uid = std::mem::take(&mut initial);
                    }
                    // The watcher relists by itself after an error.
                    Err(_) => continue,
                }
                let counts = Counts {
                    present: running_by_uid.len(),
                    running: running_by_uid.values().filter(|running| **running).count(),
                };
                sender.send_replace(counts);
            }
        });
        Census { counts, task }
    }

    /// Waits until `done` holds for the counts.
    pub async fn until(&mut self, done: impl Fn(Counts) -> bool) -> Counts {
        if let Ok(counts) = self.counts.wait_for(|counts| done(*counts)).await {
            return *counts;
        }
        // The watch task ended (it never does while the census lives).
        self.now()
    }

    pub fn now(&self) -> Counts {
        *self.counts.borrow()
    }
}

impl Drop for Census {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}
