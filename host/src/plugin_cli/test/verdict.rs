//! Whether what the policy did for a case's pod is what the case expects: a pure comparison,
//! and the words `orca plugin test` prints for both sides.

use crate::policy::PlanFailure;
use crate::policy::decision::DecisionRecord;

use super::case::{Expectation, ExpectedDecision, ExpectedFailure};

/// What the pipeline did with the pod.
#[derive(Debug, Clone, Copy)]
pub enum Actual<'a> {
    Decided(&'a DecisionRecord),
    Failed(ActualFailure<'a>),
}

/// How the pod failed.
#[derive(Debug, Clone, Copy)]
pub struct ActualFailure<'a> {
    pub reason: PlanFailure,
    /// The plugin whose failure failed the pod, and its failure kind (`onError`'s word);
    /// `None` when no plugin's turn did (a guardrail, an annotation orca checks itself).
    pub failed_by: Option<(&'a str, &'a str)>,
    pub message: &'a str,
}

/// A case's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// Each part of the expectation that did not hold, as `what: expected X, got Y`.
    Failed(Vec<String>),
}

/// Compares `actual` with `expect`: every part the case gives must hold.
pub fn judge(expect: &Expectation, actual: Actual) -> Verdict {
    let mismatches = match (expect, actual) {
        (Expectation::Decided(expected), Actual::Decided(record)) => decision(expected, record),
        (Expectation::Fails(expected), Actual::Failed(failure)) => failure_of(expected, failure),
        (Expectation::Decided(_), Actual::Failed(failure)) => vec![format!(
            "the pod fails ({}) instead of being decided",
            failure.reason
        )],
        (Expectation::Fails(_), Actual::Decided(record)) => vec![format!(
            "the pod is decided ({}) instead of failing",
            record.instance_type
        )],
    };
    if mismatches.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Failed(mismatches)
    }
}

fn decision(expected: &ExpectedDecision, record: &DecisionRecord) -> Vec<String> {
    let mut mismatches = Vec::new();
    let mut compare = |what: &str, want: Option<&str>, got: &str| {
        if let Some(want) = want
            && want != got
        {
            mismatches.push(format!("{what}: expected {want}, got {got}"));
        }
    };
    compare(
        "instanceType",
        expected.instance_type.as_deref(),
        &record.instance_type,
    );
    compare(
        "selectedBy",
        expected.selected_by.as_deref(),
        &record.select_instance.plugin,
    );
    compare(
        "market",
        expected.market.map(|m| m.as_str()),
        record.market.as_str(),
    );
    for (key, want) in &expected.tags {
        match record.tags.get(key) {
            Some(got) if got == want => {}
            Some(got) => mismatches.push(format!("tags.{key}: expected {want}, got {got}")),
            None => mismatches.push(format!("tags.{key}: expected {want}, got no such tag")),
        }
    }
    mismatches
}

fn failure_of(expected: &ExpectedFailure, actual: ActualFailure) -> Vec<String> {
    let mut mismatches = Vec::new();
    if expected.reason != actual.reason {
        mismatches.push(format!(
            "reason: expected {}, got {}",
            expected.reason, actual.reason
        ));
    }
    let (got_plugin, got_kind) = match actual.failed_by {
        Some((plugin, kind)) => (plugin, kind),
        None => ("no plugin", "none"),
    };
    if let Some(kind) = expected.kind
        && kind.as_str() != got_kind
    {
        mismatches.push(format!("kind: expected {kind}, got {got_kind}"));
    }
    if let Some(plugin) = &expected.plugin
        && plugin != got_plugin
    {
        mismatches.push(format!("plugin: expected {plugin}, got {got_plugin}"));
    }
    if let Some(part) = &expected.message_contains
        && !actual.message.contains(part.as_str())
    {
        mismatches.push(format!("message: expected it to contain {part:?}"));
    }
    mismatches
}

/// `m5.large on-demand by orca-default-selector, 8 tags`; with `all_tags`, each tag instead
/// of their number (for a case that checks tags).
pub fn decided_text(record: &DecisionRecord, all_tags: bool) -> String {
    let tags = if all_tags {
        let tags: Vec<String> = record
            .tags
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("tags {}", tags.join(" "))
    } else {
        format!("{} tags", record.tags.len())
    };
    format!(
        "{} {} by {}, {tags}",
        record.instance_type,
        record.market.as_str(),
        record.select_instance.plugin,
    )
}

/// `PolicyError (noMatch by team-selector-py): the message`.
pub fn failed_text(failure: ActualFailure) -> String {
    match failure.failed_by {
        Some((plugin, kind)) => format!(
            "{} ({kind} by {plugin}): {}",
            failure.reason, failure.message
        ),
        None => format!("{}: {}", failure.reason, failure.message),
    }
}

/// What the case expects, in the words of [`decided_text`] and [`failed_text`].
pub fn expected_text(expect: &Expectation) -> String {
    match expect {
        Expectation::Decided(expected) => {
            let mut parts = Vec::new();
            if let Some(instance_type) = &expected.instance_type {
                parts.push(instance_type.clone());
            }
            if let Some(market) = expected.market {
                parts.push(market.as_str().to_owned());
            }
            if let Some(plugin) = &expected.selected_by {
                parts.push(format!("by {plugin}"));
            }
            if !expected.tags.is_empty() {
                let tags: Vec<String> = expected
                    .tags
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                parts.push(format!("tags including {}", tags.join(" ")));
            }
            format!("decided: {}", parts.join(" "))
        }
        Expectation::Fails(failure) => {
            let mut text = format!("fails with {}", failure.reason);
            match (failure.kind, &failure.plugin) {
                (Some(kind), Some(plugin)) => text.push_str(&format!(" ({kind} by {plugin})")),
                (Some(kind), None) => text.push_str(&format!(" ({kind})")),
                (None, Some(plugin)) => text.push_str(&format!(" (by {plugin})")),
                (None, None) => {}
            }
            if let Some(part) = &failure.message_contains {
                text.push_str(&format!(", message containing {part:?}"));
            }
            text
        }
    }
}

#[cfg(test)]
mod tests;
