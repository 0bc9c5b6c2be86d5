//! The aws provider end to end: the real orca binary, the real scheduler placing pods, and
//! moto's EC2 server behind the real AWS SDK, including instances stopped behind orca's back
//! and orca SIGKILLed in the middle of a burst. What moto cannot show (capacity errors,
//! throttling, eventual consistency, lost answers, per-id refusals) is covered by the
//! provider's unit tests against a fault-injecting `Ec2Api` and by the simulation against
//! `tests/ec2-model` (`tests/e2e/simulation.rs`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_ec2::types::{
    Filter, Instance, InstanceStateName, LaunchTemplateHttpTokensState,
    LaunchTemplateInstanceMetadataOptionsRequest, RequestLaunchTemplateData, ShutdownBehavior,
};
use aws_sdk_sqs::types::QueueAttributeName;
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use orca_e2e::ec2::{default_subnets_by_zone, finish_workload, state_of, tags_of};
use orca_e2e::notices::{
    ACCOUNT, REGION, rebalance_recommendation, spot_warning, spot_warning_from,
};
use orca_e2e::pods::{self, burst_pod, instance_id, phase};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(250);
const POD_UID_TAG: &str = "orca.research/pod-uid";

struct AwsScenario {
    orca: OrcaProcess,
    namespace: TestNamespace,
    pods: Api<Pod>,
    ec2: aws_sdk_ec2::Client,
}

impl AwsScenario {
    async fn start(test: &str, aws_extra: &str) -> Result<AwsScenario> {
        AwsScenario::start_with_policy(test, aws_extra, "").await
    }

    /// As [`AwsScenario::start`], with a `policy:` section (empty: the defaults).
    async fn start_with_policy(test: &str, aws_extra: &str, policy: &str) -> Result<AwsScenario> {
        let cluster = TestCluster::shared();
        let client = cluster.kube_client().await?;
        let node = unique_node_name(test);
        let orca = OrcaProcess::start(&node, |_| {
            format!("{}{policy}", aws_test_config(&node, aws_extra))
        })?;
        orca.wait_ready(Duration::from_secs(20)).await?;
        let namespace = TestNamespace::create(&client, &format!("e2e-{test}")).await?;
        let pods = Api::namespaced(client, &namespace.name);
        Ok(AwsScenario {
            orca,
            namespace,
            pods,
            ec2: cluster.ec2_client().await,
        })
    }

    fn node(&self) -> &str {
        &self.orca.node_name
    }

    /// Every instance tagged for this scenario's node, in any state.
    async fn instances(&self) -> Result<Vec<Instance>> {
        let pages = self
            .ec2
            .describe_instances()
            .filters(
                Filter::builder()
                    .name("tag:orca.research/node")
                    .values(self.node())
                    .build(),
            )
            .send()
            .await?;
        Ok(pages
            .reservations()
            .iter()
            .flat_map(|r| r.instances().iter().cloned())
            .collect())
    }

    async fn instance(&self, id: &str) -> Result<Instance> {
        self.instances()
            .await?
            .into_iter()
            .find(|i| i.instance_id() == Some(id))
            .with_context(|| format!("instance {id} is not listed"))
    }

    async fn wait_phase(&self, name: &str, wanted: &'static str, timeout: Duration) -> Result<Pod> {
        pods::wait_for_phase(&self.pods, name, wanted, timeout).await
    }

    async fn finish_workload(&self, instance_id: &str, exit_code: i32) -> Result<()> {
        finish_workload(&self.ec2, instance_id, exit_code).await
    }

    async fn finish(self) -> Result<()> {
        self.namespace.delete().await
    }
}

