//! `orca-image`: builds orca's container image from deploy/Dockerfile's final stage without a
//! container engine, and pushes it (see the crate's docs).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use orca_image::{FinalStage, Image, Registry, Sources, push};

/// Builds the image deploy/Dockerfile's final stage describes, without a container engine.
#[derive(Debug, Parser)]
#[command(name = "orca-image", version, about)]
struct Cli {
    /// The Dockerfile whose final stage is built.
    #[arg(long, default_value = "deploy/Dockerfile")]
    dockerfile: PathBuf,
    /// The build context: where COPY without --from reads.
    #[arg(long, default_value = ".")]
    context: PathBuf,
    /// A build stage's output, NAME=DIR: DIR stands for that stage's `/` (the build stage's
    /// /out/orca is DIR/out/orca). Repeatable.
    #[arg(long = "stage", value_parser = parse_stage)]
    stages: Vec<(String, PathBuf)>,
    /// Pushes the image there: REGISTRY/REPOSITORY:TAG.
    #[arg(long)]
    push: Option<String>,
    /// Registry credentials, Docker's config.json format (its credential helpers included);
    /// default: Docker's own, `$DOCKER_CONFIG/config.json` or `~/.docker/config.json`.
    #[arg(long, requires = "push")]
    docker_config: Option<PathBuf>,
    /// PEM certificates trusted besides the system's, for a registry with a private CA.
    #[arg(long, requires = "push")]
    ca_file: Option<PathBuf>,
}

fn parse_stage(text: &str) -> Result<(String, PathBuf), String> {
    text.split_once('=')
        .map(|(name, dir)| (name.to_owned(), PathBuf::from(dir)))
        .ok_or_else(|| format!("{text}: expected NAME=DIR"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let stage = FinalStage::read(&cli.dockerfile)?;
    let sources = Sources {
        context: cli.context,
        stages: cli.stages.into_iter().collect::<BTreeMap<_, _>>(),
    };
    let image = Image::assemble(&stage, &sources)?;
    for layer in &image.layers {
        println!(
            "layer {} {:>10} bytes compressed, {:>10} unpacked: {}",
            layer.digest(),
            layer.blob.len(),
            layer.unpacked_bytes,
            layer.created_by
        );
    }
    println!(
        "image: {:.1} MiB compressed (what a pull downloads), {:.1} MiB unpacked",
        mib(image.compressed_bytes()),
        mib(image.unpacked_bytes())
    );
    if let Some(reference) = cli.push {
        let registry = Registry {
            ca_file: cli.ca_file,
            docker_config: cli.docker_config.or_else(docker_own_config),
        };
        let pinned = push(&image, &reference, &registry)
            .await
            .with_context(|| format!("pushing the image to {reference}"))?;
        println!("{pinned}");
    }
    Ok(())
}

/// Docker's own config, as `docker push` reads it: `$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`, when it exists (its `credHelpers` and `credsStore` included, which
/// `docker login` to ECR leaves).
fn docker_own_config() -> Option<PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")))?;
    Some(dir.join("config.json")).filter(|path| path.is_file())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
