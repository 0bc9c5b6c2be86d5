//! `orca plugin check oci://…`: resolves and pulls a reference as a node would, shows its
//! cosign signature status against `--key` or a config's `policy.registry.verify`, then loads
//! it as `check FILE.wasm` does.

use std::path::PathBuf;

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
pub fn run(text: &str, options: &Options) -> Result<(), String> {
    let plugin = PluginReference::parse(text)
        .map_err(|error| format!("{text} is not a plugin reference: {error}"))?;
    let (docker_config, ca_file, trust, limits) = match &options.config {
        Some(path) => {
            let config = Config::load(path).map_err(|error| error.to_string())?;
            let registry = config.policy.registry;
            let trust = TrustPolicy::from_config(&registry).map_err(|error| error.to_string())?;
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
            TrustPolicy::keys(&options.keys).map_err(|error| error.to_string())?,
            PullLimits::default(),
        ),
    };
    let docker_config = docker_config.or_else(super::push::default_docker_config);
    let puller =
        Puller::new(ca_file.as_deref(), docker_config, None, limits).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Handle::current();
    let digest = runtime
        .block_on(puller.resolve(&plugin))
        .map_err(|error| format!("resolving {text}: {error}"))?;
    println!("reference:  {text}");
    println!("manifest:   {digest}");

    let auth = puller
        .auth(&plugin.reference)
        .map_err(|error| error.to_string())?;
    let verifier = SignatureVerifier::new(trust, puller.client().clone(), ca_file.as_deref())
        .map_err(|e| e.to_string())?;
    match runtime.block_on(verifier.verify(&plugin, digest.as_str(), &auth)) {
        Ok(Some(signer)) => println!("signed by:  {signer}"),
        Ok(None) => {
            let (layers, _) = runtime
                .block_on(verifier.signatures(&plugin, digest.as_str(), &auth))
                .map_err(|error| error.to_string())?;
            println!(
                "signatures: {} cosign signature(s) found, not checked (name --key, or a --config whose policy.registry.verify covers {text})",
                layers.len()
            );
        }
        Err(error) => {
            println!("signature:  refused: {error}");
            return Err(format!("a node would refuse {text}: {error}"));
        }
    }

    let pulled = runtime
        .block_on(puller.pull(&plugin, &digest))
        .map_err(|error| format!("pulling {digest}: {error}"))?;
    let (loaded, elapsed) = super::check::load_bytes(&pulled.bytes, text)?;
    println!("component:  {}", pulled.layer_digest);
    super::check::describe(&loaded, &pulled.bytes, elapsed);
    Ok(())
}
