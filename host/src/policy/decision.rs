//! The record of one decision, written to the pod as `orca.research/decision` and summarized
//! in an Event: what was chosen, by which plugin version, and why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::guardrails::{GuardrailRecord, Price};
use super::honoured::NotHonoured;
use super::mixed::MixedPolicy;
use super::shadow::record::ShadowRecord;
use super::tag_merge::TagConflict;
use crate::cost::PriceSource;
use crate::provider::plan::{AllocationStrategy, LaunchPlan, Market};

/// The annotation orca writes on each pod it plans.
pub const DECISION_ANNOTATION: &str = "orca.research/decision";

/// A plan and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub plan: LaunchPlan,
    pub record: DecisionRecord,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// The first candidate: what the provider tries first.
    pub instance_type: String,
    /// Every candidate in order (the provider moves down the list on capacity errors).
    pub candidates: Vec<String>,
    pub market: Market,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_price: Option<f64>,
    pub fallback_to_on_demand: bool,
    /// The market plugin's EC2 Fleet strategy; absent: the node's configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_strategy: Option<AllocationStrategy>,
    /// Whether a rebalance recommendation marks the pod `DisruptionTarget` at once. Read back
    /// from the pod when a recommendation arrives, so a restart keeps the plugin's word.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mark_on_rebalance: bool,
    pub tags: BTreeMap<String, String>,
    pub select_instance: HookRecord,
    pub choose_market: HookRecord,
    pub build_tags: HookRecord,
    /// The build-tags chain's other plugins that answered, after `build_tags` (the first):
    /// each one's tags were merged in (`policy/tag_merge.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags_merged_from: Vec<HookRecord>,
    /// Keys two of the build-tags chain's plugins set differently: the earlier plugin's value
    /// was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tag_conflicts: Vec<TagConflict>,
    /// Plugins passed over before the one that decided: declines, and failures `onError`
    /// let through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<FallbackRecord>,
    /// Plugins that broke on one hook (and fell back) while answering another: the plan mixes
    /// two policies (`policy/mixed.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mixed_policies: Vec<MixedPolicy>,
    /// The pod's `orca.research/…` requests the plugins' answers did not follow, each naming
    /// the plugin (`policy/honoured.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_honoured: Vec<NotHonoured>,
    /// What `policy.guardrails` took away from the plugins' plan, lowered, or refused, each
    /// naming the guardrail, the plugin and the value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guardrails: Vec<GuardrailRecord>,
    /// The most an hour of the pod's instance may cost, over every offering the plan may
    /// launch (a spot one at the max price, else at the on-demand price; an on-demand one at
    /// the catalogue's on-demand price): what counts against the namespace's cap until its
    /// instance is listed. Absent when the catalogue lacks a price that counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_case_price_per_hour: Option<f64>,
    /// What the provider made of the plan, once it answered: the offering EC2 chose, how, and
    /// each offering passed over with EC2's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchRecord>,
    /// What `policy.shadow`'s candidate would have decided beside this decision, never acted
    /// on (`policy/shadow.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowRecord>,
}

/// The launch's answer, in the decision record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchRecord {
    /// `m5.large spot`, or empty when nothing launched.
    pub offering: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_by: Option<String>,
    /// The availability zone the instance runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The zones the pod admits (`us-west-2a`, `not us-west-2b`), when it names any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_zones: String,
    /// `m6i.large spot: InsufficientInstanceCapacity: in us-west-2a: …`
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed_over: Vec<String>,
    /// The pod's EBS volumes and where the instance gets each once it runs:
    /// `vol-0123… at /dev/sdf` (the `SuccessfulAttachVolume` Event says when).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// What the launched instance costs an hour at launch (USD): on demand, the catalogue's
    /// price; spot, its pool's price (see `price_source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// Where `price_per_hour` came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_source: Option<PriceSource>,
}

