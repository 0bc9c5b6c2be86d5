//! Two clusters in one AWS account and region, end to end: two control planes (the shared
//! harness and a second one started here), one orca in each at the same `node.name` and the
//! shipped `node.clusterName`, pods of the same namespace and names on both, one EC2 endpoint
//! (the shared moto). Neither may list, adopt or terminate the other's instances, including
//! after instances lose their cluster id (as instances launched before orca tagged one) and
//! are claimed again. And a node renamed in `config.yaml` leaves no instance running without
//! its pod.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::{Filter, Instance, InstanceStateName};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use orca_e2e::cluster::SecondCluster;
use orca_e2e::ec2::{state_of, tags_of};
use orca_e2e::pods::{self, burst_pod, instance_id, phase};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(250);
const POD_UID_TAG: &str = "orca.research/pod-uid";
const CLUSTER_ID_TAG: &str = "orca.research/cluster-id";
/// The test config's `pods.orphanGracePeriod`.
const ORPHAN_GRACE: Duration = Duration::from_secs(3);
const PODS: usize = 3;

/// Each pod's name → (its UID, the instance it names).
type Running = BTreeMap<String, (String, String)>;

/// The aws test config with the shipped cluster name: two clusters left at it share every
/// name-derived tag.
fn shipped_names_config(node: &str) -> String {
    aws_test_config(node, "").replace(
        &format!("  clusterName: {node}\n"),
        "  clusterName: kubernetes\n",
    )
}

/// One cluster's side: its orca, its pods API, and the UID of its `kube-system`.
struct Side {
    name: &'static str,
    orca: OrcaProcess,
    pods: Api<Pod>,
    cluster_id: String,
}

impl Side {
    async fn running(&self) -> Result<Running> {
        let mut running = BTreeMap::new();
        for i in 0..PODS {
            let name = format!("p{i}");
            let pod = pods::wait_for_phase(&self.pods, &name, "Running", Duration::from_secs(60))
                .await
                .map_err(|error| {
                    anyhow::anyhow!(
                        "{} {name}: {error:#}\norca log:\n{}",
                        self.name,
                        self.orca.log()
                    )
                })?;
            let uid = pod.metadata.uid.clone().context("uid")?;
            let id = instance_id(&pod).context("the pod names its instance")?;
            running.insert(name, (uid, id));
        }
        Ok(running)
    }
}

async fn cluster_id(client: &kube::Client) -> Result<String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .get("kube-system")
        .await?
        .metadata
        .uid
        .context("kube-system has a UID")
}

async fn wait_node_ready(client: &kube::Client, node: &str, orca: &OrcaProcess) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    poll_until(
        &format!("node {node} Ready in the second cluster"),
        Duration::from_secs(30),
        TICK,
        || async {
            let ready = orca_e2e::nodes::ready_condition(&nodes, node).await?;
            Ok(ready.filter(|(status, _)| status == "True").map(|_| ()))
        },
    )
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", orca.log()))
}

