//! The virtual node end to end: the real orca binary against the harness's control plane, the
//! real scheduler placing pods (never pre-bound), and the simulated provider journalled to a
//! file, so "the cloud" outlives orca as real instances do.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{EnvVar, Node};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use orca_e2e::journal::launches_by_pod;
use orca_e2e::nodes::ready_condition;
use orca_e2e::pods::{self, burst_pod, condition, instance_id, phase};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, Scenario, TestCluster, TestNamespace, test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(250);

async fn wait_node_ready_status(
    nodes: &Api<Node>,
    name: &str,
    status: &str,
    timeout: Duration,
) -> Result<String> {
    poll_until(
        &format!("node {name} Ready={status}"),
        timeout,
        TICK,
        || async {
            Ok(ready_condition(nodes, name)
                .await?
                .filter(|(s, _)| s == status)
                .map(|(_, reason)| reason))
        },
    )
    .await
}

#[tokio::test]
async fn node_registers_ready_with_its_version_and_renews_its_lease() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let name = unique_node_name("ready");
    let orca = OrcaProcess::start(&name, |dir| test_config(&name, dir, ""))?;
    let nodes: Api<Node> = Api::all(client.clone());

    let reason = wait_node_ready_status(&nodes, &name, "True", Duration::from_secs(5)).await?;
    assert_eq!(reason, "OrcaProviderReady");

    let node = nodes.get(&name).await?;
    let spec = node.spec.clone().unwrap_or_default();
    let taint = &spec.taints.unwrap_or_default()[0];
    assert_eq!(
        (
            taint.key.as_str(),
            taint.value.as_deref(),
            taint.effect.as_str()
        ),
        ("orca.research/burst-node", Some("true"), "NoSchedule")
    );
    let status = node.status.unwrap_or_default();
    assert_eq!(
        status.capacity.unwrap_or_default()["nvidia.com/gpu"].0,
        "100"
    );
    assert_eq!(
        status
            .daemon_endpoints
            .and_then(|d| d.kubelet_endpoint)
            .map(|k| k.port),
        // The kubelet API's port, where the apiserver reaches it (each test orca has its own).
        Some(i32::from(orca.kubelet_port))
    );

    let output = cluster
        .kubectl()
        .args(["get", "nodes", &name, "-o", "wide", "--no-headers"])
        .output()?;
    let line = String::from_utf8_lossy(&output.stdout);
    assert!(
        line.contains("-orca") && line.contains("orca://"),
        "kubectl get nodes: {line}"
    );

    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let renew_time = |lease: Lease| lease.spec.and_then(|s| s.renew_time).map(|t| t.0);
    let first = poll_until("lease", Duration::from_secs(5), TICK, || async {
        Ok(leases.get_opt(&name).await?.and_then(renew_time))
    })
    .await?;
    let lease = leases.get(&name).await?;
    assert_eq!(
        lease.spec.as_ref().and_then(|s| s.lease_duration_seconds),
        Some(40)
    );
    assert_eq!(
        lease.metadata.owner_references.unwrap_or_default()[0].name,
        name
    );
    poll_until("lease renewal", Duration::from_secs(10), TICK, || async {
        Ok(leases
            .get(&name)
            .await
            .map(renew_time)?
            .filter(|renewed| *renewed > first))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn scheduled_pod_runs_then_succeeds_and_a_deleted_pod_loses_its_instance() -> Result<()> {
    let scenario = Scenario::start("life").await?;
    let (name, api) = (scenario.node().to_owned(), scenario.pods.clone());

    let finishing = burst_pod(
        "finishes",
        &name,
        &[
            ("simulated.orca.research/run-time", "3s"),
            ("orca.research/instance-type", "c5.xlarge"),
        ],
    );
    let mut forever = burst_pod("runs-forever", &name, &[]);
    forever.spec.as_mut().expect("spec").containers[0].env = Some(vec![EnvVar {
        name: "GREETING".to_owned(),
        value: Some("hello from the launch request".to_owned()),
        ..EnvVar::default()
    }]);
    // Its instance pulls with its own credentials: the pod launches, and a Warning says so.
    forever.spec.as_mut().expect("spec").image_pull_secrets =
        Some(vec![k8s_openapi::api::core::v1::LocalObjectReference {
            name: "regcred".to_owned(),
        }]);
    pods::create(&api, &finishing).await?;
    pods::create(&api, &forever).await?;

    let running = pods::wait_for(&api, "finishes", "Running", Duration::from_secs(60), |p| {
        phase(p) == "Running"
    })
    .await?;
    assert_eq!(
        running.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(name.as_str()),
        "placed by the scheduler"
    );
    let status = running.status.clone().unwrap_or_default();
    assert!(
        status
            .host_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10.200.")),
        "{status:?}"
    );
    assert_eq!(status.pod_ip, status.host_ip);
    assert_eq!(condition(&running, "Ready"), Some("True"));
    let container = &status.container_statuses.unwrap_or_default()[0];
    assert!(
        container.ready
            && container
                .state
                .as_ref()
                .and_then(|s| s.running.as_ref())
                .is_some()
    );

    let done = pods::wait_for(
        &api,
        "finishes",
        "Succeeded",
        Duration::from_secs(60),
        |p| phase(p) == "Succeeded",
    )
    .await?;
    let terminated = done
        .status
        .unwrap_or_default()
        .container_statuses
        .unwrap_or_default()[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("terminated container state");
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (0, Some("Completed"))
    );

    let forever = pods::wait_for(
        &api,
        "runs-forever",
        "Running",
        Duration::from_secs(60),
        |p| phase(p) == "Running",
    )
    .await?;
    let uid = forever.metadata.uid.clone().unwrap_or_default();
    api.delete("runs-forever", &DeleteParams::default()).await?;
    poll_until(
        "deleted pod to disappear",
        Duration::from_secs(60),
        TICK,
        || async { Ok(api.get_opt("runs-forever").await?.is_none().then_some(())) },
    )
    .await?;
    let journal = launches_by_pod(&scenario.orca.file("instances.jsonl"));
    assert_eq!(journal[&uid].len(), 1);
    assert!(
        journal[&uid][0].terminated,
        "the deleted pod's instance is terminated: {journal:?}"
    );
    // The provider was given the pod resolved, as the aws one is: its environment included.
    let env = &journal[&uid][0].workload["containers"][0]["env"];
    assert!(
        env.to_string().contains("GREETING")
            && env.to_string().contains("hello from the launch request"),
        "the instance's workload carries the pod's environment: {env}"
    );

    let events = TestCluster::shared()
        .kubectl()
        .args([
            "get",
            "events",
            "-n",
            &scenario.namespace.name,
            "-o",
            "jsonpath={.items[*].reason}",
        ])
        .output()?;
    let reasons = String::from_utf8_lossy(&events.stdout);
    for reason in [
        "ProviderCreateSuccess",
        "InstanceRunning",
        "InstanceSucceeded",
    ] {
        assert!(
            reasons.contains(reason),
            "missing event {reason} in {reasons}"
        );
    }
    let client = TestCluster::shared().kube_client().await?;
    let warning = pods::wait_for_event(
        &client,
        &scenario.namespace.name,
        "runs-forever",
        "ImagePullSecretsUnused",
        Duration::from_secs(30),
    )
    .await?;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(
        warning
            .note
            .as_deref()
            .is_some_and(|note| note.starts_with("imagePullSecrets are not used on orca nodes")),
        "{warning:?}"
    );
    scenario.finish().await
}

#[tokio::test]
async fn pod_without_the_toleration_is_never_placed_on_the_node() -> Result<()> {
    let scenario = Scenario::start("taint").await?;
    let (name, api) = (scenario.node().to_owned(), scenario.pods.clone());
    pods::create(
        &api,
        &pods::pod_without_toleration("intolerant", &name, &[]),
    )
    .await?;
    let pod = pods::wait_for(
        &api,
        "intolerant",
        "Unschedulable",
        Duration::from_secs(60),
        |p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.reason.as_deref() == Some("Unschedulable"))
                })
        },
    )
    .await?;
    let message = pod
        .status
        .unwrap_or_default()
        .conditions
        .unwrap_or_default()[0]
        .message
        .clone()
        .unwrap_or_default();
    assert!(message.contains("untolerated taint"), "{message}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        api.get("intolerant").await?.spec.and_then(|s| s.node_name),
        None
    );
    scenario.finish().await
}