#[tokio::test]
async fn an_annotated_pod_runs_on_that_type_with_its_tags_and_is_terminated_on_delete() -> Result<()>
{
    let scenario = AwsScenario::start("aws-annotated", "").await?;
    let pod = burst_pod(
        "trainer",
        scenario.node(),
        &[
            ("orca.research/instance-type", "m5.xlarge"),
            ("orca.research/tags", r#"{"team":"vision"}"#),
        ],
    );
    pods::create(&scenario.pods, &pod).await?;
    let running = scenario
        .wait_phase("trainer", "Running", Duration::from_secs(30))
        .await?;
    let status = running.status.clone().unwrap_or_default();
    assert!(
        status.host_ip.is_some() && status.pod_ip.is_some(),
        "{status:?}"
    );
    let id = instance_id(&running).context("the pod names its instance")?;
    let instance = scenario.instance(&id).await?;
    assert_eq!(
        instance.instance_type().map(|t| t.as_str()),
        Some("m5.xlarge")
    );
    assert_eq!(instance.image_id(), Some("ami-0123456789abcdef0"));
    assert_eq!(
        instance.instance_lifecycle(),
        None,
        "on-demand unless asked for spot"
    );
    let tags = tags_of(&instance);
    let uid = running.metadata.uid.clone().unwrap_or_default();
    for (key, value) in [
        ("ManagedBy", "ORCA"),
        ("orca.research/node", scenario.node()),
        ("orca.research/cluster", scenario.node()),
        (
            "orca.research/pod-namespace",
            scenario.namespace.name.as_str(),
        ),
        ("orca.research/pod-name", "trainer"),
        (POD_UID_TAG, uid.as_str()),
        ("team", "vision"),
    ] {
        assert_eq!(
            tags.get(key).map(String::as_str),
            Some(value),
            "tag {key}: {tags:?}"
        );
    }
    let decision = running
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("orca.research/decision"))
        .context("decision annotation")?;
    assert!(decision.contains("m5.xlarge"), "{decision}");

    scenario
        .pods
        .delete("trainer", &DeleteParams::default())
        .await?;
    poll_until(
        "pod trainer removed",
        Duration::from_secs(30),
        TICK,
        || async {
            Ok(scenario
                .pods
                .get_opt("trainer")
                .await?
                .is_none()
                .then_some(()))
        },
    )
    .await?;
    let state = state_of(&scenario.instance(&id).await?);
    assert!(
        matches!(
            state,
            InstanceStateName::ShuttingDown | InstanceStateName::Terminated
        ),
        "{state:?}"
    );
    scenario.finish().await
}

#[tokio::test]
async fn a_spot_pod_gets_a_spot_instance_and_its_exit_code_decides_the_phase() -> Result<()> {
    let scenario = AwsScenario::start("aws-spot", "").await?;
    for (name, exit_code) in [("ok", 0), ("bad", 3)] {
        let pod = burst_pod(
            name,
            scenario.node(),
            &[
                ("orca.research/launch-type", "spot"),
                ("orca.research/max-spot-price", "0.50"),
            ],
        );
        pods::create(&scenario.pods, &pod).await?;
        let running = scenario
            .wait_phase(name, "Running", Duration::from_secs(30))
            .await?;
        let id = instance_id(&running).context("the pod names its instance")?;
        let instance = scenario.instance(&id).await?;
        assert_eq!(
            instance.instance_lifecycle().map(|l| l.as_str()),
            Some("spot"),
            "InstanceMarketOptions reached EC2"
        );
        scenario.finish_workload(&id, exit_code).await?;
    }
    let ok = scenario
        .wait_phase("ok", "Succeeded", Duration::from_secs(30))
        .await?;
    assert_eq!(pods::reason(&ok), "");
    let bad = scenario
        .wait_phase("bad", "Failed", Duration::from_secs(30))
        .await?;
    let terminated = bad
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .context("a terminated container state")?;
    assert_eq!(terminated.exit_code, 3);
    scenario.finish().await
}

#[tokio::test]
async fn a_spot_pod_launches_through_one_fleet_carrying_every_candidate_type() -> Result<()> {
    let scenario = AwsScenario::start("aws-fleet", "").await?;
    let mut pod = burst_pod(
        "fleet",
        scenario.node(),
        &[
            ("orca.research/launch-type", "spot"),
            ("orca.research/max-spot-price", "0.90"),
        ],
    );
    // Requests several types fit, so the selector ranks more than one candidate.
    let container = &mut pod.spec.as_mut().context("spec")?.containers[0];
    container.resources = Some(ResourceRequirements {
        requests: Some(
            [
                ("cpu".to_owned(), Quantity("2".to_owned())),
                ("memory".to_owned(), Quantity("4Gi".to_owned())),
            ]
            .into(),
        ),
        ..ResourceRequirements::default()
    });
    let created = pods::create(&scenario.pods, &pod).await?;
    let uid = created.metadata.uid.clone().context("uid")?;
    let running = scenario
        .wait_phase("fleet", "Running", Duration::from_secs(30))
        .await?;
    let decision = pods::decision(&running).context("the decision annotation")?;
    let candidates: Vec<String> = decision["candidates"]
        .as_array()
        .context("candidates")?
        .iter()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect();
    assert!(candidates.len() > 1, "several candidates: {candidates:?}");
    let chosen_by = decision["launch"]["chosenBy"].as_str().unwrap_or_default();
    assert!(
        chosen_by.contains("EC2 Fleet (price-capacity-optimized)"),
        "the decision says how EC2 chose: {decision}"
    );

    // One instant fleet for the pod, one pool per candidate (no subnets configured).
    let fleets: Vec<_> = scenario
        .ec2
        .describe_fleets()
        .send()
        .await?
        .fleets()
        .iter()
        .filter(|fleet| {
            fleet
                .tags()
                .iter()
                .any(|t| t.key() == Some(POD_UID_TAG) && t.value() == Some(uid.as_str()))
        })
        .cloned()
        .collect();
    assert_eq!(fleets.len(), 1, "one fleet for the pod");
    let pools: Vec<String> = fleets[0]
        .launch_template_configs()
        .iter()
        .flat_map(|config| config.overrides())
        .filter_map(|o| o.instance_type().map(|t| t.as_str().to_owned()))
        .collect();
    assert_eq!(pools, candidates, "every candidate, in rank order");

    let id = instance_id(&running).context("the pod names its instance")?;
    let instance = scenario.instance(&id).await?;
    assert_eq!(
        instance.instance_lifecycle().map(|l| l.as_str()),
        Some("spot")
    );
    let launched_type = instance
        .instance_type()
        .map(|t| t.as_str().to_owned())
        .unwrap_or_default();
    assert!(candidates.contains(&launched_type), "{launched_type}");
    assert_eq!(tags_of(&instance).get(POD_UID_TAG), Some(&uid));
    scenario.finish().await
}

