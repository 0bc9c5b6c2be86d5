//! Plugins delivered by reference from a real OCI registry (the CNCF distribution registry on
//! loopback, TLS from its own CA, basic auth from a Docker config.json as a
//! `kubernetes.io/dockerconfigjson` Secret holds it): `orca plugin push` publishes v1 and pods
//! are decided by v1; v2 pushed to the same tag decides new pods within the refresh interval,
//! no restart; a v3 whose bytes in the registry no longer match their digest is refused,
//! reported on the Node as `PluginRejected`, and v2 keeps serving; restarted while the registry
//! is down, orca serves v2 from the components it kept on disk.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::orca::orca_binary;
use orca_e2e::plugins::hostile_wasm;
use orca_e2e::pods::{self, burst_pod, wait_decided, wait_for_node_event};
use orca_e2e::registry::TestRegistry;
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, test_config, unique_node_name};
use sha2::{Digest, Sha256};

#[path = "oci/hostile_registry.rs"]
mod hostile_registry;

const DECIDED: Duration = Duration::from_secs(60);
/// A new tag's digest is loaded within the 1 s refresh interval plus a load.
const SWAPPED: Duration = Duration::from_secs(30);
const TICK: Duration = Duration::from_millis(200);
const REPOSITORY: &str = "team/hostile";

/// `component` with a custom section appended: the same plugin, other bytes (a new version
/// as far as digests go, told apart in decisions by its sha256).
fn with_custom_section(component: &[u8], payload: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"orca-test-version";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(payload.as_bytes());
    let mut out = component.to_vec();
    out.push(0);
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `orca plugin push` of `bytes` to `tag` of [`REPOSITORY`]; the pinned reference it prints.
fn push(registry: &TestRegistry, bytes: &[u8], tag: &str) -> Result<String> {
    push_to(registry, REPOSITORY, bytes, tag)
}

/// `orca plugin push` of `bytes` to `repository:tag`; the pinned reference it prints.
fn push_to(registry: &TestRegistry, repository: &str, bytes: &[u8], tag: &str) -> Result<String> {
    let file = registry
        .dir()
        .join(format!("{}-{tag}.wasm", repository.replace('/', "-")));
    std::fs::write(&file, bytes)?;
    let output = Command::new(orca_binary())
        .args(["plugin", "push"])
        .arg(&file)
        .arg(format!("oci://{}/{repository}:{tag}", registry.addr))
        .arg("--docker-config")
        .arg(registry.docker_config()?)
        .arg("--ca-file")
        .arg(&registry.ca)
        .output()
        .context("running orca plugin push")?;
    ensure!(
        output.status.success(),
        "orca plugin push failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pinned = String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    ensure!(
        pinned.starts_with("oci://") && pinned.contains("@sha256:"),
        "push prints the pinned reference: {pinned}"
    );
    Ok(pinned)
}

fn start(node: &str, registry: &TestRegistry, docker_config: &Path) -> Result<OrcaProcess> {
    let reference = format!("oci://{}/{REPOSITORY}:stable", registry.addr);
    start_with(node, &[reference], registry, docker_config, "")
}

/// orca following `references` (the first one deciding pods: the hostile plugin), trusting
/// `registry`'s CA, with `registry_extra` lines under `policy.registry`.
fn start_with(
    node: &str,
    references: &[String],
    registry: &TestRegistry,
    docker_config: &Path,
    registry_extra: &str,
) -> Result<OrcaProcess> {
    let references = references
        .iter()
        .map(|r| format!("\"{r}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let ca = registry.ca.display().to_string();
    let docker_config = docker_config.display().to_string();
    OrcaProcess::start(node, |dir| {
        format!(
            "{}policy:\n  plugins: [{references}]\n  registry:\n    refreshInterval: 1s\n    dockerConfig: {docker_config}\n    caFile: {ca}\n{registry_extra}  selectInstance:\n    - plugin: hostile\n",
            test_config(node, dir, ""),
        )
    })
}

async fn decided_by(api: &Api<Pod>, name: &str, node: &str) -> Result<String> {
    pods::create(api, &burst_pod(name, node, &[])).await?;
    let decision = wait_decided(api, name, DECIDED).await?;
    ensure!(
        decision["selectInstance"]["plugin"] == "hostile",
        "{decision}"
    );
    Ok(decision["selectInstance"]["sha256"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

#[tokio::test]
async fn a_plugin_pulled_by_tag_is_swapped_when_the_tag_moves_and_tampered_bytes_are_refused()
-> Result<()> {
    let registry = TestRegistry::start()?;
    let docker_config = registry.docker_config()?;
    let original = std::fs::read(hostile_wasm()?)?;
    let v1 = with_custom_section(&original, "v1");
    let v2 = with_custom_section(&original, "v2");
    let v3 = with_custom_section(&original, "v3");
    push(&registry, &v1, "stable")?;

    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name("oci");
    let orca = start(&node, &registry, &docker_config)?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    orca.wait_serving(Duration::from_secs(120)).await?;
    let namespace = TestNamespace::create(&client, "oci").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    let first = decided_by(&api, "first", &node)
        .await
        .map_err(|e| anyhow::anyhow!("{e:#}\norca log:\n{}", orca.log()))?;
    ensure!(first == sha256(&v1), "v1 decided the first pod");

    // v2 to the same tag: live within the refresh interval, without a restart.
    push(&registry, &v2, "stable")?;
    let mut round = 0;
    poll_until("a pod decided by v2", SWAPPED, TICK, || {
        round += 1;
        let api = api.clone();
        let node = node.clone();
        let v2 = sha256(&v2);
        async move {
            let sha = decided_by(&api, &format!("swap-{round}"), &node).await?;
            Ok((sha == v2).then_some(()))
        }
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}\norca log:\n{}", orca.log()))?;

    // v3's component is pushed under another tag, its bytes in the registry then changed, and
    // only then is `stable` pointed at its manifest: orca must refuse what it pulls.
    let pinned = push(&registry, &v3, "staging")?;
    let manifest_digest = pinned.rsplit('@').next().unwrap_or_default().to_owned();
    let layer = format!("sha256:{}", sha256(&v3));
    let blob = registry.blob_file(&layer);
    let mut tampered = std::fs::read(&blob).with_context(|| format!("{}", blob.display()))?;
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    std::fs::write(&blob, &tampered)?;
    let media_type = "application/vnd.oci.image.manifest.v1+json";
    let url = |reference: &str| {
        format!(
            "https://{}/v2/{REPOSITORY}/manifests/{reference}",
            registry.addr
        )
    };
    let manifest = registry.curl(&[
        "-H",
        &format!("Accept: {media_type}"),
        &url(&manifest_digest),
    ])?;
    let manifest_file = registry.dir().join("v3-manifest.json");
    std::fs::write(&manifest_file, manifest)?;
    registry.curl(&[
        "-X",
        "PUT",
        "-H",
        &format!("Content-Type: {media_type}"),
        "--data-binary",
        &format!("@{}", manifest_file.display()),
        &url("stable"),
    ])?;

    let rejected = wait_for_node_event(&client, &node, "PluginRejected", SWAPPED)
        .await
        .map_err(|e| anyhow::anyhow!("{e:#}\norca log:\n{}", orca.log()))?;
    let note = rejected.note.unwrap_or_default();
    ensure!(
        note.contains("does not match its digest") && note.contains("keeps serving"),
        "{note}"
    );
    let still = decided_by(&api, "still", &node).await?;
    ensure!(
        still == sha256(&v2),
        "v2 keeps serving after the tampered v3"
    );
    namespace.delete().await
}
