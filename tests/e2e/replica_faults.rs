//! Replicas whose hold on a node ends while they are not looking (issue 39, cases 2 and 5), end
//! to end: the real binary twice, the real apiserver's Leases, moto's EC2 and SQS.
//!
//! - The holder is stopped (SIGSTOP) past its Lease and the orphan grace while the other
//!   replica takes the node over, launches for new pods and gets spot warnings; then it runs
//!   again (SIGCONT) with a view as old as the stop. Repeated, each replica in turn.
//! - The holder's Lease writes get 503 for a minute (a proxy in front of its apiserver, which
//!   kube's client retries for minutes) while the other replica takes over and launches.
//!
//! In neither may the old holder terminate anything or delete any message: each replica's
//! EC2 and SQS calls go through a recording proxy of its own, and its log of calls is the
//! audit. And a node whose serving task panics (in process, over the EC2 model) stops being
//! served: its Lease is released to the other replica, or, alone, orca exits with an error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::InstanceStateName;
use aws_sdk_sqs::types::QueueAttributeName;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use orca_e2e::ec2::state_of;
use orca_e2e::metrics;
use orca_e2e::notices::spot_warning;
use orca_e2e::pods::{self, condition, instance_id, phase};
use orca_e2e::proxy::{Fault, Proxy};
use orca_e2e::replicas::{Replicas, Setup};
use orca_e2e::wait::poll_until;
use orca_e2e::{TestCluster, unique_node_name};

const TICK: Duration = Duration::from_millis(250);
/// The test config's Lease: `replicas.leaseDuration` (orca's default).
const LEASE: Duration = Duration::from_secs(8);
/// The test config's `pods.orphanGracePeriod`.
const ORPHAN_GRACE: Duration = Duration::from_secs(3);
const TAKEOVER_WITHIN: Duration = Duration::from_secs(20);
/// What the old holder must never have sent once its hold could have ended.
const ACTS: [&str; 3] = ["TerminateInstances", "DeleteMessage", "DeleteMessageBatch"];

/// Two pairs of orca processes at once would measure the machine, not the replicas.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Both replicas' AWS calls recorded, and an interruption queue on moto's SQS.
struct Audited {
    aws: [Proxy; 2],
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

impl Audited {
    async fn start(test: &str) -> Result<Audited> {
        let cluster = TestCluster::shared();
        let moto = cluster.var("AWS_ENDPOINT_URL");
        let sqs = cluster.sqs_client().await;
        let queue_url = sqs
            .create_queue()
            .queue_name(unique_node_name(test))
            .attributes(QueueAttributeName::VisibilityTimeout, "10")
            .send()
            .await?
            .queue_url()
            .context("queue url")?
            .to_owned();
        Ok(Audited {
            aws: [Proxy::http(moto).await?, Proxy::http(moto).await?],
            sqs,
            queue_url,
        })
    }

    fn setup(&self) -> Setup {
        let moto = TestCluster::shared().var("AWS_ENDPOINT_URL");
        Setup {
            aws_extra: format!(
                "interruptionQueue:\n  url: {}\n  endpointUrl: {moto}\n",
                self.queue_url
            ),
            kubeconfigs: [None, None],
            aws_endpoints: [Some(self.aws[0].url.clone()), Some(self.aws[1].url.clone())],
        }
    }

    /// A spot warning for each instance, on the queue.
    async fn warn(&self, instances: &[String]) -> Result<()> {
        for instance in instances {
            self.sqs
                .send_message()
                .queue_url(&self.queue_url)
                .message_body(spot_warning(instance, Timestamp::now()))
                .send()
                .await?;
        }
        Ok(())
    }

    /// Waits until no message is left on the queue, visible or in flight: every warning sent
    /// has been received and deleted. Until then a replica may still be acting on one.
    async fn drained(&self, replicas: &Replicas) -> Result<()> {
        let counts = [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        ];
        poll_until(
            "every warning deleted from the queue",
            Duration::from_secs(60),
            TICK,
            || async {
                let attributes = self
                    .sqs
                    .get_queue_attributes()
                    .queue_url(&self.queue_url)
                    .set_attribute_names(Some(counts.to_vec()))
                    .send()
                    .await?;
                let mut left = 0;
                for name in &counts {
                    left += attributes
                        .attributes()
                        .and_then(|all| all.get(name))
                        .with_context(|| format!("the queue's {name}"))?
                        .parse::<u64>()?;
                }
                Ok((left == 0).then_some(()))
            },
        )
        .await
        .map_err(|error| replicas.with_logs(&error))
    }