/// Issue 39, case 6: fleets named the node's launch template by name at `$Latest`, and a
/// template under that name counted as orca's whatever it held. Someone replaces it (IMDSv1,
/// stop on shutdown) and orca restarts: nothing is launched from it; the pod fails naming the
/// template and each setting that differs, in its status and its Event, and the node's log
/// says the same.
#[tokio::test]
async fn a_launch_template_someone_else_put_under_orcas_name_is_never_launched_from() -> Result<()>
{
    let mut scenario = AwsScenario::start("aws-template", "").await?;
    pods::create(&scenario.pods, &burst_pod("first", scenario.node(), &[])).await?;
    scenario
        .wait_phase("first", "Running", Duration::from_secs(30))
        .await?;
    let named = |name: String| {
        Filter::builder()
            .name("launch-template-name")
            .values(name)
            .build()
    };
    let made = scenario
        .ec2
        .describe_launch_templates()
        .filters(named(format!("orca-{}-*", scenario.node())))
        .send()
        .await?;
    let name = made
        .launch_templates()
        .iter()
        .find_map(|template| template.launch_template_name())
        .context("orca made the node's launch template")?
        .to_owned();
    // Someone deletes it and puts their own under the same name.
    scenario
        .ec2
        .delete_launch_template()
        .launch_template_name(&name)
        .send()
        .await?;
    scenario
        .ec2
        .create_launch_template()
        .launch_template_name(&name)
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .instance_initiated_shutdown_behavior(ShutdownBehavior::Stop)
                .metadata_options(
                    LaunchTemplateInstanceMetadataOptionsRequest::builder()
                        .http_tokens(LaunchTemplateHttpTokensState::Optional)
                        .build(),
                )
                .build(),
        )
        .send()
        .await?;
    scenario.orca.stop()?;
    scenario.orca.restart()?;
    scenario.orca.wait_ready(Duration::from_secs(20)).await?;

    let created = pods::create(&scenario.pods, &burst_pod("second", scenario.node(), &[])).await?;
    let uid = created.metadata.uid.clone().context("uid")?;
    let failed = scenario
        .wait_phase("second", "Failed", Duration::from_secs(60))
        .await?;
    let message = pods::message(&failed);
    assert_eq!(pods::reason(&failed), "InstanceCreationFailed", "{message}");
    let named_all = |text: &str| {
        [
            "LaunchTemplateMismatch",
            name.as_str(),
            "InstanceInitiatedShutdownBehavior stop where orca sets terminate",
            "MetadataOptions.HttpTokens optional where orca sets required",
        ]
        .iter()
        .all(|part| text.contains(part))
    };
    assert!(
        named_all(message),
        "the status names the template and each setting: {message}"
    );
    let client = scenario.pods.clone().into_client();
    let namespace = scenario.namespace.name.clone();
    poll_until(
        "a ProviderCreateFailed Event naming the template and each setting",
        Duration::from_secs(30),
        TICK,
        || async {
            let events = pods::events_about(&client, &namespace, "second").await?;
            Ok(events
                .iter()
                .any(|event| {
                    event.reason.as_deref() == Some("ProviderCreateFailed")
                        && event.note.as_deref().is_some_and(named_all)
                })
                .then_some(()))
        },
    )
    .await?;
    let log = scenario.orca.log();
    assert!(
        log.contains("refusing to launch from a launch template orca did not make")
            && log.contains(&name),
        "the node's log says so"
    );
    let launched: Vec<String> = scenario
        .instances()
        .await?
        .iter()
        .filter(|instance| tags_of(instance).get(POD_UID_TAG) == Some(&uid))
        .filter_map(|instance| instance.instance_id().map(str::to_owned))
        .collect();
    assert!(
        launched.is_empty(),
        "nothing launched for the pod: {launched:?}"
    );
    scenario
        .ec2
        .delete_launch_template()
        .launch_template_name(&name)
        .send()
        .await?;
    scenario.finish().await
}