/// The plugin that answered one hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRecord {
    pub plugin: String,
    pub version: String,
    pub sha256: String,
    pub reason: String,
    /// Who signed the plugin (`key sha256:…`, `keyless SUBJECT (issuer ISSUER)`), when it was
    /// pulled under `policy.registry.verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

/// A plugin passed over: it declined, or failed under `onError: fallback` for that kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FallbackRecord {
    pub hook: String,
    pub plugin: String,
    /// The failure kind (`declined`, `noMatch`, …); empty in records written before kinds.
    #[serde(default)]
    pub kind: String,
    pub error: String,
}

#[cfg(test)]
impl DecisionRecord {
    /// `candidates` on demand, decided by a plugin `p`: the decision unit tests launch with.
    pub fn on_demand(candidates: &[&str]) -> DecisionRecord {
        let hook =
            serde_json::json!({"plugin": "p", "version": "1", "sha256": "00", "reason": "r"});
        serde_json::from_value(serde_json::json!({
            "instanceType": candidates.first(),
            "candidates": candidates,
            "market": "on-demand",
            "fallbackToOnDemand": false,
            "tags": {},
            "selectInstance": hook,
            "chooseMarket": hook,
            "buildTags": hook,
        }))
        .expect("a well-formed decision record")
    }
}

impl DecisionRecord {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// One line for the `PolicyDecision` Event.
    /// The taggers merged in after the first (` + plugin …`) and each key two of them set
    /// (`; tag K kept …`), for the summary.
    fn tags_merged_summary(&self) -> String {
        let mut text = String::new();
        for merged in &self.tags_merged_from {
            text.push_str(&format!(" + {}", decided_by(merged)));
        }
        for conflict in &self.tag_conflicts {
            text.push_str(&format!(
                "; tag {} kept {}'s {:?} over {}'s {:?}",
                conflict.key,
                conflict.kept.plugin,
                conflict.kept.value,
                conflict.dropped.plugin,
                conflict.dropped.value
            ));
        }
        text
    }

    pub fn summary(&self) -> String {
        let price = match self.max_price {
            Some(price) => format!(" (max ${price}/h)"),
            None => String::new(),
        };
        let by = decided_by;
        let strategy = match self.allocation_strategy {
            Some(strategy) => format!(" by {strategy}"),
            None => String::new(),
        };
        let rebalance = if self.mark_on_rebalance {
            " (marked on rebalance)"
        } else {
            ""
        };
        let worst = match self
            .worst_case_price_per_hour
            .and_then(|p| Price::of(Some(p)))
        {
            Some(worst) => format!(" (up to {worst})"),
            None => String::new(),
        };
        let mut summary = format!(
            "{} {}{price}{strategy}{rebalance}{worst}; type by {}; market by {}; {} tags by {}",
            self.instance_type,
            self.market.as_str(),
            by(&self.select_instance),
            by(&self.choose_market),
            self.tags.len(),
            by(&self.build_tags),
        );
        summary.push_str(&self.tags_merged_summary());
        if let Some(launch) = &self.launch {
            summary.push_str(&launch.summary());
        }
        for guardrail in &self.guardrails {
            summary.push_str(&format!("; {}", guardrail.describe()));
        }
        for ignored in &self.not_honoured {
            summary.push_str(&format!("; {}", ignored.describe()));
        }
        for mixed in &self.mixed_policies {
            summary.push_str(&format!("; {}", mixed.describe()));
        }
        if let Some(shadow) = &self.shadow {
            summary.push_str(&format!("; {}", shadow.describe()));
        }
        for fallback in &self.fallbacks {
            let passed = if fallback.kind == "declined" {
                "passed"
            } else {
                "fell back past"
            };
            summary.push_str(&format!(
                "; {} {passed} {}: {}",
                fallback.hook, fallback.plugin, fallback.error
            ));
        }
        summary
    }
}

