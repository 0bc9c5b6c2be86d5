//! metrics-server against the harness's apiserver, as a cluster runs it: scraping the kubelet
//! port of the nodes it is given (orca's), serving `metrics.k8s.io` through the apiserver's
//! aggregation layer, so `kubectl top` and the HorizontalPodAutoscaler read it.
//!
//! The harness has no kube-proxy and no pod network: the APIService points at a Service of
//! type `ExternalName` (`localhost`), which the aggregator resolves to `localhost:PORT`
//! (`ResolveCluster` in k8s.io/apiserver; `--enable-aggregator-routing` would need Endpoints,
//! which may not be loopback addresses). The APIService is cluster-wide: dropping the guard
//! deletes it, since a registered API that does not answer breaks discovery (and so namespace
//! deletion) for every other test.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cluster::{TestCluster, kubectl_ok, kubectl_ok_with_input, repo_root};
use crate::orca::free_port;

/// The APIService metrics-server serves.
const API_SERVICE: &str = "v1beta1.metrics.k8s.io";

/// A running metrics-server registered as `metrics.k8s.io`; stopped and unregistered on drop.
pub struct MetricsServer {
    child: Mutex<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl MetricsServer {
    /// Starts metrics-server (built on first use by `tests/cluster/metrics-server`) scraping the
    /// nodes `node_selector` selects every 10 s, registers it with a Service in `namespace`,
    /// and waits until the apiserver calls its API available.
    ///
    /// # Errors
    /// It cannot be built or started, or is not available within two minutes (the first build
    /// is included: it takes a few minutes on a cold cache, so the build runs before).
    pub async fn start(namespace: &str, node_selector: &str) -> Result<MetricsServer> {
        let cluster = TestCluster::shared();
        let script = repo_root().join("tests/cluster/metrics-server");
        // Built now (once per machine), not inside the wait below.
        let built = Command::new(&script).arg("--build-only").output()?;
        anyhow::ensure!(
            built.status.success(),
            "tests/cluster/metrics-server: {built:?}"
        );
        let dir = tempfile::Builder::new()
            .prefix("orca-metrics-server-")
            .tempdir()?;
        let port = free_port()?;
        let kubeconfig = cluster.var("KUBECONFIG").to_owned();
        let log = dir.path().join("metrics-server.log");
        let child = Command::new(&script)
            .args([
                &format!("--secure-port={port}"),
                "--bind-address=127.0.0.1",
                &format!("--cert-dir={}", dir.path().display()),
                &format!("--kubeconfig={kubeconfig}"),
                &format!("--authentication-kubeconfig={kubeconfig}"),
                &format!("--authorization-kubeconfig={kubeconfig}"),
                "--kubelet-insecure-tls",
                "--kubelet-preferred-address-types=InternalIP",
                "--kubelet-use-node-status-port",
                "--metric-resolution=10s",
                "--kubelet-request-timeout=5s",
                &format!("--node-selector={node_selector}"),
                "--v=2",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting metrics-server")?;
        let server = MetricsServer {
            child: Mutex::new(child),
            log,
            _dir: dir,
        };
        let manifest = format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: metrics-server\n  namespace: {namespace}\n\
             spec:\n  type: ExternalName\n  externalName: localhost\n---\n\
             apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {API_SERVICE}\n\
             spec:\n  group: metrics.k8s.io\n  version: v1beta1\n  insecureSkipTLSVerify: true\n\
             \x20 groupPriorityMinimum: 100\n  versionPriority: 100\n\
             \x20 service:\n    namespace: {namespace}\n    name: metrics-server\n    port: {port}\n"
        );
        kubectl_ok_with_input(&["apply", "-f", "-"], manifest.as_bytes())?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = server.exited() {
                bail!("metrics-server exited ({status}):\n{}", server.log());
            }
            let available = kubectl_ok(&[
                "get",
                "apiservice",
                API_SERVICE,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
            ])
            .is_ok_and(|status| status.trim() == "True");
            if available {
                break;
            }
            if Instant::now() >= deadline {
                let status = kubectl_ok(&["get", "apiservice", API_SERVICE, "-o", "yaml"])
                    .unwrap_or_default();
                bail!(
                    "metrics.k8s.io not available after 2 minutes:\n{status}\nmetrics-server log:\n{}",
                    server.log()
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(server)
    }

    /// How it ended, if it has.
    fn exited(&self) -> Option<std::process::ExitStatus> {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .try_wait()
            .ok()
            .flatten()
    }

    /// What metrics-server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        let _ = TestCluster::shared()
            .kubectl()
            .args(["delete", "apiservice", API_SERVICE, "--ignore-not-found"])
            .output();
        let child = self
            .child
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = child.kill();
        let _ = child.wait();
    }
}
