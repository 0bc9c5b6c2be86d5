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

pub mod record;

pub use self::record::{ShadowField, ShadowOutcome, ShadowRecord, signed_price};
use super::chains::{ChainStep, HookChains};
use super::decision::{Decision, DecisionRecord};
use super::planner::PlanError;
use super::plugin_text::bounded;
use super::wasm::Hook;
use crate::config::{OnError, ShadowConfig};

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

#[cfg(test)]
mod tests;
