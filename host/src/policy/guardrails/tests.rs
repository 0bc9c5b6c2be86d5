//! Every rule of the module's table as a row: guardrails, a plan, and what is left of it.

use std::collections::BTreeMap;

use super::*;
use crate::provider::plan::{AllocationStrategy, InstanceCandidate, MarketDecision};

fn price(name: &str) -> Option<Price> {
    let usd = match name {
        "c7i.large" => 0.0893,
        "m7i.large" => 0.1008,
        "g6e.xlarge" => 1.861,
        "m7i.metal-24xl" => 4.8384,
        "p5.48xlarge" => 55.04,
        _ => return None,
    };
    Price::of(Some(usd))
}

fn deciders() -> Deciders {
    Deciders {
        select_instance: "picky 1.0.0".to_owned(),
        choose_market: "marketeer 2.0.0".to_owned(),
    }
}

fn config(yaml: &str) -> Guardrails {
    let config: GuardrailsConfig = serde_saphyr::from_str(yaml).unwrap();
    config.validate().unwrap();
    Guardrails::from_config(&config)
}

fn plan(types: &[&str], market: Market, max_price: Option<f64>, fallback: bool) -> LaunchPlan {
    LaunchPlan {
        candidates: types
            .iter()
            .map(|t| InstanceCandidate {
                instance_type: (*t).to_owned(),
                reason: String::new(),
            })
            .collect(),
        market: MarketDecision {
            market,
            max_price,
            fallback_to_on_demand: fallback,
            reason: String::new(),
            allocation_strategy: None,
            mark_on_rebalance: false,
        },
        tags: BTreeMap::new(),
    }
}

/// What is left of a plan, in a form a table can hold.
#[derive(Debug, PartialEq)]
struct Left {
    types: Vec<String>,
    market: Market,
    max_price: Option<f64>,
    fallback: bool,
}

fn left(types: &[&str], market: Market, max_price: Option<f64>, fallback: bool) -> Left {
    Left {
        types: types.iter().map(|t| (*t).to_owned()).collect(),
        market,
        max_price,
        fallback,
    }
}

fn effects(records: &[GuardrailRecord]) -> Vec<(Guardrail, Effect, String)> {
    records
        .iter()
        .map(|r| (r.guardrail, r.effect, r.value.clone()))
        .collect()
}

