//! deploy/iam's policies enforced: the real orca binary calls a moto of this test's own as an
//! IAM user holding what moto can check of `deploy/iam/orca.json` (its projection, see
//! `orca_e2e::iam`), down every path it has: a launch through EC2 Fleet and one through
//! RunInstances, a zone-constrained pod on a node with `subnetIds`, the catalogue refresh, the
//! health ping, `kubectl logs`, `kubectl exec` (Run Command), the interruption queue, the pods' usage read from CloudWatch,
//! and terminations. No request may be refused, and each path must have happened. The workload
//! role's part, the bootstrap's `aws ec2 create-tags` of the exit code and its
//! `aws cloudwatch put-metric-data` of the pod's usage, runs from the user data orca launched,
//! with the real AWS CLI as a second user holding the projection of
//! `deploy/iam/workload.json`.
//!
//! moto checks actions (and SQS's queue ARN), not EC2's resource ARNs, conditions or
//! `iam:PassRole`: those parts of the policies rest on AWS's documentation (see
//! `tests/src/iam.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_ec2::types::{InstanceAttributeName, InstanceStateName};
use base64::Engine as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::DeleteParams;
use orca_e2e::cluster::{kubectl_ok, repo_root};
use orca_e2e::ec2::{state_of, tags_of};
use orca_e2e::iam::{
    ADMIN, IamMoto, MOTO_ACCOUNT, Placeholders, deployed_policy, moto_projection, without_action,
};
use orca_e2e::imds::Imds;
use orca_e2e::notices::spot_warning_from;
use orca_e2e::orca::aws_test_config_at;
use orca_e2e::pods::{self, burst_pod, instance_id, phase};
use orca_e2e::volumes::{Claimed, mounting_claim};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, unique_node_name};

const TICK: Duration = Duration::from_millis(250);
const EXIT_CODE_TAG: &str = "orca.research/exit-code";

/// The EC2 operations orca's paths make (as `orca_ec2_calls_total` names them), each of which
/// must have succeeded at least once: CreateFleet and CreateLaunchTemplate (fleet launch),
/// RunInstances (`launchApi: runInstances`), DescribeSubnets (zone-constrained pod with
/// `subnetIds`), the catalogue refresh's three, DescribeAvailabilityZones (health ping),
/// DescribeInstances (listing, and the notice's owner lookup), GetConsoleOutput (`kubectl
/// logs`), TerminateInstances (pod deleted), DescribeVolumes and AttachVolume (the fleet pod's
/// EBS claim).
const OPERATIONS: [&str; 13] = [
    "DescribeVolumes",
    "AttachVolume",
    "CreateLaunchTemplate",
    "CreateFleet",
    "RunInstances",
    "DescribeSubnets",
    "DescribeInstanceTypes",
    "DescribeSpotPriceHistory",
    "DescribeInstanceTypeOfferings",
    "DescribeAvailabilityZones",
    "DescribeInstances",
    "GetConsoleOutput",
    "TerminateInstances",
];

/// What deploy/iam's placeholders stand for here: moto's account, the harness's region,
/// `cluster` (orca's `node.clusterName`) and this cluster's kube-system UID.
async fn placeholders(client: &kube::Client, cluster: &str) -> Result<Placeholders> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let cluster_id = namespaces
        .get("kube-system")
        .await?
        .metadata
        .uid
        .context("kube-system's UID")?;
    Ok(Placeholders {
        region: TestCluster::shared().var("AWS_REGION").to_owned(),
        account: MOTO_ACCOUNT.to_owned(),
        cluster: cluster.to_owned(),
        cluster_id,
    })
}

/// A zone of moto's region and its default subnet (the first zone).
async fn a_zone_and_its_subnet(ec2: &aws_sdk_ec2::Client) -> Result<(String, String)> {
    orca_e2e::ec2::default_subnets_by_zone(ec2)
        .await?
        .into_iter()
        .next()
        .context("moto has a default subnet")
}

/// `nodes:` with one node in `zone`, launching into `subnet`: each of its pods admits that zone
/// only, so orca reads the subnet's zone (`DescribeSubnets`) before launching.
fn zone_node(name: &str, zone: &str, subnet: &str) -> String {
    format!("nodes:\n  - name: {name}\n    zone: {zone}\n    subnetIds: [{subnet}]\n")
}

