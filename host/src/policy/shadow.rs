//! Shadow plugins (`policy.shadow`): a candidate plugin is asked for every pod beside the live
//! chains, in chains of its own (the live ones with the candidate in place of the plugin it
//! `replaces`, or asked first where it implements the hook), through the same guardrails. Its
//! decision is compared with the live one and recorded in the live decision
//! ([`ShadowRecord`]): what differs, what the candidate would have launched, and at launch
//! what that would cost an hour against what was launched. Nothing it answers is acted on.
//!
//! The pure parts live here: the candidate's chains ([`chains`]), the comparison
//! ([`compare`]) and the pricing at launch ([`ShadowRecord::priced`]); the pipeline runs the
//! candidate (in a sandbox slot of its own, waited for at most `budget` past the live
//! decision) and the launch prices it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::decision::{Decision, DecisionRecord};
use super::pipeline::{ChainStep, HookChains};
use super::planner::PlanError;
use super::plugin_text::bounded;
use super::wasm::Hook;
use crate::config::{OnError, ShadowConfig};
use crate::policy::guardrails::Price;
use crate::provider::plan::Market;

/// `policy.shadow` as the pipeline runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowSpec {
    /// The candidate's name.
    pub plugin: String,
    /// The live plugin it takes the place of; `None`: asked first.
    pub replaces: Option<String>,
    /// The candidate's settings, as JSON text.
    pub settings: String,
    pub on_error: OnError,
    /// How long past the live decision a launch waits for the candidate's.
    pub budget: Duration,
}

impl From<&ShadowConfig> for ShadowSpec {
    fn from(config: &ShadowConfig) -> ShadowSpec {
        ShadowSpec {
            plugin: config.plugin.clone(),
            replaces: config.replaces.clone(),
            settings: config.settings.to_string(),
            on_error: config.on_error,
            budget: config.budget.get(),
        }
    }
}

impl ShadowSpec {
    /// The candidate as one step of a chain.
    fn step(&self) -> ChainStep {
        ChainStep {
            plugin: self.plugin.clone(),
            settings: self.settings.clone(),
            on_error: self.on_error,
        }
    }
}

/// The chains the candidate's decision runs: `live`'s, with the candidate in place of every
/// step of the plugin it replaces, or (replacing none) asked first in the chain of each hook
/// it `implements`, ahead of the live plugins.
pub fn chains(
    live: &HookChains,
    spec: &ShadowSpec,
    implements: impl Fn(Hook) -> bool,
) -> HookChains {
    let shadowed = |hook: Hook, chain: &[ChainStep]| -> Vec<ChainStep> {
        match &spec.replaces {
            Some(replaced) => chain
                .iter()
                .map(|step| {
                    if &step.plugin == replaced {
                        spec.step()
                    } else {
                        step.clone()
                    }
                })
                .collect(),
            None if implements(hook)
                && chain
                    .first()
                    .is_none_or(|first| first.plugin != spec.plugin) =>
            {
                std::iter::once(spec.step())
                    .chain(chain.iter().cloned())
                    .collect()
            }
            None => chain.to_vec(),
        }
    };
    HookChains {
        select_instance: shadowed(Hook::SelectInstance, &live.select_instance),
        choose_market: shadowed(Hook::ChooseMarket, &live.choose_market),
        build_tags: shadowed(Hook::BuildTags, &live.build_tags),
    }
}

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

/// How the candidate's decision ended.
#[derive(Debug)]
pub enum ShadowRun {
    Decided(Box<Decision>),
    Failed(PlanError),
    TimedOut,
    NotLoaded,
}

/// The record of the candidate `plugin` (`version`, when loaded) beside the `live` decision.
pub fn compare(
    plugin: &str,
    version: Option<&str>,
    live: Result<&DecisionRecord, &PlanError>,
    shadow: &ShadowRun,
) -> ShadowRecord {
    let mut record = ShadowRecord {
        plugin: plugin.to_owned(),
        version: version.map(str::to_owned),
        outcome: ShadowOutcome::NotLoaded,
        differences: Vec::new(),
        instance_type: None,
        market: None,
        candidates: Vec::new(),
        max_price: None,
        tags: BTreeMap::new(),
        error: None,
        price_per_hour: None,
        price_difference_per_hour: None,
    };
    record.outcome = match (live, shadow) {
        (_, ShadowRun::NotLoaded) => ShadowOutcome::NotLoaded,
        (_, ShadowRun::TimedOut) => ShadowOutcome::TimedOut,
        (Ok(_), ShadowRun::Failed(error)) | (Err(_), ShadowRun::Failed(error)) => {
            record.error = Some(bounded(&error.to_string()).into_owned());
            if live.is_ok() {
                ShadowOutcome::ShadowFailed
            } else {
                ShadowOutcome::BothFailed
            }
        }
        (Err(_), ShadowRun::Decided(decision)) => {
            let shadow = &decision.record;
            record.instance_type = Some(shadow.instance_type.clone());
            record.market = Some(shadow.market);
            record.candidates = shadow.candidates.clone();
            record.max_price = shadow.max_price;
            ShadowOutcome::LiveFailed
        }
        (Ok(live), ShadowRun::Decided(decision)) => {
            let shadow = &decision.record;
            record.differences = differences(live, shadow);
            record.instance_type = Some(shadow.instance_type.clone());
            record.market = Some(shadow.market);
            if record.differences.contains(&ShadowField::Candidates) {
                record.candidates = shadow.candidates.clone();
            }
            if record.differences.contains(&ShadowField::MaxPrice) {
                record.max_price = shadow.max_price;
            }
            if record.differences.contains(&ShadowField::Tags) {
                record.tags = shadow.tags.clone();
            }
            if record.differences.is_empty() {
                ShadowOutcome::Agreed
            } else {
                ShadowOutcome::Differed
            }
        }
    };
    record
}

/// The parts of `shadow`'s plan that differ from `live`'s.
fn differences(live: &DecisionRecord, shadow: &DecisionRecord) -> Vec<ShadowField> {
    let mut fields = Vec::new();
    if live.instance_type != shadow.instance_type {
        fields.push(ShadowField::InstanceType);
    }
    if live.candidates != shadow.candidates {
        fields.push(ShadowField::Candidates);
    }
    if live.market != shadow.market {
        fields.push(ShadowField::Market);
    }
    if live.max_price != shadow.max_price {
        fields.push(ShadowField::MaxPrice);
    }
    if live.fallback_to_on_demand != shadow.fallback_to_on_demand {
        fields.push(ShadowField::FallbackToOnDemand);
    }
    if live.tags != shadow.tags {
        fields.push(ShadowField::Tags);
    }
    fields
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

#[cfg(test)]
mod tests;