#[tokio::test]
async fn killed_orca_goes_not_ready_and_a_restart_adopts_its_pods_without_duplicates() -> Result<()>
{
    let mut scenario = Scenario::start("crash").await?;
    let (name, api) = (scenario.node().to_owned(), scenario.pods.clone());
    let nodes: Api<Node> = Api::all(scenario.client.clone());
    let names = ["a", "b", "c"];
    for pod in names {
        pods::create(&api, &burst_pod(pod, &name, &[])).await?;
    }
    let mut before = Vec::new();
    for pod in names {
        let running = pods::wait_for(&api, pod, "Running", Duration::from_secs(60), |p| {
            phase(p) == "Running"
        })
        .await?;
        before.push(instance_id(&running).expect("instance id recorded"));
    }

    scenario.orca.kill()?;
    let reason = wait_node_ready_status(&nodes, &name, "Unknown", Duration::from_secs(60)).await?;
    assert_eq!(
        reason, "NodeStatusUnknown",
        "the node lifecycle controller saw the lease expire"
    );

    scenario.orca.restart()?;
    wait_node_ready_status(&nodes, &name, "True", Duration::from_secs(10)).await?;
    for (pod, instance) in names.iter().zip(&before) {
        // The lifecycle controller marked the pods not ready; orca must restore them.
        let adopted = pods::wait_for(&api, pod, "Ready again", Duration::from_secs(60), |p| {
            phase(p) == "Running" && condition(p, "Ready") == Some("True")
        })
        .await?;
        assert_eq!(
            instance_id(&adopted).as_ref(),
            Some(instance),
            "pod {pod} kept its instance"
        );
    }
    let journal = launches_by_pod(&scenario.orca.file("instances.jsonl"));
    assert_eq!(journal.len(), 3, "{journal:?}");
    assert!(
        journal
            .values()
            .all(|launches| launches.len() == 1 && !launches[0].terminated),
        "{journal:?}"
    );

    let status = scenario.orca.stop()?;
    assert!(
        status.success(),
        "SIGTERM exits cleanly: {status:?}\n{}",
        scenario.orca.log()
    );
    assert!(api.get("a").await.is_ok(), "pods stay when orca stops");
    scenario.finish().await
}