/// Every `orca_ec2_calls_total` series of `orca`: (operation, code) → calls.
fn ec2_calls(orca: &OrcaProcess) -> Result<BTreeMap<(String, String), f64>> {
    let page = orca_e2e::metrics::scrape(orca.metrics_port)?;
    Ok(orca_e2e::metrics::series(&page, "orca_ec2_calls_total")?
        .into_iter()
        .map(|(labels, value)| {
            let label = |name: &str| labels.get(name).cloned().unwrap_or_default();
            ((label("operation"), label("code")), value)
        })
        .collect())
}

/// Every series of `metric` on `orca`'s metrics page.
fn metric(orca: &OrcaProcess, metric: &str) -> Result<Vec<(BTreeMap<String, String>, f64)>> {
    let page = orca_e2e::metrics::scrape(orca.metrics_port)?;
    orca_e2e::metrics::series(&page, metric)
}

/// Messages visible and in flight on the queue.
async fn messages_in(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<u64> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let answer = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await?;
    let mut count = 0;
    for value in answer.attributes().into_iter().flat_map(|a| a.values()) {
        count += value.parse::<u64>()?;
    }
    Ok(count)
}

fn has_condition(pod: &Pod, kind: &str, reason: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.type_ == kind && c.status == "True" && c.reason.as_deref() == Some(reason)
            })
        })
}

