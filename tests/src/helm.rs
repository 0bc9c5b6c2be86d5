//! The real helm CLI (`tests/cluster/build-helm`, built once from the Go module proxy) and
//! orca's chart (`deploy/charts/orca`): lint, render, install into the harness cluster.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::TestCluster;
use crate::cluster::repo_root;

/// The chart's directory in the repository.
pub fn chart_dir() -> PathBuf {
    repo_root().join("deploy/charts/orca")
}

/// The Kubernetes version charts are rendered for without a cluster: the harness's
/// (`K8S_VERSION` of tests/cluster/versions.env), so `helm template` checks the chart's
/// `kubeVersion` against the version the install e2e runs on.
pub fn kube_version() -> Result<String> {
    let versions = std::fs::read_to_string(repo_root().join("tests/cluster/versions.env"))?;
    versions
        .lines()
        .find_map(|line| line.strip_prefix("K8S_VERSION="))
        .map(str::to_owned)
        .context("no K8S_VERSION in tests/cluster/versions.env")
}

/// The helm binary, built on first use (a warm run only checks the build's stamp).
pub fn helm_binary() -> Result<&'static Path> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let output = Command::new(repo_root().join("tests/cluster/build-helm"))
                .output()
                .map_err(|e| format!("running tests/cluster/build-helm: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "tests/cluster/build-helm failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            Ok(PathBuf::from(
                String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            ))
        })
        .as_deref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// helm with a state of its own (no user's repositories, registries or caches read or
/// written), and the harness's kubeconfig when `cluster` is true.
fn helm(cluster: bool) -> Result<Command> {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    let home = HOME.get_or_init(|| tempfile::tempdir().expect("a temporary helm home"));
    let mut command = Command::new(helm_binary()?);
    for (variable, dir) in [
        ("HELM_CACHE_HOME", "cache"),
        ("HELM_CONFIG_HOME", "config"),
        ("HELM_DATA_HOME", "data"),
    ] {
        command.env(variable, home.path().join(dir));
    }
    if cluster {
        command.env("KUBECONFIG", TestCluster::shared().var("KUBECONFIG"));
    } else {
        // Nothing rendered offline may depend on a cluster the user happens to point at.
        command.env("KUBECONFIG", home.path().join("no-kubeconfig"));
    }
    Ok(command)
}

/// `helm ARGS`, which must succeed: its stdout, or an error with its output.
pub fn helm_ok(args: &[&str], cluster: bool) -> Result<String> {
    crate::cluster::succeeded("helm", args, helm(cluster)?.args(args).output()?)
}

/// `helm ARGS` expected to fail: its stderr.
pub fn helm_err(args: &[&str]) -> Result<String> {
    let output = helm(false)?.args(args).output()?;
    if output.status.success() {
        bail!(
            "helm {} succeeded, and should not have: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout)
        );
    }
    Ok(String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The objects `helm template RELEASE deploy/charts/orca -n NAMESPACE EXTRA...` renders, as
/// JSON, in the order helm prints them; the config it renders must pass the config schema.
pub fn template(release: &str, namespace: &str, extra: &[&str]) -> Result<Vec<Value>> {
    let chart = chart_dir();
    let kube_version = kube_version()?;
    let mut args = vec![
        "template",
        release,
        chart.to_str().context("a UTF-8 chart path")?,
        "--namespace",
        namespace,
        "--kube-version",
        kube_version.as_str(),
    ];
    args.extend_from_slice(extra);
    let yaml = helm_ok(&args, false)?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&yaml)
        .with_context(|| format!("parsing helm template's output:\n{yaml}"))?;
    let objects: Vec<Value> = documents.into_iter().filter(|d| !d.is_null()).collect();
    // Whatever values rendered it, the config orca will read is one the schema accepts.
    for object in &objects {
        if let Some(config) = object["data"]["config.yaml"].as_str() {
            crate::config_schema::check_config(config).with_context(|| {
                format!(
                    "the config the chart renders with {extra:?} ({})",
                    object["metadata"]["name"]
                )
            })?;
        }
    }
    Ok(objects)
}

/// A release of the chart in the harness cluster, uninstalled (and checked gone) by
/// [`Release::uninstall`].
pub struct Release {
    pub name: String,
    pub namespace: String,
}

impl Release {
    /// `helm install NAME deploy/charts/orca -n NAMESPACE EXTRA...`; the namespace must exist.
    pub fn install(name: &str, namespace: &str, extra: &[&str]) -> Result<Release> {
        let chart = chart_dir();
        let mut args = vec![
            "install",
            name,
            chart.to_str().context("a UTF-8 chart path")?,
            "--namespace",
            namespace,
        ];
        args.extend_from_slice(extra);
        helm_ok(&args, true)?;
        Ok(Release {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        })
    }

    /// `helm get manifest`: the objects the release holds, as JSON.
    pub fn manifest(&self) -> Result<Vec<Value>> {
        let yaml = helm_ok(
            &[
                "get",
                "manifest",
                &self.name,
                "--namespace",
                &self.namespace,
            ],
            true,
        )?;
        let documents: Vec<Value> = serde_saphyr::from_multiple(&yaml)?;
        Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
    }

    pub fn uninstall(self) -> Result<()> {
        helm_ok(
            &[
                "uninstall",
                &self.name,
                "--namespace",
                &self.namespace,
                "--wait",
            ],
            true,
        )
        .map(drop)
    }
}
