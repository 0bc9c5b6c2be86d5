//! orca's container image, built without a container engine (`deploy/image`, what
//! `deploy/build-image` runs on a release build) from `deploy/Dockerfile`'s final stage, pushed
//! to a real registry (the CNCF distribution registry on loopback), pulled back by a client of
//! its own, unpacked as a runtime unpacks layers, and run under `chroot` as UID 65532, the way
//! the Deployment runs it: `orca --version`; `orca plugin check` of a plugin where the
//! Deployment mounts the plugins ConfigMap; and orca serving a Node of the harness cluster
//! against its apiserver and moto, with only the image's files, its kubeconfig and config.
//!
//! `chroot --userspec` needs root (CI runs as root).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig};
use oci_client::manifest::IMAGE_LAYER_GZIP_MEDIA_TYPE;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use orca_e2e::cluster::repo_root;
use orca_e2e::orca::{free_port, orca_binary, with_test_listeners};
use orca_e2e::plugins::team_selector_wasm;
use orca_e2e::registry::TestRegistry;
use orca_e2e::wait::poll_until;
use orca_e2e::{TestCluster, aws_test_config, unique_node_name};
use orca_image::{FinalStage, Image, Registry, Sources};

/// The Deployment's user and group (deploy/base/deployment.yaml, the Dockerfile's USER).
const USERSPEC: &str = "65532:65532";
const READY: Duration = Duration::from_secs(90);

