//! The provider against the fault-injecting fake: offering fallback on each capacity error,
//! throttling, eventual consistency, a crash between `RunInstances` and its answer, and
//! batched status and termination calls.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::api::ApiError;
use super::fake::FakeEc2;
use super::*;
use crate::config::{AwsConfig, Seconds};
use crate::provider::ErrorClass;
use crate::provider::plan::{InstanceCandidate, LaunchPlan, Market, MarketDecision};
use crate::workload::testing::LaunchPod;

/// The `kube-system` UID of the cluster the tests' provider launches for.
pub(super) const CLUSTER_ID: &str = "0b9f4c1e-5d2a-4f6b-9a43-7c1d2e3f4a5b";

/// The walk: one `RunInstances` per offering (`launchApi: runInstances`); fleets have their
/// own tests in `fleet/tests.rs`.
fn provider(fake: Arc<FakeEc2>) -> AwsProvider {
    provider_with(
        fake,
        AwsConfig {
            launch_api: crate::config::LaunchApi::RunInstances,
            ..AwsConfig::default()
        },
    )
}

/// The provider of node `orca-aws-node` in cluster `research` over `fake`, with `config`'s
/// launch settings, a default AMI and a three-minute unavailable cache.
pub(super) fn provider_with(fake: Arc<FakeEc2>, config: AwsConfig) -> AwsProvider {
    AwsProvider::new(
        fake,
        Identity {
            node: "orca-aws-node".to_owned(),
            cluster: "research".to_owned(),
            cluster_id: CLUSTER_ID.to_owned(),
        },
        AwsConfig {
            default_ami: Some("ami-0123456789abcdef0".to_owned()),
            unavailable_offering_ttl: Seconds::from_secs(180),
            ..config
        },
    )
}

pub(super) fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "ml", "uid": format!("uid-{name}") },
        "spec": { "containers": [ { "name": "main", "image": "busybox", "command": ["true"] } ] }
    }))
    .unwrap()
}

pub(super) fn plan(pod: &Pod, market: Market, fallback: bool) -> LaunchPlan {
    let key = PodKey::of(pod).unwrap();
    let tags = crate::provider::ownership::ownership_tags("orca-aws-node", "research", &key)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    LaunchPlan {
        candidates: ["m5.large", "m6i.large"]
            .map(|t| InstanceCandidate {
                instance_type: t.to_owned(),
                reason: "fits".to_owned(),
            })
            .to_vec(),
        market: MarketDecision {
            market,
            max_price: Some(0.05),
            fallback_to_on_demand: fallback,
            reason: "test".to_owned(),
            allocation_strategy: None,
            mark_on_rebalance: false,
        },
        tags,
    }
}

fn offering(instance_type: &str, market: Market) -> String {
    Offering {
        instance_type: instance_type.to_owned(),
        market,
    }
    .to_string()
}

/// Each on-demand offering of `types` answers its next launch with a capacity error.
fn out_of_on_demand_capacity(fake: &FakeEc2, types: &[&str], message: &str) {
    for instance_type in types {
        fake.refuse(
            instance_type,
            Market::OnDemand,
            ApiError::service("InsufficientInstanceCapacity", message),
        );
    }
}

/// Launches the named pod with the on-demand plan without fallback.
async fn create_on_demand(provider: &AwsProvider, name: &str) -> Result<Launched, LaunchFailed> {
    let pod = pod(name);
    provider
        .launch_pod(&pod, &plan(&pod, Market::OnDemand, false))
        .await
}