/// A queue of its own for one test, hiding a received message for `visibility_seconds`; its URL.
async fn create_queue(
    sqs: &aws_sdk_sqs::Client,
    test: &str,
    visibility_seconds: u32,
) -> Result<String> {
    Ok(sqs
        .create_queue()
        .queue_name(unique_node_name(test))
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_seconds.to_string(),
        )
        .send()
        .await?
        .queue_url()
        .context("queue url")?
        .to_owned())
}

/// Replicas that split the nodes hand each other's notices on (`NoticeQueue::hand_on`): against
/// moto's SQS, a message received and handed on is received again within seconds, though the
/// queue hides a received message for a minute; a handle SQS does not know is refused by name.
#[tokio::test]
async fn a_notice_handed_on_is_received_again_long_before_its_visibility_timeout() -> Result<()> {
    use orca::interruption::{NoticeQueue, QueueError, SqsQueue};
    let cluster = TestCluster::shared();
    let sqs = cluster.sqs_client().await;
    let queue_url = create_queue(&sqs, "hand-on", 60).await?;
    sqs.send_message()
        .queue_url(&queue_url)
        .message_body("a notice for the other replica")
        .send()
        .await?;
    let queue = SqsQueue::with_client(sqs, &queue_url);
    let first = queue.receive(Duration::from_secs(5)).await?;
    ensure!(first.len() == 1, "{first:?}");
    let hidden = queue.receive(Duration::from_secs(1)).await?;
    ensure!(
        hidden.is_empty(),
        "a received message is hidden: {hidden:?}"
    );
    let handed_at = Instant::now();
    queue
        .hand_on(&[first[0].receipt_handle.clone()], Duration::from_secs(1))
        .await?;
    let again = queue.receive(Duration::from_secs(10)).await?;
    ensure!(
        again.len() == 1 && again[0].body == first[0].body,
        "handed on, the message comes back: {again:?}"
    );
    ensure!(
        handed_at.elapsed() < Duration::from_secs(30),
        "{:?}",
        handed_at.elapsed()
    );
    match queue
        .hand_on(&["not-a-receipt".to_owned()], Duration::from_secs(1))
        .await
    {
        Err(QueueError::NotHandedOn { entries, .. }) => {
            ensure!(
                entries.len() == 1 && entries[0].receipt_handle == "not-a-receipt",
                "{entries:?}"
            );
        }
        Err(other) => anyhow::bail!("an unknown handle is refused by name, not {other:#}"),
        Ok(()) => anyhow::bail!("an unknown handle was accepted"),
    }
    Ok(())
}

#[tokio::test]
async fn a_spot_warning_reaches_the_pod_before_its_instance_goes() -> Result<()> {
    let cluster = TestCluster::shared();
    let sqs = cluster.sqs_client().await;
    let queue_url = create_queue(&sqs, "interruptions", 1).await?;
    let extra = format!(
        "interruptionQueue:\n  url: {queue_url}\n  endpointUrl: {}\n",
        cluster.var("AWS_ENDPOINT_URL")
    );
    // The market plugin marks its pods on a rebalance recommendation (orca:policy@0.3.0).
    let policy = "policy:\n  chooseMarket:\n    - plugin: orca-default-market\n      \
                  settings: {markOnRebalance: true}\n";
    let mut scenario = AwsScenario::start_with_policy("aws-interrupt", &extra, policy).await?;
    let pod = burst_pod(
        "warned",
        scenario.node(),
        &[
            ("orca.research/launch-type", "spot"),
            ("orca.research/max-spot-price", "0.90"),
        ],
    );
    pods::create(&scenario.pods, &pod).await?;
    let running = scenario
        .wait_phase("warned", "Running", Duration::from_secs(30))
        .await?;
    let id = instance_id(&running).context("the pod names its instance")?;
    let condition = |pod: &Pod, kind: &str, reason: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions.iter().any(|c| {
                    c.type_ == kind && c.status == "True" && c.reason.as_deref() == Some(reason)
                })
            })
    };

    // A rebalance recommendation first: the plugin's markOnRebalance makes it DisruptionTarget.
    sqs.send_message()
        .queue_url(&queue_url)
        .message_body(rebalance_recommendation(&id, jiff::Timestamp::now()))
        .send()
        .await?;
    let recommended = pods::wait_for(
        &scenario.pods,
        "warned",
        "DisruptionTarget for the rebalance recommendation",
        Duration::from_secs(15),
        |pod| condition(pod, "DisruptionTarget", "RebalanceRecommendation"),
    )
    .await?;
    assert!(condition(
        &recommended,
        "orca.research/RebalanceRecommended",
        "RebalanceRecommendation"
    ));
    assert_eq!(phase(&recommended), "Running");

    // An instance EC2 does not know, warned about an hour ago.
    let foreign = spot_warning(
        "i-0fedcba9876543210",
        jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1),
    );
    sqs.send_message()
        .queue_url(&queue_url)
        .message_body(&foreign)
        .send()
        .await?;
    sqs.send_message()
        .queue_url(&queue_url)
        .message_body(spot_warning(&id, jiff::Timestamp::now()))
        .send()
        .await?;

    // The warning reaches the pod while its instance still runs.
    let warned = pods::wait_for(
        &scenario.pods,
        "warned",
        "the DisruptionTarget condition",
        Duration::from_secs(15),
        |pod| condition(pod, "DisruptionTarget", "SpotInterruption"),
    )
    .await?;
    assert_eq!(phase(&warned), "Running");
    assert_eq!(
        state_of(&scenario.instance(&id).await?),
        InstanceStateName::Running,
        "warned before the instance goes"
    );
    let client = cluster.kube_client().await?;
    poll_until(
        "a SpotInterruption Warning Event",
        Duration::from_secs(15),
        TICK,
        || async {
            let events = pods::events_about(&client, &scenario.namespace.name, "warned").await?;
            Ok(events
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("SpotInterruption")
                        && e.type_.as_deref() == Some("Warning")
                })
                .then_some(()))
        },
    )
    .await?;

    // EC2 reclaims it; the workload wrote 143 on the way down.
    scenario.finish_workload(&id, 143).await?;
    let failed = scenario
        .wait_phase("warned", "Failed", Duration::from_secs(30))
        .await?;
    assert_eq!(pods::reason(&failed), "SpotInterrupted");

    // The queue is this orca's: a message about an instance that is not its own is deleted
    // too (EC2 does not know that instance), not left to circulate.
    queue_drained(&sqs, &queue_url).await?;
    scenario.orca.stop()?;
    sqs.delete_queue().queue_url(&queue_url).send().await?;
    scenario.finish().await
}

