//! Two orca replicas sharing nodes through Leases, on moto: started, watched (Lease holders,
//! advertised ports, Ready conditions), and their instances counted per pod. The replicas e2e
//! and the failover bench both drive them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use aws_sdk_ec2::types::{Filter, Instance};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;

use crate::ec2::tags_of;
use crate::pods::{burst_pod, phase};
use crate::wait::poll_until;
use crate::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(250);
const POD_UID_TAG: &str = "orca.research/pod-uid";

/// Replicas `a` and `b` of one orca config, sharing its nodes.
pub struct Replicas {
    pub base: String,
    pub nodes: Vec<String>,
    pub a: OrcaProcess,
    pub b: OrcaProcess,
    pub namespace: TestNamespace,
    pub pods: Api<Pod>,
    pub leases: Api<Lease>,
    pub node_api: Api<Node>,
    pub ec2: aws_sdk_ec2::Client,
}

/// How each replica reaches the apiserver and AWS, and what else their config says.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// Lines under `provider.aws` for both replicas (an `interruptionQueue`).
    pub aws_extra: String,
    /// Replica `a`'s and `b`'s kubeconfigs when not the harness's orca user's (a proxy).
    pub kubeconfigs: [Option<PathBuf>; 2],
    /// Replica `a`'s and `b`'s AWS endpoint (EC2 and the interruption queue) when not moto
    /// itself (a recording proxy in front of it).
    pub aws_endpoints: [Option<String>; 2],
}

impl Replicas {
    /// `nodes` nodes, replica `a` started first (it takes every node), `b` once they are Ready.
    pub async fn start(test: &str, nodes: usize) -> Result<Replicas> {
        Self::start_with(test, nodes, Setup::default()).await
    }

    /// [`Self::start`], each replica reaching the apiserver and AWS as `setup` says.
    pub async fn start_with(test: &str, nodes: usize, setup: Setup) -> Result<Replicas> {
        let cluster = TestCluster::shared();
        let client = cluster.kube_client().await?;
        let namespace = TestNamespace::create(&client, &format!("e2e-{test}")).await?;
        let base = unique_node_name(test);
        let nodes: Vec<String> = (0..nodes).map(|i| format!("{base}-{i}")).collect();
        let moto = cluster.var("AWS_ENDPOINT_URL");
        let config = |identity: &str, endpoint: &Option<String>| {
            let mut text = aws_test_config(&base, &setup.aws_extra);
            if let Some(endpoint) = endpoint {
                text = text.replace(
                    &format!("endpointUrl: {moto}"),
                    &format!("endpointUrl: {endpoint}"),
                );
            }
            text.push_str("nodes:\n");
            for node in &nodes {
                text.push_str(&format!("  - name: {node}\n"));
            }
            text.push_str(&format!(
                "replicas:\n  shareNodes: true\n  namespace: {}\n  identity: {identity}\n",
                namespace.name
            ));
            text
        };
        let orca_kubeconfig = PathBuf::from(cluster.var("ORCA_KUBECONFIG"));
        let kubeconfig = |replica: usize| {
            setup.kubeconfigs[replica]
                .clone()
                .unwrap_or_else(|| orca_kubeconfig.clone())
        };
        // Each process has its own name for its log; the nodes are the config's.
        let a = OrcaProcess::start_with_kubeconfig(&format!("{base}-a"), &kubeconfig(0), |_| {
            config("replica-a", &setup.aws_endpoints[0])
        })?
        .declaring(&nodes);
        a.wait_ready(Duration::from_secs(30)).await?;
        let b = OrcaProcess::start_with_kubeconfig(&format!("{base}-b"), &kubeconfig(1), |_| {
            config("replica-b", &setup.aws_endpoints[1])
        })?
        .declaring(&nodes);
        b.wait_serving(Duration::from_secs(30)).await?;
        Ok(Replicas {
            base,
            pods: Api::namespaced(client.clone(), &namespace.name),
            leases: Api::namespaced(client.clone(), &namespace.name),
            node_api: Api::all(client),
            namespace,
            nodes,
            a,
            b,
            ec2: cluster.ec2_client().await,
        })
    }

