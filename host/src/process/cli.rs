//! Command-line interface.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

    /// Without a command, orca runs the virtual node.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
#[expect(
    clippy::large_enum_variant,
    reason = "parsed once per process: boxing the plugin commands would save nothing"
)]
pub enum Command {
    /// Tools for plugin authors: check, evaluate and benchmark a plugin without a cluster.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Tools for operators: the configuration file's schema.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Prints the JSON Schema of config.yaml (what `deploy/config.schema.json` holds), for
    /// editors (`# yaml-language-server: $schema=…`) and for checking configs in CI.
    Schema,
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Loads a plugin as orca would and reports its world, interface version, name, version,
    /// sha256 and hooks. Exit status 1 if orca would refuse it. Given an `oci://` reference,
    /// pulls it as orca would and shows its cosign signatures: with `--key` (or `--config`),
    /// who signed it, and exit status 1 if `policy.registry.verify` would refuse it.
    Check {
        /// The plugin component (`.wasm`), or `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:…`).
        file: String,
        /// Cosign public keys a signature must be by (repeatable); for an `oci://` reference.
        #[arg(long = "key", conflicts_with = "config")]
        keys: Vec<PathBuf>,
        /// An orca config.yaml whose `policy.registry` (verify, dockerConfig, caFile) applies;
        /// for an `oci://` reference.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Registry credentials, Docker's config.json format (default as for `push`).
        #[arg(long)]
        docker_config: Option<PathBuf>,
        /// PEM certificates trusted besides the system's, for a registry with a private CA.
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
    /// Runs the whole pipeline for a pod and shows every plugin asked (who answered, who
    /// declined or failed and why), every candidate with its reason, and the decision as orca
    /// would record it. With `--plugin`, that plugin is asked first for the hooks it implements
    /// (the embedded default answers what it declines, and the other hooks); with `--config`,
    /// the chains of that config.yaml decide.
    /// Exit status 1 if the pod would fail, or would launch on a plan mixed from two policies
    /// (a plugin broke on one hook, fell back, and answered another).
    Eval {
        #[command(flatten)]
        pipeline: PipelineArgs,
        /// `text` for people, `json` for scripts (the same fields, for failures too).
        #[arg(short = 'o', long, default_value = "text", value_parser = ["text", "json"])]
        output: String,
    },
    /// Runs a candidate plugin over the pods orca runs on a live cluster, read-only: each
    /// pod's recorded decision (`orca.research/decision`) beside what the candidate would
    /// decide for it now, as `policy.shadow` asks it (the config's chains, nodes and
    /// guardrails), each priced from the catalogue in the pod's zone. Prints the pods it would
    /// change, with the difference an hour, and a summary. Lists pods on the config's nodes;
    /// writes nothing. Exit status 0 whatever the candidate decides.
    Replay {
        /// The orca config.yaml the nodes run.
        #[arg(long)]
        config: PathBuf,
        /// The candidate: a component (`.wasm`), or the name of a plugin the config loads
        /// (default: the config's `policy.shadow`).
        #[arg(long)]
        shadow: Option<String>,
        /// The live plugin the candidate takes the place of (`policy.shadow.replaces`).
        #[arg(long, requires = "shadow")]
        shadow_replaces: Option<String>,
        /// The candidate's settings as JSON.
        #[arg(long, default_value = "{}", requires = "shadow")]
        shadow_settings: String,
        /// The cluster's kubeconfig (default: in-cluster, else ~/.kube/config).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Only this namespace's pods.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// `text` for people, `json` for scripts.
        #[arg(short = 'o', long, default_value = "text", value_parser = ["text", "json"])]
        output: String,
    },
    /// Runs the pipeline repeatedly and prints latency percentiles, beside the default policy
    /// run natively (no sandbox) for comparison.
    Bench {
        #[command(flatten)]
        pipeline: PipelineArgs,
        /// Timed decisions (after 10% as many warm-up runs).
        #[arg(long, default_value_t = 5000)]
        iterations: usize,
    },
    /// Runs test cases: each case file (YAML) gives a pod and the decision expected for it
    /// (instance type, market, tags, or how the pod fails), optionally with the plugin's
    /// settings or a config.yaml; each runs through the pipeline `eval` runs. Prints one line
    /// per case, the expected and actual decision of each that fails, and a summary.
    /// Exit status 0 if every case passes, 1 if one fails, 2 if a case cannot be run (a
    /// malformed case file, a missing pod, a plugin orca would refuse).
    Test {
        /// Folders of case files (their `*.yaml` and `*.yml` files, not subfolders), or case
        /// files.
        #[arg(required = true)]
        cases: Vec<PathBuf>,
        /// The plugin under test: asked first for the hooks it implements, the embedded
        /// defaults after it; a case with a config runs that config's chains, which can name
        /// it. Without it, the embedded default plugins (or the config's) decide.
        #[arg(long)]
        plugin: Option<PathBuf>,
        /// The config.yaml of every case that names none.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Publishes a plugin component to an OCI registry as a WebAssembly artifact (one
    /// `application/wasm` layer), after checking that orca loads it, and prints the reference
    /// pinned to the manifest's digest. `policy.plugins` pulls it from there.
    Push {
        /// The plugin component (`.wasm`).
        file: PathBuf,
        /// Where to: `oci://REGISTRY/REPOSITORY:TAG`.
        reference: String,
        /// Registry credentials, Docker's config.json format (default: `$DOCKER_CONFIG/config.json`,
        /// else `~/.docker/config.json`, when present).
        #[arg(long)]
        docker_config: Option<PathBuf>,
        /// PEM certificates trusted besides the system's, for a registry with a private CA.
        #[arg(long)]
        ca_file: Option<PathBuf>,
        /// Signs the pushed manifest with this cosign private key (`cosign generate-key-pair`;
        /// its password from `COSIGN_PASSWORD`), as `cosign sign --key` would, so
        /// `policy.registry.verify` accepts it.
        #[arg(long)]
        sign_key: Option<PathBuf>,
    },
}

/// What `eval` and `bench` run.
#[derive(Debug, Args)]
pub struct PipelineArgs {
    /// A plugin component; without it, the embedded default plugins decide.
    #[arg(long, conflicts_with = "config")]
    pub plugin: Option<PathBuf>,
    /// An orca config.yaml: its hook chains, settings, onError, plugins directory, limits,
    /// node (name, cluster, architecture) and region, exactly as orca would load them.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The pod, as YAML or JSON (a manifest is enough; a missing uid is filled in).
    #[arg(long)]
    pub pod: PathBuf,
    /// The plugin's settings as JSON.
    #[arg(long, default_value = "{}", conflicts_with = "config")]
    pub settings: String,
    /// The region whose catalogue prices apply (default: the config's `provider.region`, or
    /// us-east-1).
    #[arg(long)]
    pub region: Option<String>,
    /// The Node's architecture, for a pod that selects none (default: the config's
    /// `node.architecture`, or amd64).
    #[arg(long, value_parser = ["amd64", "arm64"])]
    pub architecture: Option<String>,
    /// `policy.limits.instances` for this run: `reused` keeps an instance warm between
    /// decisions, as orca does for a plugin configured so (an interpreter's plugin).
    #[arg(long, value_parser = ["fresh", "reused"], conflicts_with = "config")]
    pub instances: Option<String>,
    /// `policy.limits.maxMemory` for this run (a quantity, such as 128Mi).
    #[arg(long, conflicts_with = "config")]
    pub max_memory: Option<String>,
    /// A candidate plugin asked beside the chains as `policy.shadow` asks it, never acted on:
    /// a component (`.wasm`), or the name of a plugin the config loads. `eval` shows its
    /// decision beside the live one; `bench` times decisions with it and without. Overrides
    /// the config's `policy.shadow`.
    #[arg(long)]
    pub shadow: Option<String>,
    /// The live plugin the candidate takes the place of (`policy.shadow.replaces`); without
    /// it, the candidate is asked first for the hooks it implements.
    #[arg(long, requires = "shadow")]
    pub shadow_replaces: Option<String>,
    /// The candidate's settings as JSON.
    #[arg(long, default_value = "{}", requires = "shadow")]
    pub shadow_settings: String,
}

/// How log lines are written.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    ValueEnum,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines, for terminals.
    Text,
}
