//! The plugins named by OCI reference (`policy.plugins`): the puller (with its store beside
//! the compiled plugins, and the signature verifier when `policy.registry.verify` trusts
//! anyone), and the refresh that keeps them pulled.

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::error::StartError;
use super::parts::Parts;
use crate::policy::oci::{
    PluginReference, PullLimits, Puller, RefreshSettings, SignatureVerifier, TrustPolicy,
};
use crate::policy::reload::ReloadReporter;

/// Starts the refresh of `parts`' OCI plugins; it ends at shutdown.
///
/// # Errors
/// [`StartError::PluginRegistryFailed`] for a registry setting that cannot be used.
pub fn spawn_refresh(
    parts: &Parts,
    reporter: Arc<dyn ReloadReporter>,
    shutdown: &CancellationToken,
) -> Result<JoinHandle<()>, StartError> {
    let registry = &parts.config.policy.registry;
    // Beside the compiled plugins: a restart while the registry is unreachable serves the
    // last verified versions.
    let store = parts
        .config
        .policy
        .compile_cache_dir()
        .map(|dir| dir.join("pulled"));
    let mut puller = Puller::new(
        registry.ca_file.as_deref(),
        registry.docker_config.clone(),
        store.as_deref(),
        PullLimits::of(registry),
    )
    .map_err(|error| StartError::PluginRegistryFailed(error.to_string()))?;
    // Checked when the config was loaded; read again here, where it is used.
    let trust = TrustPolicy::from_config(registry)
        .map_err(|error| StartError::PluginRegistryFailed(error.to_string()))?;
    if !trust.is_empty() {
        let verifier =
            SignatureVerifier::new(trust, puller.client().clone(), registry.ca_file.as_deref())
                .map_err(|error| StartError::PluginRegistryFailed(error.to_string()))?;
        puller = puller.with_verifier(verifier);
    }
    let references = parts
        .config
        .policy
        .plugins
        .iter()
        .filter_map(|text| PluginReference::parse(text).ok())
        .collect();
    Ok(crate::policy::oci::spawn_refresh(
        Arc::new(puller),
        parts.registry.clone(),
        references,
        RefreshSettings {
            interval: registry.refresh_interval.get(),
            pull_timeout: registry.pull_timeout.get(),
        },
        reporter,
        shutdown.clone(),
    ))
}