/// Messages visible and in flight on the queue, as SQS counts them.
async fn messages_in(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<u64> {
    let answer = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await?;
    let mut count = 0;
    for (_, value) in answer.attributes().into_iter().flatten() {
        count += value.parse::<u64>()?;
    }
    Ok(count)
}

/// Waits until orca deleted every message on the queue.
async fn queue_drained(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<()> {
    poll_until(
        "every message on the queue deleted",
        Duration::from_secs(30),
        TICK,
        || async { Ok((messages_in(sqs, queue_url).await? == 0).then_some(())) },
    )
    .await
}

/// Issue 39, case 7: a spot warning naming the pod's instance was acted on whatever account
/// sent it (any account's rule allowed to send to the queue could end pods `SpotInterrupted`),
/// and messages orca does not act on (another instance's, unreadable) were left on the queue
/// to circulate until its retention dropped them. Here: forged warnings from another account
/// and region are deleted and never mark the pod; a warning about someone else's instance in
/// the account (moto's), one about an instance EC2 does not know, and an unreadable body are
/// deleted; the queue ends empty while orca runs, with its default 30 s visibility timeout,
/// so a message orca left would still be counted; then a real warning still marks the pod.
#[tokio::test]
async fn a_forged_warning_is_never_acted_on_and_nothing_but_this_orcas_notices_stays_queued()
-> Result<()> {
    let cluster = TestCluster::shared();
    let sqs = cluster.sqs_client().await;
    let queue_url = create_queue(&sqs, "interruption-junk", 30).await?;
    let extra = format!(
        "interruptionQueue:\n  url: {queue_url}\n  endpointUrl: {}\n",
        cluster.var("AWS_ENDPOINT_URL")
    );
    let scenario = AwsScenario::start("aws-junk", &extra).await?;
    let pod = burst_pod(
        "target",
        scenario.node(),
        &[("orca.research/launch-type", "spot")],
    );
    pods::create(&scenario.pods, &pod).await?;
    let running = scenario
        .wait_phase("target", "Running", Duration::from_secs(30))
        .await?;
    let id = instance_id(&running).context("the pod names its instance")?;
    // Someone else's instance in the account, tagged by the controller that launched it. (One
    // launched moments ago that shows none of orca's tags is kept for the visibility grace:
    // EC2 may show an instance's tags one by one. A tag naming another owner settles it.)
    let tag = |key: &str, value: &str| {
        aws_sdk_ec2::types::Tag::builder()
            .key(key)
            .value(value)
            .build()
    };
    let someone_elses = scenario
        .ec2
        .run_instances()
        .image_id("ami-0123456789abcdef0")
        .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
        .min_count(1)
        .max_count(1)
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Instance)
                .tags(tag("Name", "web"))
                .tags(tag("ManagedBy", "karpenter"))
                .build(),
        )
        .send()
        .await?
        .instances()
        .first()
        .and_then(|i| i.instance_id().map(str::to_owned))
        .context("someone else's instance")?;
    let now = jiff::Timestamp::now();
    let an_hour_ago = now - jiff::SignedDuration::from_hours(1);
    for body in [
        spot_warning_from("210987654321", REGION, &id, now),
        spot_warning_from(ACCOUNT, "eu-west-1", &id, now),
        spot_warning(&someone_elses, now),
        spot_warning("i-0fedcba9876543210", an_hour_ago),
        "{\"not\": \"an event\"}".to_owned(),
    ] {
        sqs.send_message()
            .queue_url(&queue_url)
            .message_body(body)
            .send()
            .await?;
    }
    queue_drained(&sqs, &queue_url).await?;
    let marked = |pod: &Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "DisruptionTarget"))
    };
    let after = scenario.pods.get("target").await?;
    assert!(
        !marked(&after),
        "a forged warning marked the pod: {:?}",
        after.status
    );
    let page = orca_e2e::metrics::scrape(scenario.orca.metrics_port)?;
    let outcomes =
        orca_e2e::metrics::by_label(&page, "orca_interruption_messages_total", "outcome");
    for (outcome, count) in [
        ("other-account", 1.0),
        ("other-region", 1.0),
        ("foreign", 2.0),
        ("unparsed", 1.0),
        ("delivered", 0.0),
    ] {
        assert_eq!(
            outcomes.get(outcome),
            Some(&count),
            "{outcome}: {outcomes:?}"
        );
    }

    // This orca's own warning is acted on as before.
    sqs.send_message()
        .queue_url(&queue_url)
        .message_body(spot_warning(&id, jiff::Timestamp::now()))
        .send()
        .await?;
    pods::wait_for(
        &scenario.pods,
        "target",
        "DisruptionTarget for the real warning",
        Duration::from_secs(15),
        marked,
    )
    .await?;
    queue_drained(&sqs, &queue_url).await?;
    sqs.delete_queue().queue_url(&queue_url).send().await?;
    scenario.finish().await
}

