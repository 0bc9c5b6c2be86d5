//! Why an `orca plugin …` command failed: what `main` prints after `orca: `. Each names the
//! argument, file or reference it is about.

use std::path::PathBuf;

use super::test::case::CaseError;
use crate::config::ConfigError;
use crate::policy::PlanError;
use crate::policy::catalogue::CatalogueError;
use crate::policy::guardrails::GuardrailError;
use crate::policy::oci::{
    ClientError, PullError, PushError, ReferenceError, SignError, SignatureError,
};
use crate::policy::registry::LoadFileError;
use crate::policy::setup::PolicySetupError;
use crate::policy::wasm::{EngineError, LoadError};
use crate::support::errors::error_chain;

#[derive(Debug, thiserror::Error)]
pub enum PluginCommandError {
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a Pod manifest: {source}", path.display())]
    NotAPod {
        path: PathBuf,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("{}: the pod has no metadata.name", path.display())]
    UnnamedPod { path: PathBuf },
    #[error("--settings is not JSON: {0}")]
    SettingsNotJson(#[source] serde_json::Error),
    #[error("--shadow-settings is not JSON: {0}")]
    ShadowSettingsNotJson(#[source] serde_json::Error),
    #[error(
        "--shadow {0}: no plugin of that name is loaded (give a component file, FILE.wasm, or \
         the name of a plugin the config's pluginsDir or plugins load)"
    )]
    ShadowNotLoaded(String),
    #[error("--shadow-replaces {0}: no chain of the config names that plugin")]
    ShadowReplacesNothing(String),
    #[error("no candidate to replay: give --shadow PLUGIN, or set the config's policy.shadow")]
    NoCandidate,
    #[error("connecting to the cluster: {}", error_chain(.0))]
    Cluster(#[source] crate::cluster::connection::ConnectionError),
    #[error("listing the pods of node {node}: {source}")]
    ListPods {
        node: String,
        #[source]
        source: kube::Error,
    },
    /// `--max-memory` is checked as `policy.limits.maxMemory`; the message names the flag.
    #[error("--max-memory: {}", .0.to_string().replace("policy.limits.maxMemory", "the value"))]
    MaxMemory(#[source] ConfigError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{}", error_chain(.0))]
    Policy(#[source] PolicySetupError),
    #[error("policy.guardrails: {0}")]
    Guardrails(#[source] GuardrailError),
    #[error(transparent)]
    PluginFile(#[from] LoadFileError),
    #[error("the plugin engine cannot start: {0}")]
    Engine(#[source] EngineError),
    #[error("the bundled instance catalogue is unreadable: {0}")]
    Catalogue(#[source] CatalogueError),
    #[error("{label}: orca would refuse this plugin: {source}")]
    Refused {
        label: String,
        #[source]
        source: LoadError,
    },
    #[error("the pod would fail with {0}")]
    PodWouldFail(#[source] PlanError),
    #[error(
        "the pod would launch on a plan mixed from two policies ({0}): a plugin broke on one \
         hook and onError: fallback let another plugin decide it"
    )]
    MixedPolicies(String),
    #[error("printing the evaluation: {0}")]
    Print(#[source] serde_json::Error),
    #[error("{text} is not a plugin reference: {source}")]
    NotAReference {
        text: String,
        #[source]
        source: ReferenceError,
    },
    #[error("{0} names a digest; push to a tag (the digest is printed after the push)")]
    PushToDigest(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    SigningKey(SignError),
    #[error(transparent)]
    Credentials(PullError),
    #[error("resolving {text}: {source}")]
    Resolve {
        text: String,
        #[source]
        source: PullError,
    },
    #[error("pulling {digest}: {source}")]
    Pull {
        digest: String,
        #[source]
        source: PullError,
    },
    #[error(transparent)]
    Signatures(SignatureError),
    #[error("a node would refuse {text}: {source}")]
    SignatureRefused {
        text: String,
        #[source]
        source: SignatureError,
    },
    #[error("pushing to {reference}: {source}")]
    Push {
        reference: String,
        #[source]
        source: PushError,
    },
    #[error("{pinned} is pushed but not signed: {source}")]
    NotSigned {
        pinned: String,
        #[source]
        source: SignError,
    },
    #[error(transparent)]
    Case(#[from] CaseError),
    #[error("{}: no case files (*.yaml, *.yml) in this folder", .0.display())]
    NoCases(PathBuf),
    #[error("{failed} of {total} test cases failed")]
    CasesFailed { failed: usize, total: usize },
    /// `orca plugin test` could not run its cases: a case file, pod, config or plugin is
    /// wrong. Exit status 2, apart from failed cases' 1.
    #[error(transparent)]
    BadTestInput(Box<PluginCommandError>),
}

impl PluginCommandError {
    /// The command's exit status: 2 for input `orca plugin test` cannot run, else 1 (a
    /// refused plugin, a pod that would fail, a failed case…).
    pub fn exit_status(&self) -> u8 {
        match self {
            PluginCommandError::BadTestInput(_) => 2,
            _ => 1,
        }
    }
}
