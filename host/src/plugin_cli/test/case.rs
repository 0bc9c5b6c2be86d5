//! One `orca plugin test` case file: a pod, what the policy should decide for it (or how it
//! should fail), and optionally the settings or config it is decided with.
//!
//! ```yaml
//! description: an ml pod asking for 4 GPUs gets a g6 first   # optional
//! podFile: ../pod-ml-4gpu.yaml      # or `pod:` with the manifest inline
//! settings: {teams: {}}             # optional: the plugin's settings (`--plugin` only)
//! config: config.yaml               # optional: the chains of this config.yaml decide
//! expect:                           # any of these; each one given must match
//!   instanceType: g6.12xlarge
//!   selectedBy: team-selector-py    # the plugin whose answer chose the type
//!   market: spot
//!   tags: {team: ml}                # these tags at least, with these values
//! ```
//!
//! or, for a pod that must fail:
//!
//! ```yaml
//! expect:
//!   failure:
//!     reason: PolicyError           # InvalidAnnotation, GuardrailViolation or PolicyError
//!     kind: noMatch                 # optional: how the plugin that failed the pod failed
//!     plugin: team-selector-py      # optional: which plugin failed it
//!     messageContains: at most 8    # optional
//! ```
//!
//! Paths (`podFile`, `config`) are relative to the case file. Unknown fields are errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;

use crate::config::FailureKind;
use crate::policy::PlanFailure;
use crate::provider::plan::Market;

/// A case, read and checked: everything needed to run it.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case file, as found (its directory argument joined with its name).
    pub path: PathBuf,
    pub description: Option<String>,
    pub pod: PodSource,
    /// The plugin's settings as JSON, when the case gives them.
    pub settings: Option<String>,
    /// The config.yaml whose chains decide, resolved against the case file's folder.
    pub config: Option<PathBuf>,
    pub expect: Expectation,
}

/// Where the case's pod comes from.
#[derive(Debug, Clone)]
pub enum PodSource {
    Inline(Box<Pod>),
    /// Resolved against the case file's folder.
    File(PathBuf),
}

/// What the case expects of the decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Expectation {
    Decided(ExpectedDecision),
    Fails(ExpectedFailure),
}

/// The parts of a decision a case checks; `None` (or no tags) checks nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpectedDecision {
    pub instance_type: Option<String>,
    pub selected_by: Option<String>,
    pub market: Option<Market>,
    pub tags: BTreeMap<String, String>,
}

/// How the pod must fail.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExpectedFailure {
    /// The pod status reason.
    pub reason: PlanFailure,
    /// The failure kind of the plugin that failed the pod (`onError`'s words).
    #[serde(default)]
    pub kind: Option<FailureKind>,
    /// The plugin that failed the pod, as the chain names it.
    #[serde(default)]
    pub plugin: Option<String>,
    #[serde(default)]
    pub message_contains: Option<String>,
}

/// Why a case file cannot be run: each names the file, and the field when there is one.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("reading {}: {source}", path.display())]
    ReadFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a test case: {source}", path.display())]
    Malformed {
        path: PathBuf,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("{}: {field}: {problem}", path.display())]
    Invalid {
        path: PathBuf,
        field: &'static str,
        problem: &'static str,
    },
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CaseFile {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    pod: Option<Box<Pod>>,
    #[serde(default)]
    pod_file: Option<PathBuf>,
    #[serde(default)]
    settings: Option<serde_json::Value>,
    #[serde(default)]
    config: Option<PathBuf>,
    expect: ExpectFile,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpectFile {
    #[serde(default)]
    instance_type: Option<String>,
    #[serde(default)]
    selected_by: Option<String>,
    #[serde(default)]
    market: Option<Market>,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    #[serde(default)]
    failure: Option<ExpectedFailure>,
}

impl Case {
    /// Reads and checks the case file at `path`.
    ///
    /// # Errors
    /// [`CaseError`] naming the file, and the field that is wrong.
    pub fn read(path: &Path) -> Result<Case, CaseError> {
        let text = std::fs::read_to_string(path).map_err(|source| CaseError::ReadFailed {
            path: path.to_owned(),
            source,
        })?;
        Case::parse(path, &text)
    }

    /// The case in `text`, read from `path`.
    ///
    /// # Errors
    /// As [`Case::read`].
    pub fn parse(path: &Path, text: &str) -> Result<Case, CaseError> {
        let file: CaseFile =
            serde_saphyr::from_str(text).map_err(|source| CaseError::Malformed {
                path: path.to_owned(),
                source: Box::new(source),
            })?;
        let invalid = |field, problem| CaseError::Invalid {
            path: path.to_owned(),
            field,
            problem,
        };
        let folder = path.parent().unwrap_or(Path::new(""));
        let pod = match (file.pod, file.pod_file) {
            (Some(pod), None) => PodSource::Inline(pod),
            (None, Some(pod_file)) => PodSource::File(folder.join(pod_file)),
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "pod",
                    "give the pod inline or as podFile, not both",
                ));
            }
            (None, None) => {
                return Err(invalid(
                    "pod",
                    "missing: give the pod inline (pod:) or as a file (podFile:)",
                ));
            }
        };
        if file.settings.is_some() && file.config.is_some() {
            return Err(invalid(
                "settings",
                "a case with a config takes its settings from the config's chains",
            ));
        }
        let settings = match file.settings {
            Some(value @ serde_json::Value::Object(_)) => Some(value.to_string()),
            Some(_) => {
                return Err(invalid(
                    "settings",
                    "must be a mapping (the plugin's settings object)",
                ));
            }
            None => None,
        };
        Ok(Case {
            path: path.to_owned(),
            description: file.description,
            pod,
            settings,
            config: file.config.map(|config| folder.join(config)),
            expect: expectation(file.expect).map_err(|problem| invalid("expect", problem))?,
        })
    }
}

fn expectation(expect: ExpectFile) -> Result<Expectation, &'static str> {
    let decision = ExpectedDecision {
        instance_type: expect.instance_type,
        selected_by: expect.selected_by,
        market: expect.market,
        tags: expect.tags.unwrap_or_default(),
    };
    let checks_decision = decision != ExpectedDecision::default();
    match expect.failure {
        Some(_) if checks_decision => Err(
            "failure cannot be combined with instanceType, selectedBy, market or tags (a pod \
             that fails has no decision)",
        ),
        Some(failure) => Ok(Expectation::Fails(failure)),
        None if checks_decision => Ok(Expectation::Decided(decision)),
        None => {
            Err("names nothing to check: give instanceType, selectedBy, market, tags, or failure")
        }
    }
}

#[cfg(test)]
mod tests;
