//! Plugins delivered by reference from a real OCI registry (the CNCF distribution registry on
//! loopback, TLS from its own CA, basic auth from a Docker config.json as a
//! `kubernetes.io/dockerconfigjson` Secret holds it): `orca plugin push` publishes v1 and pods
//! are decided by v1; v2 pushed to the same tag decides new pods within the refresh interval,
//! no restart; a v3 whose bytes in the registry no longer match their digest is refused,
//! reported on the Node as `PluginRejected`, and v2 keeps serving; restarted while the registry
//! is down, orca serves v2 from the components it kept on disk. With `policy.registry.verify`,
//! only versions signed by an allowed cosign key load (signed by `orca plugin push --sign-key`
//! and by the real cosign CLI), and the signer is in every decision.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::cosign::{Cosign, KEY_PASSWORD, KeyPair};
use orca_e2e::orca::orca_binary;
use orca_e2e::plugins::hostile_wasm;
use orca_e2e::pods::{self, burst_pod, events_about, wait_decided, wait_for_node_event};
use orca_e2e::registry::TestRegistry;
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, test_config, unique_node_name};
use sha2::{Digest, Sha256};

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
    push_to(registry, REPOSITORY, bytes, tag, None)
}

/// `orca plugin push` of `bytes` to `tag` of [`REPOSITORY`], signed with `key`; the pinned
/// reference it prints.
fn push_signed(registry: &TestRegistry, bytes: &[u8], tag: &str, key: &KeyPair) -> Result<String> {
    push_to(registry, REPOSITORY, bytes, tag, Some(key))
}

/// `orca plugin push` of `bytes` to `repository:tag`, signed with `key` when given; the pinned
/// reference it prints.
fn push_to(
    registry: &TestRegistry,
    repository: &str,
    bytes: &[u8],
    tag: &str,
    key: Option<&KeyPair>,
) -> Result<String> {
    let file = registry
        .dir()
        .join(format!("{}-{tag}.wasm", repository.replace('/', "-")));
    std::fs::write(&file, bytes)?;
    let mut command = Command::new(orca_binary());
    command
        .args(["plugin", "push"])
        .arg(&file)
        .arg(format!("oci://{}/{repository}:{tag}", registry.addr))
        .arg("--docker-config")
        .arg(registry.docker_config()?)
        .arg("--ca-file")
        .arg(&registry.ca);
    if let Some(key) = key {
        command
            .arg("--sign-key")
            .arg(&key.private)
            .env("COSIGN_PASSWORD", KEY_PASSWORD);
    }
    let output = command.output().context("running orca plugin push")?;
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
    start_verifying(node, registry, docker_config, "")
}

/// orca pulling `stable` every second, with `verify` (YAML lines under `registry:`, or none).
fn start_verifying(
    node: &str,
    registry: &TestRegistry,
    docker_config: &Path,
    verify: &str,
) -> Result<OrcaProcess> {
    let reference = format!("oci://{}/{REPOSITORY}:stable", registry.addr);
    start_with(node, &[reference], registry, docker_config, verify)
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
    // A compile cache of its own, so a store of pulled plugins of its own (kept beside it): the
    // shared one keeps what earlier runs pulled under the same reference (a registry's port is
    // reused), and orca rightly serves that at startup until its pull of today's version ends.
    OrcaProcess::start(node, |dir| {
        format!(
            "{}policy:\n  compileCacheDir: {}\n  plugins: [{references}]\n  registry:\n    refreshInterval: 1s\n    dockerConfig: {docker_config}\n    caFile: {ca}\n{registry_extra}  selectInstance:\n    - plugin: hostile\n",
            test_config(node, dir, ""),
            dir.join("compile-cache").display(),
        )
    })
}

async fn decided_by(api: &Api<Pod>, name: &str, node: &str) -> Result<String> {
    Ok(decided_and_signed_by(api, name, node).await?.0)
}