#[tokio::test]
async fn invalid_config_is_rejected_naming_the_field() -> Result<()> {
    let name = unique_node_name("badcfg");
    let mut orca =
        OrcaProcess::start_with_config_the_schema_refuses(&name, "node:\n  memory: 4TB\n")?;
    let exited = poll_until("orca to exit", Duration::from_secs(10), TICK, || {
        let running = orca.is_running();
        async move { Ok((!running).then_some(())) }
    })
    .await;
    assert!(exited.is_ok(), "orca kept running with a bad config");
    let log = orca.log();
    assert!(
        log.contains("node.memory") && log.contains("\"4TB\"") && log.contains("4Ti"),
        "{log}"
    );
    Ok(())
}

#[tokio::test]
async fn invalid_annotation_fails_the_pod_before_anything_is_launched() -> Result<()> {
    let scenario = Scenario::start("annot").await?;
    let (name, api) = (scenario.node().to_owned(), scenario.pods.clone());
    let created = pods::create(
        &api,
        &burst_pod(
            "bad-price",
            &name,
            &[("orca.research/max-spot-price", "cheap")],
        ),
    )
    .await?;
    let failed = pods::wait_for(&api, "bad-price", "Failed", Duration::from_secs(60), |p| {
        phase(p) == "Failed"
    })
    .await?;
    assert_eq!(pods::reason(&failed), "InvalidAnnotation");
    assert!(
        pods::message(&failed).contains("orca.research/max-spot-price")
            && pods::message(&failed).contains("\"cheap\""),
        "{}",
        pods::message(&failed)
    );
    let journal = launches_by_pod(&scenario.orca.file("instances.jsonl"));
    assert!(
        !journal.contains_key(created.metadata.uid.as_deref().unwrap_or_default()),
        "nothing reached the provider"
    );
    scenario.finish().await
}

#[tokio::test]
async fn transient_launch_errors_are_retried_and_capacity_errors_fail_the_pod() -> Result<()> {
    let scenario = Scenario::start("faults").await?;
    let (name, api) = (scenario.node().to_owned(), scenario.pods.clone());
    pods::create(
        &api,
        &burst_pod(
            "flaky",
            &name,
            &[("simulated.orca.research/launch-error", "transient:2")],
        ),
    )
    .await?;
    pods::create(
        &api,
        &burst_pod(
            "no-capacity",
            &name,
            &[("simulated.orca.research/launch-error", "capacity")],
        ),
    )
    .await?;

    pods::wait_for(
        &api,
        "flaky",
        "Running after retries",
        Duration::from_secs(30),
        |p| phase(p) == "Running",
    )
    .await?;
    let failed = pods::wait_for(
        &api,
        "no-capacity",
        "Failed",
        Duration::from_secs(60),
        |p| phase(p) == "Failed",
    )
    .await?;
    assert_eq!(pods::reason(&failed), "InstanceCreationFailed");
    assert!(
        pods::message(&failed).contains("InsufficientInstanceCapacity"),
        "{}",
        pods::message(&failed)
    );

    let events = TestCluster::shared()
        .kubectl()
        .args([
            "get",
            "events",
            "-n",
            &scenario.namespace.name,
            "--field-selector",
            "involvedObject.name=flaky",
            "-o",
            "jsonpath={.items[*].reason}",
        ])
        .output()?;
    let reasons = String::from_utf8_lossy(&events.stdout);
    assert!(
        reasons.contains("ProviderCreateFailed") && reasons.contains("ProviderCreateSuccess"),
        "{reasons}"
    );
    scenario.finish().await
}

