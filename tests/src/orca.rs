//! The real `orca` binary as a child process, with a per-test config and node name, so tests
//! can kill it (SIGKILL or SIGTERM) and start it again like an operator would.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};

use crate::TestCluster;
use crate::http::curl_status;
use crate::procfs;

/// The orca binary, built once per test process with the same cargo and target dir; or the
/// one `ORCA_BINARY` names (a prebuilt release, or orca under a profiler), used as it is.
pub fn orca_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        if let Some(binary) = std::env::var_os("ORCA_BINARY") {
            return PathBuf::from(binary);
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        // Same profile as this executable: benchmarks (release) measure a release orca.
        let exe = std::env::current_exe().expect("test executable path");
        let release = exe
            .ancestors()
            .any(|dir| dir.file_name().is_some_and(|name| name == "release"));
        let mut args = vec!["build", "--quiet", "-p", "orca", "--bin", "orca"];
        if release {
            args.push("--release");
        }
        let mut build = Command::new(cargo);
        build.args(&args).current_dir(crate::cluster::repo_root());
        as_from_a_shell(&mut build);
        let status = build
            .status()
            .expect("running cargo build for the orca binary");
        assert!(status.success(), "building the orca binary failed");
        // Test executables live in <target>/<profile>/deps, bench binaries in <target>/<profile>.
        let profile = if release { "release" } else { "debug" };
        exe.ancestors()
            .find(|dir| dir.file_name().is_some_and(|name| name == profile))
            .map(|dir| dir.join("orca"))
            .filter(|path| path.exists())
            .expect("orca binary in the target directory")
    })
}