/// The sha256 of the plugin that chose a new pod's instance type, and the signer the
/// decision record names for it (empty when none).
async fn decided_and_signed_by(api: &Api<Pod>, name: &str, node: &str) -> Result<(String, String)> {
    pods::create(api, &burst_pod(name, node, &[])).await?;
    let decision = wait_decided(api, name, DECIDED).await?;
    ensure!(
        decision["selectInstance"]["plugin"] == "hostile",
        "{decision}"
    );
    let field = |name: &str| {
        decision["selectInstance"][name]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    Ok((field("sha256"), field("signedBy")))
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

/// The fingerprint orca shows for a cosign public key: the sha256 of its DER (SubjectPublicKeyInfo).
fn key_fingerprint(public: &Path) -> Result<String> {
    let pem = std::fs::read_to_string(public)?;
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD.decode(body)?;
    Ok(format!("sha256:{}", sha256(&der)))
}

/// `oci://REGISTRY/REPOSITORY@sha256:…` as cosign names it (no scheme).
fn cosign_reference(pinned: &str) -> &str {
    pinned.trim_start_matches("oci://")
}

/// The note of a `PluginRejected` Event on `node` that mentions `digest`, once there is one.
async fn rejection_naming(
    client: &kube::Client,
    node: &str,
    digest: &str,
    wanted: &str,
) -> Result<String> {
    poll_until(
        &format!("a PluginRejected event naming {digest} and {wanted:?}"),
        SWAPPED,
        TICK,
        || async move {
            let events = events_about(client, "default", node).await?;
            Ok(events.into_iter().find_map(|event| {
                let note = event.note.unwrap_or_default();
                (event.reason.as_deref() == Some("PluginRejected")
                    && note.contains(digest)
                    && note.contains(wanted))
                .then_some(note)
            }))
        },
    )
    .await
}

/// `orca plugin check oci://…` with `--key`: its exit status and output.
fn check_reference(registry: &TestRegistry, reference: &str, key: &Path) -> Result<(bool, String)> {
    let output = Command::new(orca_binary())
        .args(["plugin", "check", reference])
        .arg("--docker-config")
        .arg(registry.docker_config()?)
        .arg("--ca-file")
        .arg(&registry.ca)
        .arg("--key")
        .arg(key)
        .output()
        .context("running orca plugin check")?;
    Ok((
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    ))
}

/// `policy.registry.verify` allowing one key for every plugin of the test's repository: v1,
/// signed by `orca plugin push --sign-key` (and accepted by `cosign verify`), decides pods and
/// the decision names its signer; v2, pushed unsigned and then signed by the real cosign CLI,
/// is swapped in once signed; v3, unsigned, and v4, signed by another key, are refused with
/// `PluginRejected` naming what was expected and found, v2 serving on; restarted while the tag
/// names v4, orca serves v2 again (what it kept on disk is only ever a verified version).
#[tokio::test]
async fn only_plugins_signed_by_an_allowed_key_load_and_a_refused_push_leaves_the_signed_version_serving()
-> Result<()> {
    let registry = TestRegistry::start()?;
    let cosign = Cosign::for_registry(&registry)?;
    let docker_config = registry.docker_config()?;
    let keys = registry.dir().join("keys");
    std::fs::create_dir_all(&keys)?;
    let team = cosign.generate_key_pair(&keys, "team")?;
    let rogue = cosign.generate_key_pair(&keys, "rogue")?;
    let team_fingerprint = key_fingerprint(&team.public)?;
    let original = std::fs::read(hostile_wasm()?)?;
    let [v1, v2, v3, v4] = ["v1", "v2", "v3", "v4"].map(|v| with_custom_section(&original, v));

    // orca signs what it pushes, in cosign's format: cosign verifies it with the team's key
    // and not with another.
    let v1_pinned = push_signed(&registry, &v1, "stable", &team)?;
    let verified = cosign.verify(&team.public, cosign_reference(&v1_pinned))?;
    ensure!(
        verified.status.success(),
        "cosign verify of orca's signature: {}",
        String::from_utf8_lossy(&verified.stderr)
    );
    let other = cosign.verify(&rogue.public, cosign_reference(&v1_pinned))?;
    ensure!(
        !other.status.success(),
        "cosign verify accepts orca's signature with a key that did not make it"
    );

    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name("oci-signed");
    let verify = format!(
        "    verify:\n      - references: [\"oci://{}/team/*\"]\n        keys: [\"{}\"]\n",
        registry.addr,
        team.public.display()
    );
    let mut orca = start_verifying(&node, &registry, &docker_config, &verify)?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    orca.wait_serving(Duration::from_secs(120)).await?;
    let namespace = TestNamespace::create(&client, "oci-signed").await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    let with_log =
        |e: anyhow::Error, orca: &OrcaProcess| anyhow::anyhow!("{e:#}\norca log:\n{}", orca.log());
    let (sha, signer) = decided_and_signed_by(&api, "first", &node)
        .await
        .map_err(|e| with_log(e, &orca))?;
    ensure!(sha == sha256(&v1), "v1 decided the first pod");
    ensure!(
        signer == format!("key {team_fingerprint}"),
        "the decision names v1's signer: {signer:?}, expected key {team_fingerprint}"
    );

    // v2 pushed, then signed by cosign itself: loaded once the signature is there.
    let v2_pinned = push(&registry, &v2, "stable")?;
    cosign.sign(&team, cosign_reference(&v2_pinned))?;
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
    .map_err(|e| with_log(e, &orca))?;

    // v3, unsigned: refused, naming the key expected and that there is no signature.
    let v3_pinned = push(&registry, &v3, "stable")?;
    let v3_digest = v3_pinned.rsplit('@').next().unwrap_or_default();
    let note = rejection_naming(&client, &node, v3_digest, "no cosign signature")
        .await
        .map_err(|e| with_log(e, &orca))?;
    ensure!(
        note.contains(&team_fingerprint) && note.contains("keeps serving"),
        "{note}"
    );
    ensure!(
        decided_by(&api, "after-unsigned", &node).await? == sha256(&v2),
        "v2 keeps serving after the unsigned v3"
    );

    // v4, signed by cosign with a key not allowed: refused, naming the key expected.
    let v4_pinned = push(&registry, &v4, "stable")?;
    cosign.sign(&rogue, cosign_reference(&v4_pinned))?;
    let v4_digest = v4_pinned.rsplit('@').next().unwrap_or_default();
    let note = rejection_naming(&client, &node, v4_digest, "not by an allowed signer")
        .await
        .map_err(|e| with_log(e, &orca))?;
    ensure!(
        note.contains(&team_fingerprint) && note.contains("keeps serving"),
        "{note}"
    );
    ensure!(
        decided_by(&api, "after-rogue", &node).await? == sha256(&v2),
        "v2 keeps serving after v4, signed by another key"
    );

    // `orca plugin check` of a reference shows the signature status.
    let stable = format!("oci://{}/{REPOSITORY}:stable", registry.addr);
    let (ok, output) = check_reference(&registry, &stable, &team.public)?;
    ensure!(
        !ok && output.contains("not by an allowed signer"),
        "{output}"
    );
    let (ok, output) = check_reference(&registry, &v2_pinned, &team.public)?;
    ensure!(
        ok && output.contains(&format!("signed by:  key {team_fingerprint}")),
        "{output}"
    );

    // Restarted while the tag names v4: v2, the version last verified, serves from disk.
    orca.stop()?;
    orca.restart()?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    let (sha, signer) = decided_and_signed_by(&api, "after-restart", &node)
        .await
        .map_err(|e| with_log(e, &orca))?;
    ensure!(sha == sha256(&v2), "v2 serves after the restart");
    ensure!(signer == format!("key {team_fingerprint}"), "{signer:?}");
    namespace.delete().await
}
