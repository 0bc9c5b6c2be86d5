//! Command-line interface.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// A virtual Kubernetes node that runs each pod scheduled to it as an EC2 instance.
#[derive(Debug, Parser)]
#[command(name = "orca", version, about)]
pub struct Cli {
    /// Path of the orca configuration file.
    #[arg(long, env = "ORCA_CONFIG", default_value = "config.yaml")]
    pub config: PathBuf,

    /// Kubeconfig to use when not running in a cluster (default: ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Log level or tracing filter (`info`, `debug`, `orca=debug,kube=info`); overrides config.
    #[arg(long)]
    pub log_level: Option<String>,

    /// Log format; overrides config.
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines, for terminals.
    Text,
}
