//! README's first command, `tests/quickstart`, run as a newcomer runs it (against the already
//! running harness, which it reuses), and its `stop`.
//!
//! CI proves that command once per run (issue 60): `.ci/run` runs `tests/quickstart` and its
//! `stop` first, on a newcomer's toolchain, and names what they printed in
//! `ORCA_QUICKSTART_TRANSCRIPT` (its node and namespace in `ORCA_QUICKSTART_NODE` and
//! `ORCA_QUICKSTART_NAMESPACE`). This test then holds that run to the same assertions and checks
//! in the cluster and in EC2 what its `stop` left, rather than run the quickstart a second time.
//! Without the variable (`tests/run` alone, a developer's `cargo test`), it runs both itself.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::InstanceStateName;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, Client};
use orca_e2e::cluster::repo_root;
use orca_e2e::orca::as_from_a_shell;
use orca_e2e::wait::poll_until;
use orca_e2e::{TestCluster, TestNamespace, ec2, unique_node_name};

fn quickstart(args: &[&str], node: &str, namespace: &str) -> Result<String> {
    let cluster = TestCluster::shared();
    let mut command = Command::new("bash");
    command
        .arg(repo_root().join("tests/quickstart"))
        .args(args)
        .envs(cluster.env_vars())
        .env("ORCA_QUICKSTART_NODE", node)
        .env("ORCA_QUICKSTART_NAMESPACE", namespace);
    // The quickstart runs `cargo build`: as from a shell.
    let output = as_from_a_shell(&mut command).output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(
        output.status.success(),
        "tests/quickstart {args:?} failed:\n{text}"
    );
    Ok(text)
}

/// What `tests/quickstart` showed: the node Ready, the pod Running on it, the EC2 instance with
/// its type, market and tags, and the policy decision. Returns the instance's id.
fn check_shown(shown: &str, node: &str) -> Result<String> {
    // `kubectl get nodes,pods -o wide`: the node Ready, the pod Running on it.
    let lines: Vec<&str> = shown.lines().collect();
    ensure!(
        lines
            .iter()
            .any(|l| l.starts_with(node) && l.contains(" Ready ")),
        "node {node} Ready:\n{shown}"
    );
    ensure!(
        lines
            .iter()
            .any(|l| l.starts_with("gpu-training ") && l.contains("Running") && l.contains(node)),
        "gpu-training Running on {node}:\n{shown}"
    );
    // The EC2 instance with its type, market and tags.
    let instance = lines
        .iter()
        .find(|l| l.starts_with("i-"))
        .with_context(|| format!("no instance shown:\n{shown}"))?;
    for expected in [
        "p5.48xlarge",
        "spot",
        "running",
        "ManagedBy=ORCA",
        "orca.research/pod-name=gpu-training",
    ] {
        ensure!(instance.contains(expected), "{expected}: {instance}");
    }
    // The decision annotation, pretty-printed.
    ensure!(
        shown.contains(r#""instanceType": "p5.48xlarge""#),
        "{shown}"
    );
    ensure!(
        shown.contains(r#""plugin": "orca-default-selector""#),
        "{shown}"
    );
    let id = instance.split_whitespace().next().unwrap_or_default();
    Ok(id.to_owned())
}

/// What `tests/quickstart stop` leaves: the pod deleted, its instance terminated, the node
/// removed.
async fn check_stopped(client: Client, namespace: &str, node: &str, instance: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    ensure!(
        pods.get_opt("gpu-training").await?.is_none(),
        "gpu-training deleted from {namespace}"
    );
    let ec2 = TestCluster::shared().ec2_client().await;
    poll_until(
        "the pod's instance terminated",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || async {
            let described = ec2::instance(&ec2, instance).await?;
            Ok((ec2::state_of(&described) == InstanceStateName::Terminated).then_some(()))
        },
    )
    .await?;
    let nodes: Api<Node> = Api::all(client);
    poll_until(
        "the node removed",
        Duration::from_secs(10),
        Duration::from_millis(200),
        || async { Ok(nodes.get_opt(node).await?.is_none().then_some(())) },
    )
    .await
}

#[tokio::test]
async fn the_quickstart_runs_the_gpu_pod_on_ec2_and_shows_its_instance_and_decision() -> Result<()>
{
    let client = TestCluster::shared().kube_client().await?;
    if let Ok(transcript) = std::env::var("ORCA_QUICKSTART_TRANSCRIPT") {
        // CI's own run of the quickstart, as a newcomer ran it (.ci/run).
        let shown = std::fs::read_to_string(&transcript)
            .with_context(|| format!("reading the quickstart's transcript {transcript}"))?;
        let node = std::env::var("ORCA_QUICKSTART_NODE").unwrap_or("orca-aws-node".into());
        let namespace = std::env::var("ORCA_QUICKSTART_NAMESPACE").unwrap_or("default".into());
        let instance = check_shown(&shown, &node)?;
        return check_stopped(client, &namespace, &node, &instance).await;
    }
    let namespace = TestNamespace::create(&client, "e2e-quickstart").await?;
    let node = unique_node_name("quickstart");
    let shown = quickstart(&[], &node, &namespace.name)?;
    let instance = check_shown(&shown, &node)?;
    quickstart(&["stop"], &node, &namespace.name)?;
    check_stopped(client, &namespace.name, &node, &instance).await?;
    namespace.delete().await
}