#[tokio::test]
async fn each_capacity_error_moves_to_the_next_offering_then_to_on_demand() {
    for code in [
        "InsufficientInstanceCapacity",
        "SpotMaxPriceTooLow",
        "MaxSpotInstanceCountExceeded",
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
    ] {
        let fake = Arc::new(FakeEc2::default());
        fake.refuse("m5.large", Market::Spot, ApiError::service(code, "no room"));
        fake.refuse(
            "m6i.large",
            Market::Spot,
            ApiError::service(code, "no room"),
        );
        let pod = pod("trainer");
        let launched = provider(fake.clone())
            .launch_pod(&pod, &plan(&pod, Market::Spot, true))
            .await
            .unwrap();
        assert_eq!(
            launched.offering.to_string(),
            offering("m5.large", Market::OnDemand),
            "{code}"
        );
        let skipped: Vec<String> = launched
            .passed_over
            .iter()
            .map(|p| format!("{} {}", p.offering, p.error.code))
            .collect();
        assert_eq!(
            skipped,
            [
                format!("m5.large spot {code}"),
                format!("m6i.large spot {code}")
            ]
        );
        assert_eq!(fake.count("RunInstances"), 3);
        let instances = fake.instances();
        assert_eq!(instances.len(), 1);
        assert!(!instances[0].spot);
    }
}

#[tokio::test]
async fn an_unavailable_offering_is_skipped_without_asking_ec2_again() {
    let fake = Arc::new(FakeEc2::default());
    out_of_on_demand_capacity(&fake, &["m5.large"], "no m5 in us-east-1a");
    let provider = provider(fake.clone());
    create_on_demand(&provider, "first").await.unwrap();
    assert_eq!(fake.count("RunInstances"), 2);
    let launched = create_on_demand(&provider, "second").await.unwrap();
    assert_eq!(launched.offering.instance_type, "m6i.large");
    assert_eq!(
        fake.count("RunInstances"),
        3,
        "m5.large was not asked again"
    );
    assert!(
        launched.passed_over[0]
            .error
            .message
            .contains("skipped for 180s")
    );
}

#[tokio::test]
async fn when_no_offering_is_left_the_pod_fails_with_the_last_aws_code() {
    let fake = Arc::new(FakeEc2::default());
    fake.refuse(
        "m5.large",
        Market::Spot,
        ApiError::service("InsufficientInstanceCapacity", "a"),
    );
    fake.refuse(
        "m6i.large",
        Market::Spot,
        ApiError::service("SpotMaxPriceTooLow", "b"),
    );
    let pod = pod("trainer");
    let failed = provider(fake.clone())
        .launch_pod(&pod, &plan(&pod, Market::Spot, false))
        .await
        .unwrap_err();
    assert_eq!(failed.error.class, ErrorClass::Capacity);
    assert_eq!(failed.error.code, "SpotMaxPriceTooLow");
    assert_eq!(failed.passed_over.len(), 2);
    assert!(fake.instances().is_empty());
}

#[tokio::test]
async fn a_permanent_error_stops_the_walk() {
    let fake = Arc::new(FakeEc2::default());
    fake.refuse(
        "m5.large",
        Market::Spot,
        ApiError::service("UnauthorizedOperation", "You are not authorized"),
    );
    let pod = pod("trainer");
    let failed = provider(fake.clone())
        .launch_pod(&pod, &plan(&pod, Market::Spot, true))
        .await
        .unwrap_err();
    assert_eq!(failed.error.class, ErrorClass::Permanent);
    assert_eq!(failed.error.code, "UnauthorizedOperation");
    assert_eq!(fake.count("RunInstances"), 1);
}

#[tokio::test]
async fn throttling_is_transient_and_the_retry_launches_once() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let pod = pod("trainer");
    let plan = plan(&pod, Market::OnDemand, false);
    fake.fail_next_call(ApiError::service(
        "RequestLimitExceeded",
        "Request limit exceeded.",
    ));
    let failed = provider.launch_pod(&pod, &plan).await.unwrap_err();
    assert_eq!(failed.error.class, ErrorClass::Transient);
    provider.launch_pod(&pod, &plan).await.unwrap();
    assert_eq!(fake.instances().len(), 1);
}

