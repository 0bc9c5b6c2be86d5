//! orca survives an apiserver restart without restarting itself, and reads the apiserver's
//! release and schema again (a restart is how an upgrade looks). Its own test binary: cargo
//! runs test binaries one after another, so no other test sees the apiserver go away.

use std::process::Command;
use std::time::Duration;

use anyhow::Result;
use orca_e2e::metrics::{by_label, scrape};
use orca_e2e::pods::{self, burst_pod, phase};
use orca_e2e::wait::poll_until;
use orca_e2e::{Scenario, TestCluster};

/// How many times orca has read the apiserver's release and schema successfully.
fn schema_reads(scenario: &Scenario) -> Result<f64> {
    let page = scrape(scenario.orca.metrics_port)?;
    Ok(
        by_label(&page, "orca_apiserver_schema_reads_total", "result")
            .get("ok")
            .copied()
            .unwrap_or_default(),
    )
}

#[tokio::test]
async fn orca_recovers_from_an_apiserver_restart_without_restarting() -> Result<()> {
    let cluster = TestCluster::shared();
    let mut scenario = Scenario::start("apirestart").await?;
    let (name, api) = (scenario.node().to_owned(), scenario.pods.clone());
    let pid = scenario.orca.pid();
    pods::create(&api, &burst_pod("before", &name, &[])).await?;
    pods::create(
        &api,
        &burst_pod(
            "during",
            &name,
            &[("simulated.orca.research/run-time", "4s")],
        ),
    )
    .await?;
    pods::wait_for(&api, "before", "Running", Duration::from_secs(60), |p| {
        phase(p) == "Running"
    })
    .await?;

    let reads_before = schema_reads(&scenario)?;

    let restart =
        Command::new(orca_e2e::cluster::repo_root().join("tests/cluster/restart-apiserver"))
            .env("ORCA_CLUSTER_STATE", cluster.var("ORCA_CLUSTER_STATE"))
            .status()?;
    assert!(restart.success(), "restarting the apiserver failed");
    // The restart may have been an upgrade: orca reads the release again once its watches
    // list anew, without waiting for its periodic check.
    poll_until(
        "orca reading the apiserver's release again",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async { Ok((schema_reads(&scenario)? > reads_before).then_some(())) },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}\norca log:\n{}", scenario.orca.log()))?;

    // A pod whose instance finished while the apiserver was away is still reported.
    pods::wait_for(&api, "during", "Succeeded", Duration::from_secs(60), |p| {
        phase(p) == "Succeeded"
    })
    .await?;
    pods::create(&api, &burst_pod("after", &name, &[])).await?;
    pods::wait_for(&api, "after", "Running", Duration::from_secs(60), |p| {
        phase(p) == "Running"
    })
    .await?;
    scenario.orca.wait_ready(Duration::from_secs(30)).await?;
    assert!(
        scenario.orca.is_running(),
        "orca must not exit: {}",
        scenario.orca.log()
    );
    assert_eq!(scenario.orca.pid(), pid);
    scenario.finish().await
}
