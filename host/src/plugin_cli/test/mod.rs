//! `orca plugin test [--plugin FILE.wasm] [--config FILE] CASES…`: runs each case's pod through
//! the pipeline `eval` builds (the real host, engine and catalogue) and checks the decision
//! against the case's expectation. One line per case, the expected and actual decision of each
//! failing one, a summary; exit status 0 when every case passes, 1 when one fails, 2 when a
//! case (or the plugin, or a config) cannot be run at all.

pub(super) mod case;
mod verdict;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use self::case::{Case, CaseError, Expectation, PodSource};
use self::verdict::{Actual, ActualFailure, Verdict};
use super::PluginCommandError;
use super::inputs::{self, PipelineSpec};
use crate::policy::Pipeline;
use crate::policy::explain::StepOutcome;

/// What `orca plugin test` is given.
pub struct TestOptions<'a> {
    /// Folders of case files (`*.yaml`, `*.yml`, not their subfolders), or case files.
    pub cases: &'a [PathBuf],
    pub plugin: Option<&'a Path>,
    /// The config.yaml of the cases that name none.
    pub config: Option<&'a Path>,
}

/// Runs every case; a case file, pod, config or plugin that cannot be used is
/// [`PluginCommandError::BadTestInput`] (exit status 2), checked for every case before any
/// runs.
pub fn run(options: &TestOptions) -> Result<(), PluginCommandError> {
    let cases = read_cases(options.cases).map_err(bad_input)?;
    let mut pipelines: HashMap<(Option<PathBuf>, String), Pipeline> = HashMap::new();
    let mut prepared = Vec::with_capacity(cases.len());
    for case in &cases {
        let pod = pod_of(case).map_err(bad_input)?;
        let (config, settings) = chain_inputs(case, options).map_err(bad_input)?;
        let key = (config.map(Path::to_owned), settings.clone());
        if !pipelines.contains_key(&key) {
            let spec = PipelineSpec {
                plugin: options.plugin,
                config,
                settings: &settings,
                region: None,
                architecture: None,
                instances: None,
                max_memory: None,
                shadow: None,
            };
            let (pipeline, _) = inputs::pipeline(&spec).map_err(bad_input)?;
            pipelines.insert(key.clone(), pipeline);
        }
        prepared.push((case, pod, key));
    }
    let mut failed = 0;
    for (case, pod, key) in &prepared {
        let verdict = run_case(case, pod, &pipelines[key]);
        if verdict.is_some() {
            failed += 1;
        }
        print!("{}", verdict.unwrap_or_else(|| passed_line(case)));
    }
    let total = prepared.len();
    println!(
        "{total} case{}: {} passed, {failed} failed",
        if total == 1 { "" } else { "s" },
        total - failed
    );
    if failed == 0 {
        Ok(())
    } else {
        Err(PluginCommandError::CasesFailed { failed, total })
    }
}

fn bad_input(error: impl Into<PluginCommandError>) -> PluginCommandError {
    PluginCommandError::BadTestInput(Box::new(error.into()))
}

/// The case files the arguments name, in order: a folder's `*.yaml` and `*.yml` files sorted
/// by name, a file as given.
fn read_cases(arguments: &[PathBuf]) -> Result<Vec<Case>, PluginCommandError> {
    let mut cases = Vec::new();
    for argument in arguments {
        if !argument.is_dir() {
            cases.push(Case::read(argument)?);
            continue;
        }
        let entries = std::fs::read_dir(argument).map_err(|source| PluginCommandError::Read {
            path: argument.clone(),
            source,
        })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| {
                path.is_file()
                    && matches!(
                        path.extension().and_then(|e| e.to_str()),
                        Some("yaml" | "yml")
                    )
            })
            .collect();
        if files.is_empty() {
            return Err(PluginCommandError::NoCases(argument.clone()));
        }
        files.sort();
        for file in files {
            cases.push(Case::read(&file)?);
        }
    }
    Ok(cases)
}

fn pod_of(case: &Case) -> Result<Pod, PluginCommandError> {
    match &case.pod {
        PodSource::Inline(pod) => inputs::as_admitted((**pod).clone(), &case.path),
        PodSource::File(path) => inputs::read_pod(path),
    }
}

/// The config (the case's, else the command's) and settings the case is decided with.
fn chain_inputs<'a>(
    case: &'a Case,
    options: &TestOptions<'a>,
) -> Result<(Option<&'a Path>, String), CaseError> {
    let config = case.config.as_deref().or(options.config);
    let invalid = |problem| CaseError::Invalid {
        path: case.path.clone(),
        field: "settings",
        problem,
    };
    match (&case.settings, config, options.plugin) {
        (Some(_), Some(_), _) => Err(invalid(
            "a case decided by a config takes its settings from the config's chains",
        )),
        (Some(_), None, None) => Err(invalid(
            "settings are the plugin's: run the case with --plugin FILE.wasm",
        )),
        (Some(settings), None, Some(_)) => Ok((None, settings.clone())),
        (None, _, _) => Ok((config, "{}".to_owned())),
    }
}

/// Runs one case: `None` when it passes, else the lines that say why not.
fn run_case(case: &Case, pod: &Pod, pipeline: &Pipeline) -> Option<String> {
    let (outcome, asked) = pipeline.explain(pod);
    let actual = match &outcome {
        Ok(decision) => Actual::Decided(&decision.record),
        Err(error) => Actual::Failed(ActualFailure {
            reason: error.reason,
            failed_by: asked
                .iter()
                .filter(|step| step.outcome == StepOutcome::FailedThePod)
                .find_map(|step| {
                    let failure = step.failure.as_ref()?;
                    Some((step.plugin.as_str(), failure.kind.as_str()))
                }),
            message: &error.message,
        }),
    };
    let Verdict::Failed(mismatches) = verdict::judge(&case.expect, actual) else {
        return None;
    };
    let mut text = format!("FAIL  {}", heading(case));
    text.push_str(&format!(
        "      expected: {}\n",
        verdict::expected_text(&case.expect)
    ));
    let actual_text = match actual {
        Actual::Decided(record) => {
            let all_tags = matches!(&case.expect, Expectation::Decided(e) if !e.tags.is_empty());
            format!("decided: {}", verdict::decided_text(record, all_tags))
        }
        Actual::Failed(failure) => format!("fails with {}", verdict::failed_text(failure)),
    };
    text.push_str(&format!("      actual:   {actual_text}\n"));
    for mismatch in mismatches {
        text.push_str(&format!("      - {mismatch}\n"));
    }
    Some(text)
}

fn passed_line(case: &Case) -> String {
    format!("ok    {}", heading(case))
}

/// `PATH` or `PATH: description`, and a newline.
fn heading(case: &Case) -> String {
    match &case.description {
        Some(description) => format!("{}: {}\n", case.path.display(), description.trim()),
        None => format!("{}\n", case.path.display()),
    }
}
