//! Hot reload: the plugins directory is watched (inotify through `notify`), and after a quiet
//! spell (the debounce) it is rescanned as a whole. Rescanning rather than interpreting single
//! events covers every way files change the same way: a new file, an atomic rename, an
//! in-place write, a removal, and a Kubernetes ConfigMap volume swapping its `..data` symlink.
//! A periodic rescan backs up the watch in case events are lost (inotify queue overflow).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::decision::short;
use super::registry::{PluginRegistry, PluginSet, ReloadEvent};

/// A rescan happens at least this often, events or not.
pub const SAFETY_RESCAN: Duration = Duration::from_secs(30);

/// Receives what each rescan did (beyond the log line written here): metrics, Node Events.
pub trait ReloadReporter: Send + Sync {
    fn report(&self, event: &ReloadEvent);

    /// Called after every rescan with the set now serving.
    fn rescanned(&self, set: &PluginSet) {
        let _ = set;
    }
}

/// Several reporters as one.
pub struct Reporters(pub Vec<Arc<dyn ReloadReporter>>);

impl ReloadReporter for Reporters {
    fn report(&self, event: &ReloadEvent) {
        for reporter in &self.0 {
            reporter.report(event);
        }
    }

    fn rescanned(&self, set: &PluginSet) {
        for reporter in &self.0 {
            reporter.rescanned(set);
        }
    }
}

/// Rescans once now, reporting what it found (startup, before any pod is planned).
pub fn rescan_and_report(registry: &PluginRegistry, dir: &Path, reporter: &dyn ReloadReporter) {
    for event in registry.rescan(dir) {
        log(&event);
        reporter.report(&event);
    }
    reporter.rescanned(&registry.current());
}

/// Watches `dir` until `shutdown`; every burst of changes leads to one rescan.
///
/// # Errors
/// [`notify::Error`] if the directory cannot be watched (it is checked to exist at startup).
pub fn spawn_watcher(
    registry: Arc<PluginRegistry>,
    dir: PathBuf,
    debounce: Duration,
    reporter: Arc<dyn ReloadReporter>,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, notify::Error> {
    let (changed, mut changes) = mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Any event, or a watch error, means "look again": the rescan finds out what changed.
        if let Err(error) = &event {
            tracing::warn!(%error, "plugins directory watch reported an error; rescanning");
        }
        let _ = changed.send(());
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(tokio::spawn(async move {
        // Dropping the watcher ends the watch: keep it for the task's life.
        let _watcher = watcher;
        let mut safety = tokio::time::interval(SAFETY_RESCAN);
        safety.tick().await;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                received = changes.recv() => {
                    if received.is_none() {
                        return;
                    }
                    settle(&mut changes, debounce).await;
                }
                _ = safety.tick() => {}
            }
            let registry = registry.clone();
            let dir = dir.clone();
            let reporter = reporter.clone();
            let rescan = tokio::task::spawn_blocking(move || {
                rescan_and_report(&registry, &dir, reporter.as_ref());
            });
            if let Err(error) = rescan.await {
                tracing::error!(%error, "plugins directory rescan crashed; the previous plugins keep serving");
            }
        }
    }))
}

/// How often embedded plugins whose loads ran out of time at startup are loaded again.
pub const EMBEDDED_RETRY: Duration = Duration::from_secs(5);

/// Loads the embedded plugins left pending at startup again, every [`EMBEDDED_RETRY`], until
/// all have loaded or `shutdown`; each attempt is reported like a rescan (the policy's
/// readiness follows). Nothing is spawned when none is pending.
pub fn spawn_embedded_retry(
    registry: Arc<PluginRegistry>,
    reporter: Arc<dyn ReloadReporter>,
    shutdown: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if !registry.has_pending_embedded() {
        return None;
    }
    Some(tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(EMBEDDED_RETRY) => {}
            }
            let registry = registry.clone();
            let reporter = reporter.clone();
            let attempt = tokio::task::spawn_blocking(move || {
                for event in registry.load_pending_embedded() {
                    log(&event);
                    reporter.report(&event);
                }
                reporter.rescanned(&registry.current());
                !registry.has_pending_embedded()
            });
            match attempt.await {
                Ok(true) => return,
                Ok(false) => {}
                Err(error) => {
                    tracing::error!(%error, "loading the pending embedded plugins crashed; trying again");
                }
            }
        }
    }))
}

/// Waits until no change arrived for `debounce`, but not longer than 20 debounces in all, so a
/// directory that never stops changing is still rescanned.
async fn settle(changes: &mut mpsc::UnboundedReceiver<()>, debounce: Duration) {
    let deadline = tokio::time::Instant::now() + debounce * 20;
    loop {
        let quiet = tokio::time::sleep(debounce);
        tokio::select! {
            () = quiet => return,
            () = tokio::time::sleep_until(deadline) => return,
            received = changes.recv() => if received.is_none() { return },
        }
    }
}

pub(crate) fn log(event: &ReloadEvent) {
    match event {
        ReloadEvent::Loaded {
            path,
            name,
            version,
            sha256,
        } => {
            tracing::info!(path = %path.display(), plugin = %name, %version, sha256 = %short(sha256), "plugin loaded")
        }
        ReloadEvent::Rejected { path, error, kept } => match kept {
            Some(kept) => {
                tracing::error!(path = %path.display(), %error, %kept, "plugin rejected; the previous version keeps serving")
            }
            None => tracing::error!(path = %path.display(), %error, "plugin rejected"),
        },
        ReloadEvent::Removed { path, name } => {
            tracing::info!(path = %path.display(), plugin = %name, "plugin file removed; plugin unloaded");
        }
        ReloadEvent::Shadowed { path, name, by } => tracing::warn!(
            path = %path.display(), plugin = %name, by = %by.display(),
            "two files provide the same plugin; the later file name is used"
        ),
    }
}
