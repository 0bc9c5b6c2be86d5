//! What the candidate would have done, as the live decision's record holds it
//! (`DecisionRecord::shadow`), and its words for the summary.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::guardrails::Price;
use crate::provider::plan::Market;

/// How the candidate's decision compares with the live one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ShadowOutcome {
    /// Both decided the same plan.
    Agreed,
    /// Both decided, differently ([`ShadowRecord::differences`]).
    Differed,
    /// The live chains decided; the candidate's would have failed the pod.
    ShadowFailed,
    /// The live chains failed the pod; the candidate's would have decided.
    LiveFailed,
    /// Both failed the pod.
    BothFailed,
    /// The candidate had not decided `budget` after the live decision: the launch went on.
    TimedOut,
    /// No plugin of the candidate's name is loaded: nothing was asked.
    NotLoaded,
}

impl ShadowOutcome {
    pub const ALL: [ShadowOutcome; 7] = [
        ShadowOutcome::Agreed,
        ShadowOutcome::Differed,
        ShadowOutcome::ShadowFailed,
        ShadowOutcome::LiveFailed,
        ShadowOutcome::BothFailed,
        ShadowOutcome::TimedOut,
        ShadowOutcome::NotLoaded,
    ];

    /// As records and metrics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ShadowOutcome::Agreed => "agreed",
            ShadowOutcome::Differed => "differed",
            ShadowOutcome::ShadowFailed => "shadowFailed",
            ShadowOutcome::LiveFailed => "liveFailed",
            ShadowOutcome::BothFailed => "bothFailed",
            ShadowOutcome::TimedOut => "timedOut",
            ShadowOutcome::NotLoaded => "notLoaded",
        }
    }
}

/// A part of the plan the candidate decided differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ShadowField {
    /// The first candidate: what would have launched.
    InstanceType,
    /// The rest of the candidates, or their order.
    Candidates,
    Market,
    MaxPrice,
    FallbackToOnDemand,
    Tags,
}

impl ShadowField {
    pub const ALL: [ShadowField; 6] = [
        ShadowField::InstanceType,
        ShadowField::Candidates,
        ShadowField::Market,
        ShadowField::MaxPrice,
        ShadowField::FallbackToOnDemand,
        ShadowField::Tags,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ShadowField::InstanceType => "instanceType",
            ShadowField::Candidates => "candidates",
            ShadowField::Market => "market",
            ShadowField::MaxPrice => "maxPrice",
            ShadowField::FallbackToOnDemand => "fallbackToOnDemand",
            ShadowField::Tags => "tags",
        }
    }
}

/// What the candidate would have done, in the live decision's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowRecord {
    /// The candidate's name, and its version when it was loaded.
    pub plugin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub outcome: ShadowOutcome,
    /// What the candidate decided differently (`differed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<ShadowField>,
    /// The candidate's plan, when it decided: its first type and market, and (where they
    /// differ from the live plan's) its candidates, max price and tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub market: Option<Market>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_price: Option<f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Why the candidate's chains would have failed the pod (`shadowFailed`, `bothFailed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the candidate's first type would cost an hour in its market, priced as the launch
    /// was (the same zone and source), once the pod launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// `price_per_hour` less what was launched costs an hour: positive, the candidate would
    /// spend more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_difference_per_hour: Option<f64>,
}

impl ShadowRecord {
    /// The type and market the candidate would have launched first, when it decided.
    pub fn offering(&self) -> Option<(&str, Market)> {
        Some((self.instance_type.as_deref()?, self.market?))
    }

    /// What the candidate would have launched where `launched` was: the same offering when
    /// it agreed (a capacity fallback would have moved it down the same list), its own first
    /// one when it differed; `None` when it decided nothing.
    pub fn launched_instead<'a>(
        &'a self,
        launched: (&'a str, Market),
    ) -> Option<(&'a str, Market)> {
        match self.outcome {
            ShadowOutcome::Agreed => Some(launched),
            ShadowOutcome::Differed => self.offering(),
            _ => None,
        }
    }

    /// Records what the candidate's offering costs an hour (`candidate`) against what was
    /// launched (`launched`), each priced as the launch was.
    pub fn priced(&mut self, candidate: Option<Price>, launched: Option<Price>) {
        self.price_per_hour = candidate.map(Price::usd);
        self.price_difference_per_hour = match (candidate, launched) {
            (Some(candidate), Some(launched)) => Some(round_usd(candidate.usd() - launched.usd())),
            _ => None,
        };
    }

    /// One clause for the decision's summary.
    pub fn describe(&self) -> String {
        let who = match &self.version {
            Some(version) => format!("shadow {} {version}", self.plugin),
            None => format!("shadow {}", self.plugin),
        };
        match self.outcome {
            ShadowOutcome::Agreed => format!("{who} agreed"),
            ShadowOutcome::Differed | ShadowOutcome::LiveFailed => {
                let offering = match self.offering() {
                    Some((instance_type, market)) => format!("{instance_type} {}", market.as_str()),
                    None => "?".to_owned(),
                };
                let fields: Vec<&str> = self.differences.iter().map(|f| f.as_str()).collect();
                let differing = if fields.is_empty() {
                    String::new()
                } else {
                    format!(" ({} differ)", fields.join(", "))
                };
                let price = match (self.price_per_hour, self.price_difference_per_hour) {
                    (Some(price), Some(difference)) => {
                        format!(" at ${price}/h ({})", signed_price(difference))
                    }
                    (Some(price), None) => format!(" at ${price}/h"),
                    _ => String::new(),
                };
                format!("{who} would launch {offering}{price}{differing}")
            }
            ShadowOutcome::ShadowFailed | ShadowOutcome::BothFailed => format!(
                "{who} would fail the pod: {}",
                self.error.as_deref().unwrap_or("")
            ),
            ShadowOutcome::TimedOut => format!("{who} had not decided within its budget"),
            ShadowOutcome::NotLoaded => format!("{who} is not loaded"),
        }
    }
}

/// Dollars to the micro-dollar prices are kept in, so a difference of two catalogue prices
/// prints as the catalogue does (`0.096 - 0.0832` is `0.0128`, not `0.012799999999999992`).
fn round_usd(dollars: f64) -> f64 {
    (dollars * 1e6).round() / 1e6
}

/// `+$0.0128/h`, `-$0.05/h`.
pub fn signed_price(dollars: f64) -> String {
    let sign = if dollars < 0.0 { '-' } else { '+' };
    format!("{sign}${}/h", dollars.abs())
}