#[tokio::test]
async fn a_restart_in_the_middle_of_a_burst_of_50_pods_leaves_exactly_50_instances() -> Result<()> {
    let mut scenario = AwsScenario::start("aws-burst", "").await?;
    const PODS: usize = 50;
    let names: Vec<String> = (0..PODS).map(|i| format!("burst-{i:02}")).collect();
    for name in &names {
        pods::create(&scenario.pods, &burst_pod(name, scenario.node(), &[])).await?;
    }
    // Kill orca while it is launching, then start it again.
    poll_until(
        "the first launches",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async { Ok((!scenario.instances().await?.is_empty()).then_some(())) },
    )
    .await?;
    scenario.orca.kill()?;
    let launched_before_restart = scenario.instances().await?.len();
    scenario.orca.restart()?;
    poll_until(
        "every pod Running",
        Duration::from_secs(90),
        TICK,
        || async {
            let list = scenario.pods.list(&ListParams::default()).await?;
            Ok(
                (list.items.len() == PODS && list.items.iter().all(|p| phase(p) == "Running"))
                    .then_some(()),
            )
        },
    )
    .await?;
    let instances = scenario.instances().await?;
    let uids: BTreeSet<String> = instances
        .iter()
        .filter_map(|i| tags_of(i).get(POD_UID_TAG).cloned())
        .collect();
    assert_eq!(
        instances.len(),
        PODS,
        "{launched_before_restart} launched before the restart; {} in all",
        instances.len()
    );
    assert_eq!(uids.len(), PODS, "one instance per pod");
    let pods = scenario.pods.list(&ListParams::default()).await?;
    for pod in &pods.items {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        assert!(
            uids.contains(&uid),
            "pod {:?} has an instance",
            pod.metadata.name
        );
    }
    scenario.finish().await
}

