//! orca survives an apiserver restart without restarting itself. Its own test binary: cargo
//! runs test binaries one after another, so no other test sees the apiserver go away.

use std::process::Command;
use std::time::Duration;

use anyhow::Result;
use orca_e2e::pods::{self, burst_pod, phase};
use orca_e2e::{Scenario, TestCluster};

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

    let restart =
        Command::new(orca_e2e::cluster::repo_root().join("tests/cluster/restart-apiserver"))
            .env("ORCA_CLUSTER_STATE", cluster.var("ORCA_CLUSTER_STATE"))
            .status()?;
    assert!(restart.success(), "restarting the apiserver failed");

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
