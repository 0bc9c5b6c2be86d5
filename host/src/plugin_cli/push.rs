//! `orca plugin push FILE oci://…`: publishes a plugin as teams publish everything else, as an
//! artifact their CI pushes to a registry, signed with a cosign key when asked.

use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use super::PluginCommandError;
use crate::policy::oci::{
    PASSWORD_VARIABLE, PluginReference, PullLimits, Puller, SigningKey, TrustPolicy, cosign_client,
    push,
};

pub fn run(
    file: &Path,
    reference: &str,
    docker_config: Option<PathBuf>,
    ca_file: Option<&Path>,
    sign_key: Option<&Path>,
) -> Result<(), PluginCommandError> {
    let target =
        PluginReference::parse(reference).map_err(|source| PluginCommandError::NotAReference {
            text: reference.to_owned(),
            source,
        })?;
    if target.is_pinned() {
        return Err(PluginCommandError::PushToDigest(reference.to_owned()));
    }
    // The key opens before anything is pushed: a wrong password pushes nothing.
    let key = match sign_key {
        Some(path) => {
            let password = Zeroizing::new(
                std::env::var(PASSWORD_VARIABLE)
                    .unwrap_or_default()
                    .into_bytes(),
            );
            Some(SigningKey::read(path, &password).map_err(PluginCommandError::SigningKey)?)
        }
        None => None,
    };
    // Refuse to publish what orca would refuse to load.
    let (checked, bytes) = super::check::load(file)?;
    let plugin = checked.plugin;
    let puller = Puller::new(
        ca_file,
        docker_config.or_else(default_docker_config),
        None,
        PullLimits::default(),
    )?;
    let auth = puller
        .auth(&target.reference)
        .map_err(PluginCommandError::Credentials)?;
    let runtime = tokio::runtime::Handle::current();
    let digest = runtime
        .block_on(push(puller.client(), &target.reference, &auth, bytes))
        .map_err(|source| PluginCommandError::Push {
            reference: reference.to_owned(),
            source,
        })?;
    let pinned = format!(
        "oci://{}/{}@{digest}",
        target.reference.registry(),
        target.reference.repository()
    );
    println!(
        "pushed {} {} (sha256 {}) to {reference}",
        plugin.name, plugin.version, plugin.sha256
    );
    if let Some(key) = key {
        let mut client = cosign_client(ca_file, &TrustPolicy::default())?;
        runtime
            .block_on(key.sign(&mut client, &target.reference, &auth, &digest))
            .map_err(|source| PluginCommandError::NotSigned {
                pinned: pinned.clone(),
                source,
            })?;
        println!("signed {digest} with {}", key.signer());
    }
    println!("{pinned}");
    Ok(())
}

/// Docker's own default: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, if it
/// exists.
pub(super) fn default_docker_config() -> Option<PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")))?;
    let path = dir.join("config.json");
    path.is_file().then_some(path)
}
