//! `policy.guardrails` on the whole pipeline with real plugins: whatever a selector or market
//! plugin answers, the plan that comes out stays within the host's limits, and what was taken
//! away is recorded, naming the guardrail, the plugin and the value.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use orca::config::Config;
use orca::policy::guardrails::{Effect, Guardrail, Guardrails};
use orca::policy::pipeline::HookChains;
use orca::policy::{Decision, Pipeline, PlanError, PlanFailure};
use serde_json::json;
use support::{bytes, registry};

/// The chains and guardrails of a config whose `policy:` section is `policy`, with the
/// hostile test plugin in the plugins directory.
fn pipeline(policy: &str) -> (Pipeline, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hostile.wasm"),
        bytes("orca-test-plugin-hostile"),
    )
    .unwrap();
    let config = Config::parse(&format!("policy:\n{policy}")).unwrap();
    let pipeline = Pipeline::new(
        registry(Some(dir.path())),
        HookChains::from_config(&config.policy),
        "orca-aws-node",
        "research",
    )
    .with_guardrails(Arc::new(Guardrails::from_config(&config.policy.guardrails)));
    (pipeline, dir)
}

fn pod(namespace: &str, annotations: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "trainer", "namespace": namespace,
            "uid": "4f1c2b9e-0000-4000-8000-000000000002",
            "annotations": annotations,
        },
        "spec": { "containers": [ { "name": "main", "image": "busybox" } ] }
    }))
    .unwrap()
}

fn types(decision: &Decision) -> Vec<&str> {
    decision
        .plan
        .candidates
        .iter()
        .map(|c| c.instance_type.as_str())
        .collect()
}

fn refused(outcome: Result<Decision, PlanError>) -> PlanError {
    match outcome {
        Ok(decision) => panic!("launched {:?}", types(&decision)),
        Err(error) => error,
    }
}

const HOSTILE_SELECTS: &str = "  selectInstance:\n    - plugin: hostile\n";

/// The case: a selector (a moved tag, a new file) answers `p5.48xlarge`. Denied, it
/// is dropped and the plugin's next candidate launches; the decision record says so.
#[test]
fn a_denied_type_a_plugin_answers_is_dropped_and_recorded() {
    let (pipeline, _dir) = pipeline(&format!(
        "{HOSTILE_SELECTS}  guardrails:\n    denyFamilies: [\"p5*\"]\n"
    ));
    let decision = pipeline
        .decide(&pod(
            "ml",
            json!({ "hostile.orca.research/mode": "dear-first" }),
        ))
        .unwrap();
    assert_eq!(types(&decision), ["m7i.large"]);
    let record = &decision.record;
    assert_eq!(record.instance_type, "m7i.large");
    assert_eq!(record.guardrails.len(), 1, "{:?}", record.guardrails);
    let dropped = &record.guardrails[0];
    assert_eq!(
        (dropped.guardrail, dropped.effect, dropped.value.as_str()),
        (Guardrail::DenyFamilies, Effect::Dropped, "p5.48xlarge")
    );
    assert_eq!(dropped.plugin, "hostile 0.0.1");
    assert!(
        record
            .summary()
            .contains("policy.guardrails.denyFamilies (p5*) dropped p5.48xlarge, chosen by plugin hostile 0.0.1"),
        "{}",
        record.summary()
    );
}

