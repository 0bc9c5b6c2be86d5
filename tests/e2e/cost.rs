//! Cost per pod end to end (issue 46): the real orca binary on the harness's moto, whose
//! `DescribeSpotPriceHistory` answers a history this test sets. A spot pod whose pool's price
//! changes while it runs, an on-demand pod, both ending with their workload, and a pod deleted:
//! each ended pod's cost is on record (the `orca.research/cost` annotation, the `PodCost`
//! Event), the spot one integrated piecewise over the change, and orca's Prometheus counters
//! sum to the records.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use orca_e2e::pods::{self, burst_pod, decision, events_about};
use orca_e2e::spot_prices::{PriceChange, SetPrices};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

/// A type no other test launches spot, so the prices set here are this test's alone.
const SPOT_TYPE: &str = "c6in.large";
const BEFORE: f64 = 0.04;
const AFTER: f64 = 0.10;
/// How long after the test starts the spot price changes.
const CHANGE_AFTER: i64 = 25;

fn cost_of(pod: &Pod) -> Option<serde_json::Value> {
    let text = pod
        .metadata
        .annotations
        .as_ref()?
        .get("orca.research/cost")?;
    serde_json::from_str(text).ok()
}

fn at(record: &serde_json::Value, field: &str) -> Result<Timestamp> {
    record[field]
        .as_str()
        .with_context(|| format!("{field} in {record}"))?
        .parse()
        .with_context(|| format!("{field} in {record}"))
}

fn number(record: &serde_json::Value, field: &str) -> Result<f64> {
    record[field]
        .as_f64()
        .with_context(|| format!("{field} in {record}"))
}

fn hours(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64() / 3600.0
}