#[tokio::test]
async fn a_crash_between_run_instances_and_its_answer_never_duplicates() {
    let fake = Arc::new(FakeEc2::default());
    let pod = pod("trainer");
    let plan = plan(&pod, Market::OnDemand, false);
    // The instance is launched but the answer is lost, and the new instance is not yet
    // visible to describes (EC2's eventual consistency), so the lookup by tag misses it.
    fake.hide_new_instances_for(5);
    fake.lose_next_answer(ApiError::transport("operation timed out"));
    let failed = provider(fake.clone())
        .launch_pod(&pod, &plan)
        .await
        .unwrap_err();
    assert_eq!(failed.error.class, ErrorClass::Transient);
    // A new process (after a crash) retries: the ClientToken brings back the same instance.
    let launched = provider(fake.clone())
        .launch_pod(&pod, &plan)
        .await
        .unwrap();
    assert_eq!(fake.instances().len(), 1);
    assert_eq!(launched.instance_id, fake.instances()[0].instance_id);
}

#[tokio::test]
async fn an_instance_tagged_for_the_pod_is_adopted_not_relaunched() {
    let fake = Arc::new(FakeEc2::default());
    let pod = pod("trainer");
    let plan = plan(&pod, Market::Spot, false);
    let first = provider(fake.clone())
        .launch_pod(&pod, &plan)
        .await
        .unwrap();
    let again = provider(fake.clone())
        .launch_pod(&pod, &plan)
        .await
        .unwrap();
    assert!(again.adopted);
    assert_eq!(again.instance_id, first.instance_id);
    assert_eq!(again.offering.market, Market::Spot);
    assert_eq!(fake.count("RunInstances"), 1);
}

#[tokio::test]
async fn a_just_launched_instance_missing_from_the_listing_is_not_reported() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let pod = pod("trainer");
    fake.hide_new_instances_for(1);
    provider
        .launch_pod(&pod, &plan(&pod, Market::OnDemand, false))
        .await
        .unwrap();
    // The reconciler's launch grace covers this gap; the provider just reports what EC2 shows.
    assert!(provider.statuses().await.unwrap().is_empty());
    assert_eq!(provider.statuses().await.unwrap().len(), 1);
}

#[tokio::test]
async fn statuses_take_one_call_for_all_pods_and_read_the_exit_tags() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let pods: Vec<Pod> = (0..30).map(|i| pod(&format!("p{i}"))).collect();
    let plans: Vec<LaunchPlan> = pods.iter().map(plan_for).collect();
    futures::future::join_all(
        pods.iter()
            .zip(&plans)
            .map(|(pod, plan)| provider.launch_pod(pod, plan)),
    )
    .await;
    let id = fake.instances()[0].instance_id.clone();
    fake.set_tag(&id, workload::TAG_EXIT_CODE, "3");
    fake.set_tag(&id, workload::TAG_FINISHED_AT, "2026-11-22T10:00:00Z");
    let before = fake.count("DescribeInstances");
    let statuses = provider.statuses().await.unwrap();
    assert_eq!(fake.count("DescribeInstances") - before, 1);
    assert_eq!(statuses.len(), 30);
    let ended = statuses.iter().find(|s| s.instance_id == id).unwrap();
    assert_eq!(ended.workload_exit.as_ref().unwrap().exit_code, 3);
    assert!(
        fake.count("DescribeInstances") < 30,
        "launch lookups were batched: {} describes for 30 pods",
        fake.count("DescribeInstances")
    );
}

fn plan_for(pod: &Pod) -> LaunchPlan {
    plan(pod, Market::OnDemand, false)
}

