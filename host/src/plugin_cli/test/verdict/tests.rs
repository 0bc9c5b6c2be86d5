use std::collections::BTreeMap;

use super::*;
use crate::config::FailureKind;
use crate::policy::decision::HookRecord;
use crate::provider::plan::Market;

fn hook(plugin: &str) -> HookRecord {
    HookRecord {
        plugin: plugin.to_owned(),
        version: "1.0.0".to_owned(),
        sha256: String::new(),
        reason: String::new(),
        signed_by: None,
    }
}

fn record() -> DecisionRecord {
    DecisionRecord {
        instance_type: "g6.xlarge".to_owned(),
        candidates: vec!["g6.xlarge".to_owned()],
        market: Market::Spot,
        max_price: None,
        fallback_to_on_demand: false,
        allocation_strategy: None,
        mark_on_rebalance: false,
        tags: BTreeMap::from([
            ("team".to_owned(), "ml".to_owned()),
            ("Name".to_owned(), "p".to_owned()),
        ]),
        select_instance: hook("team"),
        choose_market: hook("orca-default-market"),
        build_tags: hook("orca-default-tagger"),
        tags_merged_from: Vec::new(),
        tag_conflicts: Vec::new(),
        fallbacks: Vec::new(),
        mixed_policies: Vec::new(),
        not_honoured: Vec::new(),
        guardrails: Vec::new(),
        worst_case_price_per_hour: None,
        launch: None,
        shadow: None,
    }
}

fn decided(
    instance_type: Option<&str>,
    market: Option<Market>,
    tags: &[(&str, &str)],
) -> Expectation {
    Expectation::Decided(ExpectedDecision {
        instance_type: instance_type.map(str::to_owned),
        selected_by: None,
        market,
        tags: tags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    })
}

fn fails(kind: Option<FailureKind>, message: Option<&str>) -> Expectation {
    Expectation::Fails(ExpectedFailure {
        reason: PlanFailure::PolicyError,
        kind,
        plugin: None,
        message_contains: message.map(str::to_owned),
    })
}

const NO_MATCH: ActualFailure = ActualFailure {
    reason: PlanFailure::PolicyError,
    failed_by: Some(("team", "noMatch")),
    message: "team ml may use at most 8 GPUs",
};

fn mismatches(expect: &Expectation, actual: Actual) -> Vec<String> {
    match judge(expect, actual) {
        Verdict::Passed => Vec::new(),
        Verdict::Failed(mismatches) => mismatches,
    }
}

/// Every part a case gives is checked, and only those; each mismatch names the field with
/// both values.
#[test]
fn a_verdict_checks_each_given_part_and_names_expected_and_actual() {
    let record = record();
    let decided_actual = Actual::Decided(&record);
    let failed_actual = Actual::Failed(NO_MATCH);
    let table: Vec<(Expectation, Actual, Vec<&str>)> = vec![
        (
            decided(Some("g6.xlarge"), None, &[]),
            decided_actual,
            vec![],
        ),
        (
            decided(None, Some(Market::Spot), &[("team", "ml")]),
            decided_actual,
            vec![],
        ),
        (
            decided(Some("g5.xlarge"), Some(Market::OnDemand), &[]),
            decided_actual,
            vec![
                "instanceType: expected g5.xlarge, got g6.xlarge",
                "market: expected on-demand, got spot",
            ],
        ),
        (
            decided(None, None, &[("team", "web"), ("cost", "1")]),
            decided_actual,
            vec![
                "tags.cost: expected 1, got no such tag",
                "tags.team: expected web, got ml",
            ],
        ),
        (
            decided(Some("g6.xlarge"), None, &[]),
            failed_actual,
            vec!["the pod fails (PolicyError) instead of being decided"],
        ),
        (
            fails(Some(FailureKind::NoMatch), Some("at most 8")),
            failed_actual,
            vec![],
        ),
        (
            fails(Some(FailureKind::Crashed), Some("at most 4")),
            failed_actual,
            vec![
                "kind: expected crashed, got noMatch",
                "message: expected it to contain \"at most 4\"",
            ],
        ),
        (
            fails(None, None),
            decided_actual,
            vec!["the pod is decided (g6.xlarge) instead of failing"],
        ),
    ];
    for (expect, actual, wanted) in table {
        assert_eq!(mismatches(&expect, actual), wanted, "{expect:?}");
    }
}

#[test]
fn a_failure_of_no_plugin_matches_only_a_case_that_names_none() {
    let guardrail = Actual::Failed(ActualFailure {
        reason: PlanFailure::GuardrailViolation,
        failed_by: None,
        message: "denied",
    });
    let by_reason = Expectation::Fails(ExpectedFailure {
        reason: PlanFailure::GuardrailViolation,
        kind: None,
        plugin: None,
        message_contains: None,
    });
    assert_eq!(judge(&by_reason, guardrail), Verdict::Passed);
    assert_eq!(
        mismatches(&fails(Some(FailureKind::NoMatch), None), guardrail),
        vec![
            "reason: expected PolicyError, got GuardrailViolation",
            "kind: expected noMatch, got none",
        ]
    );
}

#[test]
fn the_actual_decision_lists_its_tags_only_for_a_case_that_checks_tags() {
    assert_eq!(
        decided_text(&record(), false),
        "g6.xlarge spot by team, 2 tags"
    );
    assert_eq!(
        decided_text(&record(), true),
        "g6.xlarge spot by team, tags Name=p team=ml"
    );
}

#[test]
fn the_expectation_reads_as_the_actual_decision_does() {
    assert_eq!(
        expected_text(&decided(
            Some("g6.xlarge"),
            Some(Market::Spot),
            &[("team", "ml")]
        )),
        "decided: g6.xlarge spot tags including team=ml"
    );
    assert_eq!(
        expected_text(&fails(Some(FailureKind::NoMatch), Some("8 GPUs"))),
        "fails with PolicyError (noMatch), message containing \"8 GPUs\""
    );
}