#[tokio::test]
async fn the_catalogue_is_refreshed_from_ec2_through_the_sdk() -> Result<()> {
    let node = unique_node_name("aws-catalogue");
    let orca = OrcaProcess::start(&node, |_| {
        aws_test_config(&node, "").replace("catalogueRefresh: 0s", "catalogueRefresh: 1h")
    })?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    const REFRESHES: [&str; 3] = [
        "instance types refreshed",
        "spot prices refreshed",
        "zones per instance type refreshed",
    ];
    // A deadline, not a speed claim: the three refreshes page through moto's 700-odd types,
    // which a loaded CI machine, running the other tests of this file beside it, takes a while.
    let log = poll_until(
        "the three refreshes logged",
        Duration::from_secs(120),
        TICK,
        || async {
            let log = orca.log();
            let missing: Vec<&str> = REFRESHES
                .into_iter()
                .filter(|refresh| !log.contains(refresh))
                .collect();
            if missing.is_empty() {
                Ok(Some(log))
            } else {
                bail!("not logged yet: {missing:?}")
            }
        },
    )
    .await?;
    // `types=N` of a refresh's line.
    let types_in = |refresh: &str| -> Result<(usize, String)> {
        let line = log
            .lines()
            .find(|l| l.contains(refresh))
            .unwrap_or_default();
        let types = line
            .split("types=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("types=N in the line {line:?}"))?;
        Ok((types, line.to_owned()))
    };
    let (types, line) = types_in(REFRESHES[0])?;
    assert!(types > 500, "moto describes its instance types: {line}");
    // DescribeInstanceTypeOfferings by zone, through the SDK's paginator.
    let (zoned, line) = types_in(REFRESHES[2])?;
    assert!(zoned > 500, "moto offers its types in its zones: {line}");
    Ok(())
}

// Issue 16, defect 2: a stopped instance was counted as finished, so nothing terminated it; it
// and its EBS volume stayed, billed, after the pod was gone.
#[tokio::test]
async fn a_stopped_instance_fails_its_pod_with_a_precise_reason_and_is_terminated() -> Result<()> {
    let scenario = AwsScenario::start("aws-stopped", "").await?;
    pods::create(&scenario.pods, &burst_pod("stopped", scenario.node(), &[])).await?;
    let running = scenario
        .wait_phase("stopped", "Running", Duration::from_secs(30))
        .await?;
    let id = instance_id(&running).context("the pod names its instance")?;
    // Someone stops it from the console (or EC2 does, for a scheduled event).
    scenario
        .ec2
        .stop_instances()
        .instance_ids(&id)
        .send()
        .await?;
    let failed = scenario
        .wait_phase("stopped", "Failed", Duration::from_secs(30))
        .await?;
    assert_eq!(
        pods::reason(&failed),
        "InstanceStopped",
        "{}",
        pods::message(&failed)
    );
    assert!(
        pods::message(&failed).contains(&format!("instance {id}"))
            && pods::message(&failed).contains("was stopped"),
        "{}",
        pods::message(&failed)
    );
    // The pod is final and still there; its stopped instance must not stay.
    poll_until(
        "the stopped instance terminated",
        Duration::from_secs(30),
        TICK,
        || async {
            let state = state_of(&scenario.instance(&id).await?);
            Ok(matches!(
                state,
                InstanceStateName::ShuttingDown | InstanceStateName::Terminated
            )
            .then_some(()))
        },
    )
    .await?;
    scenario.finish().await
}

/// SIGKILL at 20 seeded random points of a burst of creates, graceful deletes and force
/// deletes, each followed by a restart: afterwards every pod had at most one instance, and
/// once the pods are gone no instance is left running.
#[tokio::test]
async fn sigkill_at_20_random_points_of_a_burst_leaves_every_instance_accounted_for() -> Result<()>
{
    const SEED: u64 = 16;
    const STEPS: usize = 120;
    const KILLS: usize = 20;
    let mut scenario = AwsScenario::start("aws-sigkill", "").await?;
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut kill_at: Vec<usize> = (0..STEPS).collect();
    rng.shuffle(&mut kill_at);
    kill_at.truncate(KILLS);
    let mut created = Vec::new();
    let mut next = 0;
    for step in 0..STEPS {
        match rng.u32(0..10) {
            0..6 => {
                let name = format!("k{next:03}");
                next += 1;
                pods::create(&scenario.pods, &burst_pod(&name, scenario.node(), &[])).await?;
                created.push(name);
            }
            6..8 if !created.is_empty() => {
                let name = created.swap_remove(rng.usize(0..created.len()));
                let _ = scenario.pods.delete(&name, &DeleteParams::default()).await;
            }
            8..10 if !created.is_empty() => {
                let name = created.swap_remove(rng.usize(0..created.len()));
                let _ = scenario
                    .pods
                    .delete(&name, &DeleteParams::default().grace_period(0))
                    .await;
            }
            _ => {}
        }
        if kill_at.contains(&step) {
            scenario.orca.kill()?;
            scenario.orca.restart()?;
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(0..150))).await;
    }
    for name in created {
        let _ = scenario.pods.delete(&name, &DeleteParams::default()).await;
    }
    poll_until("every pod gone", Duration::from_secs(120), TICK, || async {
        Ok(scenario
            .pods
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await?;
    // Orphans (instances of force-deleted pods) go after orphanGracePeriod (3 s here).
    let instances = poll_until(
        "every instance terminated",
        Duration::from_secs(60),
        TICK,
        || async {
            let instances = scenario.instances().await?;
            Ok(instances
                .iter()
                .all(|i| {
                    matches!(
                        state_of(i),
                        InstanceStateName::ShuttingDown | InstanceStateName::Terminated
                    )
                })
                .then_some(instances))
        },
    )
    .await?;
    let mut per_pod: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for instance in &instances {
        let uid = tags_of(instance)
            .get(POD_UID_TAG)
            .cloned()
            .unwrap_or_default();
        per_pod
            .entry(uid)
            .or_default()
            .push(instance.instance_id().unwrap_or_default().to_owned());
    }
    let duplicated: Vec<_> = per_pod.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(
        duplicated.is_empty(),
        "pods with two instances: {duplicated:?}"
    );
    assert!(
        instances.len() <= next,
        "{} instances for {next} pods",
        instances.len()
    );
    scenario.finish().await
}

#[tokio::test]
async fn three_zone_nodes_spread_a_deployment_and_each_pod_launches_in_its_nodes_zone() -> Result<()>
{
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let ec2 = cluster.ec2_client().await;
    let zones: Vec<(String, String)> = default_subnets_by_zone(&ec2)
        .await?
        .into_iter()
        .take(3)
        .collect();
    anyhow::ensure!(zones.len() == 3, "moto has three zones: {zones:?}");
    let base = unique_node_name("aws-zones");
    let names: Vec<String> = (0..zones.len()).map(|i| format!("{base}-{i}")).collect();
    let mut entries = String::from("nodes:\n");
    for ((zone, subnet), name) in zones.iter().zip(&names) {
        entries.push_str(&format!(
            "  - name: {name}\n    zone: {zone}\n    subnetIds: [{subnet}]\n"
        ));
    }
    let orca = OrcaProcess::start(&base, |_| {
        format!("{}{entries}", aws_test_config(&base, ""))
    })?
    .declaring(&names);
    orca.wait_ready(Duration::from_secs(30)).await?;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    for ((zone, _), name) in zones.iter().zip(&names) {
        let labels = nodes.get(name).await?.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("topology.kubernetes.io/zone"),
            Some(zone),
            "{name}: {labels:?}"
        );
    }

    const REPLICAS: usize = 6;
    let namespace = TestNamespace::create(&client, "e2e-aws-zones").await?;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &namespace.name);
    let deployment: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(
        serde_json::json!({
            "metadata": { "name": "spread" },
            "spec": {
                "replicas": REPLICAS,
                "selector": { "matchLabels": { "app": "spread" } },
                "template": {
                    "metadata": { "labels": { "app": "spread" } },
                    "spec": {
                        "tolerations": [{ "key": "orca.research/burst-node", "operator": "Equal",
                                          "value": "true", "effect": "NoSchedule" }],
                        // Only this test's nodes: the cluster is shared.
                        "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{ "matchExpressions": [{
                                "key": "kubernetes.io/hostname", "operator": "In", "values": names
                            }] }]
                        } } },
                        "topologySpreadConstraints": [{
                            "maxSkew": 1,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": { "matchLabels": { "app": "spread" } }
                        }],
                        "containers": [{ "name": "main", "image": "busybox:1.36",
                                         "command": ["sleep", "3600"] }]
                    }
                }
            }
        }),
    )?;
    deployments
        .create(&kube::api::PostParams::default(), &deployment)
        .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    let running = poll_until(
        "every replica Running",
        Duration::from_secs(90),
        TICK,
        || async {
            let list = pods.list(&ListParams::default()).await?;
            Ok(
                (list.items.len() == REPLICAS && list.items.iter().all(|p| phase(p) == "Running"))
                    .then_some(list.items),
            )
        },
    )
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", orca.log()))?;
    for ((zone, subnet), name) in zones.iter().zip(&names) {
        let on_node: Vec<&Pod> = running
            .iter()
            .filter(|pod| pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name))
            .collect();
        assert_eq!(
            on_node.len(),
            REPLICAS / zones.len(),
            "the scheduler spreads the replicas over the zones"
        );
        for pod in on_node {
            let id = instance_id(pod).context("the pod names its instance")?;
            let instance = orca_e2e::ec2::instance(&ec2, &id).await?;
            assert_eq!(
                instance.placement().and_then(|p| p.availability_zone()),
                Some(zone.as_str()),
                "{id} of a pod on {name}"
            );
            assert_eq!(instance.subnet_id(), Some(subnet.as_str()), "{id}");
            let tags = tags_of(&instance);
            assert_eq!(
                tags.get("orca.research/node"),
                Some(name),
                "the instance is its node's"
            );
            let decision = orca_e2e::pods::decision(pod).with_context(|| {
                format!(
                    "the decision annotation of {:?}: {:?}\norca log:\n{}",
                    pod.metadata.name,
                    pod.metadata.annotations,
                    orca.log()
                )
            })?;
            assert!(decision.to_string().contains(zone.as_str()), "{decision}");
        }
    }
    deployments
        .delete("spread", &DeleteParams::default())
        .await?;
    namespace.delete().await
}