/// `command` with the environment a shell has, for a `cargo build` a test starts (directly or
/// through a script). Cargo gives a test process its package's CARGO_* variables; build scripts
/// that watch the environment would see a change and rebuild half the tree, twice (there, and
/// again for the next `cargo test`).
pub fn as_from_a_shell(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_") && name != "CARGO_HOME" && name != "CARGO_TARGET_DIR" {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// One orca process and the files it uses.
pub struct OrcaProcess {
    pub node_name: String,
    pub dir: tempfile::TempDir,
    /// The kubelet API's HTTPS port (`node.daemonPort`) on 127.0.0.1.
    pub kubelet_port: u16,
    /// The plain-HTTP metrics and health port on 127.0.0.1.
    pub metrics_port: u16,
    /// Whose credentials orca uses against the apiserver.
    kubeconfig: PathBuf,
    /// Tests log at debug level to explain failures; benchmarks keep the config's level.
    debug_logs: bool,
    child: Option<Child>,
    /// The Nodes this orca registers (`nodes:`), when not `node_name` alone.
    declared_nodes: Vec<String>,
    /// Another cluster's admin kubeconfig, when orca runs there (its Nodes are deleted there).
    other_cluster: Option<PathBuf>,
    /// Names the log file (`orca-<log_name>.log`): the node's name unless two orcas share it.
    log_name: String,
    /// Set over the harness's environment (other AWS credentials and endpoint).
    env: Vec<(String, String)>,
    /// Whether the config is checked against the published schema before orca starts: always,
    /// but for a test of orca's own refusal of a config the schema refuses too.
    schema_checked: bool,
}

impl OrcaProcess {
    /// Starts orca with the config `config` writes for this process's temp dir, as the
    /// harness's `orca` user (`CN=orca`, so the audit log tells its calls apart).
    pub fn start(node_name: &str, config: impl FnOnce(&Path) -> String) -> Result<OrcaProcess> {
        let kubeconfig = PathBuf::from(TestCluster::shared().var("ORCA_KUBECONFIG"));
        Self::start_with_kubeconfig(node_name, &kubeconfig, config)
    }

    /// [`Self::start`] at the log level the config names rather than the tests' debug level:
    /// benchmarks measure orca as it runs in production (a debug line per reconcile costs CPU).
    pub fn start_as_configured(
        node_name: &str,
        config: impl FnOnce(&Path) -> String,
    ) -> Result<OrcaProcess> {
        let kubeconfig = PathBuf::from(TestCluster::shared().var("ORCA_KUBECONFIG"));
        Self::spawn(node_name, &kubeconfig, false, config)
    }

    /// orca in `cluster` (a control plane of its own), with the shared cluster's AWS endpoint:
    /// two clusters in one account. Its log is `orca-<log_name>.log`, since its node may have
    /// the same name as one in the shared cluster.
    pub fn start_in_cluster(
        cluster: &crate::cluster::SecondCluster,
        log_name: &str,
        node_name: &str,
        config: impl FnOnce(&Path) -> String,
    ) -> Result<OrcaProcess> {
        let dir = tempfile::Builder::new().prefix("orca-e2e-").tempdir()?;
        let (kubelet_port, metrics_port) = (free_port()?, free_port()?);
        let config = with_test_listeners(&config(dir.path()), kubelet_port, metrics_port);
        std::fs::write(dir.path().join("config.yaml"), config)?;
        let mut process = OrcaProcess {
            node_name: node_name.to_owned(),
            dir,
            kubelet_port,
            metrics_port,
            kubeconfig: cluster.orca_kubeconfig(),
            debug_logs: true,
            child: None,
            declared_nodes: Vec::new(),
            other_cluster: Some(cluster.admin_kubeconfig()),
            log_name: log_name.to_owned(),
            env: Vec::new(),
            schema_checked: true,
        };
        process.restart()?;
        Ok(process)
    }

    /// [`Self::start`] with the credentials in `kubeconfig` (e.g. a ServiceAccount's token).
    pub fn start_with_kubeconfig(
        node_name: &str,
        kubeconfig: &Path,
        config: impl FnOnce(&Path) -> String,
    ) -> Result<OrcaProcess> {
        Self::spawn(node_name, kubeconfig, true, config)
    }

    /// [`Self::start`] with `env` set over the harness's environment: e.g. another IAM user's
    /// access key and another AWS endpoint (`AWS_ENDPOINT_URL` is where STS calls go).
    pub fn start_with_env(
        node_name: &str,
        env: &[(String, String)],
        config: impl FnOnce(&Path) -> String,
    ) -> Result<OrcaProcess> {
        let kubeconfig = PathBuf::from(TestCluster::shared().var("ORCA_KUBECONFIG"));
        Self::spawn_with_env(node_name, &kubeconfig, true, env, true, config)
    }

    /// [`Self::start`] of a config the published schema refuses (checked: the schema must
    /// refuse it), for a test of how orca itself refuses it.
    ///
    /// # Errors
    /// The schema accepts the config, or orca cannot be started.
    pub fn start_with_config_the_schema_refuses(
        node_name: &str,
        config: &str,
    ) -> Result<OrcaProcess> {
        if crate::config_schema::check_config(config).is_ok() {
            bail!("the published schema accepts the config this test says it refuses:\n{config}");
        }
        let kubeconfig = PathBuf::from(TestCluster::shared().var("ORCA_KUBECONFIG"));
        Self::spawn_with_env(node_name, &kubeconfig, true, &[], false, |_| {
            config.to_owned()
        })
    }

    fn spawn(
        node_name: &str,
        kubeconfig: &Path,
        debug_logs: bool,
        config: impl FnOnce(&Path) -> String,
    ) -> Result<OrcaProcess> {
        Self::spawn_with_env(node_name, kubeconfig, debug_logs, &[], true, config)
    }

    fn spawn_with_env(
        node_name: &str,
        kubeconfig: &Path,
        debug_logs: bool,
        env: &[(String, String)],
        schema_checked: bool,
        config: impl FnOnce(&Path) -> String,
    ) -> Result<OrcaProcess> {
        let dir = tempfile::Builder::new().prefix("orca-e2e-").tempdir()?;
        let (kubelet_port, metrics_port) = (free_port()?, free_port()?);
        let config = with_test_listeners(&config(dir.path()), kubelet_port, metrics_port);
        std::fs::write(dir.path().join("config.yaml"), config)?;
        let mut process = OrcaProcess {
            node_name: node_name.to_owned(),
            dir,
            kubelet_port,
            metrics_port,
            kubeconfig: kubeconfig.to_owned(),
            debug_logs,
            child: None,
            declared_nodes: Vec::new(),
            other_cluster: None,
            log_name: node_name.to_owned(),
            env: env.to_vec(),
            schema_checked,
        };
        process.restart()?;
        Ok(process)
    }

    /// Starts orca again with the same config and files (after [`Self::kill`] or [`Self::stop`]).
    pub fn restart(&mut self) -> Result<()> {
        if self.child.is_some() {
            bail!("orca for {} is already running", self.node_name);
        }
        // The published schema must accept every config the tests give orca.
        if self.schema_checked {
            crate::config_schema::check_config_file(&self.config_path())?;
        }
        let cluster = TestCluster::shared();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let mut command = Command::new(orca_binary());
        command
            .arg("--config")
            .arg(self.config_path())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig);
        if self.debug_logs {
            command.args(["--log-level", "orca=debug,info"]);
        }
        let child = command
            .envs(cluster.env_vars())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting orca")?;
        self.child = Some(child);
        Ok(())
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.yaml")
    }

    /// The log lives in the harness's state dir (not the temp dir), so it outlives the test
    /// and `tests/run` can keep it when something failed.
    pub fn log_path(&self) -> PathBuf {
        let logs = PathBuf::from(TestCluster::shared().var("ORCA_CLUSTER_STATE")).join("logs");
        logs.join(format!("orca-{}.log", self.log_name))
    }

    /// A path inside this process's temp dir (for state and outage files).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// CPU seconds (user + system) the process has used so far, from /proc.
    pub fn cpu_seconds(&self) -> Option<f64> {
        procfs::cpu_seconds(self.pid()?)
    }

    /// Peak resident set size in bytes (VmHWM), from /proc.
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        procfs::peak_rss_bytes(self.pid()?)
    }

    /// Resident set size now, in bytes (VmRSS), from /proc.
    pub fn rss_bytes(&self) -> Option<u64> {
        procfs::rss_bytes(self.pid()?)
    }

    /// The anonymous part of the resident set (see [`procfs::anon_rss_bytes`]).
    pub fn anon_rss_bytes(&self) -> Option<u64> {
        procfs::anon_rss_bytes(self.pid()?)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(
            self.child.as_mut().map(|child| child.try_wait()),
            Some(Ok(None))
        )
    }

    /// SIGKILL: no chance to clean up, as in a crash or OOM kill.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// SIGSTOP: the process stops where it is, as in a frozen VM or a long pause (its
    /// sockets stay open, the kernel keeps receiving for it).
    pub fn pause(&self) -> Result<()> {
        self.signal("-STOP")
    }

    /// SIGCONT after [`Self::pause`]: the process runs on from where it stopped.
    pub fn resume(&self) -> Result<()> {
        self.signal("-CONT")
    }

    fn signal(&self, signal: &str) -> Result<()> {
        let pid = self.pid().context("orca is not running")?;
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()?;
        if !status.success() {
            bail!("kill {signal} {pid} failed");
        }
        Ok(())
    }

    /// SIGTERM, then waits for exit; returns the exit status.
    pub fn stop(&mut self) -> Result<std::process::ExitStatus> {
        let mut child = self.child.take().context("orca is not running")?;
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()?;
        if !status.success() {
            bail!("sending SIGTERM failed");
        }
        Ok(child.wait()?)
    }

    /// This orca's config declares `names` in `nodes:` (its `node.name` is only their
    /// template): they are the Nodes waited for and deleted at the end.
    #[must_use]
    pub fn declaring(mut self, names: &[String]) -> OrcaProcess {
        self.declared_nodes = names.to_vec();
        self
    }

    /// The Nodes this orca registers.
    pub fn node_names(&self) -> Vec<String> {
        if self.declared_nodes.is_empty() {
            vec![self.node_name.clone()]
        } else {
            self.declared_nodes.clone()
        }
    }

    /// Waits until orca's Nodes are Ready (as a user would before sending them pods).
    pub async fn wait_ready(&self, timeout: std::time::Duration) -> Result<()> {
        let client = TestCluster::shared().kube_client().await?;
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        for name in self.node_names() {
            crate::wait::poll_until(
                &format!("node {name} Ready"),
                timeout,
                std::time::Duration::from_millis(200),
                || async {
                    let ready = crate::nodes::ready_condition(&nodes, &name).await?;
                    Ok(ready.filter(|(status, _)| status == "True").map(|_| ()))
                },
            )
            .await
            .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", self.log()))?;
        }
        Ok(())
    }

    /// Waits until this process answers `/readyz` (Node registered, pod cache listed, kubelet
    /// API listening). After a restart the Node is still Ready from before; this is the
    /// process's own readiness.
    pub async fn wait_serving(&self, timeout: std::time::Duration) -> Result<()> {
        let readyz = format!("http://127.0.0.1:{}/readyz", self.metrics_port);
        crate::wait::poll_until(
            &format!("orca for {} ready", self.node_name),
            timeout,
            std::time::Duration::from_millis(200),
            || async { Ok(matches!(curl_status(&readyz, &[]), Ok((200, _))).then_some(())) },
        )
        .await
        .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", self.log()))
    }

    /// `/readyz` as it answers now: status code and body.
    pub fn readyz(&self) -> Result<(u16, String)> {
        let readyz = format!("http://127.0.0.1:{}/readyz", self.metrics_port);
        curl_status(&readyz, &[])
    }

    /// The log so far, for assertion messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for OrcaProcess {
    /// Kills orca and deletes its Node, so tests leave no NotReady nodes behind in the shared
    /// cluster (they would pile up run after run).
    fn drop(&mut self) {
        let _ = self.kill();
        let mut kubectl = TestCluster::shared().kubectl();
        if let Some(kubeconfig) = &self.other_cluster {
            kubectl.env("KUBECONFIG", kubeconfig);
        }
        let _ = kubectl
            .args(["delete", "node", "--ignore-not-found", "--wait=false"])
            .args(self.node_names())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A unique node name for one test: tests share the cluster, never a node. The prefix is this
/// test binary's alone ([`crate::names::claim`]).
pub fn unique_node_name(test: &str) -> String {
    crate::names::claim(crate::names::NameKind::Node, test);
    let suffix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("orca-e2e-{test}-{suffix:08x}")
}

/// The config the end-to-end tests run orca with: short intervals so lifecycles take seconds,
/// the simulated provider journalled in `dir` (so instances survive an orca restart), and an
/// outage file there. `simulated_extra` adds lines under `provider.simulated`.
pub fn test_config(node_name: &str, dir: &Path, simulated_extra: &str) -> String {
    format!(
        "{}provider:
  simulated:
    bootDelay: 500ms
    stateFile: {dir}/instances.jsonl
    outageFile: {dir}/outage
{}",
        node_and_pods(node_name, ""),
        provider_lines(simulated_extra),
        dir = dir.display()
    )
}

/// The config for orca with the aws provider against the harness's moto EC2 server: the
/// same short intervals as [`test_config`], the node's own name as cluster name (so tests
/// sharing moto never see each other's instances). `aws_extra` adds lines under `provider.aws`.
pub fn aws_test_config(node_name: &str, aws_extra: &str) -> String {
    let cluster = TestCluster::shared();
    aws_test_config_at(node_name, cluster.var("AWS_ENDPOINT_URL"), aws_extra)
}

/// [`aws_test_config`] with EC2 at `endpoint` (a moto of the test's own).
pub fn aws_test_config_at(node_name: &str, endpoint: &str, aws_extra: &str) -> String {
    let cluster = TestCluster::shared();
    format!(
        "{}provider:
  kind: aws
  region: {region}
  aws:
    endpointUrl: {endpoint}
    defaultAmi: ami-0123456789abcdef0
    catalogueRefresh: 0s
{}",
        node_and_pods(node_name, &format!("  clusterName: {node_name}\n")),
        provider_lines(aws_extra),
        region = cluster.var("AWS_REGION"),
    )
}

/// Tests run side by side on one machine: each orca gets its own loopback ports for the
/// kubelet API and metrics, and a self-signed serving certificate (the CSR source has a test
/// of its own) unless the config chooses its TLS. Any config gets these, so no two orcas
/// ever fight over 10250.
pub fn with_test_listeners(config: &str, kubelet_port: u16, metrics_port: u16) -> String {
    let port_line = format!("  daemonPort: {kubelet_port}\n");
    let mut config = match section_start(config, "node") {
        Some(at) => {
            let body = at + "node:\n".len();
            format!("{}{port_line}{}", &config[..body], &config[body..])
        }
        None => format!("node:\n{port_line}{config}"),
    };
    if !config.ends_with('\n') {
        config.push('\n');
    }
    if section_start(&config, "kubeletApi").is_none() {
        config.push_str(
            "kubeletApi:\n  bindAddress: 127.0.0.1\n  followPollInterval: 500ms\n  tls:\n    sources: [selfSigned]\n",
        );
    }
    config.push_str(&format!(
        "metrics:\n  bindAddress: 127.0.0.1\n  port: {metrics_port}\n"
    ));
    config
}

/// Where the top-level section `name:` starts in `config`.
fn section_start(config: &str, name: &str) -> Option<usize> {
    let header = format!("{name}:\n");
    if config.starts_with(&header) {
        Some(0)
    } else {
        config.find(&format!("\n{header}")).map(|at| at + 1)
    }
}

/// A port nothing listens on now (the kernel's pick for an ephemeral bind).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The `node:` and `pods:` sections every test config shares: short intervals so lifecycles
/// take seconds. `node_extra` holds further (indented) `node:` lines.
fn node_and_pods(node_name: &str, node_extra: &str) -> String {
    format!(
        "node:
  name: {node_name}
{node_extra}  leaseRenewInterval: 2s
  pingInterval: 1s
  statusUpdateInterval: 10s
pods:
  syncInterval: 1s
  orphanGracePeriod: 3s
  launchVisibilityGrace: 5s
  retryInitialBackoff: 200ms
  retryMaxBackoff: 1s
"
    )
}

/// `extra` indented to sit under `provider.<kind>`.
fn provider_lines(extra: &str) -> String {
    extra.lines().map(|line| format!("    {line}\n")).collect()
}
