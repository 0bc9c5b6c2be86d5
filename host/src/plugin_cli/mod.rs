//! `orca plugin …`: what a plugin author runs before shipping a plugin. Every command uses the
//! same engine, limits, catalogue and pipeline as the node, so what passes here loads there.
// A command fails once and `main` prints why: inside the commands the error's size costs
// nothing; `run` hands it out boxed.
#![allow(clippy::result_large_err)]

mod bench;
mod check;
mod check_reference;
mod error;
mod eval;
mod inputs;
mod push;
mod replay;
mod test;

use std::path::Path;

pub use self::error::PluginCommandError;
use crate::process::cli::PluginCommand;

/// Runs a plugin command; the error is printed by `main`.
///
/// # Errors
/// What failed, naming the argument, file or reference.
pub fn run(command: PluginCommand) -> Result<(), Box<PluginCommandError>> {
    dispatch(command).map_err(Box::new)
}

fn dispatch(command: PluginCommand) -> Result<(), PluginCommandError> {
    match command {
        PluginCommand::Check {
            file,
            keys,
            config,
            docker_config,
            ca_file,
        } => match file.strip_prefix("oci://") {
            Some(_) => check_reference::run(
                &file,
                &check_reference::Options {
                    keys,
                    config,
                    docker_config,
                    ca_file,
                },
            ),
            None => check::run(Path::new(&file)),
        },
        PluginCommand::Eval { pipeline, output } => eval::run(&pipeline, &output),
        PluginCommand::Replay {
            config,
            shadow,
            shadow_replaces,
            shadow_settings,
            kubeconfig,
            namespace,
            output,
        } => replay::run(&replay::ReplayOptions {
            config: &config,
            shadow: shadow.as_deref().map(|plugin| inputs::ShadowArgs {
                plugin,
                replaces: shadow_replaces.as_deref(),
                settings: &shadow_settings,
            }),
            kubeconfig: kubeconfig.as_deref(),
            namespace: namespace.as_deref(),
            output: &output,
        }),
        PluginCommand::Bench {
            pipeline,
            iterations,
        } => bench::run(&pipeline, iterations),
        PluginCommand::Test {
            cases,
            plugin,
            config,
        } => test::run(&test::TestOptions {
            cases: &cases,
            plugin: plugin.as_deref(),
            config: config.as_deref(),
        }),
        PluginCommand::Push {
            file,
            reference,
            docker_config,
            ca_file,
            sign_key,
        } => push::run(
            &file,
            &reference,
            docker_config,
            ca_file.as_deref(),
            sign_key.as_deref(),
        ),
    }
}