/// A plugin that answers only denied types gets the pod failed `GuardrailViolation`, with the
/// whole decision on record (what every hook answered, and what refused it).
#[test]
fn a_plan_of_denied_types_only_is_refused_with_its_decision_on_record() {
    let (pipeline, _dir) = pipeline(&format!(
        "{HOSTILE_SELECTS}  guardrails:\n    denyInstanceTypes: [\"p5.*\"]\n"
    ));
    let error = refused(pipeline.decide(&pod(
        "ml",
        json!({ "hostile.orca.research/mode": "dear-only" }),
    )));
    assert_eq!(error.reason, PlanFailure::GuardrailViolation);
    assert!(
        error
            .message
            .contains("policy.guardrails.denyInstanceTypes (p5.*) refused p5.48xlarge, chosen by plugin hostile 0.0.1"),
        "{}",
        error.message
    );
    let record = error.refused.expect("the refused decision");
    assert_eq!(record.instance_type, "p5.48xlarge");
    assert_eq!(record.choose_market.plugin, "orca-default-market");
    assert_eq!(record.guardrails[0].effect, Effect::Refused);
}

/// The default selector honours `orca.research/instance-type`, so a pod can ask for the
/// dearest type itself; on demand over the per-pod cap it is refused.
#[test]
fn on_demand_over_the_per_pod_cap_is_refused_naming_the_price() {
    let (pipeline, _dir) = pipeline("  guardrails:\n    maxPodPricePerHour: 5\n");
    let error = refused(pipeline.decide(&pod(
        "ml",
        json!({ "orca.research/instance-type": "p5.48xlarge" }),
    )));
    assert_eq!(error.reason, PlanFailure::GuardrailViolation);
    assert!(
        error.message.contains(
            "policy.guardrails.maxPodPricePerHour ($5/h) refused p5.48xlarge on-demand at $55.04/h"
        ),
        "{}",
        error.message
    );
}

/// Spot without a max price may cost the on-demand price: the host lowers the max price to
/// the cap, drops an on-demand fallback no candidate fits, and tags the instance with the max
/// price so every replica's listing counts it at that.
#[test]
fn spot_over_the_per_pod_cap_launches_capped_at_it_without_the_fallback() {
    let (pipeline, _dir) = pipeline("  guardrails:\n    maxPodPricePerHour: 5\n");
    let decision = pipeline
        .decide(&pod(
            "ml",
            json!({
                "orca.research/instance-type": "p5.48xlarge",
                "orca.research/launch-type": "spot",
            }),
        ))
        .unwrap();
    let market = &decision.plan.market;
    assert_eq!(market.market.as_str(), "spot");
    assert_eq!(market.max_price, Some(5.0));
    assert!(!market.fallback_to_on_demand);
    assert_eq!(decision.plan.tags["orca.research/spot-max-price"], "5");
    assert_eq!(decision.record.worst_case_price_per_hour, Some(5.0));
    let effects: Vec<(Guardrail, Effect)> = decision
        .record
        .guardrails
        .iter()
        .map(|g| (g.guardrail, g.effect))
        .collect();
    assert_eq!(
        effects,
        [
            (Guardrail::MaxPodPricePerHour, Effect::FallbackDropped),
            (Guardrail::MaxPodPricePerHour, Effect::MaxPriceLowered)
        ]
    );
}

/// A namespace's cap binds one pod too: no pod may cost more than its whole namespace may.
#[test]
fn a_namespace_cap_bounds_each_of_its_pods_and_the_worst_case_is_recorded() {
    let (pipeline, _dir) =
        pipeline("  guardrails:\n    maxPricePerHourByNamespace:\n      small: 1\n");
    let pod_asking = |namespace| {
        pod(
            namespace,
            json!({ "orca.research/instance-type": "g6e.xlarge" }),
        )
    };
    let error = refused(pipeline.decide(&pod_asking("small")));
    assert!(
        error
            .message
            .contains("policy.guardrails.maxNamespacePricePerHour ($1/h for namespace small)"),
        "{}",
        error.message
    );
    let decision = pipeline.decide(&pod_asking("elsewhere")).unwrap();
    assert!(decision.record.guardrails.is_empty());
    assert!(
        decision
            .record
            .worst_case_price_per_hour
            .is_some_and(|price| price > 1.0)
    );
}

