//! Two orca replicas sharing two nodes through Leases, end to end: the real binary twice, the
//! real apiserver's coordination Leases, the real scheduler, and moto's EC2. The replica
//! holding the nodes is SIGKILLed with pods running, then again in the middle of a burst of
//! creates and deletes; the other must hold every node within 15 s, without a Node going
//! NotReady, a pod losing its instance, or a pod getting a second one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::{Filter, Instance, InstanceStateName};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use orca_e2e::ec2::{state_of, tags_of};
use orca_e2e::http::curl_status;
use orca_e2e::pods::{self, burst_pod, instance_id, phase};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(250);
const POD_UID_TAG: &str = "orca.research/pod-uid";
const TAKEOVER_WITHIN: Duration = Duration::from_secs(15);

/// The two scenarios run one after the other: four orca processes at once would measure the
/// machine (and moto's one Python process), not the takeover.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Replicas {
    base: String,
    nodes: Vec<String>,
    a: OrcaProcess,
    b: OrcaProcess,
    namespace: TestNamespace,
    pods: Api<Pod>,
    leases: Api<Lease>,
    node_api: Api<Node>,
    ec2: aws_sdk_ec2::Client,
}

impl Replicas {
    /// Replica `a` starts first and takes both nodes; `b` starts once they are Ready.
    async fn start(test: &str) -> Result<Replicas> {
        let cluster = TestCluster::shared();
        let client = cluster.kube_client().await?;
        let namespace = TestNamespace::create(&client, &format!("e2e-{test}")).await?;
        let base = unique_node_name(test);
        let nodes: Vec<String> = (0..2).map(|i| format!("{base}-{i}")).collect();
        let config = |identity: &str| {
            let mut text = aws_test_config(&base, "");
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
        // Each process has its own name for its log; the nodes are the config's.
        let a =
            OrcaProcess::start(&format!("{base}-a"), |_| config("replica-a"))?.declaring(&nodes);
        a.wait_ready(Duration::from_secs(30)).await?;
        let b =
            OrcaProcess::start(&format!("{base}-b"), |_| config("replica-b"))?.declaring(&nodes);
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
    async fn holders(&self) -> Result<BTreeMap<String, String>> {
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
    async fn wait_held_by(
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
        .map_err(|error| {
            anyhow::anyhow!(
                "{error:#}\nreplica a log:\n{}\nreplica b log:\n{}",
                tail(&self.a.log()),
                tail(&self.b.log())
            )
        })
    }

    /// Records any moment a node's Ready condition is not True, until the flag is dropped.
    fn watch_ready(&self) -> (Arc<AtomicBool>, tokio::task::JoinHandle<Vec<String>>) {
        let running = Arc::new(AtomicBool::new(true));
        let (nodes, api, flag) = (self.nodes.clone(), self.node_api.clone(), running.clone());
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            while flag.load(Ordering::Acquire) {
                for node in &nodes {
                    match orca_e2e::nodes::ready_condition(&api, node).await {
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
    async fn instances(&self) -> Result<Vec<Instance>> {
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
    async fn launches_per_pod(&self) -> Result<BTreeMap<String, usize>> {
        let mut launches = BTreeMap::new();
        for instance in self.instances().await? {
            if let Some(uid) = tags_of(&instance).get(POD_UID_TAG) {
                *launches.entry(uid.clone()).or_default() += 1;
            }
        }
        Ok(launches)
    }

    fn pod_on(&self, name: &str, index: usize) -> Pod {
        burst_pod(name, &self.nodes[index % self.nodes.len()], &[])
    }

    async fn wait_all_running(&self, count: usize, timeout: Duration) -> Result<Vec<Pod>> {
        poll_until("every pod Running", timeout, TICK, || async {
            let list = self.pods.list(&ListParams::default()).await?;
            Ok(
                (list.items.len() == count && list.items.iter().all(|p| phase(p) == "Running"))
                    .then_some(list.items),
            )
        })
        .await
        .map_err(|error| {
            anyhow::anyhow!(
                "{error:#}\nreplica a log:\n{}\nreplica b log:\n{}",
                tail(&self.a.log()),
                tail(&self.b.log())
            )
        })
    }

    async fn finish(self) -> Result<()> {
        self.namespace.delete().await
    }
}

/// The end of a log, for assertion messages.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

#[tokio::test]
async fn the_other_replica_takes_over_every_node_within_15_s_of_a_sigkill_and_no_pod_loses_or_doubles_its_instance()
-> Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut replicas = Replicas::start("replicas-kill").await?;
    const PODS: usize = 10;
    for i in 0..PODS {
        pods::create(&replicas.pods, &replicas.pod_on(&format!("steady-{i}"), i)).await?;
    }
    let before = replicas
        .wait_all_running(PODS, Duration::from_secs(60))
        .await?;
    let instance_before: BTreeMap<String, String> = before
        .iter()
        .map(|pod| (uid(pod), instance_id(pod).unwrap_or_default()))
        .collect();
    let holders = replicas.holders().await?;
    ensure!(
        holders.values().all(|holder| holder == "replica-a"),
        "the first replica holds both nodes: {holders:?}"
    );

    let (watching, not_ready) = replicas.watch_ready();
    let killed = Instant::now();
    replicas.a.kill()?;
    replicas
        .wait_held_by("replica-b", &replicas.b, TAKEOVER_WITHIN)
        .await?;
    let takeover = killed.elapsed();

    // The kubelet API and the metrics of the new holder answer for both nodes: `kubectl logs`
    // reaches it through the Node's advertised port.
    let (status, metrics) = curl_status(
        &format!("http://127.0.0.1:{}/metrics", replicas.b.metrics_port),
        &[],
    )?;
    assert_eq!(status, 200);
    for node in &replicas.nodes {
        assert!(
            metrics.contains(&format!("orca_node_served{{node=\"{node}\"}} 1")),
            "{metrics}"
        );
    }
    let logs = TestCluster::shared()
        .kubectl()
        .args(["logs", "-n", &replicas.namespace.name, "steady-1"])
        .output()?;
    assert!(
        logs.status.success(),
        "kubectl logs through the new holder: {}",
        String::from_utf8_lossy(&logs.stderr)
    );

    // New pods launch through the new holder.
    for i in PODS..PODS + 2 {
        pods::create(&replicas.pods, &replicas.pod_on(&format!("steady-{i}"), i)).await?;
    }
    let after = replicas
        .wait_all_running(PODS + 2, Duration::from_secs(60))
        .await?;
    watching.store(false, Ordering::Release);
    let not_ready = not_ready.await?;
    assert!(not_ready.is_empty(), "no Node went NotReady: {not_ready:?}");
    for pod in &after {
        if let Some(before) = instance_before.get(&uid(pod)) {
            assert_eq!(
                instance_id(pod).as_ref(),
                Some(before),
                "{:?} keeps its instance",
                pod.metadata.name
            );
        }
    }
    let launches = replicas.launches_per_pod().await?;
    assert_eq!(launches.len(), PODS + 2, "{launches:?}");
    assert!(
        launches.values().all(|&n| n == 1),
        "one instance per pod: {launches:?}"
    );
    eprintln!("takeover after SIGKILL: {takeover:?}");
    replicas.finish().await
}

#[tokio::test]
async fn a_sigkill_of_the_holder_during_a_burst_of_50_creates_and_deletes_launches_nothing_twice_and_leaks_nothing()
-> Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut replicas = Replicas::start("replicas-burst").await?;
    const PODS: usize = 50;
    const DELETED: usize = 20;
    let names: Vec<String> = (0..PODS).map(|i| format!("burst-{i:02}")).collect();
    let (watching, not_ready) = replicas.watch_ready();
    for (i, name) in names.iter().enumerate() {
        pods::create(&replicas.pods, &replicas.pod_on(name, i)).await?;
    }
    poll_until(
        "the first launches",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async { Ok((!replicas.instances().await?.is_empty()).then_some(())) },
    )
    .await?;
    // Deletes go out while the holder launches; it dies in the middle of them.
    for name in &names[..DELETED / 2] {
        replicas.pods.delete(name, &DeleteParams::default()).await?;
    }
    let killed = Instant::now();
    replicas.a.kill()?;
    for name in &names[DELETED / 2..DELETED] {
        replicas.pods.delete(name, &DeleteParams::default()).await?;
    }
    replicas
        .wait_held_by("replica-b", &replicas.b, TAKEOVER_WITHIN)
        .await?;
    let takeover = killed.elapsed();
    let running = replicas
        .wait_all_running(PODS - DELETED, Duration::from_secs(120))
        .await?;
    let kept: BTreeSet<String> = running.iter().map(uid).collect();
    // Every instance of a deleted pod ends terminated; every kept pod has exactly one.
    poll_until(
        "the deleted pods' instances terminated",
        Duration::from_secs(60),
        TICK,
        || async {
            let live = replicas
                .instances()
                .await?
                .into_iter()
                .filter(|i| {
                    !matches!(
                        state_of(i),
                        InstanceStateName::ShuttingDown | InstanceStateName::Terminated
                    )
                })
                .filter_map(|i| tags_of(&i).get(POD_UID_TAG).cloned())
                .collect::<Vec<_>>();
            Ok(
                (live.len() == kept.len() && live.iter().all(|uid| kept.contains(uid)))
                    .then_some(()),
            )
        },
    )
    .await
    .context("no instance leaked")?;
    watching.store(false, Ordering::Release);
    let not_ready = not_ready.await?;
    assert!(not_ready.is_empty(), "no Node went NotReady: {not_ready:?}");
    let launches = replicas.launches_per_pod().await?;
    assert!(
        launches.values().all(|&n| n == 1),
        "nothing launched twice: {launches:?}"
    );
    for uid in &kept {
        assert_eq!(launches.get(uid), Some(&1), "pod {uid} has its instance");
    }
    eprintln!("takeover after SIGKILL mid-burst: {takeover:?}");
    replicas.finish().await
}