impl LaunchRecord {
    /// The launch's clauses for the decision's summary: who chose the offering, where it
    /// runs, at what price, what was passed over.
    fn summary(&self) -> String {
        let mut summary = String::new();
        if let Some(chosen_by) = &self.chosen_by {
            summary.push_str(&format!("; {chosen_by}"));
        }
        match (&self.zone, self.pod_zones.is_empty()) {
            (Some(zone), true) => summary.push_str(&format!("; runs in {zone}")),
            (Some(zone), false) => summary.push_str(&format!(
                "; runs in {zone}, the pod admits {}",
                self.pod_zones
            )),
            (None, false) => {
                summary.push_str(&format!("; the pod admits {}", self.pod_zones));
            }
            (None, true) => {}
        }
        if let (Some(price), Some(source)) = (
            self.price_per_hour.and_then(|p| Price::of(Some(p))),
            self.price_source,
        ) {
            summary.push_str(&format!("; launched at {price} ({})", source.describe()));
        }
        if !self.passed_over.is_empty() {
            summary.push_str(&format!("; passed over {}", self.passed_over.join(", ")));
        }
        summary
    }
}

/// The first 12 hex digits, as `sha256:abcdef123456`.
pub fn short(sha256: &str) -> String {
    format!("sha256:{}", sha256.get(..12).unwrap_or(sha256))
}

/// `plugin version (sha256:…[, signed by …]): reason`, the summary's words for who decided.
fn decided_by(hook: &HookRecord) -> String {
    let signed = match &hook.signed_by {
        Some(signer) => format!(", signed by {signer}"),
        None => String::new(),
    };
    format!(
        "{} {} ({}{signed}): {}",
        hook.plugin,
        hook.version,
        short(&hook.sha256),
        hook.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tag_merge::TagSource;

    #[test]
    fn the_summary_gives_the_price_per_hour_of_what_was_launched_and_its_source() {
        let mut record = DecisionRecord::on_demand(&["m5.large"]);
        let launch: LaunchRecord = serde_json::from_value(serde_json::json!({
            "offering": "m5.large spot",
            "instanceId": "i-0123",
            "zone": "us-west-2a",
            "pricePerHour": 0.0312,
            "priceSource": "spotPriceHistory",
        }))
        .unwrap();
        record.launch = Some(launch);
        let summary = record.summary();
        assert!(
            summary.contains("; launched at $0.0312/h (the pool's spot price history)"),
            "{summary}"
        );
        let json: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
        assert_eq!(json["launch"]["pricePerHour"], 0.0312);
        assert_eq!(json["launch"]["priceSource"], "spotPriceHistory");
    }

    #[test]
    fn the_summary_names_the_taggers_merged_in_and_each_key_set_twice() {
        let mut record = DecisionRecord::on_demand(&["m5.large"]);
        assert!(!record.summary().contains(" + "), "{}", record.summary());
        let mut merged = record.build_tags.clone();
        merged.plugin = "orca-default-tagger".to_owned();
        merged.reason = "3 tags merged in".to_owned();
        record.tags_merged_from.push(merged);
        record.tag_conflicts.push(TagConflict {
            key: "Name".to_owned(),
            kept: TagSource {
                plugin: "p".to_owned(),
                value: "ml-job".to_owned(),
            },
            dropped: TagSource {
                plugin: "orca-default-tagger".to_owned(),
                value: "ml/trainer".to_owned(),
            },
        });
        let summary = record.summary();
        assert!(
            summary.contains(" + orca-default-tagger 1 (sha256:00): 3 tags merged in"),
            "{summary}"
        );
        assert!(
            summary.contains(
                "; tag Name kept p's \"ml-job\" over orca-default-tagger's \"ml/trainer\""
            ),
            "{summary}"
        );
        // Written and read back whole, under the record's field names.
        let json: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
        assert_eq!(json["tagConflicts"][0]["kept"]["plugin"], "p");
        assert_eq!(json["tagsMergedFrom"][0]["plugin"], "orca-default-tagger");
        let back: DecisionRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
    }
}