    /// Who holds each node's Lease.
    pub async fn holders(&self) -> Result<BTreeMap<String, String>> {
        let mut holders = BTreeMap::new();
        for node in &self.nodes {
            let holder = self
                .leases
                .get_opt(&format!("orca-node-{node}"))
                .await?
                .and_then(|lease| lease.spec)
                .and_then(|spec| spec.holder_identity)
                .unwrap_or_default();
            holders.insert(node.clone(), holder);
        }
        Ok(holders)
    }

    /// Waits until `identity` holds every node's Lease, every Node advertises `holder`'s
    /// kubelet API, and `holder` is ready (every node registered, its pods listed): the
    /// takeover is complete.
    pub async fn wait_held_by(
        &self,
        identity: &str,
        holder: &OrcaProcess,
        timeout: Duration,
    ) -> Result<()> {
        let port = holder.kubelet_port;
        poll_until(
            &format!("{identity} holds and serves every node"),
            timeout,
            Duration::from_millis(100),
            || async {
                if self
                    .holders()
                    .await?
                    .values()
                    .any(|holder| holder != identity)
                {
                    return Ok(None);
                }
                for node in &self.nodes {
                    let advertised = self
                        .node_api
                        .get(node)
                        .await?
                        .status
                        .and_then(|status| status.daemon_endpoints)
                        .and_then(|endpoints| endpoints.kubelet_endpoint)
                        .map(|endpoint| endpoint.port);
                    if advertised != Some(i32::from(port)) {
                        return Ok(None);
                    }
                }
                Ok(matches!(holder.readyz(), Ok((200, _))).then_some(()))
            },
        )
        .await
        .map_err(|error| self.with_logs(&error))
    }

    /// Records any moment a node's Ready condition is not True, until the flag is dropped.
    pub fn watch_ready(&self) -> (Arc<AtomicBool>, tokio::task::JoinHandle<Vec<String>>) {
        let running = Arc::new(AtomicBool::new(true));
        let (nodes, api, flag) = (self.nodes.clone(), self.node_api.clone(), running.clone());
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            while flag.load(Ordering::Acquire) {
                for node in &nodes {
                    match crate::nodes::ready_condition(&api, node).await {
                        Ok(Some((status, reason))) if status != "True" => {
                            seen.push(format!("{node}: Ready={status} ({reason})"));
                        }
                        Ok(None) => seen.push(format!("{node}: no Ready condition")),
                        _ => {}
                    }
                }
                tokio::time::sleep(TICK).await;
            }
            seen
        });
        (running, task)
    }

    /// Every instance of this test's cluster tag, in any state.
    pub async fn instances(&self) -> Result<Vec<Instance>> {
        let answer = self
            .ec2
            .describe_instances()
            .filters(
                Filter::builder()
                    .name("tag:orca.research/cluster")
                    .values(&self.base)
                    .build(),
            )
            .send()
            .await?;
        Ok(answer
            .reservations()
            .iter()
            .flat_map(|r| r.instances().iter().cloned())
            .collect())
    }

    /// Instances launched per pod UID, in any state: a duplicate shows as a 2.
    pub async fn launches_per_pod(&self) -> Result<BTreeMap<String, usize>> {
        let mut launches = BTreeMap::new();
        for instance in self.instances().await? {
            if let Some(uid) = tags_of(&instance).get(POD_UID_TAG) {
                *launches.entry(uid.clone()).or_default() += 1;
            }
        }
        Ok(launches)
    }

    pub fn pod_on(&self, name: &str, index: usize) -> Pod {
        burst_pod(name, &self.nodes[index % self.nodes.len()], &[])
    }

    pub async fn wait_all_running(&self, count: usize, timeout: Duration) -> Result<Vec<Pod>> {
        poll_until("every pod Running", timeout, TICK, || async {
            let list = self.pods.list(&ListParams::default()).await?;
            Ok(
                (list.items.len() == count && list.items.iter().all(|p| phase(p) == "Running"))
                    .then_some(list.items),
            )
        })
        .await
        .map_err(|error| self.with_logs(&error))
    }

    /// `error` with the end of each replica's log.
    pub fn with_logs(&self, error: &anyhow::Error) -> anyhow::Error {
        anyhow::anyhow!(
            "{error:#}\nreplica a log:\n{}\nreplica b log:\n{}",
            tail(&self.a.log()),
            tail(&self.b.log())
        )
    }

    pub async fn finish(self) -> Result<()> {
        self.namespace.delete().await
    }
}

/// The end of a log, for assertion messages.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