/// Markets the operator does not allow: a spot plan that may fall back goes on demand.
#[test]
fn a_market_not_allowed_is_left_for_the_plans_fallback() {
    let (pipeline, _dir) = pipeline("  guardrails:\n    markets: [on-demand]\n");
    let decision = pipeline
        .decide(&pod("ml", json!({ "orca.research/launch-type": "spot" })))
        .unwrap();
    assert_eq!(decision.plan.market.market.as_str(), "on-demand");
    assert_eq!(
        decision.record.guardrails[0].effect,
        Effect::MovedToOnDemand
    );
    assert!(
        !decision
            .plan
            .tags
            .contains_key("orca.research/spot-max-price")
    );
}

/// A refusal names everything that left the plan empty: the candidates the lists dropped
/// before the market was asked too, not only the last guardrail.
#[test]
fn a_refusal_names_every_guardrail_that_took_a_candidate() {
    let (pipeline, _dir) = pipeline(&format!(
        "{HOSTILE_SELECTS}  guardrails:\n    denyFamilies: [p5]\n    maxPodPricePerHour: 0.05\n"
    ));
    let error = refused(pipeline.decide(&pod(
        "ml",
        json!({ "hostile.orca.research/mode": "dear-first" }),
    )));
    for part in [
        "policy.guardrails.denyFamilies (p5) refused p5.48xlarge, chosen by plugin hostile 0.0.1",
        "policy.guardrails.maxPodPricePerHour ($0.05/h) refused m7i.large on-demand at $0.1008/h",
    ] {
        assert!(error.message.contains(part), "{}", error.message);
    }
    let record = error.refused.expect("the refused decision");
    assert!(
        record
            .guardrails
            .iter()
            .all(|g| g.effect == Effect::Refused),
        "{:?}",
        record.guardrails
    );
}

/// The guardrails apply after every chain, not only at the end: the taggers are asked for
/// what will launch. A selector's dear first candidate the per-pod cap drops, and a spot plan
/// the markets move to on demand, reach the tagger as the type and market that launch.
#[test]
fn the_taggers_tag_the_plan_the_guardrails_left() {
    let (pipeline, _dir) = pipeline(
        "  selectInstance:\n    - plugin: hostile\n      settings: dear-first\n  \
         buildTags:\n    - plugin: hostile\n      settings: tag-context\n    - plugin: \
         orca-default-tagger\n  guardrails:\n    maxPodPricePerHour: 5\n    markets: [on-demand]\n",
    );
    let decision = pipeline
        .decide(&pod("ml", json!({ "orca.research/launch-type": "spot" })))
        .unwrap();
    assert_eq!(types(&decision), ["m7i.large"]);
    assert_eq!(decision.plan.market.market.as_str(), "on-demand");
    assert_eq!(decision.plan.tags["tagged-type"], "m7i.large");
    assert_eq!(decision.plan.tags["tagged-market"], "on-demand");
    // The default tagger merged in after the team's: the pod's Name is kept.
    assert_eq!(decision.plan.tags["Name"], "ml/trainer");
    let effects: Vec<Effect> = decision
        .record
        .guardrails
        .iter()
        .map(|g| g.effect)
        .collect();
    assert!(effects.contains(&Effect::Dropped), "{effects:?}");
    assert!(effects.contains(&Effect::MovedToOnDemand), "{effects:?}");
}

/// A refused plan still asks the taggers, for what the plugins chose, so its record is whole.
#[test]
fn a_refused_plan_records_the_tags_of_what_the_plugins_chose() {
    let (pipeline, _dir) = pipeline(
        "  selectInstance:\n    - plugin: hostile\n      settings: dear-only\n  \
         buildTags:\n    - plugin: hostile\n      settings: tag-context\n  guardrails:\n    \
         maxPodPricePerHour: 5\n",
    );
    let record = refused(pipeline.decide(&pod("ml", json!({}))))
        .refused
        .expect("the refused decision");
    assert_eq!(record.tags["tagged-type"], "p5.48xlarge");
}
