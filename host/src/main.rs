use anyhow::Context;
use clap::Parser;
use orca::cli::{Cli, LogFormat};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    orca::tls::install_crypto_provider();
    orca::logging::init(
        cli.log_level.as_deref().unwrap_or("info"),
        cli.log_format.unwrap_or(LogFormat::Text),
    )?;
    let (client, source) = orca::kube_connection::connect(cli.kubeconfig.as_deref()).await?;
    let version = client
        .apiserver_version()
        .await
        .context("asking the apiserver for its version")?;
    tracing::info!(?source, server_version = %version.git_version, "connected to Kubernetes");
    Ok(())
}