#[tokio::test]
async fn orca_from_the_image_built_without_an_engine_runs_as_65532_checks_a_plugin_and_serves_a_node()
-> Result<()> {
    ensure!(
        euid()? == 0,
        "this test runs orca under `chroot --userspec`, which needs root (CI runs as root)"
    );
    // The build stage's /out/orca is the orca under test (a debug build in CI: the builder
    // strips its debug info, as the release profile leaves none).
    let stage_dir = tempfile::Builder::new()
        .prefix("orca-image-stage-")
        .tempdir()?;
    std::fs::create_dir_all(stage_dir.path().join("out"))?;
    std::os::unix::fs::symlink(orca_binary(), stage_dir.path().join("out/orca"))?;
    let dockerfile = repo_root().join("deploy/Dockerfile");
    let stage = FinalStage::read(&dockerfile)?;
    let image = Image::assemble(
        &stage,
        &Sources {
            context: repo_root().to_owned(),
            stages: BTreeMap::from([("build".to_owned(), stage_dir.path().to_owned())]),
        },
    )?;
    eprintln!(
        "image: {} layers, {} bytes compressed",
        image.layers.len(),
        image.compressed_bytes()
    );

    let registry = TestRegistry::start()?;
    let pinned = orca_image::push(
        &image,
        &format!("{}/orca/orca:e2e", registry.addr),
        &Registry {
            ca_file: Some(registry.ca.clone()),
            docker_config: Some(registry.docker_config()?),
        },
    )
    .await?;
    ensure!(
        pinned.contains("@sha256:"),
        "push pins the digest: {pinned}"
    );

    // Pulled back by a client of this test's own, as a node's runtime would.
    let (config, rootfs) = pull_and_unpack(&registry, &pinned).await?;
    let settings = &config["config"];
    ensure!(settings["User"] == USERSPEC, "{settings}");
    ensure!(
        settings["Entrypoint"] == serde_json::json!(stage.entrypoint),
        "{settings}"
    );
    ensure!(
        settings["Cmd"] == serde_json::json!(stage.cmd),
        "{settings}"
    );
    for port in ["10250/tcp", "10255/tcp"] {
        ensure!(settings["ExposedPorts"].get(port).is_some(), "{settings}");
    }
    ensure!(
        settings["Env"].as_array().is_some_and(|env| env
            .iter()
            .any(|e| e == "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")),
        "{settings}"
    );
    // Every file the Dockerfile's final stage copies is where it puts it.
    for copy in &stage.copies {
        let inside = rootfs.path().join(copy.target().trim_start_matches('/'));
        ensure!(inside.is_file(), "{}: no {}", copy.text, inside.display());
        if copy.from.is_none() {
            ensure!(
                std::fs::read(&inside)? == std::fs::read(repo_root().join(&copy.source))?,
                "{}: the content differs",
                copy.text
            );
        }
    }
    let passwd = std::fs::read_to_string(rootfs.path().join("etc/passwd"))?;
    ensure!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");

    // The Deployment's writable cache (the `cache` emptyDir, XDG_CACHE_HOME).
    let cache = rootfs.path().join("var/cache/orca");
    std::fs::create_dir_all(&cache)?;
    chown(&cache, 65532)?;

    // orca --version, as UID 65532, with nothing but the image's files.
    let version = in_image(rootfs.path(), &["--version"], &[])?;
    let expected = Command::new(orca_binary()).arg("--version").output()?;
    ensure!(
        version.status.success() && version.stdout == expected.stdout,
        "orca --version in the image: {}{}",
        String::from_utf8_lossy(&version.stdout),
        String::from_utf8_lossy(&version.stderr)
    );

    // A plugin where the Deployment mounts the orca-plugins ConfigMap.
    let plugins = rootfs.path().join("etc/orca/plugins");
    std::fs::create_dir_all(&plugins)?;
    std::fs::copy(team_selector_wasm()?, plugins.join("team-selector.wasm"))?;
    let check = in_image(
        rootfs.path(),
        &["plugin", "check", "/etc/orca/plugins/team-selector.wasm"],
        &[],
    )?;
    let report = String::from_utf8_lossy(&check.stdout);
    ensure!(
        check.status.success() && report.contains("name:       team-selector"),
        "orca plugin check in the image: {report}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // The compile cache works as 65532 where the Deployment puts it.
    let stderr = String::from_utf8_lossy(&check.stderr);
    ensure!(!stderr.contains("compile cache not used"), "{stderr}");

    // orca serving a Node of the harness against its apiserver and moto.
    let node = unique_node_name("image");
    let serving = Serving::start(rootfs.path(), &node)?;
    let client = TestCluster::shared().kube_client().await?;
    let nodes: kube::Api<Node> = kube::Api::all(client);
    poll_until(
        &format!("node {node} Ready"),
        READY,
        Duration::from_millis(500),
        || async {
            let ready = orca_e2e::nodes::ready_condition(&nodes, &node).await?;
            Ok(ready.filter(|(status, _)| status == "True").map(|_| ()))
        },
    )
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", serving.log()))?;
    // The Node shows Ready as soon as orca creates it; orca's own /readyz says so once the
    // registration call has returned to it, a moment later.
    let readyz = format!("http://127.0.0.1:{}/readyz", serving.metrics_port);
    poll_until("/readyz 200", READY, Duration::from_millis(200), || async {
        let (status, body) = orca_e2e::http::curl_status(&readyz, &[])?;
        Ok((status == 200).then_some(()).or_else(|| {
            eprintln!("/readyz: {status} {body}");
            None
        }))
    })
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", serving.log()))?;
    ensure!(
        serving.runs_as(65532)?,
        "orca in the image runs as 65532\n{}",
        serving.log()
    );
    Ok(())
}

/// Pulls `pinned` with basic auth and the registry's CA, and unpacks its layers, bottom first,
/// into a new directory, keeping modes and owners as a runtime does. The image config, and the
/// directory.
async fn pull_and_unpack(
    registry: &TestRegistry,
    pinned: &str,
) -> Result<(serde_json::Value, tempfile::TempDir)> {
    let client = Client::new(ClientConfig {
        extra_root_certificates: vec![Certificate {
            encoding: CertificateEncoding::Pem,
            data: std::fs::read(&registry.ca)?,
        }],
        ..ClientConfig::default()
    });
    let reference: Reference = pinned.parse()?;
    let auth = RegistryAuth::Basic(registry.user.clone(), registry.password.clone());
    let pulled = client
        .pull(&reference, &auth, vec![IMAGE_LAYER_GZIP_MEDIA_TYPE])
        .await
        .with_context(|| format!("pulling {pinned}"))?;
    let config: serde_json::Value = serde_json::from_slice(&pulled.config.data)?;
    let rootfs = tempfile::Builder::new()
        .prefix("orca-image-rootfs-")
        .tempdir()?;
    // The image's `/`, as a runtime makes it: every user may walk it.
    std::fs::set_permissions(
        rootfs.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    for layer in &pulled.layers {
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(layer.data.as_ref()));
        archive.set_preserve_permissions(true);
        archive.set_preserve_ownerships(true);
        archive.unpack(rootfs.path())?;
    }
    Ok((config, rootfs))
}

/// `orca ARGS` in the image at `rootfs` as UID/GID 65532, with the image's environment, the
/// Deployment's XDG_CACHE_HOME and `env`; its output.
fn in_image(rootfs: &Path, args: &[&str], env: &[(String, String)]) -> Result<Output> {
    chroot(rootfs, args, env).output().context("running chroot")
}

fn chroot(rootfs: &Path, args: &[&str], env: &[(String, String)]) -> Command {
    let mut command = Command::new("/usr/sbin/chroot");
    command
        .arg(format!("--userspec={USERSPEC}"))
        .arg(rootfs)
        .arg("/usr/local/bin/orca")
        .args(args)
        .current_dir(rootfs)
        // The image's Env, then the container's; nothing of this machine's.
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
        .env("XDG_CACHE_HOME", "/var/cache/orca")
        .envs(env.iter().map(|(k, v)| (k, v)));
    command
}

/// orca serving from the image, as the Deployment runs it: its config and kubeconfig where the
/// ConfigMap and a token would be.
struct Serving {
    child: Child,
    node: String,
    metrics_port: u16,
    log: PathBuf,
}

impl Serving {
    fn start(rootfs: &Path, node: &str) -> Result<Serving> {
        let cluster = TestCluster::shared();
        let etc = rootfs.join("etc/orca/config");
        std::fs::create_dir_all(&etc)?;
        // The kubeconfig with its certificates inline: paths of this machine mean nothing there.
        let kubeconfig = cluster
            .kubectl()
            .env("KUBECONFIG", cluster.var("ORCA_KUBECONFIG"))
            .args(["config", "view", "--flatten", "--minify"])
            .output()?;
        ensure!(
            kubeconfig.status.success(),
            "kubectl config view: {}",
            String::from_utf8_lossy(&kubeconfig.stderr)
        );
        std::fs::write(etc.join("kubeconfig"), &kubeconfig.stdout)?;
        let (kubelet_port, metrics_port) = (free_port()?, free_port()?);
        let config = format!(
            "{}policy:\n  pluginsDir: /etc/orca/plugins\n",
            aws_test_config(node, "")
        );
        std::fs::write(
            etc.join("config.yaml"),
            with_test_listeners(&config, kubelet_port, metrics_port),
        )?;
        let log = PathBuf::from(cluster.var("ORCA_CLUSTER_STATE"))
            .join("logs")
            .join(format!("orca-{node}.log"));
        let file = std::fs::File::create(&log)?;
        let aws: Vec<(String, String)> = cluster
            .env_vars()
            .filter(|(key, _)| key.starts_with("AWS_"))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let child = chroot(
            rootfs,
            &[
                "--config",
                "/etc/orca/config/config.yaml",
                "--kubeconfig",
                "/etc/orca/config/kubeconfig",
                "--log-format",
                "json",
            ],
            &aws,
        )
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .context("starting orca from the image")?;
        Ok(Serving {
            child,
            node: node.to_owned(),
            metrics_port,
            log,
        })
    }

    /// Whether the process (chroot execs orca, so the child is orca) has `uid` as its real and
    /// effective user and group.
    fn runs_as(&self, uid: u32) -> Result<bool> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let ids = |field: &str| -> Vec<String> {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .map(|rest| rest.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let all = |values: Vec<String>| {
            !values.is_empty() && values.iter().all(|v| *v == uid.to_string())
        };
        Ok(all(ids("Uid:")) && all(ids("Gid:")))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = TestCluster::shared()
            .kubectl()
            .args([
                "delete",
                "node",
                "--ignore-not-found",
                "--wait=false",
                &self.node,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn chown(path: &Path, id: u32) -> Result<()> {
    std::os::unix::fs::chown(path, Some(id), Some(id))
        .with_context(|| format!("chown {}", path.display()))
}

/// This process's effective user ID, from /proc.
fn euid() -> Result<u32> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .and_then(|euid| euid.parse().ok())
        .context("no Uid line in /proc/self/status")
}
