//! `orca plugin eval --pod pod.yaml [--plugin FILE.wasm [--settings JSON] | --config FILE]
//! [-o text|json]`: one decision, and how the chains reached it.

use serde::Serialize;

use super::{PluginCommandError, inputs};
use crate::policy::PlanError;
use crate::policy::decision::DecisionRecord;
use crate::policy::explain::{AskedStep, StepOutcome};
use crate::process::cli::PipelineArgs;
use crate::provider::plan::InstanceCandidate;

/// What `-o json` prints: the same whether the pod would launch or fail.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Evaluation<'a> {
    /// Whether orca would launch the pod.
    decided: bool,
    /// Every plugin asked, in order.
    asked: &'a [AskedStep],
    /// The instance types, best first, each with the selector's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    candidates: Option<Vec<CandidateView<'a>>>,
    /// What orca would write to the pod's `orca.research/decision` annotation (for a plan the
    /// guardrails refuse too: what each plugin chose, and what refused it).
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<&'a DecisionRecord>,
    /// Why the pod would fail: its status reason and message.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorView<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CandidateView<'a> {
    instance_type: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct ErrorView<'a> {
    reason: &'a str,
    message: &'a str,
}

pub fn run(args: &PipelineArgs, output: &str) -> Result<(), PluginCommandError> {
    let (pipeline, _) = inputs::pipeline(&args.spec())?;
    let pod = inputs::read_pod(&args.pod)?;
    let (outcome, asked) = pipeline.explain(&pod);
    let evaluation = Evaluation {
        decided: outcome.is_ok(),
        asked: &asked,
        candidates: outcome.as_ref().ok().map(|d| {
            d.plan
                .candidates
                .iter()
                .map(|c: &InstanceCandidate| CandidateView {
                    instance_type: &c.instance_type,
                    reason: &c.reason,
                })
                .collect()
        }),
        decision: match &outcome {
            Ok(decision) => Some(&decision.record),
            Err(error) => error.refused.as_deref(),
        },
        error: outcome.as_ref().err().map(|e: &PlanError| ErrorView {
            reason: e.reason.as_str(),
            message: &e.message,
        }),
    };
    if output == "json" {
        let json = serde_json::to_string_pretty(&evaluation).map_err(PluginCommandError::Print)?;
        println!("{json}");
    } else {
        print!("{}", text(&evaluation));
    }
    match outcome {
        // Launched, but not by one policy: a plugin broke on one hook and answered another.
        Ok(decision) if !decision.record.mixed_policies.is_empty() => {
            Err(PluginCommandError::MixedPolicies(
                decision
                    .record
                    .mixed_policies
                    .iter()
                    .map(|mixed| mixed.describe())
                    .collect::<Vec<_>>()
                    .join("; "),
            ))
        }
        Ok(_) => Ok(()),
        Err(error) => Err(PluginCommandError::PodWouldFail(error)),
    }
}

/// The evaluation for people: the steps per hook, then the answer.
fn text(evaluation: &Evaluation) -> String {
    let mut out = String::new();
    let mut hook = "";
    for step in evaluation.asked {
        if step.hook != hook {
            hook = step.hook;
            out.push_str(&format!("{hook}\n"));
        }
        let who = match (&step.version, step.interface) {
            (Some(version), Some(interface)) => {
                format!("{} {version} (orca:policy@{interface})", step.plugin)
            }
            _ => step.plugin.clone(),
        };
        let what = match (&step.failure, step.outcome) {
            (None, _) => "answered".to_owned(),
            (Some(failure), StepOutcome::PassedOn) => {
                format!("{}, next plugin asked: {}", failure.kind, failure.message)
            }
            (Some(failure), _) => {
                format!("{}, the pod fails: {}", failure.kind, failure.message)
            }
        };
        out.push_str(&format!("  {who}: {what}\n"));
    }
    if let Some(candidates) = &evaluation.candidates {
        out.push_str("candidates, best first\n");
        let width = candidates
            .iter()
            .map(|c| c.instance_type.len())
            .max()
            .unwrap_or(0);
        for candidate in candidates {
            out.push_str(&format!(
                "  {:<width$}  {}\n",
                candidate.instance_type, candidate.reason
            ));
        }
    }
    if let Some(decision) = evaluation.decision {
        out.push_str(&format!("decision\n  {}\n", decision.summary()));
        out.push_str("tags\n");
        for (key, value) in &decision.tags {
            out.push_str(&format!("  {key}={value}\n"));
        }
    }
    out
}
