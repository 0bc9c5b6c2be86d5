//! The node processes the bench compares, each started as its project documents it, with its own
//! apiserver identity (so the audit log tells their requests apart), on a node of its own.

use std::fmt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use orca_e2e::{OrcaProcess, TestCluster};

/// The taint every bench node carries; the bench's pods tolerate it (and virtual-kubelet's own).
pub const BURST_TAINT: &str = "orca.research/burst-node";
/// The label of the nodes one KWOK process manages when it manages several.
const BENCH_RUN_LABEL: &str = "orca.research/bench-run";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerKind {
    Orca,
    Kwok,
    VirtualKubelet,
}

impl PeerKind {
    pub const ALL: [PeerKind; 3] = [PeerKind::Orca, PeerKind::Kwok, PeerKind::VirtualKubelet];

    pub fn parse(name: &str) -> Result<PeerKind> {
        PeerKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .with_context(|| format!("unknown peer {name:?} (orca, kwok, virtual-kubelet)"))
    }

    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Orca => "orca",
            PeerKind::Kwok => "kwok",
            PeerKind::VirtualKubelet => "virtual-kubelet",
        }
    }

    /// The username its client certificate carries (tests/cluster/lib/pki.sh).
    pub fn audit_user(self) -> &'static str {
        self.name()
    }
}

impl fmt::Display for PeerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the peers' binaries are (tests/bench/build-peers builds them).
pub struct PeerBinaries {
    pub kwok: PathBuf,
    /// KWOK's fast stages, its config.
    pub kwok_stages: PathBuf,
    pub virtual_kubelet: PathBuf,
}

impl PeerBinaries {
    /// Builds the peers once (cached) and reads where they are.
    pub fn build() -> Result<PeerBinaries> {
        let script = orca_e2e::cluster::repo_root().join("tests/bench/build-peers");
        let output = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !output.status.success() {
            bail!("{} failed ({})", script.display(), output.status);
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let path = |key: &str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{key}=")))
                .map(PathBuf::from)
                .with_context(|| format!("build-peers printed no {key}"))
        };
        Ok(PeerBinaries {
            kwok: path("KWOK_BIN")?,
            kwok_stages: path("KWOK_STAGES")?,
            virtual_kubelet: path("VIRTUAL_KUBELET_BIN")?,
        })
    }
}

/// One running node process and the nodes it serves.
pub struct Peer {
    pub kind: PeerKind,
    pub node_names: Vec<String>,
    process: Process,
}

enum Process {
    Orca(Box<OrcaProcess>),
    Child {
        child: Child,
        /// Its config files, if it has any; removed with the peer.
        _dir: Option<tempfile::TempDir>,
    },
}

impl Peer {
    /// Starts one `kind` process for the nodes `node_names`, each with room for `capacity`
    /// pods, and waits for every node to be Ready.
    pub async fn start(
        kind: PeerKind,
        node_names: &[String],
        capacity: usize,
        binaries: &PeerBinaries,
    ) -> Result<Peer> {
        let process = match (kind, node_names) {
            (PeerKind::Orca, _) => Process::Orca(Box::new(start_orca(node_names, capacity)?)),
            (PeerKind::Kwok, _) => start_kwok(node_names, capacity, binaries).await?,
            (PeerKind::VirtualKubelet, [node_name]) => {
                start_virtual_kubelet(node_name, capacity, &binaries.virtual_kubelet)?
            }
            (PeerKind::VirtualKubelet, _) => bail!("virtual-kubelet serves one node per process"),
        };
        let peer = Peer {
            kind,
            node_names: node_names.to_vec(),
            process,
        };
        for node_name in node_names {
            peer.wait_node_ready(node_name, Duration::from_secs(60))
                .await?;
        }
        Ok(peer)
    }

    pub fn pid(&self) -> Option<u32> {
        match &self.process {
            Process::Orca(orca) => orca.pid(),
            Process::Child { child, .. } => Some(child.id()),
        }
    }

    async fn wait_node_ready(&self, node_name: &str, timeout: Duration) -> Result<()> {
        let client = TestCluster::shared().kube_client().await?;
        let nodes: Api<Node> = Api::all(client);
        orca_e2e::wait::poll_until(
            &format!("{} node {node_name} Ready", self.kind),
            timeout,
            Duration::from_millis(200),
            || async {
                let ready = orca_e2e::nodes::ready_condition(&nodes, node_name).await?;
                Ok(ready.filter(|(status, _)| status == "True").map(|_| ()))
            },
        )
        .await
    }

