//! `orca plugin check oci://…`: resolves and pulls a reference as a node would, shows its
//! cosign signature status against `--key` or a config's `policy.registry.verify`, then loads
//! it as `check FILE.wasm` does.

use std::path::PathBuf;

use super::PluginCommandError;
use crate::config::Config;
use crate::policy::oci::{PluginReference, PullLimits, Puller, SignatureVerifier, TrustPolicy};

/// What besides the reference `check` was given.
pub struct Options {
    pub keys: Vec<PathBuf>,
    pub config: Option<PathBuf>,
    pub docker_config: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
}

/// # Errors
/// Why a node would refuse the reference (its signatures, its bytes), or why it could not be
/// reached.
pub fn run(text: &str, options: &Options) -> Result<(), PluginCommandError> {
    let plugin =
        PluginReference::parse(text).map_err(|source| PluginCommandError::NotAReference {
            text: text.to_owned(),
            source,
        })?;
    let (docker_config, ca_file, trust, limits) = match &options.config {
        Some(path) => {
            let config = Config::load(path)?;
            let registry = config.policy.registry;
            let trust = TrustPolicy::from_config(&registry)?;
            let limits = PullLimits::of(&registry);
            (
                registry.docker_config.or(options.docker_config.clone()),
                registry.ca_file.or(options.ca_file.clone()),
                trust,
                limits,
            )
        }
        None => (
            options.docker_config.clone(),
            options.ca_file.clone(),
            TrustPolicy::keys(&options.keys)?,
            PullLimits::default(),
        ),
    };
    let docker_config = docker_config.or_else(super::push::default_docker_config);
    let puller = Puller::new(ca_file.as_deref(), docker_config, None, limits)?;
    let runtime = tokio::runtime::Handle::current();
    let digest = runtime
        .block_on(puller.resolve(&plugin))
        .map_err(|source| PluginCommandError::Resolve {
            text: text.to_owned(),
            source,
        })?;
    println!("reference:  {text}");
    println!("manifest:   {digest}");

    let auth = puller
        .auth(&plugin.reference)
        .map_err(PluginCommandError::Credentials)?;
    let verifier = SignatureVerifier::new(trust, puller.client().clone(), ca_file.as_deref())?;
    match runtime.block_on(verifier.verify(&plugin, digest.as_str(), &auth)) {
        Ok(Some(signer)) => println!("signed by:  {signer}"),
        Ok(None) => {
            let (layers, _) = runtime
                .block_on(verifier.signatures(&plugin, digest.as_str(), &auth))
                .map_err(PluginCommandError::Signatures)?;
            println!(
                "signatures: {} cosign signature(s) found, not checked (name --key, or a --config whose policy.registry.verify covers {text})",
                layers.len()
            );
        }
        Err(error) => {
            println!("signature:  refused: {error}");
            return Err(PluginCommandError::SignatureRefused {
                text: text.to_owned(),
                source: error,
            });
        }
    }

    let pulled = runtime
        .block_on(puller.pull(&plugin, &digest))
        .map_err(|source| PluginCommandError::Pull {
            digest: digest.to_string(),
            source,
        })?;
    let checked = super::check::load_bytes(&pulled.bytes, text)?;
    println!("component:  {}", pulled.layer_digest);
    super::check::describe(&checked, &pulled.bytes);
    Ok(())
}