    /// The message deletions replica `replica` (0: a, 1: b) sent since `since`, and its
    /// terminations of `instances` (the test's: the process-wide sweep for instances of
    /// undeclared nodes may end other tests' strays, rightly).
    fn acts_since(&self, replica: usize, since: Timestamp, instances: &[String]) -> Vec<String> {
        self.aws[replica]
            .calls_since(since, &ACTS)
            .into_iter()
            .filter(|seen| {
                seen.operation.as_deref() != Some("TerminateInstances")
                    || instances.iter().any(|id| seen.body.contains(id.as_str()))
            })
            .map(|seen| format!("{:?} at {}: {}", seen.operation, seen.at, seen.body))
            .collect()
    }
}

/// The ids of every instance of the test, in any state.
async fn test_instances(replicas: &Replicas) -> Result<Vec<String>> {
    Ok(replicas
        .instances()
        .await?
        .iter()
        .filter_map(|instance| instance.instance_id().map(str::to_owned))
        .collect())
}

/// Every pod of the test, by name.
async fn all_pods(replicas: &Replicas) -> Result<BTreeMap<String, Pod>> {
    Ok(replicas
        .pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|pod| Some((pod.metadata.name.clone()?, pod)))
        .collect())
}

/// Creates `names` and waits until every pod of the test is Running; their instances.
async fn create_running(replicas: &Replicas, names: &[String]) -> Result<Vec<String>> {
    for (i, name) in names.iter().enumerate() {
        pods::create(&replicas.pods, &replicas.pod_on(name, i)).await?;
    }
    let total = all_pods(replicas).await?.len();
    let running = replicas
        .wait_all_running(total, Duration::from_secs(60))
        .await?;
    Ok(running
        .iter()
        .filter(|pod| {
            pod.metadata
                .name
                .as_ref()
                .is_some_and(|name| names.contains(name))
        })
        .filter_map(instance_id)
        .collect())
}

/// Every pod Running, on an instance moto has running.
async fn every_pod_runs_on_its_instance(replicas: &Replicas) -> Result<()> {
    let instances: BTreeMap<String, InstanceStateName> = replicas
        .instances()
        .await?
        .iter()
        .filter_map(|i| Some((i.instance_id()?.to_owned(), state_of(i))))
        .collect();
    for (name, pod) in all_pods(replicas).await? {
        ensure!(phase(&pod) == "Running", "{name} is {}", phase(&pod));
        let id = instance_id(&pod).with_context(|| format!("{name} names no instance"))?;
        ensure!(
            instances.get(&id) == Some(&InstanceStateName::Running),
            "{name}'s instance {id} is {:?}: terminated under its running pod",
            instances.get(&id)
        );
    }
    Ok(())
}

/// Waits until each of `pods` carries the spot warning's `DisruptionTarget` condition.
async fn wait_warned(replicas: &Replicas, names: &[String]) -> Result<()> {
    poll_until(
        "the warned pods marked DisruptionTarget",
        Duration::from_secs(60),
        TICK,
        || async {
            let pods = all_pods(replicas).await?;
            let marked = names.iter().all(|name| {
                pods.get(name)
                    .is_some_and(|pod| condition(pod, "DisruptionTarget") == Some("True"))
            });
            Ok(marked.then_some(()))
        },
    )
    .await
    .map_err(|error| replicas.with_logs(&error))
}

