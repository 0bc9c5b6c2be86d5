//! Following the configured `oci://` plugins: the version kept on disk serves from startup,
//! and each reference is resolved and pulled again every interval, on its own, under its own
//! deadline. A new digest is pulled, verified and loaded without a restart; a failure (the
//! registry down, stalled or sending too much, credentials refused, bytes that do not match
//! their digest, a component that does not load) keeps the version serving and is reported
//! once, as `PluginRejected`. A reference whose registry is slow holds up no other.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::digest::ContentDigest;
use super::pull_error::PullError;
use super::puller::{Pulled, Puller};
use super::reference::PluginReference;
use super::signature::Signer;
use crate::policy::registry::{PluginRegistry, ReloadEvent};
use crate::policy::reload::{self, ReloadReporter};

/// How references are followed: `policy.registry`'s `refreshInterval` and `pullTimeout`.
#[derive(Debug, Clone, Copy)]
pub struct RefreshSettings {
    pub interval: Duration,
    /// The most one reference's resolve and pull may take.
    pub pull_timeout: Duration,
}

/// Why one round of one reference changed nothing.
#[derive(Debug, thiserror::Error)]
enum RefreshError {
    #[error("{0}")]
    Resolve(PullError),
    #[error("pulling {digest}: {source}")]
    Pull {
        digest: ContentDigest,
        source: PullError,
    },
    #[error(
        "the pull did not finish within policy.registry.pullTimeout ({})",
        humantime::format_duration(*.after)
    )]
    TimedOut { after: Duration },
    #[error("loading the pulled plugin panicked: {0}")]
    LoadPanicked(String),
}

/// What is known of one reference between rounds.
#[derive(Default)]
struct Tracked {
    /// The manifest digest whose component is serving (or was refused for good).
    settled: Option<ContentDigest>,
    /// The last failure reported, so a registry that stays down is reported once.
    reported: Option<String>,
}

/// Follows `references` until `shutdown`, each on its own.
pub fn spawn_refresh(
    puller: Arc<Puller>,
    registry: Arc<PluginRegistry>,
    references: Vec<PluginReference>,
    settings: RefreshSettings,
    reporter: Arc<dyn ReloadReporter>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // In this one task, side by side: a reference stalled until its deadline delays none
        // of the others.
        let follows = references.iter().map(|plugin| {
            follow(
                &puller,
                &registry,
                plugin,
                settings,
                reporter.as_ref(),
                &shutdown,
            )
        });
        futures::future::join_all(follows).await;
    })
}