#[tokio::test]
async fn lost_and_interrupted_instances_fail_their_pods_with_precise_reasons() -> Result<()> {
    let scenario = Scenario::start("lost").await?;
    let (name, api) = (scenario.node().to_owned(), scenario.pods.clone());
    pods::create(
        &api,
        &burst_pod(
            "vanishes",
            &name,
            &[("simulated.orca.research/lose-after", "3s")],
        ),
    )
    .await?;
    pods::create(
        &api,
        &burst_pod(
            "interrupted",
            &name,
            &[
                ("simulated.orca.research/interrupt-after", "3s"),
                ("orca.research/launch-type", "spot"),
            ],
        ),
    )
    .await?;
    pods::create(
        &api,
        &burst_pod(
            "crashes",
            &name,
            &[
                ("simulated.orca.research/run-time", "1s"),
                ("simulated.orca.research/exit-code", "3"),
            ],
        ),
    )
    .await?;

    let lost = pods::wait_for(&api, "vanishes", "Failed", Duration::from_secs(60), |p| {
        phase(p) == "Failed"
    })
    .await?;
    assert_eq!(
        pods::reason(&lost),
        "InstanceLost",
        "{}",
        pods::message(&lost)
    );
    let interrupted = pods::wait_for(
        &api,
        "interrupted",
        "Failed",
        Duration::from_secs(60),
        |p| phase(p) == "Failed",
    )
    .await?;
    assert_eq!(pods::reason(&interrupted), "SpotInterrupted");
    assert!(
        pods::message(&interrupted).contains("Server.SpotInstanceTermination"),
        "{}",
        pods::message(&interrupted)
    );
    let crashed = pods::wait_for(&api, "crashes", "Failed", Duration::from_secs(60), |p| {
        phase(p) == "Failed"
    })
    .await?;
    assert!(
        pods::message(&crashed).contains("exited with code 3"),
        "{}",
        pods::message(&crashed)
    );
    let exit_code = crashed
        .status
        .unwrap_or_default()
        .container_statuses
        .unwrap_or_default()[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .map(|t| t.exit_code);
    assert_eq!(exit_code, Some(3));
    scenario.finish().await
}

#[tokio::test]
async fn provider_outage_turns_the_node_not_ready_with_the_reason() -> Result<()> {
    let client = TestCluster::shared().kube_client().await?;
    let name = unique_node_name("outage");
    let orca = OrcaProcess::start(&name, |dir| test_config(&name, dir, ""))?;
    orca.wait_ready(Duration::from_secs(10)).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    std::fs::write(orca.file("outage"), "")?;
    let reason = wait_node_ready_status(&nodes, &name, "False", Duration::from_secs(10)).await?;
    assert_eq!(reason, "OrcaProviderNotReady");
    std::fs::remove_file(orca.file("outage"))?;
    wait_node_ready_status(&nodes, &name, "True", Duration::from_secs(10)).await?;
    Ok(())
}

#[tokio::test]
async fn deleted_node_is_registered_again() -> Result<()> {
    let client = TestCluster::shared().kube_client().await?;
    let name = unique_node_name("renode");
    let orca = OrcaProcess::start(&name, |dir| test_config(&name, dir, ""))?;
    orca.wait_ready(Duration::from_secs(10)).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let first_uid = nodes.get(&name).await?.metadata.uid;
    nodes.delete(&name, &DeleteParams::default()).await?;
    let again = poll_until("node re-created", Duration::from_secs(15), TICK, || async {
        Ok(nodes
            .get_opt(&name)
            .await?
            .filter(|node| node.metadata.uid != first_uid))
    })
    .await?;
    assert!(again.metadata.uid.is_some());
    wait_node_ready_status(&nodes, &name, "True", Duration::from_secs(10)).await?;
    Ok(())
}

#[tokio::test]
async fn instance_whose_pod_is_gone_is_terminated_after_the_grace_period() -> Result<()> {
    let mut scenario = Scenario::start("orphan").await?;
    let (name, api) = (scenario.node().to_owned(), scenario.pods.clone());
    let pod = pods::create(&api, &burst_pod("left-behind", &name, &[])).await?;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    pods::wait_for(
        &api,
        "left-behind",
        "Running",
        Duration::from_secs(60),
        |p| phase(p) == "Running",
    )
    .await?;

    // While orca is down the pod is force-deleted: nobody terminates its instance.
    scenario.orca.kill()?;
    api.delete(
        "left-behind",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await?;
    poll_until("pod gone", Duration::from_secs(10), TICK, || async {
        Ok(api.get_opt("left-behind").await?.is_none().then_some(()))
    })
    .await?;
    assert!(!launches_by_pod(&scenario.orca.file("instances.jsonl"))[&uid][0].terminated);

    scenario.orca.restart()?;
    poll_until("orphan terminated", Duration::from_secs(60), TICK, || {
        let terminated = launches_by_pod(&scenario.orca.file("instances.jsonl"))
            .get(&uid)
            .is_some_and(|l| l[0].terminated);
        async move { Ok(terminated.then_some(())) }
    })
    .await?;
    scenario.finish().await
}

/// A DaemonSet that would place a pod on orca's node (one that tolerates every taint, as EKS's
/// add-ons do) is named in a warning when orca starts, since orca would launch an instance for
/// its pod; one that a required node affinity keeps off is not. The real DaemonSet controller
/// agrees: it creates a pod on the node for the first and none for the second. Both select this
/// test's node alone (by hostname), so no other test's node gets their pods.
#[tokio::test]
async fn daemonsets_that_would_place_a_pod_on_the_node_are_named_at_startup() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let name = unique_node_name("daemonsets");
    let namespace = TestNamespace::create(&client, "daemonsets").await?;
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace.name);
    let daemonset = |ds: &str, affinity: serde_json::Value| -> Result<DaemonSet> {
        let mut spec = serde_json::json!({
            "nodeSelector": {"kubernetes.io/hostname": name},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "agent", "image": "busybox:1.36", "command": ["sleep", "3600"]}],
        });
        if !affinity.is_null() {
            spec["affinity"] = affinity;
        }
        Ok(serde_json::from_value(serde_json::json!({
            "metadata": {"name": ds},
            "spec": {
                "selector": {"matchLabels": {"app": ds}},
                "template": {"metadata": {"labels": {"app": ds}}, "spec": spec},
            },
        }))?)
    };
    let kept_off = serde_json::json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [name]}]}]}}});
    for (ds, affinity) in [("agent", serde_json::Value::Null), ("kept-off", kept_off)] {
        daemonsets
            .create(&PostParams::default(), &daemonset(ds, affinity)?)
            .await?;
    }
    let orca = OrcaProcess::start(&name, |dir| test_config(&name, dir, ""))?;
    let named = |ds: &str| {
        format!(
            "DaemonSet {}/{ds} places a pod on node {name}",
            namespace.name
        )
    };
    poll_until(
        "the warning naming the DaemonSet",
        Duration::from_secs(20),
        TICK,
        || async { Ok(orca.log().contains(&named("agent")).then_some(())) },
    )
    .await?;
    assert!(!orca.log().contains(&named("kept-off")), "{}", orca.log());
    // The DaemonSet controller places them as orca said: a pod of the first on the node, none
    // of the second.
    let daemon_pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(client.clone(), &namespace.name);
    poll_until(
        "the DaemonSet's pod on the node",
        Duration::from_secs(30),
        TICK,
        || async {
            let listed = daemon_pods
                .list(&ListParams::default().labels("app=agent"))
                .await?;
            Ok(listed
                .items
                .iter()
                .any(|pod| {
                    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str())
                })
                .then_some(()))
        },
    )
    .await?;
    let kept_off_pods = daemon_pods
        .list(&ListParams::default().labels("app=kept-off"))
        .await?;
    assert!(kept_off_pods.items.is_empty(), "{:?}", kept_off_pods.items);
    // The DaemonSets go while orca runs, so it sees their pods through.
    let foreground = DeleteParams::foreground();
    for ds in ["agent", "kept-off"] {
        daemonsets.delete(ds, &foreground).await?;
    }
    poll_until(
        "the DaemonSets' pods gone",
        Duration::from_secs(60),
        TICK,
        || async {
            Ok(daemon_pods
                .list(&ListParams::default())
                .await?
                .items
                .is_empty()
                .then_some(()))
        },
    )
    .await?;
    drop(orca);
    namespace.delete().await
}
