//! Whether the chains honoured what the pod asked for in orca's annotations. The default
//! plugins honour `orca.research/instance-type`, `orca.research/launch-type`,
//! `orca.research/max-spot-price` and `orca.research/tags`; a team's plugin placed before them
//! may answer without reading them. That is its right (policy is the team's), but it must not
//! be silent: each annotation an answer ignored is a [`NotHonoured`] in the decision record,
//! naming the plugin, and the `PolicyDecision` Event says so.
//!
//! Judged on the plugins' answers, before the guardrails: what a guardrail changed is its own
//! record, not a plugin's doing. An annotation whose value does not parse is left out: the
//! default plugin refuses it with `invalid-annotation`, and a plugin that answers anyway did
//! not ignore a request it could have read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tag_merge::TagConflict;
use crate::provider::plan::Market;

/// The pod's instance type, for the select-instance chain.
pub const INSTANCE_TYPE_ANNOTATION: &str = "orca.research/instance-type";
/// `spot` or `on-demand`, for the choose-market chain.
pub const LAUNCH_TYPE_ANNOTATION: &str = "orca.research/launch-type";
/// A spot pod's max price in dollars an hour, for the choose-market chain.
pub const MAX_SPOT_PRICE_ANNOTATION: &str = "orca.research/max-spot-price";
/// A JSON object of the pod's own tags, for the build-tags chain.
pub const TAGS_ANNOTATION: &str = "orca.research/tags";

/// One annotation the plugin that answered did not follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotHonoured {
    /// `orca.research/instance-type`, or `orca.research/tags` with the key: `orca.research/tags[team]`.
    pub annotation: String,
    /// What the pod asked for.
    pub value: String,
    /// The plugin whose answer decided instead.
    pub plugin: String,
    /// What it answered: `m5.large`, `on-demand`, `max $0.50/h`, `team=ml`, or `no such tag`.
    pub answer: String,
}

impl NotHonoured {
    /// One clause for the decision's summary.
    pub fn describe(&self) -> String {
        format!(
            "annotation {}={:?} not honoured by {} (answered {})",
            self.annotation, self.value, self.plugin, self.answer
        )
    }
}