/// Every instance launched for `uid`, in any state.
async fn instances_of(ec2: &aws_sdk_ec2::Client, uid: &str) -> Result<Vec<Instance>> {
    let answer = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name(format!("tag:{POD_UID_TAG}"))
                .values(uid)
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

fn is_live(instance: &Instance) -> bool {
    matches!(
        state_of(instance),
        InstanceStateName::Pending | InstanceStateName::Running
    )
}

/// For `lasting`, looked at every half second: each pod still has exactly one instance, the
/// one it names, running, with its cluster's id when `check_id`.
async fn hold_steady(
    ec2: &aws_sdk_ec2::Client,
    sides: &[(&Side, &Running)],
    lasting: Duration,
    check_id: bool,
) -> Result<()> {
    let until = Instant::now() + lasting;
    while Instant::now() < until {
        for (side, pods) in sides {
            for (name, (uid, id)) in pods.iter() {
                let instances = instances_of(ec2, uid).await?;
                let ids: Vec<&str> = instances.iter().filter_map(Instance::instance_id).collect();
                ensure!(
                    ids == [id.as_str()],
                    "{}'s pod {name} has instances {ids:?}, expected only {id}",
                    side.name
                );
                let instance = &instances[0];
                ensure!(
                    is_live(instance),
                    "{}'s pod {name}'s instance {id} is {:?}\n{} orca log:\n{}",
                    side.name,
                    state_of(instance),
                    side.name,
                    side.orca.log()
                );
                if check_id {
                    let tags = tags_of(instance);
                    ensure!(
                        tags.get(CLUSTER_ID_TAG) == Some(&side.cluster_id),
                        "{}'s pod {name}'s instance {id} has cluster id {:?}, expected {}",
                        side.name,
                        tags.get(CLUSTER_ID_TAG),
                        side.cluster_id
                    );
                }
                let pod = side.pods.get(name).await?;
                ensure!(
                    phase(&pod) == "Running" && instance_id(&pod).as_deref() == Some(id.as_str()),
                    "{}'s pod {name} is {} on {:?}",
                    side.name,
                    phase(&pod),
                    instance_id(&pod)
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

async fn wait_ended(ec2: &aws_sdk_ec2::Client, id: &str, orca: &OrcaProcess) -> Result<()> {
    poll_until(
        &format!("instance {id} shutting down or terminated"),
        Duration::from_secs(30),
        TICK,
        || async {
            let instance = orca_e2e::ec2::instance(ec2, id).await?;
            Ok((!is_live(&instance)).then_some(()))
        },
    )
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", orca.log()))
}

/// Issue 39, case 1: before instances carried the cluster's id, two clusters left at the
/// shipped names listed each other's instances and terminated them as orphans within the
/// orphan grace period (reproduced: 40 s at the defaults).
#[tokio::test]
async fn two_clusters_at_the_same_names_in_one_account_never_touch_each_others_instances()
-> Result<()> {
    let shared = TestCluster::shared();
    let second = SecondCluster::start()?;
    let client_a = shared.kube_client().await?;
    let client_b = second.kube_client().await?;
    let ec2 = shared.ec2_client().await;
    let node = unique_node_name("clusters");

    let orca_a = OrcaProcess::start(&node, |_| shipped_names_config(&node))?;
    let orca_b = OrcaProcess::start_in_cluster(&second, &format!("{node}-second"), &node, |_| {
        shipped_names_config(&node)
    })?;
    orca_a.wait_ready(Duration::from_secs(30)).await?;
    wait_node_ready(&client_b, &node, &orca_b).await?;

    // The same namespace and pod names on both sides: every name-derived tag is the same.
    let namespace = TestNamespace::create(&client_a, "e2e-clusters").await?;
    let namespaces_b: Api<Namespace> = Api::all(client_b.clone());
    namespaces_b
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(namespace.name.clone()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await?;
    let mut a = Side {
        name: "the first cluster",
        orca: orca_a,
        pods: Api::namespaced(client_a.clone(), &namespace.name),
        cluster_id: cluster_id(&client_a).await?,
    };
    let mut b = Side {
        name: "the second cluster",
        orca: orca_b,
        pods: Api::namespaced(client_b.clone(), &namespace.name),
        cluster_id: cluster_id(&client_b).await?,
    };
    ensure!(a.cluster_id != b.cluster_id, "two clusters, two ids");
    for side in [&a, &b] {
        for i in 0..PODS {
            pods::create(&side.pods, &burst_pod(&format!("p{i}"), &node, &[])).await?;
        }
    }
    let running_a = a.running().await?;
    let running_b = b.running().await?;
    // Startup says the names are the shipped placeholders.
    ensure!(
        a.orca.log().contains("left at the shipped placeholder"),
        "no word on the placeholder cluster name:\n{}",
        a.orca.log()
    );

    // Several orphan-grace periods side by side: nobody loses an instance.
    hold_steady(
        &ec2,
        &[(&a, &running_a), (&b, &running_b)],
        ORPHAN_GRACE * 4,
        true,
    )
    .await?;

    // Both stop; their instances lose the cluster id, as instances launched by an orca from
    // before it tagged one; both start again. Each claims its own (their pods are its), none
    // of the other's (same names, pods it does not have), launches nothing, kills nothing.
    a.orca.stop()?;
    b.orca.stop()?;
    let every: Vec<String> = running_a
        .values()
        .chain(running_b.values())
        .map(|(_, id)| id.clone())
        .collect();
    ec2.delete_tags()
        .set_resources(Some(every.clone()))
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key(CLUSTER_ID_TAG)
                .build(),
        )
        .send()
        .await?;
    a.orca.restart()?;
    b.orca.restart()?;
    a.orca.wait_serving(Duration::from_secs(30)).await?;
    b.orca.wait_serving(Duration::from_secs(30)).await?;
    let sides = [(&a, &running_a), (&b, &running_b)];
    poll_until(
        "every instance claimed by its own cluster",
        Duration::from_secs(30),
        TICK,
        || async {
            for (side, pods) in &sides {
                for (uid, id) in pods.values() {
                    let instances = instances_of(&ec2, uid).await?;
                    let claimed = instances.iter().any(|i| {
                        i.instance_id() == Some(id.as_str())
                            && tags_of(i).get(CLUSTER_ID_TAG) == Some(&side.cluster_id)
                    });
                    if !claimed {
                        return Ok(None);
                    }
                }
            }
            Ok(Some(()))
        },
    )
    .await
    .map_err(|error| {
        anyhow::anyhow!(
            "{error:#}\nfirst orca log:\n{}\nsecond orca log:\n{}",
            a.orca.log(),
            b.orca.log()
        )
    })?;
    hold_steady(&ec2, &sides, ORPHAN_GRACE * 3, true).await?;

    // A pod deleted on one side ends its own instance only.
    a.pods.delete("p0", &DeleteParams::default()).await?;
    let (_, gone) = &running_a["p0"];
    wait_ended(&ec2, gone, &a.orca).await?;
    let kept: Running = running_a
        .iter()
        .filter(|(name, _)| *name != "p0")
        .map(|(name, pod)| (name.clone(), pod.clone()))
        .collect();
    hold_steady(
        &ec2,
        &[(&a, &kept), (&b, &running_b)],
        ORPHAN_GRACE * 2,
        true,
    )
    .await?;

    // Everything goes; every instance ends.
    namespaces_b
        .delete(&namespace.name, &DeleteParams::default())
        .await?;
    namespace.delete().await?;
    for id in &every {
        let orca = if running_a.values().any(|(_, mine)| mine == id) {
            &a.orca
        } else {
            &b.orca
        };
        wait_ended(&ec2, id, orca).await?;
    }
    drop(a);
    drop(b);
    drop(second);
    Ok(())
}

/// Issue 39, case 1 (the converse): after `node.name` changed, the old name's instances were
/// listed by no node and ran on at full price. Renamed, orca ends the instance of a pod that
/// is gone and keeps the one of a pod that is still there (bound to the old Node).
#[tokio::test]
async fn a_renamed_node_leaves_no_instance_running_without_its_pod() -> Result<()> {
    let shared = TestCluster::shared();
    let client = shared.kube_client().await?;
    let ec2 = shared.ec2_client().await;
    let old = unique_node_name("renamed");
    let mut orca = OrcaProcess::start(&old, |_| aws_test_config(&old, ""))?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    let namespace = TestNamespace::create(&client, "e2e-renamed").await?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    let mut ids = BTreeMap::new();
    for name in ["kept", "dropped"] {
        pods::create(&pods_api, &burst_pod(name, &old, &[])).await?;
    }
    for name in ["kept", "dropped"] {
        let pod = pods::wait_for_phase(&pods_api, name, "Running", Duration::from_secs(60)).await?;
        ids.insert(name, instance_id(&pod).context("instance")?);
    }

    // The operator renames the node (the cluster name stays) and restarts orca.
    orca.stop()?;
    let new = format!("{old}-new");
    let config = std::fs::read_to_string(orca.config_path())?
        .replace(&format!("  name: {old}\n"), &format!("  name: {new}\n"));
    std::fs::write(orca.config_path(), config)?;
    orca.restart()?;
    orca.wait_serving(Duration::from_secs(30)).await?;
    // A pod of the old node goes for good (the pod garbage collector does this once the old
    // Node is deleted).
    pods_api
        .delete("dropped", &DeleteParams::default().grace_period(0))
        .await?;
    wait_ended(&ec2, &ids["dropped"], &orca).await?;
    // The other's pod is still there: its instance runs on.
    let until = Instant::now() + ORPHAN_GRACE * 3;
    while Instant::now() < until {
        let instance = orca_e2e::ec2::instance(&ec2, &ids["kept"]).await?;
        ensure!(
            is_live(&instance),
            "the instance of a pod that still exists was ended: {:?}\norca log:\n{}",
            state_of(&instance),
            orca.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    pods_api
        .delete("kept", &DeleteParams::default().grace_period(0))
        .await?;
    wait_ended(&ec2, &ids["kept"], &orca).await?;
    namespace.delete().await?;
    let _ = shared
        .kubectl()
        .args(["delete", "node", "--ignore-not-found", "--wait=false", &new])
        .output();
    Ok(())
}
