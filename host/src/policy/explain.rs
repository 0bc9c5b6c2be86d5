//! Every plugin a decision asked, in order, and what came of it: what `orca plugin eval` shows
//! an author, so a chain's behaviour (who declined, who failed and why, who answered) is read
//! off one run instead of guessed from the final answer.

use serde::Serialize;

use crate::config::FailureKind;

/// One plugin's turn in a hook's chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AskedStep {
    /// `select-instance`, `choose-market` or `build-tags`.
    pub hook: &'static str,
    /// The name the chain gives (`policy.<hook>[i].plugin`).
    pub plugin: String,
    /// The loaded plugin's version and interface, when it is loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<&'static str>,
    pub outcome: StepOutcome,
    /// Why the answer was not used (absent when it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<StepFailureRecord>,
}

/// What the chain did after the plugin's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StepOutcome {
    /// Its answer is the hook's answer.
    Answered,
    /// It declined or failed and `onError` asked the next plugin.
    PassedOn,
    /// It declined or failed and that is the pod's error (`onError: fail` for the kind, or the
    /// last plugin of the chain).
    FailedThePod,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepFailureRecord {
    /// `declined`, `noMatch`, `timedOut`, …: the key `onError` uses.
    pub kind: String,
    pub message: String,
}

impl StepFailureRecord {
    pub fn new(kind: FailureKind, message: &str) -> StepFailureRecord {
        StepFailureRecord {
            kind: kind.as_str().to_owned(),
            message: message.to_owned(),
        }
    }
}
