//! Pulling the configured `oci://` plugins at startup and resolving their tags again every
//! interval: a new digest is pulled, verified and loaded without a restart; a failure (the
//! registry down, credentials refused, bytes that do not match their digest, a component that
//! does not load) keeps the version serving and is reported once, as `PluginRejected`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::puller::Puller;
use super::reference::PluginReference;
use super::signature::Signer;
use crate::policy::registry::{PluginRegistry, ReloadEvent};
use crate::policy::reload::{self, ReloadReporter};

/// What is known of one reference between rounds.
#[derive(Default)]
struct Tracked {
    /// The manifest digest whose component is serving (or was refused for good).
    settled: Option<String>,
    /// The last failure reported, so a registry that stays down is reported once.
    reported: Option<String>,
}

/// Pulls `references` now and every `interval` until `shutdown`.
pub fn spawn_refresh(
    puller: Arc<Puller>,
    registry: Arc<PluginRegistry>,
    references: Vec<PluginReference>,
    interval: Duration,
    reporter: Arc<dyn ReloadReporter>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tracked: BTreeMap<String, Tracked> = BTreeMap::new();
        loop {
            for plugin in &references {
                let state = tracked.entry(plugin.text.clone()).or_default();
                if plugin.is_pinned() && state.settled.is_some() {
                    continue;
                }
                let outcome = refresh(&puller, &registry, plugin, state.settled.as_deref()).await;
                let events = match outcome {
                    Ok(Some((digest, events))) => {
                        let refused = events
                            .iter()
                            .any(|e| matches!(e, ReloadEvent::Rejected { .. }));
                        // A refused component is settled too: the registry remembers its
                        // bytes and will not load them again; a new digest is tried.
                        state.settled = Some(digest);
                        if !refused {
                            state.reported = None;
                        }
                        events
                    }
                    Ok(None) => {
                        state.reported = None;
                        Vec::new()
                    }
                    Err(error) if state.reported.as_deref() == Some(error.as_str()) => Vec::new(),
                    Err(error) => {
                        state.reported = Some(error.clone());
                        let mut events = Vec::new();
                        // Nothing serving yet (a start while the registry is unreachable): the
                        // last version verified before, if it is on disk.
                        if state.settled.is_none()
                            && let Some(remembered) = puller.remembered(plugin)
                        {
                            tracing::warn!(reference = %plugin.text, manifest = %remembered.manifest_digest, %error, "the registry cannot be reached; loading the version last pulled from disk");
                            events.extend(
                                load(&registry, plugin, remembered.bytes, remembered.signer)
                                    .await
                                    .unwrap_or_default(),
                            );
                            state.settled = Some(remembered.manifest_digest);
                        }
                        events.push(registry.pull_failed(&plugin.text, error));
                        events
                    }
                };
                for event in &events {
                    reload::log(event);
                    reporter.report(event);
                }
                if !events.is_empty() {
                    reporter.rescanned(&registry.current());
                }
            }
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = shutdown.cancelled() => return,
            }
        }
    })
}

/// Resolves `plugin`; when it names a digest other than `settled`, pulls and loads it.
/// `None`: unchanged.
async fn refresh(
    puller: &Puller,
    registry: &Arc<PluginRegistry>,
    plugin: &PluginReference,
    settled: Option<&str>,
) -> Result<Option<(String, Vec<ReloadEvent>)>, String> {
    let digest = puller.resolve(plugin).await.map_err(|e| e.to_string())?;
    if settled == Some(digest.as_str()) {
        return Ok(None);
    }
    let pulled = puller
        .pull(plugin, &digest)
        .await
        .map_err(|e| format!("pulling {digest}: {e}"))?;
    tracing::info!(reference = %plugin.text, manifest = %pulled.manifest_digest, component = %pulled.layer_digest, bytes = pulled.bytes.len(), "pulled a plugin; loading it");
    let events = load(registry, plugin, pulled.bytes, pulled.signer).await?;
    Ok(Some((digest, events)))
}

/// Offers verified bytes for `plugin` to the registry. Loading compiles the component:
/// seconds of CPU, off the runtime's threads.
async fn load(
    registry: &Arc<PluginRegistry>,
    plugin: &PluginReference,
    bytes: Vec<u8>,
    signer: Option<Signer>,
) -> Result<Vec<ReloadEvent>, String> {
    let registry = registry.clone();
    let text = plugin.text.clone();
    tokio::task::spawn_blocking(move || registry.offer_pulled(&text, &bytes, signer))
        .await
        .map_err(|error| format!("loading the pulled plugin panicked: {error}"))
}