/// The holder is stopped past its Lease and the orphan grace, the other replica takes the
/// node, launches for new pods and gets spot warnings for every pod's instance; then the
/// stopped one runs again, with a pod store as old as the stop and a sync already due. It
/// must take no step for the node: no termination, no message deleted. Every round stops the
/// replica holding the node then (each in turn); `ORCA_STALL_ROUNDS` sets how many (4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_past_its_lease_terminates_nothing_and_deletes_no_message_when_it_runs_again()
-> Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let rounds: usize = std::env::var("ORCA_STALL_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(4);
    let audited = Audited::start("stall").await?;
    let replicas = Replicas::start_with("stall", 1, audited.setup()).await?;
    create_running(&replicas, &["steady-0".to_owned(), "steady-1".to_owned()]).await?;
    for round in 0..rounds {
        let (stalled, other, other_name, other_identity, which) = if round % 2 == 0 {
            (&replicas.a, &replicas.b, "b", "replica-b", 0)
        } else {
            (&replicas.b, &replicas.a, "a", "replica-a", 1)
        };
        let stopped_at = Timestamp::now();
        stalled.pause()?;
        replicas
            .wait_held_by(other_identity, other, TAKEOVER_WITHIN)
            .await
            .with_context(|| format!("round {round}: {other_name} takes over"))?;
        // New pods, launched by the other replica: the stopped one's store never saw them.
        let names: Vec<String> = (0..2).map(|i| format!("round-{round}-{i}")).collect();
        create_running(&replicas, &names).await?;
        // Their instances older than the orphan grace when the stopped replica runs again.
        tokio::time::sleep(ORPHAN_GRACE + Duration::from_secs(1)).await;
        let pods = all_pods(&replicas).await?;
        let warned: Vec<String> = pods.values().filter_map(instance_id).collect();
        audited.warn(&warned).await?;
        stalled.resume()?;
        // Time to act, were it to: several sync periods, looks and queue rounds.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let acts = audited.acts_since(which, stopped_at, &test_instances(&replicas).await?);
        ensure!(
            acts.is_empty(),
            "round {round}: the replica stopped past its hold acted when it ran again: {acts:?}\n{}",
            replicas.with_logs(&anyhow::anyhow!("its log"))
        );
        every_pod_runs_on_its_instance(&replicas)
            .await
            .with_context(|| format!("round {round}"))?;
        let names: Vec<String> = pods.keys().cloned().collect();
        wait_warned(&replicas, &names).await?;
        // The warnings are acted on by the holder: marked, then deleted from the queue. The
        // next round stops the holder only once it has deleted them all: a deletion it sends
        // just before its stop is its right as holder, not an act of a stopped replica.
        audited.drained(&replicas).await?;
        let deleted_by_holder = audited.aws[1 - which]
            .calls_since(stopped_at, &["DeleteMessageBatch", "DeleteMessage"])
            .len();
        ensure!(
            deleted_by_holder > 0,
            "round {round}: the holder deleted the warnings it acted on"
        );
        eprintln!(
            "round {round}: {} stopped and resumed; nothing it did",
            ["a", "b"][which]
        );
    }
    let launches = replicas.launches_per_pod().await?;
    ensure!(
        launches.values().all(|&n| n == 1),
        "one instance per pod: {launches:?}"
    );
    replicas.finish().await
}

/// Whether a request writes a Lease of the replicas (not a Node's heartbeat Lease).
fn replica_lease_write(method: &hyper::Method, path: &str) -> bool {
    *method != hyper::Method::GET
        && path.contains("/apis/coordination.k8s.io/")
        && path.contains("/leases")
        && !path.contains("/namespaces/kube-node-lease/")
}