/// One reference, until `shutdown`.
async fn follow(
    puller: &Puller,
    registry: &Arc<PluginRegistry>,
    plugin: &PluginReference,
    settings: RefreshSettings,
    reporter: &dyn ReloadReporter,
    shutdown: &CancellationToken,
) {
    let mut tracked = Tracked::default();
    // The version verified before serves at once: a registry that is down, slow or stalled
    // at startup keeps no pod waiting for a plugin it already had.
    if let Some(remembered) = puller.remembered(plugin) {
        tracing::info!(reference = %plugin.text, manifest = %remembered.manifest_digest, "loading the version last pulled from disk; the registry is asked next");
        let events = match load(registry, plugin, remembered.bytes, remembered.signer).await {
            Ok(events) => events,
            Err(error) => vec![registry.pull_failed(&plugin.text, error.to_string())],
        };
        if !events
            .iter()
            .any(|e| matches!(e, ReloadEvent::Rejected { .. }))
        {
            tracked.settled = Some(remembered.manifest_digest);
        }
        report(registry, reporter, &events);
    }
    loop {
        if !(plugin.is_pinned() && tracked.settled.is_some()) {
            let events = tokio::select! {
                events = round(puller, registry, plugin, &mut tracked, settings.pull_timeout) => events,
                () = shutdown.cancelled() => return,
            };
            report(registry, reporter, &events);
        }
        tokio::select! {
            () = tokio::time::sleep(settings.interval) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// Resolves `plugin` and, when it names a digest other than the settled one, pulls and loads
/// it; what to report.
async fn round(
    puller: &Puller,
    registry: &Arc<PluginRegistry>,
    plugin: &PluginReference,
    tracked: &mut Tracked,
    pull_timeout: Duration,
) -> Vec<ReloadEvent> {
    match refresh(
        puller,
        registry,
        plugin,
        tracked.settled.as_ref(),
        pull_timeout,
    )
    .await
    {
        Ok(Some((digest, events))) => {
            let refused = events
                .iter()
                .any(|e| matches!(e, ReloadEvent::Rejected { .. }));
            // A refused component is settled too: the registry remembers its bytes and will
            // not load them again; a new digest is tried.
            tracked.settled = Some(digest);
            if !refused {
                tracked.reported = None;
            }
            events
        }
        Ok(None) => {
            tracked.reported = None;
            Vec::new()
        }
        Err(error) => {
            let message = error.to_string();
            if tracked.reported.as_deref() == Some(message.as_str()) {
                return Vec::new();
            }
            tracked.reported = Some(message.clone());
            vec![registry.pull_failed(&plugin.text, message)]
        }
    }
}

/// Resolves `plugin`; when it names a digest other than `settled`, pulls it (the two within
/// `pull_timeout`) and loads it. `None`: unchanged.
async fn refresh(
    puller: &Puller,
    registry: &Arc<PluginRegistry>,
    plugin: &PluginReference,
    settled: Option<&ContentDigest>,
    pull_timeout: Duration,
) -> Result<Option<(ContentDigest, Vec<ReloadEvent>)>, RefreshError> {
    let pulled = tokio::time::timeout(pull_timeout, pull_if_new(puller, plugin, settled))
        .await
        .map_err(|_| RefreshError::TimedOut {
            after: pull_timeout,
        })??;
    let Some(pulled) = pulled else {
        return Ok(None);
    };
    tracing::info!(reference = %plugin.text, manifest = %pulled.manifest_digest, component = %pulled.layer_digest, bytes = pulled.bytes.len(), "pulled a plugin; loading it");
    // `pulled` matches its digests and, where `policy.registry.verify` covers it, was
    // signed by an allowed signer (checked before its component was downloaded).
    let events = load(registry, plugin, pulled.bytes, pulled.signer).await?;
    Ok(Some((pulled.manifest_digest, events)))
}

async fn pull_if_new(
    puller: &Puller,
    plugin: &PluginReference,
    settled: Option<&ContentDigest>,
) -> Result<Option<Pulled>, RefreshError> {
    let digest = puller
        .resolve(plugin)
        .await
        .map_err(RefreshError::Resolve)?;
    if settled == Some(&digest) {
        return Ok(None);
    }
    match puller.pull(plugin, &digest).await {
        Ok(pulled) => Ok(Some(pulled)),
        Err(source) => Err(RefreshError::Pull { digest, source }),
    }
}

/// Offers verified bytes for `plugin` to the registry. Loading compiles the component:
/// seconds of CPU, off the runtime's threads.
async fn load(
    registry: &Arc<PluginRegistry>,
    plugin: &PluginReference,
    bytes: Vec<u8>,
    signer: Option<Signer>,
) -> Result<Vec<ReloadEvent>, RefreshError> {
    let registry = registry.clone();
    let text = plugin.text.clone();
    tokio::task::spawn_blocking(move || registry.offer_pulled(&text, &bytes, signer))
        .await
        .map_err(|error| RefreshError::LoadPanicked(error.to_string()))
}

fn report(registry: &PluginRegistry, reporter: &dyn ReloadReporter, events: &[ReloadEvent]) {
    for event in events {
        reload::log(event);
        reporter.report(event);
    }
    if !events.is_empty() {
        reporter.rescanned(&registry.current());
    }
}