#[tokio::test]
async fn every_path_of_orca_runs_with_only_the_documented_permissions() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let region = cluster.var("AWS_REGION");
    let fleet_base = unique_node_name("iam-fleet");
    let fleet_node = format!("{fleet_base}-zoned");
    let run_node = unique_node_name("iam-run");
    let values = placeholders(&client, &fleet_base).await?;
    let orca_policy = moto_projection(&deployed_policy("orca.json", &values)?)?;
    let workload_policy = moto_projection(&deployed_policy("workload.json", &values)?)?;
    let moto = IamMoto::start(
        region,
        &[("orca", orca_policy), ("workload", workload_policy)],
    )
    .await?;
    let admin = moto.aws_config(ADMIN).await;
    let ec2 = aws_sdk_ec2::Client::new(&admin);
    let sqs = aws_sdk_sqs::Client::new(&admin);

    // The queue the documented stack makes for this cluster; EventBridge's part is the test's.
    let queue_url = sqs
        .create_queue()
        .queue_name(format!("orca-{fleet_base}-interruptions"))
        .send()
        .await?
        .queue_url()
        .context("queue url")?
        .to_owned();
    let (zone, subnet) = a_zone_and_its_subnet(&ec2).await?;
    let orca_env = moto.env_of("orca");
    // Fleet (the default launchApi), a zoned node with subnetIds, the catalogue refreshed at
    // start, the interruption queue.
    let fleet_orca = OrcaProcess::start_with_env(&fleet_base, &orca_env, |_| {
        format!(
            "{}{}",
            aws_test_config_at(
                &fleet_base,
                moto.endpoint(),
                &format!(
                    "catalogueRefresh: 1h\ninterruptionQueue:\n  url: {queue_url}\n  endpointUrl: {0}\n\
                     logs:\n  group: /orca/{fleet_base}/pods\n  endpointUrl: {0}\n\
                     exec:\n  endpointUrl: {0}\n",
                    moto.endpoint()
                ),
            )
            .replace("    catalogueRefresh: 0s\n", ""),
            zone_node(&fleet_node, &zone, &subnet)
        )
    })?
    .declaring(std::slice::from_ref(&fleet_node));
    let run_orca = OrcaProcess::start_with_env(&run_node, &orca_env, |_| {
        aws_test_config_at(
            &run_node,
            moto.endpoint(),
            &format!(
                "launchApi: runInstances\nmetrics:\n  interval: 1s\n  endpointUrl: {}\n",
                moto.endpoint()
            ),
        )
    })?;
    for orca in [&fleet_orca, &run_orca] {
        orca.wait_ready(Duration::from_secs(30))
            .await
            .map_err(|error| anyhow::anyhow!("{error:#}\nmoto refused: {:#?}", moto.refusals()))?;
    }
    let namespace = TestNamespace::create(&client, "e2e-iam").await?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    // The fleet pod mounts an EBS claim: orca asks where the volume is and attaches it.
    let claimed = Claimed::make(&client, &ec2, &namespace.name, "checkpoints", &zone).await?;
    pods::create(
        &pods_api,
        &mounting_claim(
            burst_pod(
                "fleet",
                &fleet_node,
                &[
                    ("orca.research/launch-type", "spot"),
                    ("orca.research/max-spot-price", "0.90"),
                ],
            ),
            "checkpoints",
        ),
    )
    .await?;
    // A workload that ends: its user data is run to the end below.
    let mut run_pod = burst_pod("run", &run_node, &[]);
    if let Some(spec) = run_pod.spec.as_mut() {
        spec.restart_policy = Some("Never".to_owned());
    }
    pods::create(&pods_api, &run_pod).await?;
    let mut running = BTreeMap::new();
    for (name, orca) in [("fleet", &fleet_orca), ("run", &run_orca)] {
        let pod = pods::wait_for_phase(&pods_api, name, "Running", Duration::from_secs(30))
            .await
            .map_err(|error| {
                anyhow::anyhow!(
                    "{error:#}\nmoto refused: {:#?}\norca log:\n{}",
                    moto.refusals(),
                    orca.log()
                )
            })?;
        running.insert(
            name,
            instance_id(&pod).context("the pod names its instance")?,
        );
    }
    let fleet_instance = orca_e2e::ec2::instance(&ec2, &running["fleet"]).await?;
    assert_eq!(
        fleet_instance
            .placement()
            .and_then(|p| p.availability_zone()),
        Some(zone.as_str()),
        "the zoned node's pod launched in its zone"
    );
    assert_eq!(fleet_instance.subnet_id(), Some(subnet.as_str()));
    let attached = fleet_instance
        .block_device_mappings()
        .iter()
        .any(|mapping| {
            mapping.ebs().and_then(|ebs| ebs.volume_id()) == Some(claimed.volume_id.as_str())
        });
    assert!(
        attached,
        "the fleet pod's volume is attached to its instance"
    );

    // The interruption queue: a spot warning for the fleet pod's instance reaches the pod, and
    // its message is deleted.
    sqs.send_message()
        .queue_url(&queue_url)
        .message_body(spot_warning_from(
            MOTO_ACCOUNT,
            region,
            &running["fleet"],
            jiff::Timestamp::now(),
        ))
        .send()
        .await?;
    pods::wait_for(
        &pods_api,
        "fleet",
        "DisruptionTarget from the spot warning",
        Duration::from_secs(30),
        |pod| has_condition(pod, "DisruptionTarget", "SpotInterruption"),
    )
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", fleet_orca.log()))?;
    poll_until(
        "the spot warning's message deleted",
        Duration::from_secs(30),
        TICK,
        || async { Ok((messages_in(&sqs, &queue_url).await? == 0).then_some(())) },
    )
    .await?;

    // `kubectl logs`: GetLogEvents (the container's stream does not exist: nothing wrote it),
    // then GetConsoleOutput (moto's console is a fixed boot log). The log group was made at
    // startup: CreateLogGroup, PutRetentionPolicy.
    let logs = kubectl_ok(&["logs", "-n", &namespace.name, "fleet"])?;
    ensure!(logs.starts_with("Linux version"), "{logs}");

    // `kubectl exec`: SendCommand, then GetCommandInvocation until the script has ended.
    let exec = cluster
        .kubectl()
        .args(["exec", "-n", &namespace.name, "fleet", "--"])
        .args(["sh", "-c", "echo from-the-instance; exit 4"])
        .output()?;
    ensure!(
        exec.status.code() == Some(4)
            && String::from_utf8_lossy(&exec.stdout) == "from-the-instance\n",
        "kubectl exec: {exec:?}\norca log:\n{}",
        fleet_orca.log()
    );

    // The workload role: the run pod's own user data, run as its instance would. Its sampler
    // publishes the pod's usage while the container runs (orca reads it meanwhile, with
    // GetMetricData every second).
    let run = run_user_data(&moto, &ec2, &running["run"]).await?;
    let run_uid = pods_api.get("run").await?.metadata.uid.context("uid")?;
    let published = aws_sdk_cloudwatch::Client::new(&admin)
        .list_metrics()
        .namespace("Orca/Pods")
        .dimensions(
            aws_sdk_cloudwatch::types::DimensionFilter::builder()
                .name("PodUID")
                .value(&run_uid)
                .build(),
        )
        .send()
        .await?;
    let names: BTreeSet<&str> = published
        .metrics()
        .iter()
        .filter_map(|m| m.metric_name())
        .collect();
    ensure!(
        names == BTreeSet::from(["CpuUsageSeconds", "MemoryWorkingSetBytes"]),
        "the bootstrap published the pod's usage with the workload user's PutMetricData: \
         {names:?}\n{run}"
    );
    let tags = tags_of(&orca_e2e::ec2::instance(&ec2, &running["run"]).await?);
    ensure!(
        tags.get(EXIT_CODE_TAG).map(String::as_str) == Some("0"),
        "the bootstrap tagged its exit code with the workload user's CreateTags: {tags:?}\n{run}"
    );
    // orca read it back with its own role's GetMetricData.
    poll_until(
        "the run pod's usage read back by orca",
        Duration::from_secs(30),
        TICK,
        || async {
            Ok(run_orca
                .log()
                .lines()
                .any(|line| {
                    line.contains("read the pods' usage") && line.contains("with_figures=1")
                })
                .then_some(()))
        },
    )
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", run_orca.log()))?;
    // `shutdown -h now` on an instance launched to terminate on shutdown: EC2 terminates it.
    ec2.terminate_instances()
        .instance_ids(&running["run"])
        .send()
        .await?;
    pods::wait_for_phase(&pods_api, "run", "Succeeded", Duration::from_secs(30))
        .await
        .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", run_orca.log()))?;

    // Terminate on delete.
    pods_api.delete("fleet", &DeleteParams::default()).await?;
    poll_until(
        "the fleet pod's instance terminated",
        Duration::from_secs(30),
        TICK,
        || async {
            let state = state_of(&orca_e2e::ec2::instance(&ec2, &running["fleet"]).await?);
            Ok(matches!(
                state,
                InstanceStateName::ShuttingDown | InstanceStateName::Terminated
            )
            .then_some(()))
        },
    )
    .await?;

    // The catalogue refresh, logged once each of its three parts answered.
    poll_until(
        "the catalogue refreshed",
        Duration::from_secs(30),
        TICK,
        || async {
            let log = fleet_orca.log();
            Ok([
                "instance types refreshed",
                "spot prices refreshed",
                "zones per instance type refreshed",
            ]
            .iter()
            .all(|line| log.contains(line))
            .then_some(()))
        },
    )
    .await?;

    // Nothing refused, by moto's account and by orca's; each path's calls answered.
    let refused = moto.refusals();
    ensure!(refused.is_empty(), "moto refused: {refused:#?}");
    let mut ok = BTreeSet::new();
    for orca in [&fleet_orca, &run_orca] {
        for ((operation, code), calls) in ec2_calls(orca)? {
            ensure!(
                code == "ok",
                "orca {} saw {calls} {operation} calls answered {code}",
                orca.node_name
            );
            ok.insert(operation);
        }
    }
    let missing: Vec<&str> = OPERATIONS
        .iter()
        .copied()
        .filter(|operation| !ok.contains(*operation))
        .collect();
    ensure!(
        missing.is_empty(),
        "paths that never called EC2 successfully: {missing:?} (answered: {ok:?})"
    );
    let queue_errors = metric(&fleet_orca, "orca_interruption_queue_errors_total")?;
    ensure!(
        queue_errors.iter().all(|(_, value)| *value == 0.0),
        "interruption queue calls failed: {queue_errors:?}"
    );
    let acted = metric(&fleet_orca, "orca_interruptions_total")?;
    ensure!(
        acted
            .iter()
            .any(|(labels, value)| labels.get("kind").map(String::as_str)
                == Some("spot-interruption")
                && *value >= 1.0),
        "the warning acted on: {acted:?}"
    );

    drop(fleet_orca);
    drop(run_orca);
    namespace.delete().await
}