#[tokio::test]
async fn terminations_are_batched_and_an_id_ec2_does_not_know_is_unknown() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let pods: Vec<Pod> = (0..50).map(|i| pod(&format!("p{i}"))).collect();
    let mut ids = Vec::new();
    for pod in &pods {
        ids.push(
            provider
                .launch_pod(pod, &plan_for(pod))
                .await
                .unwrap()
                .instance_id,
        );
    }
    let results = futures::future::join_all(ids.iter().map(|id| provider.terminate(id))).await;
    assert!(results.iter().all(|r| r == &Ok(Termination::Requested)));
    assert_eq!(fake.count("TerminateInstances"), 1);
    assert!(
        fake.instances()
            .iter()
            .all(|i| i.state == crate::provider::InstanceState::ShuttingDown)
    );
    // Asking again is harmless; an id EC2 does not know (yet) is not taken for done.
    assert_eq!(
        provider.terminate(&ids[0]).await,
        Ok(Termination::Requested)
    );
    assert_eq!(
        provider.terminate("i-0000000000000dead").await,
        Ok(Termination::Unknown)
    );
}

// Issue 16, defect 3: one protected instance failed every pod of its batch, every second.
#[tokio::test]
async fn one_refused_id_fails_only_its_own_termination() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        let pod = pod(name);
        ids.push(
            provider
                .launch_pod(&pod, &plan_for(&pod))
                .await
                .unwrap()
                .instance_id,
        );
    }
    fake.protect(&ids[1]);
    let results = futures::future::join_all(ids.iter().map(|id| provider.terminate(id))).await;
    assert_eq!(results[0], Ok(Termination::Requested));
    assert_eq!(results[2], Ok(Termination::Requested));
    let refused = results[1].as_ref().unwrap_err();
    assert_eq!(refused.code, "OperationNotPermitted");
    let states: Vec<_> = fake.instances().iter().map(|i| i.state).collect();
    assert_eq!(
        states,
        [
            crate::provider::InstanceState::ShuttingDown,
            crate::provider::InstanceState::Pending,
            crate::provider::InstanceState::ShuttingDown
        ]
    );
}

// Issue 16, defect 4: the ClientToken was per offering, so a lost answer followed by another
// plan (a plugin reload, a catalogue refresh, an expired unavailable offering) launched twice.
#[tokio::test]
async fn a_lost_answer_and_a_changed_plan_never_launch_twice() {
    let fake = Arc::new(FakeEc2::default());
    let pod = pod("trainer");
    fake.hide_new_instances_for(5);
    fake.lose_next_answer(ApiError::transport("operation timed out"));
    let failed = provider(fake.clone())
        .launch_pod(&pod, &plan(&pod, Market::OnDemand, false))
        .await
        .unwrap_err();
    assert!(failed.in_doubt, "a lost answer leaves the launch in doubt");
    // A new process, a new plan: spot first.
    let again = provider(fake.clone())
        .launch_pod(&pod, &plan(&pod, Market::Spot, false))
        .await
        .unwrap_err();
    assert_eq!(again.error.code, "IdempotentParameterMismatch");
    assert_eq!(again.error.class, ErrorClass::Transient);
    assert!(again.in_doubt);
    assert_eq!(fake.instances().len(), 1, "no second instance");
}

// Found by the simulation (seed 1): after a restart, an earlier launch whose answer was lost
// is invisible to describes, and the unavailable-offerings cache, filled by other pods' answers,
// skipped every offering without asking EC2. The pod failed `InstanceCreationFailed` on cached
// words while its instance ran. The pod's own token must reach EC2 before it can fail.
#[tokio::test]
async fn cached_unavailability_never_fails_a_pod_without_asking_ec2() {
    let fake = Arc::new(FakeEc2::default());
    fake.hide_new_instances_for(10);
    fake.lose_next_answer(ApiError::transport("operation timed out"));
    let lost = create_on_demand(&provider(fake.clone()), "trainer")
        .await
        .unwrap_err();
    assert!(lost.in_doubt);
    // A new process; another pod's answers mark both offerings unavailable.
    let restarted = provider(fake.clone());
    out_of_on_demand_capacity(&fake, &["m5.large", "m6i.large"], "none left");
    let refused = create_on_demand(&restarted, "other").await.unwrap_err();
    assert_eq!(refused.error.class, ErrorClass::Capacity);
    let runs = fake.count("RunInstances");

    let again = create_on_demand(&restarted, "trainer").await.unwrap_err();
    assert_eq!(
        fake.count("RunInstances"),
        runs + 1,
        "the last offering is asked whatever the cache says"
    );
    assert_eq!(again.error.code, "IdempotentParameterMismatch");
    assert!(
        again.in_doubt,
        "EC2 knows the token: the launch is in doubt, not refused"
    );
    assert_eq!(fake.instances().len(), 1, "no second instance");
}