/// The pod's cost record, once orca wrote it.
async fn wait_for_cost(api: &Api<Pod>, name: &str) -> Result<serde_json::Value> {
    poll_until(
        &format!("{name}'s cost on record"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async { Ok(api.get_opt(name).await?.as_ref().and_then(cost_of)) },
    )
    .await
}

/// The instance the pod's decision names.
fn instance_of(pod: &Pod) -> Result<String> {
    let record = decision(pod).context("the decision annotation")?;
    Ok(record["launch"]["instanceId"]
        .as_str()
        .context("the launched instance in the decision")?
        .to_owned())
}

#[tokio::test]
async fn ended_pods_carry_their_cost_and_the_counters_sum_to_the_records() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let ec2 = cluster.ec2_client().await;
    let namespace = TestNamespace::create(&client, "e2e-cost").await?;
    let start = Timestamp::now();
    // Whole seconds, as EC2 (and moto) answer a price change's time.
    let change = Timestamp::from_second(start.as_second() + CHANGE_AFTER)?;
    // Every zone of the region: moto picks the spot pod's.
    let mut changes = Vec::new();
    for zone in ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"] {
        let hour_ago = start - jiff::SignedDuration::from_hours(1);
        changes.push(PriceChange::new(SPOT_TYPE, zone, "0.0400", hour_ago));
        changes.push(PriceChange::new(SPOT_TYPE, zone, "0.1000", change));
    }
    let _prices = SetPrices::set(cluster, changes)?;
    let node = unique_node_name("cost");
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, ""))?;
    orca.wait_ready(Duration::from_secs(30)).await?;

    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    let spot = [
        ("orca.research/instance-type", SPOT_TYPE),
        ("orca.research/launch-type", "spot"),
    ];
    let on_demand = [("orca.research/instance-type", "m7i.large")];
    pods::create(&api, &burst_pod("spot", &node, &spot)).await?;
    pods::create(&api, &burst_pod("on-demand", &node, &on_demand)).await?;
    pods::create(&api, &burst_pod("deleted", &node, &on_demand)).await?;
    let mut instances = Vec::new();
    for name in ["spot", "on-demand", "deleted"] {
        let running = pods::wait_for_phase(&api, name, "Running", Duration::from_secs(60)).await?;
        // The decision carries the price per hour of what was launched.
        let launch = &decision(&running).context("decision")?["launch"];
        ensure!(
            launch["pricePerHour"].as_f64().is_some_and(|p| p > 0.0)
                && launch["priceSource"].is_string(),
            "{name}: {launch}"
        );
        instances.push(instance_of(&running)?);
    }

    // The spot pod runs past the price change; then every workload ends.
    let wait = change.duration_since(Timestamp::now()).as_secs_f64() + 3.0;
    tokio::time::sleep(Duration::from_secs_f64(wait.max(0.0))).await;
    orca_e2e::ec2::finish_workload(&ec2, &instances[0], 0).await?;
    orca_e2e::ec2::finish_workload(&ec2, &instances[1], 0).await?;
    api.delete("deleted", &DeleteParams::default()).await?;

    let spot_cost = wait_for_cost(&api, "spot").await?;
    let launched = at(&spot_cost, "launchedAt")?;
    let ended = at(&spot_cost, "endedAt")?;
    ensure!(launched < change && change < ended, "{spot_cost}");
    let expected = BEFORE * hours(launched, change) + AFTER * hours(change, ended);
    ensure!(
        (number(&spot_cost, "dollars")? - expected).abs() < 1e-9,
        "the spot price counts piecewise, ${expected} expected: {spot_cost}"
    );
    assert_eq!(spot_cost["market"], "spot");
    assert_eq!(spot_cost["instanceType"], SPOT_TYPE);
    assert_eq!(spot_cost["priceSource"], "spotPriceHistory");
    assert_eq!(spot_cost["pricePerHourAtLaunch"], BEFORE);
    assert_eq!(spot_cost["pricePerHourAtEnd"], AFTER);
    let on_demand_cost = wait_for_cost(&api, "on-demand").await?;
    assert_eq!(on_demand_cost["market"], "on-demand");
    assert_eq!(on_demand_cost["priceSource"], "onDemandCatalogue");
    let spent = hours(
        at(&on_demand_cost, "launchedAt")?,
        at(&on_demand_cost, "endedAt")?,
    );
    ensure!(
        (number(&on_demand_cost, "dollars")?
            - number(&on_demand_cost, "pricePerHourAtLaunch")? * spent)
            .abs()
            < 1e-9,
        "{on_demand_cost}"
    );

    // The deleted pod is gone: its cost is in the PodCost Event.
    let deleted_note = poll_until(
        "the deleted pod's PodCost Event",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let events = events_about(&client, &namespace.name, "deleted").await?;
            Ok(events
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("PodCost"))
                .and_then(|e| e.note))
        },
    )
    .await?;
    let deleted_dollars: f64 = deleted_note
        .split_once(" cost $")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(dollars, _)| dollars.parse().ok())
        .with_context(|| format!("dollars in {deleted_note:?}"))?;
    for name in ["spot", "on-demand"] {
        // orca writes the cost annotation first and publishes the Event right after: wait for
        // the Event, not only for the annotation.
        let events = poll_until(
            "the PodCost Event",
            Duration::from_secs(30),
            Duration::from_millis(200),
            || async {
                let events = events_about(&client, &namespace.name, name).await?;
                Ok(events
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("PodCost"))
                    .then_some(events))
            },
        )
        .await
        .with_context(|| format!("{name}'s PodCost Event"))?;
        // The PolicyDecision Event names the price per hour of what was launched.
        ensure!(
            events
                .iter()
                .any(|e| e.reason.as_deref() == Some("PolicyDecision")
                    && e.note
                        .as_deref()
                        .unwrap_or_default()
                        .contains("; launched at $")),
            "{name}: {events:?}"
        );
    }

    // The counters sum to the records (the deleted pod's to the Event's 6 decimals).
    let recorded = number(&spot_cost, "dollars")? + number(&on_demand_cost, "dollars")?;
    let saved = number(&spot_cost, "onDemandDollars")? - number(&spot_cost, "dollars")?;
    let page = orca_e2e::metrics::scrape(orca.metrics_port)?;
    let ours = |metric: &str| -> Result<f64> {
        Ok(orca_e2e::metrics::series(&page, metric)?
            .into_iter()
            .filter(|(labels, _)| labels.get("namespace") == Some(&namespace.name))
            .map(|(_, value)| value)
            .sum())
    };
    let counted = ours("orca_cost_usd_total")?;
    ensure!(
        (counted - recorded - deleted_dollars).abs() < 2e-6,
        "counted ${counted}, recorded ${recorded} + ${deleted_dollars}:\n{page}"
    );
    let counted_saved = ours("orca_spot_savings_usd_total")?;
    ensure!(
        (counted_saved - saved).abs() < 1e-9,
        "saved ${counted_saved}, recorded ${saved}"
    );
    ensure!(
        ours("orca_live_spend_usd_per_hour")? == 0.0,
        "nothing of this test runs any more"
    );

    // The spot price lookups (BENCHMARKS.md, "Spot price lookups"): one spot pool, read once
    // at the spot pod's launch and cached past its end (the TTL is 5 minutes); the catalogue
    // refresh is off in the tests' config, so every call is the cost loop's.
    let operation = |metric: &str| -> Result<f64> {
        Ok(orca_e2e::metrics::series(&page, metric)?
            .into_iter()
            .filter(|(labels, _)| {
                labels.get("operation").map(String::as_str) == Some("DescribeSpotPriceHistory")
            })
            .map(|(_, value)| value)
            .sum())
    };
    let lookups = operation("orca_ec2_calls_total")?;
    let requests = operation("orca_ec2_requests_total")?;
    let listings: f64 = orca_e2e::metrics::series(&page, "orca_ec2_calls_total")?
        .into_iter()
        .filter(|(labels, _)| {
            labels.get("operation").map(String::as_str) == Some("DescribeInstances")
        })
        .map(|(_, value)| value)
        .sum();
    eprintln!(
        "spot price lookups: {lookups} DescribeSpotPriceHistory calls ({requests} HTTP requests) \
         for 3 launches (1 spot) over {:.0} s; DescribeInstances calls (every loop) {listings}",
        Timestamp::now().duration_since(start).as_secs_f64()
    );
    ensure!(
        lookups == 1.0 && requests == 1.0,
        "one lookup for the one spot pool: {lookups} calls, {requests} requests"
    );
    Ok(())
}