/// What the chains answered, and who answered each.
#[derive(Debug, Clone, Copy)]
pub struct Answers<'a> {
    /// The select-instance chain's first candidate, and its plugin.
    pub first_type: (&'a str, &'a str),
    /// The choose-market chain's market and max price, and its plugin.
    pub market: (Market, Option<f64>, &'a str),
    /// The build-tags chain's merged tags, the keys two taggers set, and its first plugin.
    pub tags: (&'a [(String, String)], &'a [TagConflict], &'a str),
}

/// Each of `annotations` (the pod's) that `answers` did not follow.
pub fn check(annotations: &BTreeMap<String, String>, answers: &Answers<'_>) -> Vec<NotHonoured> {
    let mut found = Vec::new();
    let ignored = |annotation: &str, value: &str, plugin: &str, answer: String| NotHonoured {
        annotation: annotation.to_owned(),
        value: value.to_owned(),
        plugin: plugin.to_owned(),
        answer,
    };
    let (first, select_by) = answers.first_type;
    if let Some(asked) = annotations.get(INSTANCE_TYPE_ANNOTATION).map(|v| v.trim())
        && !asked.is_empty()
        && asked != first
    {
        found.push(ignored(
            INSTANCE_TYPE_ANNOTATION,
            asked,
            select_by,
            first.to_owned(),
        ));
    }
    let (market, max_price, market_by) = answers.market;
    let asked_market = annotations
        .get(LAUNCH_TYPE_ANNOTATION)
        .and_then(|v| Market::parse(v.trim()));
    if let Some(asked) = asked_market
        && asked != market
    {
        found.push(ignored(
            LAUNCH_TYPE_ANNOTATION,
            asked.as_str(),
            market_by,
            market.as_str().to_owned(),
        ));
    }
    // A max price is asked of a spot launch: on demand it has no meaning (and a pod asked for
    // spot but launched on demand is recorded above).
    if market == Market::Spot
        && let Some(text) = annotations.get(MAX_SPOT_PRICE_ANNOTATION)
        && let Some(asked) = parse_price(text)
        && !max_price.is_some_and(|answered| same_price(answered, asked))
    {
        let answer = match max_price {
            Some(price) => format!("max ${price}/h"),
            None => "no max price (up to the on-demand price)".to_owned(),
        };
        found.push(ignored(
            MAX_SPOT_PRICE_ANNOTATION,
            text.trim(),
            market_by,
            answer,
        ));
    }
    let (tags, conflicts, tags_by) = answers.tags;
    if let Some(text) = annotations.get(TAGS_ANNOTATION)
        && let Ok(asked) = serde_json::from_str::<BTreeMap<String, String>>(text)
    {
        for (key, value) in &asked {
            let kept = tags.iter().find(|(k, _)| k == key).map(|(_, v)| v);
            if kept == Some(value) {
                continue;
            }
            // The plugin whose value was kept over another's; else the chain's first.
            let plugin = conflicts
                .iter()
                .find(|c| &c.key == key)
                .map_or(tags_by, |c| c.kept.plugin.as_str());
            let answer = match kept {
                Some(kept) => format!("{key}={kept}"),
                None => "no such tag".to_owned(),
            };
            found.push(ignored(
                &format!("{TAGS_ANNOTATION}[{key}]"),
                value,
                plugin,
                answer,
            ));
        }
    }
    found
}

/// A price as the default market plugin reads it: dollars, positive, finite.
fn parse_price(text: &str) -> Option<f64> {
    let price: f64 = text.trim().parse().ok()?;
    (price.is_finite() && price > 0.0).then_some(price)
}

/// Equal to a hundredth of a cent: what a plugin that passes the annotation on answers, after
/// a round trip through its language's floats.
fn same_price(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.000_1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tag_merge::TagSource;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Who answered: `sel`, `mkt`, `tag`; what: `m5.large` on demand, tags `team=ml`.
    fn check_against(
        pod: &[(&str, &str)],
        first: &str,
        market: (Market, Option<f64>),
        answered_tags: &[(&str, &str)],
        conflicts: &[TagConflict],
    ) -> Vec<(String, String, String, String)> {
        let answered_tags = tags(answered_tags);
        let answers = Answers {
            first_type: (first, "sel"),
            market: (market.0, market.1, "mkt"),
            tags: (&answered_tags, conflicts, "tag"),
        };
        check(&annotations(pod), &answers)
            .into_iter()
            .map(|n| (n.annotation, n.value, n.plugin, n.answer))
            .collect()
    }

    fn row(
        annotation: &str,
        value: &str,
        plugin: &str,
        answer: &str,
    ) -> (String, String, String, String) {
        (
            annotation.to_owned(),
            value.to_owned(),
            plugin.to_owned(),
            answer.to_owned(),
        )
    }

    /// (case, the pod's annotations, the first type, the market answered, what is not honoured)
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, &'a str)>,
        &'a str,
        (Market, Option<f64>),
        Vec<(String, String, String, String)>,
    );

    #[test]
    fn each_annotation_is_judged_against_its_own_chain() {
        let on_demand = (Market::OnDemand, None);
        let spot = |max| (Market::Spot, max);
        let cases: Vec<Case> = vec![
            (
                "no annotations: nothing to honour",
                vec![],
                "m5.large",
                on_demand,
                vec![],
            ),
            (
                "the type asked is the first candidate",
                vec![(INSTANCE_TYPE_ANNOTATION, "m5.large")],
                "m5.large",
                on_demand,
                vec![],
            ),
            (
                "another type first: not honoured by the selector",
                vec![(INSTANCE_TYPE_ANNOTATION, " g5.xlarge ")],
                "m5.large",
                on_demand,
                vec![row(
                    INSTANCE_TYPE_ANNOTATION,
                    "g5.xlarge",
                    "sel",
                    "m5.large",
                )],
            ),
            (
                "spot asked, on demand answered: not honoured by the market plugin",
                vec![(LAUNCH_TYPE_ANNOTATION, "spot")],
                "m5.large",
                on_demand,
                vec![row(LAUNCH_TYPE_ANNOTATION, "spot", "mkt", "on-demand")],
            ),
            (
                "spot asked and answered",
                vec![(LAUNCH_TYPE_ANNOTATION, "spot")],
                "m5.large",
                spot(None),
                vec![],
            ),
            (
                "a launch type that does not parse is the default plugin's error, not this",
                vec![(LAUNCH_TYPE_ANNOTATION, "cheap")],
                "m5.large",
                on_demand,
                vec![],
            ),
            (
                "the max price asked, passed on through a float",
                vec![(MAX_SPOT_PRICE_ANNOTATION, "0.5")],
                "m5.large",
                spot(Some(0.500_000_01)),
                vec![],
            ),
            (
                "a spot answer without the max price asked",
                vec![(MAX_SPOT_PRICE_ANNOTATION, "0.50")],
                "m5.large",
                spot(None),
                vec![row(
                    MAX_SPOT_PRICE_ANNOTATION,
                    "0.50",
                    "mkt",
                    "no max price (up to the on-demand price)",
                )],
            ),
            (
                "a different max price",
                vec![(MAX_SPOT_PRICE_ANNOTATION, "0.5")],
                "m5.large",
                spot(Some(0.9)),
                vec![row(MAX_SPOT_PRICE_ANNOTATION, "0.5", "mkt", "max $0.9/h")],
            ),
            (
                "a max price on an on-demand launch means nothing",
                vec![(MAX_SPOT_PRICE_ANNOTATION, "0.5")],
                "m5.large",
                on_demand,
                vec![],
            ),
            (
                "the pod's tags kept",
                vec![(TAGS_ANNOTATION, r#"{"team":"ml"}"#)],
                "m5.large",
                on_demand,
                vec![],
            ),
            (
                "a tag nobody set: the chain's first tagger named",
                vec![(TAGS_ANNOTATION, r#"{"team":"ml","cost":"42"}"#)],
                "m5.large",
                on_demand,
                vec![row("orca.research/tags[cost]", "42", "tag", "no such tag")],
            ),
            (
                "tags that do not parse are the default tagger's error",
                vec![(TAGS_ANNOTATION, "team=ml")],
                "m5.large",
                on_demand,
                vec![],
            ),
        ];
        for (name, pod, first, market, expected) in cases {
            assert_eq!(
                check_against(&pod, first, market, &[("team", "ml")], &[]),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn a_tag_another_plugin_kept_over_the_pods_value_names_that_plugin() {
        let conflict = TagConflict {
            key: "team".to_owned(),
            kept: TagSource {
                plugin: "team-tagger".to_owned(),
                value: "platform".to_owned(),
            },
            dropped: TagSource {
                plugin: "orca-default-tagger".to_owned(),
                value: "ml".to_owned(),
            },
        };
        let found = check_against(
            &[(TAGS_ANNOTATION, r#"{"team":"ml"}"#)],
            "m5.large",
            (Market::OnDemand, None),
            &[("team", "platform")],
            &[conflict],
        );
        assert_eq!(
            found,
            vec![row(
                "orca.research/tags[team]",
                "ml",
                "team-tagger",
                "team=platform"
            )]
        );
    }

    #[test]
    fn the_clause_names_the_annotation_the_plugin_and_its_answer() {
        let clause = NotHonoured {
            annotation: INSTANCE_TYPE_ANNOTATION.to_owned(),
            value: "g5.xlarge".to_owned(),
            plugin: "team-selector 1.0".to_owned(),
            answer: "m5.large".to_owned(),
        }
        .describe();
        assert_eq!(
            clause,
            "annotation orca.research/instance-type=\"g5.xlarge\" not honoured by team-selector \
             1.0 (answered m5.large)"
        );
    }
}