#[tokio::test]
async fn when_every_offering_is_cached_unavailable_ec2_answers_for_the_last() {
    let fake = Arc::new(FakeEc2::default());
    out_of_on_demand_capacity(&fake, &["m5.large", "m6i.large"], "none left");
    let provider = provider(fake.clone());
    create_on_demand(&provider, "first").await.unwrap_err();
    assert_eq!(fake.count("RunInstances"), 2);
    // Capacity came back: the second pod gets it, through its last offering.
    let launched = create_on_demand(&provider, "second").await.unwrap();
    assert_eq!(
        fake.count("RunInstances"),
        3,
        "m5.large was not asked again"
    );
    assert_eq!(launched.offering.instance_type, "m6i.large");
    assert_eq!(launched.passed_over.len(), 1);
}

#[tokio::test]
async fn a_bad_ami_annotation_fails_before_any_call() {
    let fake = Arc::new(FakeEc2::default());
    let mut pod = pod("trainer");
    pod.metadata.annotations = Some([(AMI_ANNOTATION.to_owned(), "ubuntu".to_owned())].into());
    let failed = provider(fake.clone())
        .launch_pod(&pod, &plan_for(&pod))
        .await
        .unwrap_err();
    assert_eq!(failed.error.code, "InvalidAnnotation");
    assert!(failed.error.message.contains(AMI_ANNOTATION));
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn the_run_request_carries_token_tags_market_and_imds_settings() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let pod = pod("trainer");
    let plan = plan(&pod, Market::Spot, false);
    let key = PodKey::of(&pod).unwrap();
    let offering = Offering {
        instance_type: "m5.large".to_owned(),
        market: Market::Spot,
    };
    let place = Place::default();
    let request = provider.run_request(
        &key,
        &plan,
        &offering,
        &place,
        "ami-0123456789abcdef0",
        "#!/bin/bash",
    );
    assert_eq!(request.client_token, token::client_token(&key.uid));
    assert_eq!(request.max_price, Some(0.05));
    assert_eq!(
        request.tags.get(TAG_POD_UID).map(String::as_str),
        Some("uid-trainer")
    );
    let on_demand = Offering {
        market: Market::OnDemand,
        ..offering
    };
    assert_eq!(
        provider
            .run_request(&key, &plan, &on_demand, &place, "ami-0123456789abcdef0", "")
            .max_price,
        None,
        "a spot price never goes on an on-demand request"
    );
}

#[tokio::test]
async fn an_adopted_on_demand_instance_is_reported_on_demand_whatever_the_plan_says() {
    let fake = Arc::new(FakeEc2::default());
    let pod = pod("trainer");
    provider(fake.clone())
        .launch_pod(&pod, &plan(&pod, Market::OnDemand, false))
        .await
        .unwrap();
    let adopted = provider(fake.clone())
        .launch_pod(&pod, &plan(&pod, Market::Spot, true))
        .await
        .unwrap();
    assert!(adopted.adopted);
    assert_eq!(adopted.offering.market, Market::OnDemand);
}

