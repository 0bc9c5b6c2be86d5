//! The running harness cluster: its env file, and clients built from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};
use aws_config::BehaviorVersion;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The local control plane + moto EC2 endpoint started by `tests/cluster/up`.
///
/// # Guarantees
/// One `up` per test binary at most: if `ORCA_CLUSTER_ENV` names an env file (as `tests/run`
/// sets it) that file is used; otherwise `up` is run once, and it reuses a running cluster.
pub struct TestCluster {
    env: BTreeMap<String, String>,
}

impl TestCluster {
    /// The cluster shared by every test in this binary.
    ///
    /// # Panics
    /// When the harness cannot be started: every end-to-end test needs it, so failing loudly
    /// with the harness's own message is the useful outcome.
    pub fn shared() -> &'static TestCluster {
        // kube and the AWS SDK both bring rustls; name the crypto backend once, as orca does.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
        CLUSTER.get_or_init(|| match Self::locate_or_start() {
            Ok(cluster) => cluster,
            Err(err) => panic!("local cluster harness unavailable: {err:#}"),
        })
    }

    fn locate_or_start() -> Result<TestCluster> {
        let env_file = match std::env::var_os("ORCA_CLUSTER_ENV") {
            Some(path) => PathBuf::from(path),
            None => run_up()?,
        };
        let text = std::fs::read_to_string(&env_file)
            .with_context(|| format!("reading harness env file {}", env_file.display()))?;
        Ok(TestCluster {
            env: parse_env_file(&text),
        })
    }

    /// A value from the harness env file, e.g. `KUBECONFIG` or `AWS_ENDPOINT_URL`.
    pub fn var(&self, key: &str) -> &str {
        self.env
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("harness env file has no {key}"))
    }

    /// Every `KEY=value` of the env file except `PATH`, ready for `Command::envs`.
    pub fn env_vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.env
            .iter()
            .filter(|(key, _)| key.as_str() != "PATH")
            .map(|(key, value)| (key.as_str(), value.as_str()))
    }

    /// A kube client authenticated as the harness's cluster admin.
    pub async fn kube_client(&self) -> Result<kube::Client> {
        let kubeconfig = Kubeconfig::read_from(self.var("KUBECONFIG"))?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// An EC2 client pointed at moto, with the harness's dummy credentials.
    pub async fn ec2_client(&self) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::new(&self.aws_config().await)
    }

    /// A CloudWatch Logs client for moto's (the same endpoint as its EC2): what an instance's
    /// log driver writes, a test writes with it.
    pub async fn logs_client(&self) -> aws_sdk_cloudwatchlogs::Client {
        aws_sdk_cloudwatchlogs::Client::new(&self.aws_config().await)
    }

    /// A CloudWatch client for moto's (the same endpoint as its EC2): what an instance's
    /// sampler publishes, a test publishes with it.
    pub async fn cloudwatch_client(&self) -> aws_sdk_cloudwatch::Client {
        aws_sdk_cloudwatch::Client::new(&self.aws_config().await)
    }

    /// An SQS client for moto's SQS server (the same endpoint as its EC2).
    pub async fn sqs_client(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.aws_config().await)
    }

    /// A Systems Manager client for moto's (the same endpoint as its EC2).
    pub async fn ssm_client(&self) -> aws_sdk_ssm::Client {
        aws_sdk_ssm::Client::new(&self.aws_config().await)
    }

    /// The SDK configuration of moto's endpoint, region and dummy credentials.
    pub async fn aws_config(&self) -> aws_config::SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .region(aws_config::Region::new(self.var("AWS_REGION").to_owned()))
            .endpoint_url(self.var("AWS_ENDPOINT_URL"))
            .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                self.var("AWS_ACCESS_KEY_ID"),
                self.var("AWS_SECRET_ACCESS_KEY"),
                None,
                None,
                "orca-test-harness",
            ))
            .load()
            .await
    }

    /// The real `kubectl` built by the harness (same version as the apiserver), with the
    /// harness kubeconfig.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(self.var("KUBECTL"));
        command.env("KUBECONFIG", self.var("KUBECONFIG"));
        command
    }
}

/// `kubectl ARGS` as the harness admin, which must succeed; its stdout, or an error with its
/// output.
pub fn kubectl_ok(args: &[&str]) -> Result<String> {
    let output = TestCluster::shared().kubectl().args(args).output()?;
    succeeded("kubectl", args, output)
}