/// Runs the user data orca launched `instance_id` with, as cloud-init would on the instance:
/// the bootstrap with the real `curl` against an IMDS answering this instance's id and region,
/// the real AWS CLI (tests/cluster/aws) with the `workload` user's key, and the host's
/// bootstrap fakes for Docker, `mount`, `systemctl` and `shutdown`. Returns its output.
async fn run_user_data(
    moto: &IamMoto,
    ec2: &aws_sdk_ec2::Client,
    instance_id: &str,
) -> Result<String> {
    let answer = ec2
        .describe_instance_attribute()
        .instance_id(instance_id)
        .attribute(InstanceAttributeName::UserData)
        .send()
        .await?;
    let encoded = answer
        .user_data()
        .and_then(|u| u.value())
        .context("the instance's user data")?;
    let script = base64::engine::general_purpose::STANDARD.decode(encoded)?;
    ensure!(
        script.starts_with(b"#!/bin/bash\n"),
        "orca's bootstrap: {}",
        String::from_utf8_lossy(&script)
    );

    let dir = tempfile::Builder::new()
        .prefix("orca-iam-instance-")
        .tempdir()?;
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin)?;
    let fakes = repo_root().join("host/src/provider/aws/workload/bootstrap/fakes");
    // Copied executable (the repository keeps them as plain files, the unit tests write them
    // out the same way): never the machine's own `shutdown` or `systemctl`.
    // The container runs 3 s, long enough for the sampler (every second) to find it, with a
    // cgroup of its own.
    std::fs::write(dir.path().join("main.seconds"), "3")?;
    let cgroup = dir.path().join("cgroup/system.slice/docker-main-id.scope");
    std::fs::create_dir_all(&cgroup)?;
    std::fs::write(
        cgroup.join("cpu.stat"),
        "usage_usec 2500000\nuser_usec 2000000\n",
    )?;
    std::fs::write(cgroup.join("memory.current"), "104857600\n")?;
    std::fs::write(
        cgroup.join("memory.stat"),
        "anon 52428800\ninactive_file 4194304\n",
    )?;
    for fake in ["docker", "mount", "systemctl", "shutdown"] {
        let to = bin.join(fake);
        std::fs::copy(fakes.join(fake), &to)?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))?;
    }
    let aws = repo_root().join("tests/cluster/aws");
    // Installed now (once per machine), not inside the bootstrap's retries.
    let installed = tokio::process::Command::new(&aws)
        .arg("--version")
        .output()
        .await?;
    ensure!(
        installed.status.success(),
        "tests/cluster/aws: {installed:?}"
    );
    std::os::unix::fs::symlink(&aws, bin.join("aws"))?;
    let script_path = dir.path().join("user-data");
    std::fs::write(&script_path, &script)?;

    let imds = Imds::start(BTreeMap::from([
        ("instance-id".to_owned(), instance_id.to_owned()),
        (
            "placement/region".to_owned(),
            TestCluster::shared().var("AWS_REGION").to_owned(),
        ),
        ("local-ipv4".to_owned(), "10.0.0.10".to_owned()),
    ]))
    .await?;
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = tokio::process::Command::new("timeout")
        .arg("120")
        .arg("bash")
        .arg(&script_path)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir.path())
        .env("FAKE_DIR", dir.path())
        .env("ORCA_ROOT", dir.path().join("root"))
        .env("ORCA_CONSOLE", dir.path().join("console"))
        .env("ORCA_IMDS", imds.url())
        .env("ORCA_BACKOFF_SECONDS", "0")
        .env("ORCA_DRAIN_SECONDS", "1")
        .env("ORCA_CGROUP", dir.path().join("cgroup"))
        // Empty trees: never this machine's own disks, which the instance store's helpers
        // would format.
        .env("ORCA_SYS", dir.path().join("sys"))
        .env("ORCA_DEV", dir.path().join("dev"))
        .env("ORCA_DOCKER_ROOT", dir.path().join("docker-root"))
        // The AWS CLI installed above, not a second install under this HOME.
        .env("ORCA_CACHE", orca_cache())
        .env("AWS_CONFIG_FILE", dir.path().join("no-aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.path().join("no-aws-credentials"),
        )
        .envs(moto.env_of("workload"))
        .output()
        .await?;
    let console = std::fs::read_to_string(dir.path().join("console")).unwrap_or_default();
    let state = |name: &str| {
        std::fs::read_to_string(dir.path().join("root/state").join(name)).unwrap_or_default()
    };
    let text = format!(
        "bootstrap exited {}\nstdout:\n{}\nstderr:\n{}\nconsole:\n{console}\nlast sample:\n{}\n\
         last publish's errors:\n{}\ndocker calls:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        state("sample"),
        state("publish.err"),
        std::fs::read_to_string(dir.path().join("docker.calls")).unwrap_or_default(),
    );
    ensure!(output.status.success(), "{text}");
    ensure!(console.contains("orca-exit-code=0"), "{text}");
    ensure!(!text.contains("tagging the instance failed"), "{text}");
    ensure!(
        shutdown_asked(dir.path()),
        "the bootstrap powered off: {text}"
    );
    Ok(text)
}