/// What a row expects the guardrails to have done: each guardrail, effect and value.
type Done = Vec<(Guardrail, Effect, &'static str)>;

use Effect::{Dropped, FallbackDropped, MaxPriceLowered, MovedToOnDemand, Refused};
use Guardrail::{
    AllowFamilies, AllowInstanceTypes, DenyFamilies, DenyInstanceTypes, Markets,
    MaxNamespacePricePerHour, MaxPodPricePerHour,
};
use Market::{OnDemand, Spot};

#[test]
fn the_allow_and_deny_lists_drop_the_types_they_refuse_and_the_rest_launch_in_order() {
    assert_narrowed(vec![
        (
            "no guardrails: the plan passes as it is",
            "{}",
            plan(&["p5.48xlarge"], OnDemand, None, false),
            left(&["p5.48xlarge"], OnDemand, None, false),
            vec![],
        ),
        (
            "a denied type is dropped and the rest launch in order",
            "denyInstanceTypes: [\"p5.*\"]",
            plan(
                &["p5.48xlarge", "m7i.large", "c7i.large"],
                OnDemand,
                None,
                false,
            ),
            left(&["m7i.large", "c7i.large"], OnDemand, None, false),
            vec![(DenyInstanceTypes, Dropped, "p5.48xlarge")],
        ),
        (
            "a denied family is dropped",
            "denyFamilies: [\"p*\"]",
            plan(&["p5.48xlarge", "m7i.large"], OnDemand, None, false),
            left(&["m7i.large"], OnDemand, None, false),
            vec![(DenyFamilies, Dropped, "p5.48xlarge")],
        ),
        (
            "a metal type is caught by a suffix glob",
            "denyInstanceTypes: [\"*.metal*\"]",
            plan(&["m7i.metal-24xl", "m7i.large"], OnDemand, None, false),
            left(&["m7i.large"], OnDemand, None, false),
            vec![(DenyInstanceTypes, Dropped, "m7i.metal-24xl")],
        ),
        (
            "allow lists keep a type matching either list",
            "allowInstanceTypes: [g6e.xlarge]\nallowFamilies: [c7i]",
            plan(
                &["m7i.large", "g6e.xlarge", "c7i.large"],
                OnDemand,
                None,
                false,
            ),
            left(&["g6e.xlarge", "c7i.large"], OnDemand, None, false),
            vec![(AllowInstanceTypes, Dropped, "m7i.large")],
        ),
        (
            "a family allow list alone names itself",
            "allowFamilies: [\"c*\"]",
            plan(&["m7i.large", "c7i.large"], OnDemand, None, false),
            left(&["c7i.large"], OnDemand, None, false),
            vec![(AllowFamilies, Dropped, "m7i.large")],
        ),
        (
            "deny wins over allow",
            "allowFamilies: [m7i]\ndenyInstanceTypes: [\"*.metal*\"]",
            plan(&["m7i.metal-24xl", "m7i.large"], OnDemand, None, false),
            left(&["m7i.large"], OnDemand, None, false),
            vec![(DenyInstanceTypes, Dropped, "m7i.metal-24xl")],
        ),
    ]);
}

#[test]
fn a_market_left_out_moves_the_plan_to_its_fallback_or_drops_the_fallback() {
    assert_narrowed(vec![
        (
            "spot not allowed: a plan that may fall back launches on demand",
            "markets: [on-demand]",
            plan(&["m7i.large"], Spot, Some(0.05), true),
            left(&["m7i.large"], OnDemand, None, false),
            vec![(Markets, MovedToOnDemand, "spot")],
        ),
        (
            "on-demand not allowed: a spot plan's fallback is dropped",
            "markets: [spot]",
            plan(&["m7i.large"], Spot, None, true),
            left(&["m7i.large"], Spot, None, false),
            vec![(Markets, FallbackDropped, "on-demand")],
        ),
    ]);
}

#[test]
fn on_demand_candidates_over_a_price_cap_or_of_unknown_price_are_dropped() {
    assert_narrowed(vec![
        (
            "on demand over the per-pod cap: the dear candidates are dropped",
            "maxPodPricePerHour: 2",
            plan(&["p5.48xlarge", "g6e.xlarge"], OnDemand, None, false),
            left(&["g6e.xlarge"], OnDemand, None, false),
            vec![(
                MaxPodPricePerHour,
                Dropped,
                "p5.48xlarge on-demand at $55.04/h",
            )],
        ),
        (
            "a type the catalogue has no price for cannot be shown to fit a cap",
            "maxPodPricePerHour: 2",
            plan(&["z9.new", "m7i.large"], OnDemand, None, false),
            left(&["m7i.large"], OnDemand, None, false),
            vec![(
                MaxPodPricePerHour,
                Dropped,
                "z9.new on-demand, whose price the catalogue does not know",
            )],
        ),
        (
            "a namespace cap below the per-pod cap binds one pod too",
            "maxPodPricePerHour: 10\nmaxPricePerHourByNamespace: {team-a: 1}",
            plan(&["g6e.xlarge", "m7i.large"], OnDemand, None, false),
            left(&["m7i.large"], OnDemand, None, false),
            vec![(
                MaxNamespacePricePerHour,
                Dropped,
                "g6e.xlarge on-demand at $1.861/h",
            )],
        ),
    ]);
}

#[test]
fn a_spot_plan_over_a_price_cap_has_its_max_price_lowered_or_its_fallback_narrowed() {
    assert_narrowed(vec![
        (
            "spot without a max price may cost the on-demand price: lowered to the cap",
            "maxPodPricePerHour: 2",
            plan(&["p5.48xlarge"], Spot, None, false),
            left(&["p5.48xlarge"], Spot, Some(2.0), false),
            vec![(
                MaxPodPricePerHour,
                MaxPriceLowered,
                "none: up to the on-demand price, p5.48xlarge on-demand at $55.04/h",
            )],
        ),
        (
            "spot with a max price over the cap: lowered to the cap",
            "maxPodPricePerHour: 2",
            plan(&["m7i.large"], Spot, Some(3.5), false),
            left(&["m7i.large"], Spot, Some(2.0), false),
            vec![(MaxPodPricePerHour, MaxPriceLowered, "$3.50/h")],
        ),
        (
            "spot within the cap, with or without a max price, passes",
            "maxPodPricePerHour: 2",
            plan(&["m7i.large", "g6e.xlarge"], Spot, None, true),
            left(&["m7i.large", "g6e.xlarge"], Spot, None, true),
            vec![],
        ),
        (
            "a fallback keeps the candidates that fit the cap on demand",
            "maxPodPricePerHour: 2",
            plan(&["p5.48xlarge", "g6e.xlarge"], Spot, Some(1.5), true),
            left(&["g6e.xlarge"], Spot, Some(1.5), true),
            vec![(
                MaxPodPricePerHour,
                Dropped,
                "p5.48xlarge as on-demand fallback at $55.04/h",
            )],
        ),
        (
            "a fallback no candidate fits on demand is dropped; spot stays, its price capped",
            "maxPodPricePerHour: 2",
            plan(&["p5.48xlarge"], Spot, None, true),
            left(&["p5.48xlarge"], Spot, Some(2.0), false),
            vec![
                (
                    MaxPodPricePerHour,
                    FallbackDropped,
                    "no candidate fits the cap on demand",
                ),
                (
                    MaxPodPricePerHour,
                    MaxPriceLowered,
                    "none: up to the on-demand price, p5.48xlarge on-demand at $55.04/h",
                ),
            ],
        ),
    ]);
}

/// Guards each case's plan for namespace `team-a` and checks what is left and what was done.
fn assert_narrowed(cases: Vec<(&str, &str, LaunchPlan, Left, Done)>) {
    for (name, yaml, input, expected, expected_records) in cases {
        let guardrails = config(yaml);
        let guarded = guardrails
            .guard(&input, "team-a", &deciders(), &price)
            .unwrap_or_else(|error| panic!("{name}: refused: {error}"));
        let market = &guarded.plan.market;
        let got = Left {
            types: guarded
                .plan
                .candidates
                .iter()
                .map(|c| c.instance_type.clone())
                .collect(),
            market: market.market,
            max_price: market.max_price,
            fallback: market.fallback_to_on_demand,
        };
        assert_eq!(got, expected, "{name}");
        let expected_records: Vec<_> = expected_records
            .into_iter()
            .map(|(g, e, v)| (g, e, v.to_owned()))
            .collect();
        assert_eq!(effects(&guarded.records), expected_records, "{name}");
    }
}

#[test]
fn a_plan_with_nothing_left_is_refused_naming_every_guardrail_plugin_and_value() {
    let cases: Vec<(&str, &str, LaunchPlan, Done)> = vec![
        (
            "every candidate denied",
            "denyFamilies: [p5]",
            plan(&["p5.48xlarge"], OnDemand, None, false),
            vec![(DenyFamilies, Refused, "p5.48xlarge")],
        ),
        (
            "spot not allowed and no fallback",
            "markets: [on-demand]",
            plan(&["m7i.large"], Spot, None, false),
            vec![(Markets, Refused, "spot")],
        ),
        (
            "on demand not allowed",
            "markets: [spot]",
            plan(&["m7i.large"], OnDemand, None, false),
            vec![(Markets, Refused, "on-demand")],
        ),
        (
            "every candidate over the cap on demand",
            "maxPodPricePerHour: 5",
            plan(&["p5.48xlarge"], OnDemand, None, false),
            vec![(
                MaxPodPricePerHour,
                Refused,
                "p5.48xlarge on-demand at $55.04/h",
            )],
        ),
        (
            "spot moved on demand, then over the cap",
            "markets: [on-demand]\nmaxPodPricePerHour: 5",
            plan(&["p5.48xlarge"], Spot, Some(4.0), true),
            vec![
                (Markets, MovedToOnDemand, "spot"),
                (
                    MaxPodPricePerHour,
                    Refused,
                    "p5.48xlarge on-demand at $55.04/h",
                ),
            ],
        ),
    ];
    for (name, yaml, input, expected) in cases {
        let error = config(yaml)
            .guard(&input, "team-a", &deciders(), &price)
            .expect_err(name);
        let GuardrailError::Refused { records } = &error else {
            panic!("{name}: {error}");
        };
        let expected: Vec<_> = expected
            .into_iter()
            .map(|(g, e, v)| (g, e, v.to_owned()))
            .collect();
        assert_eq!(effects(records), expected, "{name}");
        let message = error.to_string();
        assert!(
            message.contains(&format!(
                "policy.guardrails.{}",
                records[0].guardrail.as_str()
            )) && message.contains(&records[0].plugin)
                && message.contains(&records[0].value),
            "{name}: {message}"
        );
    }
}

#[test]
fn a_refusal_reads_as_a_sentence_an_operator_can_act_on() {
    let error = config("denyInstanceTypes: [\"p5.*\"]")
        .guard(
            &plan(&["p5.48xlarge"], OnDemand, None, false),
            "team-a",
            &deciders(),
            &price,
        )
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the guardrails leave no offering of the plan to launch: \
         policy.guardrails.denyInstanceTypes (p5.*) refused p5.48xlarge, chosen by plugin \
         picky 1.0.0"
    );
}