/// The tags of an instance of node `orca-aws-node`, cluster name `research`, for pod `uid`,
/// with `cluster_id` when it carries one.
fn owned_tags<'a>(cluster_id: Option<&'a str>, uid: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut tags = vec![
        ("ManagedBy", "ORCA"),
        ("orca.research/node", "orca-aws-node"),
        ("orca.research/cluster", "research"),
        ("orca.research/pod-namespace", "ml"),
        ("orca.research/pod-name", uid),
        ("orca.research/pod-uid", uid),
    ];
    if let Some(id) = cluster_id {
        tags.push((TAG_CLUSTER_ID, id));
    }
    tags
}

/// Regression (issue 39, case 1): two clusters in one account at the same `node.name` and
/// `node.clusterName` listed each other's instances, and each terminated the other's as
/// orphans. Listings filter on the cluster's id: another cluster's instance under the same
/// names is never seen, and every launch carries this cluster's id.
#[tokio::test]
async fn another_clusters_instances_under_the_same_names_are_never_listed() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    fake.launch_outside(
        &owned_tags(Some("8e2f0a11-0000-4000-8000-0000000000ff"), "theirs"),
        Duration::from_secs(600),
    );
    let launched = create_on_demand(&provider, "trainer").await.unwrap();
    let listed: Vec<String> = provider
        .statuses()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.instance_id)
        .collect();
    assert_eq!(listed, std::slice::from_ref(&launched.instance_id));
    let ours = fake
        .instances()
        .into_iter()
        .find(|i| i.instance_id == launched.instance_id)
        .unwrap();
    assert_eq!(
        ours.tags.get(TAG_CLUSTER_ID).map(String::as_str),
        Some(CLUSTER_ID)
    );
}

/// Instances launched before instances carried the cluster's id are claimed when their pod
/// is this node's, and left alone (never listed, so never collected) when it is not: they
/// may be another cluster's at the same names.
#[tokio::test]
async fn instances_from_before_cluster_ids_are_claimed_only_for_this_nodes_pods() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let old = Duration::from_secs(600);
    let here = fake.launch_outside(&owned_tags(None, "here"), old);
    let elsewhere = fake.launch_outside(&owned_tags(None, "elsewhere"), old);
    let theirs = fake.launch_outside(
        &owned_tags(Some("8e2f0a11-0000-4000-8000-0000000000ff"), "here-too"),
        old,
    );
    assert!(provider.statuses().await.unwrap().is_empty());

    let present = std::collections::HashSet::from(["here".to_owned(), "here-too".to_owned()]);
    let found = provider.claim_untagged(&present).await.unwrap();
    assert_eq!(found.claimed, std::slice::from_ref(&here));
    assert_eq!(found.unclaimed, [elsewhere]);
    let listed: Vec<String> = provider
        .statuses()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.instance_id)
        .collect();
    assert_eq!(listed, [here], "claimed, and listed from now on");
    assert!(!listed.contains(&theirs));

    // Claiming again finds nothing more to claim.
    let again = provider.claim_untagged(&present).await.unwrap();
    assert!(again.claimed.is_empty());
}

/// Regression (issue 39, case 3): the adoption before a launch took whichever of a pod's live
/// instances EC2 listed last, so after a restart a pod without a status could take a
/// look-alike for its own, and its first instance (the workload's) was then collected.
#[tokio::test]
async fn adoption_takes_the_pods_oldest_instance_not_a_look_alike() {
    let fake = Arc::new(FakeEc2::default());
    let original = fake.launch_outside(
        &owned_tags(Some(CLUSTER_ID), "uid-trainer"),
        Duration::from_secs(600),
    );
    let _copy = fake.launch_outside(
        &owned_tags(Some(CLUSTER_ID), "uid-trainer"),
        Duration::from_secs(60),
    );
    let pod = pod("trainer");
    let launched = provider(fake.clone())
        .launch_pod(&pod, &plan_for(&pod))
        .await
        .unwrap();
    assert!(launched.adopted);
    assert_eq!(launched.instance_id, original);
    assert_eq!(fake.count("RunInstances"), 0);
}
