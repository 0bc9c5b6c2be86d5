//! orca survives an apiserver restart without restarting itself. Its own test binary: cargo
//! runs test binaries one after another, so no other test sees the apiserver go away.

use std::process::Command;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::DeleteParams;
use orca_e2e::pods::{self, burst_pod, phase};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, test_config, unique_node_name};

#[tokio::test]
async fn orca_recovers_from_an_apiserver_restart_without_restarting() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let name = unique_node_name("apirestart");
    let mut orca = OrcaProcess::start(&name, |dir| test_config(&name, dir, ""))?;
    let pid = orca.pid();
    let namespace = TestNamespace::create(&client, "e2e-apirestart").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
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
    pods::wait_for(&api, "before", "Running", Duration::from_secs(20), |p| {
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
    let nodes: Api<Node> = Api::all(client.clone());
    poll_until(
        "node Ready",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || async {
            let ready = nodes
                .get(&name)
                .await?
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            Ok(ready.then_some(()))
        },
    )
    .await?;
    assert!(orca.is_running(), "orca must not exit: {}", orca.log());
    assert_eq!(orca.pid(), pid);
    namespace.delete().await?;
    drop(orca);
    nodes.delete(&name, &DeleteParams::default()).await?;
    Ok(())
}