#[test]
fn moving_to_on_demand_leaves_no_spot_strategy_behind() {
    let mut input = plan(&["m7i.large"], Spot, None, true);
    input.market.allocation_strategy = Some(AllocationStrategy::CapacityOptimized);
    let guarded = config("markets: [on-demand]")
        .guard(&input, "ns", &deciders(), &price)
        .unwrap();
    assert_eq!(guarded.plan.market.allocation_strategy, None);
}

#[test]
fn the_worst_price_covers_every_offering_the_plan_may_launch() {
    let usd = |p: Option<Price>| p.map(Price::usd);
    for (name, input, expected) in [
        (
            "on demand: the dearest candidate",
            plan(&["m7i.large", "g6e.xlarge"], OnDemand, None, false),
            Some(1.861),
        ),
        (
            "spot with a max price: the max price",
            plan(&["m7i.large", "g6e.xlarge"], Spot, Some(0.5), false),
            Some(0.5),
        ),
        (
            "spot without a max price: up to the on-demand price",
            plan(&["m7i.large", "g6e.xlarge"], Spot, None, false),
            Some(1.861),
        ),
        (
            "spot with a fallback: the fallback's on-demand price too",
            plan(&["m7i.large", "g6e.xlarge"], Spot, Some(0.5), true),
            Some(1.861),
        ),
        (
            "an unknown price: unknown",
            plan(&["m7i.large", "z9.new"], OnDemand, None, false),
            None,
        ),
        (
            "an unknown price under a spot max price is covered by it",
            plan(&["z9.new"], Spot, Some(0.5), false),
            Some(0.5),
        ),
    ] {
        assert_eq!(
            usd(Guardrails::worst_price(&input, &price)),
            expected,
            "{name}"
        );
    }
}

