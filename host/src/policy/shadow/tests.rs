use super::*;
use crate::policy::guardrails::Price;
use crate::policy::planner::{PlanFailure, PlanRetry};
use crate::provider::plan::{InstanceCandidate, LaunchPlan, Market, MarketDecision};

fn step(plugin: &str) -> ChainStep {
    ChainStep {
        plugin: plugin.to_owned(),
        settings: "{}".to_owned(),
        on_error: OnError::FAIL,
    }
}

fn live() -> HookChains {
    HookChains {
        select_instance: vec![step("team"), step("orca-default-selector")],
        choose_market: vec![step("orca-default-market")],
        build_tags: vec![step("team"), step("orca-default-tagger")],
    }
}

fn spec(replaces: Option<&str>) -> ShadowSpec {
    ShadowSpec {
        plugin: "candidate".to_owned(),
        replaces: replaces.map(str::to_owned),
        settings: r#"{"k":1}"#.to_owned(),
        on_error: OnError::FALLBACK,
        budget: Duration::from_millis(500),
    }
}

fn names(chain: &[ChainStep]) -> Vec<&str> {
    chain.iter().map(|s| s.plugin.as_str()).collect()
}

#[test]
fn the_candidate_goes_first_where_it_implements_the_hook_or_in_place_of_what_it_replaces() {
    // (replaces, hooks the candidate implements, expected select, market, tags chains)
    type Case<'a> = (Option<&'a str>, &'a [Hook], [&'a [&'a str]; 3]);
    let cases: &[Case] = &[
        (
            None,
            &[Hook::SelectInstance],
            [
                &["candidate", "team", "orca-default-selector"],
                &["orca-default-market"],
                &["team", "orca-default-tagger"],
            ],
        ),
        (
            None,
            &[Hook::SelectInstance, Hook::ChooseMarket, Hook::BuildTags],
            [
                &["candidate", "team", "orca-default-selector"],
                &["candidate", "orca-default-market"],
                &["candidate", "team", "orca-default-tagger"],
            ],
        ),
        (
            // Replacing a plugin two chains name: both steps, whatever it implements.
            Some("team"),
            &[Hook::SelectInstance],
            [
                &["candidate", "orca-default-selector"],
                &["orca-default-market"],
                &["candidate", "orca-default-tagger"],
            ],
        ),
        (
            Some("orca-default-market"),
            &[Hook::ChooseMarket],
            [
                &["team", "orca-default-selector"],
                &["candidate"],
                &["team", "orca-default-tagger"],
            ],
        ),
    ];
    for (replaces, hooks, [select, market, tags]) in cases {
        let chains = chains(&live(), &spec(*replaces), |hook| hooks.contains(&hook));
        assert_eq!(
            names(&chains.select_instance),
            *select,
            "{replaces:?} {hooks:?}"
        );
        assert_eq!(
            names(&chains.choose_market),
            *market,
            "{replaces:?} {hooks:?}"
        );
        assert_eq!(names(&chains.build_tags), *tags, "{replaces:?} {hooks:?}");
        // The candidate's steps carry its settings and onError, not the replaced step's.
        for step in chains
            .select_instance
            .iter()
            .chain(&chains.choose_market)
            .chain(&chains.build_tags)
            .filter(|s| s.plugin == "candidate")
        {
            assert_eq!(step.settings, r#"{"k":1}"#);
            assert_eq!(step.on_error, OnError::FALLBACK);
        }
    }
    // A candidate already first in a chain is not asked twice.
    let mut first = live();
    first.select_instance.insert(0, step("candidate"));
    let chains = chains(&first, &spec(None), |_| true);
    assert_eq!(
        names(&chains.select_instance),
        ["candidate", "team", "orca-default-selector"]
    );
}

fn decision(types: &[&str], market: &str, tags: &[(&str, &str)]) -> Decision {
    let mut record = DecisionRecord::on_demand(types);
    record.market = Market::parse(market).unwrap();
    record.tags = tags
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let plan = LaunchPlan {
        candidates: types
            .iter()
            .map(|t| InstanceCandidate {
                instance_type: (*t).to_owned(),
                reason: String::new(),
            })
            .collect(),
        market: MarketDecision {
            market: record.market,
            max_price: None,
            fallback_to_on_demand: false,
            reason: String::new(),
            allocation_strategy: None,
            mark_on_rebalance: false,
        },
        tags: record.tags.clone(),
    };
    Decision { plan, record }
}

fn failed(message: &str) -> PlanError {
    PlanError {
        reason: PlanFailure::PolicyError,
        message: message.to_owned(),
        retry: PlanRetry::No,
        refused: None,
    }
}

#[test]
fn the_comparison_names_each_part_the_candidate_decided_differently() {
    let live = decision(&["m5.large", "m5a.large"], "on-demand", &[("Name", "a")]);
    // (the candidate's decision, expected outcome, expected differences)
    let cases: Vec<(Decision, ShadowOutcome, Vec<ShadowField>)> = vec![
        (
            decision(&["m5.large", "m5a.large"], "on-demand", &[("Name", "a")]),
            ShadowOutcome::Agreed,
            vec![],
        ),
        (
            decision(&["m6g.large", "m5a.large"], "on-demand", &[("Name", "a")]),
            ShadowOutcome::Differed,
            vec![ShadowField::InstanceType, ShadowField::Candidates],
        ),
        (
            decision(&["m5.large"], "spot", &[("Name", "a")]),
            ShadowOutcome::Differed,
            vec![ShadowField::Candidates, ShadowField::Market],
        ),
        (
            decision(&["m5.large", "m5a.large"], "on-demand", &[("Name", "b")]),
            ShadowOutcome::Differed,
            vec![ShadowField::Tags],
        ),
    ];
    for (shadow, outcome, differences) in cases {
        let run = ShadowRun::Decided(Box::new(shadow.clone()));
        let record = compare("candidate", Some("2.0.0"), Ok(&live.record), &run);
        assert_eq!(record.outcome, outcome, "{differences:?}");
        assert_eq!(record.differences, differences);
        // The candidate's first type and market are always there; the rest where they differ.
        assert_eq!(
            record.offering(),
            Some((shadow.record.instance_type.as_str(), shadow.record.market))
        );
        assert_eq!(
            record.candidates.is_empty(),
            !differences.contains(&ShadowField::Candidates)
        );
        assert_eq!(
            record.tags.is_empty(),
            !differences.contains(&ShadowField::Tags)
        );
        assert_eq!(record.version.as_deref(), Some("2.0.0"));
    }
    let mut max_price = decision(&["m5.large", "m5a.large"], "spot", &[("Name", "a")]);
    let mut live_spot = max_price.clone();
    live_spot.record.max_price = Some(0.05);
    max_price.record.max_price = Some(0.04);
    let record = compare(
        "candidate",
        None,
        Ok(&live_spot.record),
        &ShadowRun::Decided(Box::new(max_price)),
    );
    assert_eq!(record.differences, [ShadowField::MaxPrice]);
    assert_eq!(record.max_price, Some(0.04));
}

#[test]
fn failures_timeouts_and_an_absent_candidate_are_outcomes_of_their_own() {
    let live = decision(&["m5.large"], "on-demand", &[]);
    let live_error = failed("select-instance: no match");
    let shadow = decision(&["c5.large"], "spot", &[]);
    // (live decided?, the candidate's run, expected outcome, an error recorded?)
    let cases: Vec<(bool, ShadowRun, ShadowOutcome, bool)> = vec![
        (
            true,
            ShadowRun::Failed(failed("boom")),
            ShadowOutcome::ShadowFailed,
            true,
        ),
        (
            false,
            ShadowRun::Failed(failed("boom")),
            ShadowOutcome::BothFailed,
            true,
        ),
        (
            false,
            ShadowRun::Decided(Box::new(shadow.clone())),
            ShadowOutcome::LiveFailed,
            false,
        ),
        (true, ShadowRun::TimedOut, ShadowOutcome::TimedOut, false),
        (false, ShadowRun::TimedOut, ShadowOutcome::TimedOut, false),
        (true, ShadowRun::NotLoaded, ShadowOutcome::NotLoaded, false),
    ];
    for (decided, run, outcome, errored) in cases {
        let live = if decided {
            Ok(&live.record)
        } else {
            Err(&live_error)
        };
        let record = compare("candidate", None, live, &run);
        assert_eq!(record.outcome, outcome);
        assert_eq!(record.error.is_some(), errored, "{outcome:?}");
        if errored {
            assert!(record.error.as_deref().unwrap().contains("boom"));
        }
        assert!(record.differences.is_empty());
        assert!(
            record.describe().starts_with("shadow candidate"),
            "{}",
            record.describe()
        );
    }
}

#[test]
fn at_launch_the_candidate_is_priced_against_what_was_launched() {
    let live = decision(&["m5.large"], "on-demand", &[]);
    let shadow = decision(&["m5.xlarge"], "on-demand", &[]);
    let mut record = compare(
        "candidate",
        Some("2.0.0"),
        Ok(&live.record),
        &ShadowRun::Decided(Box::new(shadow)),
    );
    record.priced(Price::of(Some(0.192)), Price::of(Some(0.096)));
    assert_eq!(record.price_per_hour, Some(0.192));
    assert_eq!(record.price_difference_per_hour, Some(0.096));
    assert_eq!(
        record.describe(),
        "shadow candidate 2.0.0 would launch m5.xlarge on-demand at $0.192/h (+$0.096/h) \
         (instanceType, candidates differ)"
    );
    // Cheaper: a negative difference, to the micro-dollar.
    record.priced(Price::of(Some(0.0832)), Price::of(Some(0.096)));
    assert_eq!(record.price_difference_per_hour, Some(-0.0128));
    assert!(
        record.describe().contains("(-$0.0128/h)"),
        "{}",
        record.describe()
    );
    // Nothing prices what was launched: no difference.
    record.priced(Price::of(Some(0.0832)), None);
    assert_eq!(record.price_difference_per_hour, None);
    // Written and read back under the record's names.
    let json = serde_json::to_value(&record).unwrap();
    assert_eq!(json["outcome"], "differed");
    assert_eq!(json["differences"][0], "instanceType");
    assert_eq!(json["market"], "on-demand");
    let back: ShadowRecord = serde_json::from_value(json).unwrap();
    assert_eq!(back, record);
}

#[test]
fn every_outcome_and_field_is_spelled_as_serde_spells_it() {
    for outcome in ShadowOutcome::ALL {
        assert_eq!(
            serde_json::to_value(outcome).unwrap(),
            outcome.as_str(),
            "{outcome:?}"
        );
    }
    for field in ShadowField::ALL {
        assert_eq!(serde_json::to_value(field).unwrap(), field.as_str());
    }
}
