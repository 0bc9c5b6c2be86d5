//! Policy plugins in a running orca: decisions recorded on pods, hostile plugins contained to
//! the pods they misbehave for, and a plugin delivered the way a ConfigMap volume delivers it
//! going live without a restart, while a broken update leaves the old version serving.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::plugins::{hostile_wasm, publish_like_kubelet};
use orca_e2e::pods::{self, burst_pod, decision, phase, wait_decided};
use orca_e2e::pods::{events_about, wait_for_node_event};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(100);
/// How long orca may take to record a decision.
const DECIDED: Duration = Duration::from_secs(60);
const MODE: &str = "hostile.orca.research/mode";

fn with_policy(node: &str, dir: &Path, policy: &str) -> String {
    format!("{}policy:\n{policy}", test_config(node, dir, ""))
}

/// orca with an empty plugins directory (returned) and `chains` (config lines under `policy:`).
fn start_with_plugins_dir(node: &str, chains: &str) -> Result<(OrcaProcess, PathBuf)> {
    let mut plugins_dir = None;
    let orca = OrcaProcess::start(node, |dir| {
        let plugins = dir.join("plugins");
        std::fs::create_dir(&plugins).expect("plugins dir");
        plugins_dir = Some(plugins.clone());
        with_policy(
            node,
            dir,
            &format!("  pluginsDir: {}\n{chains}", plugins.display()),
        )
    })?;
    Ok((orca, plugins_dir.context("plugins dir")?))
}

#[tokio::test]
async fn hostile_plugins_fail_only_their_own_pods_and_decisions_are_recorded() -> Result<()> {
    let hostile = std::fs::read(hostile_wasm()?)?;
    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name("hostile");
    let mut orca = OrcaProcess::start(&node, |dir| {
        let plugins = dir.join("plugins");
        std::fs::create_dir(&plugins).expect("plugins dir");
        std::fs::write(plugins.join("hostile.wasm"), &hostile).expect("plugin file");
        with_policy(
            &node,
            dir,
            &format!(
                "  pluginsDir: {}\n  selectInstance:\n    - plugin: hostile\n  buildTags:\n    - plugin: hostile\n",
                plugins.display()
            ),
        )
    })?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-hostile").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);

    let hostile_modes = [
        ("loop", "time limit"),
        ("grow", "hostile"),
        ("trap", "hostile"),
        ("output", "hostile"),
        ("bad-type", "z9.imaginary"),
        ("bad-tags", "aws:"),
    ];
    for (mode, _) in hostile_modes {
        pods::create(&api, &burst_pod(mode, &node, &[(MODE, mode)])).await?;
    }
    pods::create(&api, &burst_pod("good", &node, &[])).await?;

    for (mode, expected) in hostile_modes {
        let failed = pods::wait_for(&api, mode, "Failed", Duration::from_secs(60), |p| {
            phase(p) == "Failed"
        })
        .await?;
        assert_eq!(pods::reason(&failed), "PolicyError", "{mode}");
        assert!(
            pods::message(&failed).contains(expected) && pods::message(&failed).contains("hostile"),
            "{mode}: {}",
            pods::message(&failed)
        );
    }
    let good = pods::wait_for(&api, "good", "Running", Duration::from_secs(60), |p| {
        phase(p) == "Running"
    })
    .await?;
    let recorded = decision(&good).context("the decision annotation")?;
    assert_eq!(recorded["instanceType"], "m7i.large");
    assert_eq!(recorded["selectInstance"]["plugin"], "hostile");
    assert_eq!(recorded["chooseMarket"]["plugin"], "orca-default-market");
    assert_eq!(recorded["tags"]["orca.research/node"], node.as_str());
    let events = events_about(&client, &namespace.name, "good").await?;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("PolicyDecision")
                && e.note.as_deref().unwrap_or_default().contains("m7i.large")),
        "{events:?}"
    );
    assert!(orca.is_running(), "orca survived every hostile plugin");
    namespace.delete().await
}