/// Where the harness caches what it installs (`tests/cluster/lib/common.sh`).
fn orca_cache() -> std::path::PathBuf {
    std::env::var_os("ORCA_CACHE").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/orca")
        },
        std::path::PathBuf::from,
    )
}

fn shutdown_asked(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("shutdown.calls")).is_ok_and(|calls| calls.contains("-h now"))
}

/// The policy documented before DescribeSubnets was added to it, on a real account: a
/// zone-constrained pod on a node with `subnetIds` failed `InstanceCreationFailed`, EC2
/// refusing `ec2:DescribeSubnets`. Here enforcement is shown to be real: the same projection
/// without that action fails the same way, naming the refused action; and the SQS statement's
/// queue ARN is checked (another queue is refused, its own is not).
#[tokio::test]
async fn without_describe_subnets_a_zoned_pod_fails_naming_the_refused_action() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let region = cluster.var("AWS_REGION");
    let base = unique_node_name("iam-old");
    let node = format!("{base}-zoned");
    let values = placeholders(&client, &base).await?;
    let projection = moto_projection(&deployed_policy("orca.json", &values)?)?;
    ensure!(
        orca_e2e::iam::actions(&projection).contains(&"ec2:DescribeSubnets".to_owned()),
        "deploy/iam/orca.json allows ec2:DescribeSubnets"
    );
    let old = without_action(&projection, "ec2:DescribeSubnets");
    let moto = IamMoto::start(region, &[("orca", old)]).await?;
    let admin = moto.aws_config(ADMIN).await;
    let ec2 = aws_sdk_ec2::Client::new(&admin);
    let (zone, subnet) = a_zone_and_its_subnet(&ec2).await?;
    let orca = OrcaProcess::start_with_env(&base, &moto.env_of("orca"), |_| {
        format!(
            "{}{}",
            aws_test_config_at(&base, moto.endpoint(), ""),
            zone_node(&node, &zone, &subnet)
        )
    })?
    .declaring(std::slice::from_ref(&node));
    orca.wait_ready(Duration::from_secs(30)).await?;
    let namespace = TestNamespace::create(&client, "e2e-iam-old").await?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    pods::create(&pods_api, &burst_pod("zoned", &node, &[])).await?;
    let failed = pods::wait_for_phase(&pods_api, "zoned", "Failed", Duration::from_secs(30))
        .await
        .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", orca.log()))?;
    let message = pods::message(&failed);
    eprintln!("the zoned pod failed: {}: {message}", pods::reason(&failed));
    ensure!(
        pods::reason(&failed) == "InstanceCreationFailed"
            && message.contains("UnauthorizedOperation")
            && message.contains("ec2:DescribeSubnets"),
        "{}: {message}",
        pods::reason(&failed)
    );
    ensure!(
        phase(&failed) == "Failed",
        "the pod is Failed: {:?}",
        failed.status
    );
    let refused = moto.refusals();
    ensure!(
        !refused.is_empty()
            && refused
                .iter()
                .all(|line| line.contains("refused DescribeSubnets on *: UnauthorizedOperation")),
        "moto refused DescribeSubnets and nothing else: {refused:#?}"
    );

    // The interruption queue's statement names this cluster's queue: another one is refused.
    let sqs = aws_sdk_sqs::Client::new(&admin);
    let own = sqs
        .create_queue()
        .queue_name(format!("orca-{base}-interruptions"))
        .send()
        .await?
        .queue_url()
        .context("queue url")?
        .to_owned();
    let other = sqs
        .create_queue()
        .queue_name(format!("orca-other-{base}-interruptions"))
        .send()
        .await?
        .queue_url()
        .context("queue url")?
        .to_owned();
    let as_orca = aws_sdk_sqs::Client::new(&moto.aws_config("orca").await);
    as_orca.receive_message().queue_url(&own).send().await?;
    if as_orca
        .receive_message()
        .queue_url(&other)
        .send()
        .await
        .is_ok()
    {
        bail!("orca's SQS statement let it read another queue: {other}");
    }
    let refused_other = moto
        .refusals()
        .into_iter()
        .filter(|line| line.contains(&format!(":orca-other-{base}-interruptions: AccessDenied")))
        .count();
    ensure!(
        refused_other > 0,
        "moto refused the other queue by its ARN: {:#?}",
        moto.refusals()
    );
    drop(orca);
    namespace.delete().await
}