/// The holder's Lease writes get 503 for a minute (kube retries them with backoff for
/// minutes) while the other replica takes the node over, launches for new pods, collects a
/// force-deleted pod's instance and acts on spot warnings. The old holder must stop acting
/// when its hold runs out, whatever its renewal is doing: no termination, no message deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_renewals_hang_stops_acting_when_its_hold_runs_out() -> Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let audited = Audited::start("hung").await?;
    let apiserver = Proxy::apiserver(
        std::path::Path::new(TestCluster::shared().var("ORCA_KUBECONFIG")),
        Box::new(replica_lease_write),
    )
    .await?;
    let dir = tempfile::tempdir()?;
    let mut setup = audited.setup();
    setup.kubeconfigs[0] = Some(apiserver.kubeconfig_in(dir.path())?);
    let replicas = Replicas::start_with("hung", 1, setup).await?;
    let steady: Vec<String> = (0..3).map(|i| format!("steady-{i}")).collect();
    create_running(&replicas, &steady).await?;
    ensure!(
        replicas.holders().await?.values().all(|h| h == "replica-a"),
        "a holds the node"
    );

    let hung_at = Timestamp::now();
    apiserver.set_fault(Some(Fault::Unavailable));
    replicas
        .wait_held_by("replica-b", &replicas.b, TAKEOVER_WITHIN)
        .await?;
    // The new holder's work, while a's renewals still hang.
    let new: Vec<String> = (0..2).map(|i| format!("new-{i}")).collect();
    create_running(&replicas, &new).await?;
    let pods = all_pods(&replicas).await?;
    let gone = &pods["steady-0"];
    let orphan = instance_id(gone).context("steady-0's instance")?;
    replicas
        .pods
        .delete("steady-0", &DeleteParams::default().grace_period(0))
        .await?;
    let warned: Vec<String> = steady[1..].to_vec();
    let instances: Vec<String> = warned
        .iter()
        .filter_map(|name| instance_id(&pods[name]))
        .collect();
    audited.warn(&instances).await?;
    wait_warned(&replicas, &warned).await?;
    poll_until(
        "the force-deleted pod's instance terminated",
        Duration::from_secs(60),
        TICK,
        || async {
            let state = orca_e2e::ec2::instance(&replicas.ec2, &orphan).await?;
            Ok(matches!(
                state_of(&state),
                InstanceStateName::ShuttingDown | InstanceStateName::Terminated
            )
            .then_some(()))
        },
    )
    .await?;
    // a has had every chance to act: its sync and its queue consumer ran all along.
    tokio::time::sleep(LEASE).await;
    let instances = test_instances(&replicas).await?;
    let acts = audited.acts_since(0, hung_at, &instances);
    ensure!(
        acts.is_empty(),
        "the holder whose renewals hung acted after its hold ran out: {acts:?}\n{}",
        replicas.with_logs(&anyhow::anyhow!("its log"))
    );
    ensure!(
        !audited.acts_since(1, hung_at, &instances).is_empty(),
        "the new holder did the work"
    );
    let page = metrics::scrape(replicas.a.metrics_port)?;
    let node = &replicas.nodes[0];
    ensure!(
        !page.contains(&format!("orca_node_served{{node=\"{node}\"}} 1")),
        "a no longer serves the node"
    );
    ensure!(
        page.contains(&format!(
            "orca_node_serving_ended_total{{node=\"{node}\",reason=\"hold_lapsed\"}} 1"
        )),
        "a counted its hold running out: {}",
        page.lines()
            .filter(|line| line.contains("orca_node_serving_ended"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The apiserver answers again: a finds b's Lease, and leaves it.
    apiserver.set_fault(None);
    tokio::time::sleep(LEASE).await;
    ensure!(
        replicas.holders().await?.values().all(|h| h == "replica-b"),
        "b keeps the node"
    );
    every_pod_runs_on_its_instance(&replicas).await?;
    replicas.finish().await
}

/// The config of an in-process orca on the EC2 model: one node, short periods, optionally
/// sharing it through a Lease in `namespace` as `identity`.
fn in_process_config(node: &str, sharing: Option<(&str, &str)>) -> Result<String> {
    let replicas = sharing.map_or_else(String::new, |(namespace, identity)| {
        format!(
            "replicas:\n  shareNodes: true\n  namespace: {namespace}\n  identity: {identity}\n  leaseDuration: 4s\n  renewBefore: 3s\n"
        )
    });
    Ok(format!(
        "{replicas}node:
  name: {node}
  clusterName: {node}
  daemonPort: {kubelet}
  leaseRenewInterval: 2s
  pingInterval: 1s
pods:
  syncInterval: 500ms
  orphanGracePeriod: 3s
  shutdownGracePeriod: 5s
provider:
  kind: aws
  region: us-west-2
  aws:
    defaultAmi: ami-0123456789abcdef0
    catalogueRefresh: 0s
    subnetIds: [subnet-0a0a0a0a0a0a0a0a0]
kubeletApi:
  bindAddress: 127.0.0.1
  tls:
    sources: [selfSigned]
metrics:
  bindAddress: 127.0.0.1
  port: {metrics}
",
        kubelet = orca_e2e::orca::free_port()?,
        metrics = orca_e2e::orca::free_port()?,
    ))
}

/// Issue 39, case 5: a panic in a node's status sync ended its serving while the replica
/// went on renewing the node's Lease, so no other replica took over (and deleted pods'
/// instances were never terminated). Now the panicking replica ends its hold: it releases the
/// Lease (the watch sees it free before the other replica takes it) and counts why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_status_sync_panics_releases_the_node_to_the_other() -> Result<()> {
    use orca_e2e::inprocess::InProcessOrca;
    use orca_e2e::model_ec2::ModelEc2;
    use orca_ec2_model::{Behaviour, Ec2Model};

    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let namespace = orca_e2e::TestNamespace::create(&client, "serving-panic").await?;
    let node = unique_node_name("serving-panic");
    let kubeconfig = std::path::PathBuf::from(cluster.var("ORCA_KUBECONFIG"));
    let model = Arc::new(Ec2Model::new(39, Behaviour::calm()));
    let ec2_a = Arc::new(ModelEc2::new(model.clone()));
    let a = InProcessOrca::start(
        &in_process_config(&node, Some((&namespace.name, "replica-a")))?,
        &kubeconfig,
        ec2_a.clone(),
        None,
    )?;
    let served = |orca: &InProcessOrca| {
        orca.metric(&format!("orca_node_served{{node=\"{node}\"}}"))
            .is_ok_and(|served| served == 1.0)
    };
    poll_until(
        "a serves the node",
        Duration::from_secs(30),
        TICK,
        || async { Ok(served(&a).then_some(())) },
    )
    .await?;
    let b = InProcessOrca::start(
        &in_process_config(&node, Some((&namespace.name, "replica-b")))?,
        &kubeconfig,
        Arc::new(ModelEc2::new(model)),
        None,
    )?;
    // Every version of the node's Lease from now on, in order.
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), &namespace.name);
    let holders = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let watch = tokio::spawn({
        let (leases, holders) = (leases.clone(), holders.clone());
        let lease = ::orca::config::ReplicasConfig::lease_name(&node);
        async move {
            use futures::StreamExt;
            let config =
                kube::runtime::watcher::Config::default().fields(&format!("metadata.name={lease}"));
            let mut events = std::pin::pin!(kube::runtime::watcher(leases, config));
            while let Some(event) = events.next().await {
                if let Ok(
                    kube::runtime::watcher::Event::Apply(lease)
                    | kube::runtime::watcher::Event::InitApply(lease),
                ) = event
                {
                    let holder = lease
                        .spec
                        .and_then(|spec| spec.holder_identity)
                        .unwrap_or_default();
                    holders
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(holder);
                }
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    ec2_a.panic_on_listing();
    poll_until(
        "b serves the node",
        Duration::from_secs(30),
        TICK,
        || async { Ok(served(&b).then_some(())) },
    )
    .await?;
    watch.abort();
    let seen = holders.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let released = seen
        .windows(3)
        .any(|w| w[0] == "replica-a" && w[1].is_empty() && w[2] == "replica-b");
    ensure!(
        released,
        "a released the Lease and b took it, not after expiry: {seen:?}"
    );
    ensure!(!served(&a), "a no longer serves the node");
    let ended = a.metric(&format!(
        "orca_node_serving_ended_total{{node=\"{node}\",reason=\"status_sync_panicked\"}}"
    ))?;
    ensure!(ended == 1.0, "a counted its sync's panic once: {ended}");
    a.crash();
    b.crash();
    namespace.delete().await
}

/// Issue 39, case 5, one replica: a panic in the status sync ended serving while the process
/// ran on, its Node Ready and its pods unserved. orca now shuts down with an error (the
/// process exits non-zero and Kubernetes restarts it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alone_a_panic_in_the_status_sync_stops_orca_with_an_error() -> Result<()> {
    use orca_e2e::model_ec2::ModelEc2;
    use orca_ec2_model::{Behaviour, Ec2Model};

    let cluster = TestCluster::shared();
    let node = unique_node_name("alone-panic");
    ::orca::support::tls::install_crypto_provider();
    let config = ::orca::config::Config::parse(&in_process_config(&node, None)?)?;
    let (client, _) = ::orca::cluster::connection::connect(Some(std::path::Path::new(
        cluster.var("ORCA_KUBECONFIG"),
    )))
    .await?;
    let ec2 = Arc::new(ModelEc2::new(Arc::new(Ec2Model::new(
        39,
        Behaviour::calm(),
    ))));
    let orca = ::orca::process::Orca::with_ec2(config, client, ec2.clone()).await?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn(orca.run(shutdown.clone()));
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> =
        kube::Api::all(cluster.kube_client().await?);
    poll_until(
        "the node registered",
        Duration::from_secs(30),
        TICK,
        || async { Ok(nodes.get_opt(&node).await?.map(|_| ())) },
    )
    .await?;
    ec2.panic_on_listing();
    let ended = tokio::time::timeout(Duration::from_secs(60), run).await;
    shutdown.cancel();
    if let Err(error) = nodes.delete(&node, &DeleteParams::default()).await {
        eprintln!("deleting the test's Node {node}: {error}");
    }
    let outcome = ended
        .context("orca still runs a minute after its status sync panicked")?
        .context("orca's run panicked")?;
    let error = outcome
        .err()
        .context("orca's run ended without an error after its status sync panicked")?;
    let message = ::orca::support::errors::error_chain(&error);
    ensure!(
        message.contains(&node) && message.contains("status_sync_panicked"),
        "orca ended naming the node and why: {message}"
    );
    Ok(())
}