#[tokio::test]
async fn pods_wait_for_a_missing_plugin_and_go_on_when_it_loads() -> Result<()> {
    let hostile = std::fs::read(hostile_wasm()?)?;
    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name("notready");
    let (orca, plugins) =
        start_with_plugins_dir(&node, "  selectInstance:\n    - plugin: hostile\n")?;
    orca.wait_ready(Duration::from_secs(20)).await?;

    // Everything else is up, and /readyz names the plugin the policy waits for.
    let (code, body) = poll_until(
        "/readyz naming the missing plugin",
        DECIDED,
        TICK,
        || async {
            let (code, body) = orca.readyz()?;
            Ok(
                (code == 503 && !body.contains("node registration") && !body.contains("pod list"))
                    .then_some((code, body)),
            )
        },
    )
    .await?;
    assert!(
        body.contains("plugin hostile (policy.selectInstance[0]) is not loaded"),
        "{code}: {body}"
    );

    // A pod waits Pending, saying why, instead of failing.
    let namespace = TestNamespace::create(&client, "e2e-notready").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    pods::create(&api, &burst_pod("waiting", &node, &[])).await?;
    let waiting = pods::wait_for(&api, "waiting", "PolicyNotReady", DECIDED, |p| {
        pods::condition_reason(p, "Ready") == Some("PolicyNotReady".to_owned())
    })
    .await?;
    assert_eq!(phase(&waiting), "Pending");
    assert!(
        pods::message(&waiting).contains("plugin hostile is not loaded"),
        "{}",
        pods::message(&waiting)
    );

    // The plugin arrives: the pod goes on and /readyz is 200.
    publish_like_kubelet(
        &plugins,
        "2026_11_23_v1",
        &BTreeMap::from([("hostile.wasm".to_owned(), hostile)]),
    )?;
    let running = pods::wait_for(&api, "waiting", "Running", DECIDED, |p| {
        phase(p) == "Running"
    })
    .await?;
    let recorded = decision(&running).context("the decision annotation")?;
    assert_eq!(recorded["selectInstance"]["plugin"], "hostile");
    let (code, body) = orca.readyz()?;
    assert_eq!(code, 200, "{body}");
    namespace.delete().await
}

#[tokio::test]
async fn a_plugin_delivered_as_a_configmap_goes_live_without_a_restart() -> Result<()> {
    let hostile = std::fs::read(hostile_wasm()?)?;
    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name("reload");
    let (orca, plugins) = start_with_plugins_dir(
        &node,
        "  selectInstance:\n    - plugin: hostile\n      onError: fallback\n    - plugin: orca-default-selector\n",
    )?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-reload").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);

    // Before the plugin exists, the chain falls back to the default selector.
    pods::create(&api, &burst_pod("before", &node, &[])).await?;
    let before = wait_decided(&api, "before", DECIDED).await?;
    assert_eq!(before["selectInstance"]["plugin"], "orca-default-selector");
    assert!(
        before["fallbacks"][0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("not loaded"),
        "{before}"
    );

    // The ConfigMap gains the plugin.
    let published = Instant::now();
    publish_like_kubelet(
        &plugins,
        "2026_11_22_v1",
        &BTreeMap::from([("hostile.wasm".to_owned(), hostile.clone())]),
    )?;
    poll_until(
        "the plugin to load",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || {
            let loaded = orca.log().contains("plugin loaded");
            async move { Ok(loaded.then_some(())) }
        },
    )
    .await?;
    println!(
        "plugin live {:?} after the ConfigMap update",
        published.elapsed()
    );
    pods::create(&api, &burst_pod("after", &node, &[])).await?;
    let after = wait_decided(&api, "after", DECIDED).await?;
    assert_eq!(after["selectInstance"]["plugin"], "hostile");
    let serving = after["selectInstance"]["sha256"].clone();

    // A broken update is refused, reported on the Node, and the loaded version keeps serving.
    publish_like_kubelet(
        &plugins,
        "2026_11_22_v2",
        &BTreeMap::from([("hostile.wasm".to_owned(), b"\0asm broken".to_vec())]),
    )?;
    wait_for_node_event(&client, &node, "PluginRejected", Duration::from_secs(20)).await?;
    pods::create(&api, &burst_pod("still", &node, &[])).await?;
    let still = wait_decided(&api, "still", DECIDED).await?;
    assert_eq!(still["selectInstance"]["plugin"], "hostile");
    assert_eq!(still["selectInstance"]["sha256"], serving);
    namespace.delete().await
}