/// [`kubectl_ok`] with `stdin` fed to kubectl.
pub fn kubectl_ok_with_input(args: &[&str], stdin: &[u8]) -> Result<String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = TestCluster::shared()
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("kubectl's stdin")?
        .write_all(stdin)?;
    succeeded("kubectl", args, child.wait_with_output()?)
}

/// `tool ARGS`'s stdout if it exited 0, or an error with all its output.
pub(crate) fn succeeded(tool: &str, args: &[&str], output: std::process::Output) -> Result<String> {
    if !output.status.success() {
        bail!(
            "{tool} {} failed ({}): {}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The repository root, found from this crate's manifest directory (`<root>/tests`).
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives one level below the repository root")
}

/// A second control plane of its own (etcd, kube-apiserver, scheduler, controller-manager,
/// and a moto it does not use), for tests of two clusters sharing one AWS account: its orcas
/// talk to the shared cluster's moto. Stopped, and its state removed, when dropped.
pub struct SecondCluster {
    state: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl SecondCluster {
    /// Starts it with `tests/cluster/up` in a state directory of its own (the binaries are
    /// the shared cluster's, cached).
    ///
    /// # Errors
    /// The harness could not start it.
    pub fn start() -> Result<SecondCluster> {
        // The shared cluster first: the binaries are built once, by it.
        TestCluster::shared();
        let state = tempfile::Builder::new()
            .prefix("orca-second-cluster-")
            .tempdir()?;
        let env_file = run_up_in(Some(state.path()))?;
        let text = std::fs::read_to_string(&env_file)
            .with_context(|| format!("reading {}", env_file.display()))?;
        Ok(SecondCluster {
            state,
            env: parse_env_file(&text),
        })
    }

    /// A value from its env file.
    pub fn var(&self, key: &str) -> &str {
        self.env
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("the second cluster's env file has no {key}"))
    }

    /// Its admin's kubeconfig.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        PathBuf::from(self.var("KUBECONFIG"))
    }

    /// The kubeconfig orca runs with there.
    pub fn orca_kubeconfig(&self) -> PathBuf {
        PathBuf::from(self.var("ORCA_KUBECONFIG"))
    }

    /// A kube client as its admin.
    ///
    /// # Errors
    /// Its kubeconfig cannot be read.
    pub async fn kube_client(&self) -> Result<kube::Client> {
        let kubeconfig = Kubeconfig::read_from(self.var("KUBECONFIG"))?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }
}

impl Drop for SecondCluster {
    fn drop(&mut self) {
        let down = repo_root().join("tests/cluster/down");
        let stopped = Command::new(&down)
            .env("ORCA_CLUSTER_STATE", self.state.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .status();
        if !matches!(stopped, Ok(status) if status.success()) {
            eprintln!(
                "stopping the second cluster in {} failed: {stopped:?}",
                self.state.path().display()
            );
        }
    }
}

fn run_up() -> Result<PathBuf> {
    run_up_in(None)
}

/// `tests/cluster/up`, in `state` when given (`ORCA_CLUSTER_STATE`), else where it defaults.
fn run_up_in(state: Option<&Path>) -> Result<PathBuf> {
    let up = repo_root().join("tests/cluster/up");
    let mut command = Command::new(&up);
    if let Some(state) = state {
        command.env("ORCA_CLUSTER_STATE", state);
    }
    let output = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", up.display()))?;
    if !output.status.success() {
        bail!("{} failed with {}", up.display(), output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout.lines().last() {
        Some(path) if !path.trim().is_empty() => Ok(PathBuf::from(path.trim())),
        _ => bail!("{} printed no env file path", up.display()),
    }
}

/// Parses `KEY=value` lines; blank lines and `#` comments are skipped.
fn parse_env_file(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_env_file;

    #[test]
    fn env_file_lines_become_pairs_and_comments_are_skipped() {
        let env = parse_env_file("# harness\nKUBECONFIG=/tmp/a=b\n\nAWS_REGION=us-west-2\n");
        assert_eq!(env.len(), 2);
        assert_eq!(env["KUBECONFIG"], "/tmp/a=b");
        assert_eq!(env["AWS_REGION"], "us-west-2");
    }
}