    /// SIGTERM, wait for exit, then delete the nodes so runs leave none behind.
    pub async fn stop(self) -> Result<()> {
        match self.process {
            Process::Orca(mut orca) => {
                orca.stop()?;
            }
            Process::Child { mut child, _dir } => {
                let _ = Command::new("kill")
                    .arg("-TERM")
                    .arg(child.id().to_string())
                    .status();
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while child.try_wait()?.is_none() {
                    if std::time::Instant::now() > deadline {
                        child.kill()?;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        let nodes: Api<Node> = Api::all(TestCluster::shared().kube_client().await?);
        for node_name in &self.node_names {
            match nodes.delete(node_name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }
}

/// orca on the simulated provider, instances running at once (as the peers' pods are), the
/// instance listing every second, logging at the config's level as in production. Several
/// nodes are `nodes:` entries of the one process.
fn start_orca(node_names: &[String], capacity: usize) -> Result<OrcaProcess> {
    let first = node_names.first().context("a node to serve")?;
    let entries: String = if node_names.len() > 1 {
        std::iter::once("nodes:\n".to_owned())
            .chain(node_names.iter().map(|name| format!("  - name: {name}\n")))
            .collect()
    } else {
        String::new()
    };
    let orca = OrcaProcess::start_as_configured(first, |_| {
        format!(
            "node:\n  name: {first}\n  pods: \"{capacity}\"\n{entries}pods:\n  syncInterval: 1s\nprovider:\n  simulated:\n    bootDelay: 0s\nlogging:\n  level: info\n"
        )
    })?;
    Ok(if node_names.len() > 1 {
        orca.declaring(node_names)
    } else {
        orca
    })
}

/// KWOK with its fast stages (as kwokctl runs it), managing the nodes the bench creates for it,
/// as KWOK's docs do: KWOK simulates nodes, it does not register them. One node is managed by
/// name; several by a label of this run.
async fn start_kwok(
    node_names: &[String],
    capacity: usize,
    binaries: &PeerBinaries,
) -> Result<Process> {
    let cluster = TestCluster::shared();
    let nodes: Api<Node> = Api::all(cluster.kube_client().await?);
    let first = node_names.first().context("a node to serve")?;
    let quantity = |value: String| Quantity(value);
    let resources = [
        ("cpu".to_owned(), quantity("1000".into())),
        ("memory".to_owned(), quantity("4Ti".into())),
        ("pods".to_owned(), quantity(capacity.to_string())),
    ];
    for node_name in node_names {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(node_name.to_owned()),
                annotations: Some([("kwok.x-k8s.io/node".to_owned(), "fake".to_owned())].into()),
                labels: Some(
                    [
                        ("kubernetes.io/hostname".to_owned(), node_name.to_owned()),
                        ("type".to_owned(), "kwok".to_owned()),
                        (BENCH_RUN_LABEL.to_owned(), first.to_owned()),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                taints: Some(vec![Taint {
                    key: BURST_TAINT.to_owned(),
                    value: Some("true".to_owned()),
                    effect: "NoSchedule".to_owned(),
                    ..Taint::default()
                }]),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                allocatable: Some(resources.clone().into()),
                capacity: Some(resources.clone().into()),
                ..NodeStatus::default()
            }),
        };
        nodes.create(&PostParams::default(), &node).await?;
    }
    let managed = if node_names.len() == 1 {
        format!("--manage-single-node={first}")
    } else {
        format!("--manage-nodes-with-label-selector={BENCH_RUN_LABEL}={first}")
    };
    let log = log_file(PeerKind::Kwok, first)?;
    let port = orca_e2e::orca::free_port()?;
    let child = Command::new(&binaries.kwok)
        .arg(format!("--kubeconfig={}", cluster.var("KWOK_KUBECONFIG")))
        .arg(format!("--config={}", binaries.kwok_stages.display()))
        .arg("--manage-all-nodes=false")
        .arg(managed)
        // Room for every pod's IP (the default /24 holds 254).
        .arg("--cidr=10.0.0.1/16")
        .arg(format!("--server-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting kwok")?;
    Ok(Process::Child { child, _dir: None })
}

/// virtual-kubelet's mock provider: it registers its node (tainted
/// `virtual-kubelet.io/provider=mock:NoSchedule`) and answers every pod Running at once.
fn start_virtual_kubelet(node_name: &str, capacity: usize, binary: &PathBuf) -> Result<Process> {
    let cluster = TestCluster::shared();
    let dir = tempfile::Builder::new().prefix("bench-vk-").tempdir()?;
    let pki = PathBuf::from(cluster.var("ORCA_CLUSTER_STATE")).join("pki");
    let config = dir.path().join("mock.json");
    let provider = serde_json::json!({
        node_name: { "cpu": "1000", "memory": "4Ti", "pods": capacity.to_string() }
    });
    std::fs::write(&config, provider.to_string())?;
    let log = log_file(PeerKind::VirtualKubelet, node_name)?;
    let (kubelet_port, metrics_port) = (orca_e2e::orca::free_port()?, orca_e2e::orca::free_port()?);
    let child = Command::new(binary)
        .args(["--provider", "mock", "--nodename", node_name])
        .arg(format!("--provider-config={}", config.display()))
        .arg(format!(
            "--kubeconfig={}",
            cluster.var("VIRTUAL_KUBELET_KUBECONFIG")
        ))
        .arg(format!("--metrics-addr=127.0.0.1:{metrics_port}"))
        .arg("--enable-node-lease")
        .env("KUBELET_PORT", kubelet_port.to_string())
        // Its kubelet API serves TLS: the harness's serving pair will do, trusting its CA.
        .env("APISERVER_CERT_LOCATION", pki.join("apiserver.crt"))
        .env("APISERVER_KEY_LOCATION", pki.join("apiserver.key"))
        .env("APISERVER_CA_CERT_LOCATION", pki.join("ca.crt"))
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting virtual-kubelet")?;
    Ok(Process::Child {
        child,
        _dir: Some(dir),
    })
}

/// The peer's log, in the harness's state dir beside orca's, so it outlives the run.
fn log_file(kind: PeerKind, node_name: &str) -> Result<std::fs::File> {
    let logs = PathBuf::from(TestCluster::shared().var("ORCA_CLUSTER_STATE")).join("logs");
    std::fs::create_dir_all(&logs)?;
    let path = logs.join(format!("{kind}-{node_name}.log"));
    std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))
}