#[test]
fn the_first_step_drops_denied_candidates_unless_it_would_drop_them_all() {
    let guardrails = config("denyFamilies: [p5]");
    let (kept, records) = guardrails.screen_types(&["p5.48xlarge", "m7i.large"], "picky 1.0.0");
    assert_eq!(kept, [1]);
    assert_eq!(
        effects(&records),
        [(DenyFamilies, Dropped, "p5.48xlarge".to_owned())]
    );
    let (kept, records) = guardrails.screen_types(&["p5.48xlarge"], "picky 1.0.0");
    assert_eq!(
        kept,
        [0],
        "kept for the record; the plan is refused as a whole"
    );
    assert!(records.is_empty());
}

#[test]
fn namespace_caps_come_from_the_namespace_else_the_default() {
    let guardrails = config("maxNamespacePricePerHour: 20\nmaxPricePerHourByNamespace: {ml: 200}");
    assert_eq!(guardrails.namespace_cap("ml"), Price::of(Some(200.0)));
    assert_eq!(guardrails.namespace_cap("web"), Price::of(Some(20.0)));
    assert_eq!(config("{}").namespace_cap("web"), None);
    assert!(guardrails.caps_namespaces());
}

#[test]
fn guardrails_no_catalogue_type_can_satisfy_are_caught_at_startup() {
    let catalogue: Vec<(String, Option<Price>)> = ["c7i.large", "m7i.large", "p5.48xlarge"]
        .iter()
        .map(|name| ((*name).to_owned(), price(name)))
        .collect();
    for (yaml, expected) in [
        (
            "allowFamilies: [m9]",
            "no instance type in the catalogue passes",
        ),
        (
            "markets: [on-demand]\nmaxPodPricePerHour: 0.05",
            "policy.guardrails.maxPodPricePerHour is $0.05/h, but the cheapest instance type \
             the guardrails allow costs $0.0893/h on demand (c7i.large)",
        ),
        (
            "markets: [on-demand]\nallowFamilies: [m7i]\nmaxPricePerHourByNamespace: {web: 0.1}",
            "policy.guardrails.maxPricePerHourByNamespace.web is $0.10/h, but the cheapest \
             instance type the guardrails allow costs $0.1008/h",
        ),
    ] {
        let error = config(yaml).check_catalogue(&catalogue).unwrap_err();
        assert!(error.to_string().contains(expected), "{yaml}: {error}");
    }
    // With spot allowed, a low cap still launches (at a max price of the cap).
    assert!(
        config("maxPodPricePerHour: 0.05")
            .check_catalogue(&catalogue)
            .is_ok()
    );
    let warnings = config("allowFamilies: [m7i, m9]\ndenyInstanceTypes: [\"x*\"]")
        .check_catalogue(&catalogue)
        .unwrap();
    assert_eq!(
        warnings,
        [
            "policy.guardrails.denyInstanceTypes: x* matches no instance type in the catalogue",
            "policy.guardrails.allowFamilies: m9 matches no instance type in the catalogue",
        ]
    );
}
