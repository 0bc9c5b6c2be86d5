//! `orca plugin eval --pod pod.yaml [--plugin FILE.wasm [--settings JSON] | --config FILE]
//! [-o text|json]`: one decision, and how the chains reached it.

use serde::Serialize;

use super::{PluginCommandError, inputs};
use crate::cost::LaunchPrices;
use crate::policy::PlanError;
use crate::policy::decision::DecisionRecord;
use crate::policy::explain::{AskedStep, StepOutcome};
use crate::policy::shadow::{ShadowField, ShadowRecord};
use crate::process::cli::PipelineArgs;
use crate::provider::plan::InstanceCandidate;
use crate::provider::plan::Market;

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
    /// What the shadow's candidate (`--shadow`, or the config's `policy.shadow`) would decide
    /// beside it; also in `decision`, as orca would record it.
    #[serde(skip_serializing_if = "Option::is_none")]
    shadow: Option<&'a ShadowRecord>,
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
    let (pipeline, catalogue) = inputs::pipeline(&args.spec())?;
    let pod = inputs::read_pod(&args.pod)?;
    let (mut outcome, asked) = pipeline.explain(&pod);
    // The candidate's decision beside it, priced as a launch in no zone yet would be.
    let shadow = {
        let live = match &outcome {
            Ok(decision) => Ok(&decision.record),
            Err(error) => Err(error),
        };
        pipeline.shadow_beside(&pod, live)
    };
    let mut failed_shadow = None;
    if let Some(mut shadow) = shadow {
        let prices = LaunchPrices::new(catalogue);
        let price = |(instance_type, market): (&str, Market)| {
            prices
                .at_launch(instance_type, market, None)
                .map(|(price, _)| price)
        };
        match &mut outcome {
            Ok(decision) => {
                let live = (
                    decision.record.instance_type.as_str(),
                    decision.record.market,
                );
                shadow.priced(shadow.launched_instead(live).and_then(price), price(live));
                decision.record.shadow = Some(shadow);
            }
            Err(error) => {
                shadow.priced(shadow.offering().and_then(price), None);
                match error.refused.as_deref_mut() {
                    Some(refused) => refused.shadow = Some(shadow),
                    None => failed_shadow = Some(shadow),
                }
            }
        }
    }
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
        shadow: None,
    };
    let evaluation = Evaluation {
        shadow: evaluation
            .decision
            .and_then(|d| d.shadow.as_ref())
            .or(failed_shadow.as_ref()),
        ..evaluation
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
    if let Some(shadow) = evaluation.shadow {
        out.push_str(&format!("shadow\n  {}\n", shadow.describe()));
        if let Some(decision) = evaluation.decision {
            for line in shadow_differences(decision, shadow) {
                out.push_str(&format!("  {line}\n"));
            }
        }
    }
    out
}

/// Each part of the plan the candidate decided differently, live first: `market: on-demand
/// -> spot`; a tag the candidate sets otherwise, adds or leaves out.
fn shadow_differences(live: &DecisionRecord, shadow: &ShadowRecord) -> Vec<String> {
    let mut lines = Vec::new();
    for field in &shadow.differences {
        match field {
            ShadowField::InstanceType => lines.push(format!(
                "instanceType: {} -> {}",
                live.instance_type,
                shadow.instance_type.as_deref().unwrap_or("?")
            )),
            ShadowField::Candidates => lines.push(format!(
                "candidates: {} -> {}",
                live.candidates.join(", "),
                shadow.candidates.join(", ")
            )),
            ShadowField::Market => lines.push(format!(
                "market: {} -> {}",
                live.market.as_str(),
                shadow.market.map_or("?", |m| m.as_str())
            )),
            ShadowField::MaxPrice => lines.push(format!(
                "maxPrice: {} -> {}",
                price_text(live.max_price),
                price_text(shadow.max_price)
            )),
            ShadowField::FallbackToOnDemand => lines.push(format!(
                "fallbackToOnDemand: {} -> {}",
                live.fallback_to_on_demand, !live.fallback_to_on_demand
            )),
            ShadowField::Tags => {
                let keys: std::collections::BTreeSet<&String> =
                    live.tags.keys().chain(shadow.tags.keys()).collect();
                for key in keys {
                    match (live.tags.get(key), shadow.tags.get(key)) {
                        (Some(a), Some(b)) if a != b => {
                            lines.push(format!("tag {key}: {a:?} -> {b:?}"));
                        }
                        (Some(a), None) => lines.push(format!("tag {key}: {a:?} -> (none)")),
                        (None, Some(b)) => lines.push(format!("tag {key}: (none) -> {b:?}")),
                        _ => {}
                    }
                }
            }
        }
    }
    lines
}

fn price_text(price: Option<f64>) -> String {
    price.map_or_else(|| "none".to_owned(), |p| format!("${p}/h"))
}
