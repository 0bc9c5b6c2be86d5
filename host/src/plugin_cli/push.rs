//! `orca plugin push FILE oci://…`: publishes a plugin as teams publish everything else, as an
//! artifact their CI pushes to a registry.

use std::path::{Path, PathBuf};

use crate::policy::oci::{PluginReference, PullLimits, Puller, push};

pub fn run(
    file: &Path,
    reference: &str,
    docker_config: Option<PathBuf>,
    ca_file: Option<&Path>,
) -> Result<(), String> {
    let target = PluginReference::parse(reference)
        .map_err(|error| format!("{reference} is not a plugin reference: {error}"))?;
    if target.is_pinned() {
        return Err(format!(
            "{reference} names a digest; push to a tag (the digest is printed after the push)"
        ));
    }
    // Refuse to publish what orca would refuse to load.
    let (plugin, bytes, _) = super::check::load(file)?;
    let puller = Puller::new(
        ca_file,
        docker_config.or_else(default_docker_config),
        None,
        PullLimits::default(),
    )?;
    let auth = puller.auth(&target.reference).map_err(|e| e.to_string())?;
    let digest = tokio::runtime::Handle::current()
        .block_on(push(puller.client(), &target.reference, &auth, bytes))
        .map_err(|error| format!("pushing to {reference}: {error}"))?;
    let pinned = format!(
        "oci://{}/{}@{digest}",
        target.reference.registry(),
        target.reference.repository()
    );
    println!(
        "pushed {} {} (sha256 {}) to {reference}",
        plugin.name, plugin.version, plugin.sha256
    );
    println!("{pinned}");
    Ok(())
}

/// Docker's own default: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, if it
/// exists.
fn default_docker_config() -> Option<PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")))?;
    let path = dir.join("config.json");
    path.is_file().then_some(path)
}
