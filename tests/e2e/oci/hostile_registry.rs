//! A registry that misbehaves (`RegistryProxy` in front of the real one): a component over
//! `maxComponentSize`, a blob without end, a blob that stalls, a blob that trickles, and a
//! manifest naming a file path as its layer's digest are each refused within the configured
//! bounds and reported as `PluginRejected`, no file outside the store is touched, and the
//! version serving keeps serving. Restarted while the registry answers nothing, orca serves
//! the version it kept on disk; a reference whose registry trickles does not hold up another.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::plugins::{hostile_wasm, team_selector_wasm};
use orca_e2e::pods::events_about;
use orca_e2e::registry::TestRegistry;
use orca_e2e::registry_proxy::{RegistryFault, RegistryProxy};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, unique_node_name};

use super::{
    REPOSITORY, SWAPPED, TICK, decided_by, push, push_to, sha256, start_with, with_custom_section,
};

/// The note of a Node Event `reason` whose note contains every one of `wanted`.
async fn wait_node_event(
    client: &kube::Client,
    orca: &OrcaProcess,
    reason: &str,
    wanted: &[&str],
    timeout: Duration,
) -> Result<String> {
    let node = orca.node_name.clone();
    poll_until(
        &format!("a {reason} event on node {node} saying {wanted:?}"),
        timeout,
        TICK,
        || {
            let node = node.clone();
            async move {
                let events = events_about(client, "default", &node).await?;
                Ok(events.into_iter().find_map(|event| {
                    let note = event.note.unwrap_or_default();
                    (event.reason.as_deref() == Some(reason)
                        && wanted.iter().all(|w| note.contains(w)))
                    .then_some(note)
                }))
            }
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}\norca log:\n{}", orca.log()))
}

async fn still_v1(api: &Api<Pod>, name: &str, orca: &OrcaProcess, v1: &[u8]) -> Result<()> {
    let sha = decided_by(api, name, &orca.node_name)
        .await
        .map_err(|e| anyhow::anyhow!("{e:#}\norca log:\n{}", orca.log()))?;
    ensure!(sha == sha256(v1), "{name}: v1 keeps serving");
    Ok(())
}

#[tokio::test]
async fn a_registry_that_sends_too_much_stalls_or_trickles_is_cut_off_and_the_previous_version_keeps_serving()
-> Result<()> {
    let registry = TestRegistry::start()?;
    let proxy = RegistryProxy::start(&registry).await?;
    let docker_config = registry.docker_config_for(&proxy.addr)?;
    let original = std::fs::read(hostile_wasm()?)?;
    let v1 = with_custom_section(&original, "v1");
    let node = unique_node_name("oci-bounds");
    let limit = v1.len() + (64 << 10);
    // The versions refused are new to every run: a component kept on disk by an earlier run
    // (the store is beside the shared compile cache) would not be downloaded at all.
    let unique = |version: &str| format!("{version}-{node}");
    push(&registry, &v1, "stable")?;

    let client = TestCluster::shared().kube_client().await?;
    let reference = format!("oci://{}/{REPOSITORY}:stable", proxy.addr);
    let mut orca = start_with(
        &node,
        &[reference],
        &registry,
        &docker_config,
        &format!("    maxComponentSize: \"{limit}\"\n    stallTimeout: 2s\n    pullTimeout: 8s\n"),
    )?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    orca.wait_serving(Duration::from_secs(120)).await?;
    let namespace = TestNamespace::create(&client, "oci-bounds").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    still_v1(&api, "first", &orca, &v1).await?;

    // A component whose manifest declares more than maxComponentSize is not downloaded.
    let oversized = with_custom_section(&original, &format!("v2{}", "x".repeat(128 << 10)));
    push(&registry, &oversized, "stable")?;
    let note = wait_node_event(
        &client,
        &orca,
        "PluginRejected",
        &["policy.registry.maxComponentSize", "keeps serving"],
        SWAPPED,
    )
    .await?;
    ensure!(note.contains(&limit.to_string()), "{note}");
    still_v1(&api, "after-oversized", &orca, &v1).await?;

    // A registry that sends the blob without end is cut off at the size its manifest declares.
    // (Each fault is met by a new orca process: kube's event Recorder folds a Node's
    // PluginRejected events into the first one for six minutes, note included.)
    orca.stop()?;
    proxy.set_fault(Some(RegistryFault::EndlessBlob));
    push(
        &registry,
        &with_custom_section(&original, &unique("v3")),
        "stable",
    )?;
    orca.restart()?;
    wait_node_event(
        &client,
        &orca,
        "PluginRejected",
        &["more than the", "its manifest declares", "keeps serving"],
        SWAPPED,
    )
    .await?;
    still_v1(&api, "after-endless", &orca, &v1).await?;

    // One that stalls in the middle of the blob is given up on after stallTimeout.
    orca.stop()?;
    proxy.set_fault(Some(RegistryFault::StallBlob { after: 1024 }));
    push(
        &registry,
        &with_custom_section(&original, &unique("v4")),
        "stable",
    )?;
    orca.restart()?;
    wait_node_event(
        &client,
        &orca,
        "PluginRejected",
        &["sent nothing for 2s", "keeps serving"],
        SWAPPED,
    )
    .await?;
    still_v1(&api, "after-stall", &orca, &v1).await?;

    // One that trickles a byte at a time, never silent for stallTimeout, is given up on after
    // pullTimeout.
    orca.stop()?;
    proxy.set_fault(Some(RegistryFault::DripBlob {
        every: Duration::from_millis(200),
    }));
    let v5 = with_custom_section(&original, &unique("v5"));
    push(&registry, &v5, "stable")?;
    orca.restart()?;
    wait_node_event(
        &client,
        &orca,
        "PluginRejected",
        &["policy.registry.pullTimeout", "keeps serving"],
        SWAPPED,
    )
    .await?;
    still_v1(&api, "after-drip", &orca, &v1).await?;

    // Refusals are not for good: once the registry behaves, the tag's version loads.
    proxy.set_fault(None);
    let mut round = 0;
    poll_until("a pod decided by v5", SWAPPED, TICK, || {
        round += 1;
        let api = api.clone();
        let node = node.clone();
        let v5 = sha256(&v5);
        async move {
            let sha = decided_by(&api, &format!("healed-{round}"), &node).await?;
            Ok((sha == v5).then_some(()))
        }
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}\norca log:\n{}", orca.log()))?;
    namespace.delete().await
}

#[tokio::test]
async fn a_manifest_naming_a_file_path_as_its_digest_is_refused_and_no_file_is_touched()
-> Result<()> {
    let registry = TestRegistry::start()?;
    let proxy = RegistryProxy::start(&registry).await?;
    let docker_config = registry.docker_config_for(&proxy.addr)?;
    let original = std::fs::read(hostile_wasm()?)?;
    let v1 = with_custom_section(&original, "v1");
    let pinned = push(&registry, &v1, "stable")?;

    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name("oci-digest");
    let reference = format!("oci://{}/{REPOSITORY}:stable", proxy.addr);
    let orca = start_with(&node, &[reference], &registry, &docker_config, "")?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    orca.wait_serving(Duration::from_secs(120)).await?;
    let namespace = TestNamespace::create(&client, "oci-digest").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    still_v1(&api, "first", &orca, &v1).await?;

    // A file someone else owns, and v1's own manifest with its layer's digest replaced by that
    // file's path without `.wasm` (the pulled-plugin store names components `<digest>.wasm`).
    let outside = tempfile::Builder::new().prefix("orca-outside-").tempdir()?;
    let victim = outside.path().join("plugin.wasm");
    std::fs::write(&victim, b"not orca's")?;
    let manifest_digest = pinned.rsplit('@').next().unwrap_or_default();
    let manifest = registry.curl(&[
        "-H",
        "Accept: application/vnd.oci.image.manifest.v1+json",
        &format!(
            "https://{}/v2/{REPOSITORY}/manifests/{manifest_digest}",
            registry.addr
        ),
    ])?;
    let mut manifest: serde_json::Value = serde_json::from_slice(&manifest)?;
    let path_digest = outside.path().join("plugin").display().to_string();
    manifest["layers"][0]["digest"] = serde_json::Value::String(path_digest.clone());
    proxy.set_fault(Some(RegistryFault::Manifest {
        tag: "stable".to_owned(),
        body: serde_json::to_vec(&manifest)?,
    }));

    let note = wait_node_event(
        &client,
        &orca,
        "PluginRejected",
        &["digest", "keeps serving"],
        SWAPPED,
    )
    .await?;
    ensure!(
        note.contains(&path_digest),
        "the note names the digest: {note}"
    );
    ensure!(
        std::fs::read(&victim).context("the file outside the store")? == b"not orca's",
        "the file outside the store is untouched"
    );
    still_v1(&api, "after-path", &orca, &v1).await?;
    ensure!(
        std::fs::read(&victim)? == b"not orca's",
        "the file outside the store is untouched, rounds later"
    );
    namespace.delete().await
}

#[tokio::test]
async fn restarted_while_the_registry_answers_nothing_orca_serves_the_version_kept_on_disk()
-> Result<()> {
    let registry = TestRegistry::start()?;
    let proxy = RegistryProxy::start(&registry).await?;
    let docker_config = registry.docker_config_for(&proxy.addr)?;
    let v1 = with_custom_section(&std::fs::read(hostile_wasm()?)?, "v1");
    push(&registry, &v1, "stable")?;

    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name("oci-stalled");
    let reference = format!("oci://{}/{REPOSITORY}:stable", proxy.addr);
    let mut orca = start_with(
        &node,
        &[reference],
        &registry,
        &docker_config,
        "    stallTimeout: 2s\n    pullTimeout: 5s\n",
    )?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    orca.wait_serving(Duration::from_secs(120)).await?;
    let namespace = TestNamespace::create(&client, "oci-stalled").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    still_v1(&api, "first", &orca, &v1).await?;

    orca.stop()?;
    proxy.set_fault(Some(RegistryFault::Hang));
    orca.restart()?;
    orca.wait_serving(Duration::from_secs(120)).await?;
    still_v1(&api, "after-restart", &orca, &v1).await?;
    namespace.delete().await
}

#[tokio::test]
async fn a_reference_whose_registry_trickles_does_not_hold_up_another() -> Result<()> {
    let registry = TestRegistry::start()?;
    let proxy = RegistryProxy::start(&registry).await?;
    let docker_config = registry.docker_config_for(&proxy.addr)?;
    let node = unique_node_name("oci-independent");
    // New to every run, so never in the store from an earlier one.
    push(
        &registry,
        &with_custom_section(
            &std::fs::read(hostile_wasm()?)?,
            &format!("trickled-{node}"),
        ),
        "stable",
    )?;
    push_to(
        &registry,
        "team/selector",
        &std::fs::read(team_selector_wasm()?)?,
        "stable",
        None,
    )?;
    // The same credentials serve both hosts (the proxy passes them on).
    let both = registry.dir().join("dockerconfig-both.json");
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&docker_config)?)?;
    let direct: serde_json::Value =
        serde_json::from_slice(&std::fs::read(registry.docker_config()?)?)?;
    if let (Some(auths), Some(more)) =
        (config["auths"].as_object_mut(), direct["auths"].as_object())
    {
        auths.extend(more.clone());
    }
    std::fs::write(&both, serde_json::to_vec(&config)?)?;

    // The first reference's blob trickles for longer than the test (pullTimeout's default is
    // minutes); the second, from the registry directly, loads meanwhile.
    proxy.set_fault(Some(RegistryFault::DripBlob {
        every: Duration::from_secs(1),
    }));
    let trickled = format!("oci://{}/{REPOSITORY}:stable", proxy.addr);
    let direct = format!("oci://{}/team/selector:stable", registry.addr);
    let orca = start_with(&node, &[trickled, direct.clone()], &registry, &both, "")?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    let client = TestCluster::shared().kube_client().await?;
    wait_node_event(
        &client,
        &orca,
        "PluginLoaded",
        &["team-selector", &direct],
        Duration::from_secs(60),
    )
    .await?;
    Ok(())
}
