//! README's first command, `tests/quickstart`, run as a newcomer runs it (against the already
//! running harness, which it reuses), and its `stop`.

use std::process::Command;
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use orca_e2e::cluster::repo_root;
use orca_e2e::wait::poll_until;
use orca_e2e::{TestCluster, TestNamespace, unique_node_name};

fn quickstart(args: &[&str], node: &str, namespace: &str) -> Result<String> {
    let cluster = TestCluster::shared();
    let output = Command::new("bash")
        .arg(repo_root().join("tests/quickstart"))
        .args(args)
        .envs(cluster.env_vars())
        .env("ORCA_QUICKSTART_NODE", node)
        .env("ORCA_QUICKSTART_NAMESPACE", namespace)
        .output()?;
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

#[tokio::test]
async fn the_quickstart_runs_the_gpu_pod_on_ec2_and_shows_its_instance_and_decision() -> Result<()>
{
    let client = TestCluster::shared().kube_client().await?;
    let namespace = TestNamespace::create(&client, "e2e-quickstart").await?;
    let node = unique_node_name("quickstart");
    let shown = quickstart(&[], &node, &namespace.name)?;

    // `kubectl get nodes,pods -o wide`: the node Ready, the pod Running on it.
    let lines: Vec<&str> = shown.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&node) && l.contains(" Ready ")),
        "{shown}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("gpu-training ") && l.contains("Running") && l.contains(&node)),
        "{shown}"
    );
    // The EC2 instance with its type, market and tags.
    let instance = lines
        .iter()
        .find(|l| l.starts_with("i-"))
        .unwrap_or_else(|| panic!("no instance shown:\n{shown}"));
    for expected in [
        "p5.48xlarge",
        "spot",
        "running",
        "ManagedBy=ORCA",
        "orca.research/pod-name=gpu-training",
    ] {
        assert!(instance.contains(expected), "{expected}: {instance}");
    }
    // The decision annotation, pretty-printed.
    assert!(
        shown.contains(r#""instanceType": "p5.48xlarge""#),
        "{shown}"
    );
    assert!(
        shown.contains(r#""plugin": "orca-default-selector""#),
        "{shown}"
    );

    quickstart(&["stop"], &node, &namespace.name)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    assert!(pods.get_opt("gpu-training").await?.is_none());
    let nodes: Api<Node> = Api::all(client);
    poll_until(
        "the node removed",
        Duration::from_secs(10),
        Duration::from_millis(200),
        || async { Ok(nodes.get_opt(&node).await?.is_none().then_some(())) },
    )
    .await?;
    namespace.delete().await
}
