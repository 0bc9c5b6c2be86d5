//! Fleet launches against the fake EC2: pools and strategies, partial answers, tokens used up
//! by empty answers, lost answers, restarts and a launch template that went missing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::super::api::ApiError;
use super::super::fake::FakeEc2;
use super::super::tests::{plan, pod, provider_with};
use super::super::*;
use super::FLEET_TOKENS_SPENT_ANNOTATION;
use crate::config::AwsConfig;
use crate::provider::ErrorClass;
use crate::provider::plan::{AllocationStrategy, Market};
use crate::workload::testing::LaunchPod;

const SUBNETS: [&str; 2] = ["subnet-0a0a0a0a", "subnet-0b0b0b0b"];

fn provider(fake: Arc<FakeEc2>) -> AwsProvider {
    provider_with(
        fake,
        AwsConfig {
            subnet_ids: SUBNETS.map(str::to_owned).to_vec(),
            ..AwsConfig::default()
        },
    )
}

fn short(fake: &FakeEc2, instance_type: &str, market: Market, times: usize) {
    for _ in 0..times {
        fake.refuse(
            instance_type,
            market,
            ApiError::service("InsufficientInstanceCapacity", "no room in the zone"),
        );
    }
}

/// A pod created after the provider started: it has no history the provider forgot.
fn new_pod(name: &str) -> Pod {
    let mut pod = pod(name);
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(5);
    pod.metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(later));
    pod
}

async fn launch(
    provider: &AwsProvider,
    name: &str,
    market: Market,
    fallback: bool,
) -> Result<Launched, LaunchFailed> {
    let pod = new_pod(name);
    provider
        .launch_pod(&pod, &plan(&pod, market, fallback))
        .await
}

/// As [`launch`], for a pod older than the provider (one it may have forgotten).
async fn launch_older(
    provider: &AwsProvider,
    name: &str,
    market: Market,
    fallback: bool,
) -> Result<Launched, LaunchFailed> {
    let pod = pod(name);
    provider
        .launch_pod(&pod, &plan(&pod, market, fallback))
        .await
}

#[tokio::test]
async fn one_fleet_carries_every_candidate_in_every_subnet_and_says_how_ec2_chose() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let launched = launch(&provider, "a", Market::Spot, false).await.unwrap();
    assert_eq!(launched.offering.to_string(), "m5.large spot");
    let chosen_by = launched.chosen_by.unwrap();
    assert!(
        chosen_by.contains("EC2 Fleet (price-capacity-optimized)") && chosen_by.contains("4 pools"),
        "{chosen_by}"
    );
    let requests = fake.fleet_requests();
    assert_eq!(requests.len(), 1);
    let pools: Vec<(String, Option<String>)> = requests[0]
        .pools
        .iter()
        .map(|p| (p.instance_type.clone(), p.subnet_id.clone()))
        .collect();
    assert_eq!(pools.len(), 4);
    assert_eq!(pools[0], ("m5.large".into(), Some(SUBNETS[0].into())));
    assert_eq!(pools[3], ("m6i.large".into(), Some(SUBNETS[1].into())));
    assert_eq!(requests[0].max_price, Some(0.05));
    assert_eq!(fake.count("RunInstances"), 0);

    launch(&provider, "b", Market::OnDemand, false)
        .await
        .unwrap();
    assert_eq!(
        fake.count("CreateLaunchTemplate"),
        1,
        "one template per node"
    );
    let on_demand = fake
        .fleet_requests()
        .into_iter()
        .find(|r| r.market == Market::OnDemand)
        .unwrap();
    assert_eq!(
        on_demand.allocation_strategy,
        AllocationStrategy::Prioritized
    );
    let priorities: Vec<Option<f64>> = on_demand.pools.iter().map(|p| p.priority).collect();
    assert_eq!(priorities, [Some(0.0), Some(0.0), Some(1.0), Some(1.0)]);
    assert_eq!(on_demand.max_price, None);
}

/// The next pod's fleet offers the short pools again: nothing one pod's answer taught this
/// process goes into another's request (a restart could not build it again); EC2 passes
/// over a short pool within the request.
#[tokio::test]
async fn a_partial_fleet_reports_the_pools_passed_over_and_the_next_fleet_still_offers_them() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    short(&fake, "m5.large", Market::Spot, 2);
    let launched = launch(&provider, "a", Market::Spot, false).await.unwrap();
    assert_eq!(launched.offering.to_string(), "m6i.large spot");
    assert_eq!(launched.passed_over.len(), 2);
    assert!(
        launched
            .passed_over
            .iter()
            .all(|p| p.error.code == "InsufficientInstanceCapacity"
                && p.error.class == ErrorClass::Capacity)
    );
    launch(&provider, "b", Market::Spot, false).await.unwrap();
    let second = fake.fleet_requests().into_iter().last().unwrap();
    assert_eq!(second.pools, fake.fleet_requests()[0].pools);
}

#[tokio::test]
async fn an_empty_spot_answer_uses_its_token_up_and_on_demand_takes_the_next() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    short(&fake, "m5.large", Market::Spot, 2);
    short(&fake, "m6i.large", Market::Spot, 2);
    let launched = launch(&provider, "a", Market::Spot, true).await.unwrap();
    assert_eq!(launched.offering.market, Market::OnDemand);
    assert_eq!(launched.passed_over.len(), 4);
    let tokens: Vec<(u32, String)> = fake
        .fleet_requests()
        .iter()
        .map(|r| (r.place, r.market.as_str().to_owned()))
        .collect();
    assert!(tokens.contains(&(0, "spot".into())), "{tokens:?}");
    assert!(tokens.contains(&(1, "on-demand".into())), "{tokens:?}");
}

#[tokio::test]
async fn the_market_plugins_strategy_is_used_for_its_market_and_the_fallback_takes_the_nodes() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    short(&fake, "m5.large", Market::Spot, 2);
    short(&fake, "m6i.large", Market::Spot, 2);
    let pod = new_pod("a");
    let mut plan = plan(&pod, Market::Spot, true);
    plan.market.allocation_strategy = Some(AllocationStrategy::CapacityOptimized);
    let launched = provider.launch_pod(&pod, &plan).await.unwrap();
    assert_eq!(launched.offering.market, Market::OnDemand);
    let strategies: Vec<(Market, AllocationStrategy)> = fake
        .fleet_requests()
        .iter()
        .map(|r| (r.market, r.allocation_strategy))
        .collect();
    assert_eq!(
        strategies,
        [
            (Market::Spot, AllocationStrategy::CapacityOptimized),
            (Market::OnDemand, AllocationStrategy::Prioritized),
        ]
    );
}

/// A pod deleted while its launch was failing leaves no attempt behind once the sync sees it
/// gone; a present pod's attempt (its next token) is kept.
#[tokio::test]
async fn the_attempts_of_gone_pods_are_forgotten() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    for name in ["gone", "kept"] {
        short(&fake, "m5.large", Market::OnDemand, 2);
        short(&fake, "m6i.large", Market::OnDemand, 2);
        launch(&provider, name, Market::OnDemand, false)
            .await
            .unwrap_err();
    }
    let kept_uid = pod("kept").metadata.uid.unwrap();
    assert_eq!(provider.fleets.retain(&[kept_uid].into()), 1);
    launch(&provider, "kept", Market::OnDemand, false)
        .await
        .unwrap();
    let places: Vec<u32> = fake.fleet_requests().iter().map(|r| r.place).collect();
    assert_eq!(places, [0, 0, 1], "the kept pod moved on to its next token");
}

#[tokio::test]
async fn a_pod_that_got_nothing_asks_again_with_its_next_token() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    short(&fake, "m5.large", Market::OnDemand, 2);
    short(&fake, "m6i.large", Market::OnDemand, 2);
    let failed = launch(&provider, "a", Market::OnDemand, false)
        .await
        .unwrap_err();
    assert_eq!(failed.error.class, ErrorClass::Capacity);
    assert!(!failed.in_doubt);
    // Capacity came back; the used token would answer the empty fleet again.
    let launched = launch(&provider, "a", Market::OnDemand, false)
        .await
        .unwrap();
    assert_eq!(launched.offering.instance_type, "m5.large");
    let places: Vec<u32> = fake.fleet_requests().iter().map(|r| r.place).collect();
    assert!(places.contains(&0) && places.contains(&1), "{places:?}");
    assert_eq!(fake.instances().len(), 1);
}

#[tokio::test]
async fn a_lost_answer_is_repeated_word_for_word_and_gets_the_same_instance() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    fake.hide_new_instances_for(10);
    fake.lose_next_answer(ApiError::transport("connection reset"));
    let failed = launch(&provider, "a", Market::Spot, false)
        .await
        .unwrap_err();
    assert!(failed.in_doubt);
    // Meanwhile another pod's answer marks the first pool short: the repeat ignores that.
    short(&fake, "m5.large", Market::Spot, 1);
    let launched = launch(&provider, "a", Market::Spot, false).await.unwrap();
    assert_eq!(fake.instances().len(), 1, "no second instance");
    assert_eq!(launched.instance_id, fake.instances()[0].instance_id);
    assert_eq!(fake.count("CreateFleet"), 2);
}

#[tokio::test]
async fn a_new_process_walks_the_tokens_again_and_adopts_what_a_fleet_launched() {
    let fake = Arc::new(FakeEc2::default());
    let first = provider(fake.clone());
    short(&fake, "m5.large", Market::OnDemand, 2);
    short(&fake, "m6i.large", Market::OnDemand, 2);
    // Token 0: nothing. Token 1: an instance, whose answer is lost and whose tags do not show.
    launch(&first, "a", Market::OnDemand, false)
        .await
        .unwrap_err();
    fake.hide_new_instances_for(10);
    fake.lose_next_answer(ApiError::transport("connection reset"));
    launch(&first, "a", Market::OnDemand, false)
        .await
        .unwrap_err();
    drop(first);

    let restarted = provider(fake.clone());
    let launched = launch_older(&restarted, "a", Market::OnDemand, false)
        .await
        .unwrap();
    assert_eq!(fake.instances().len(), 1, "no second instance");
    assert_eq!(launched.instance_id, fake.instances()[0].instance_id);
    let places: Vec<u32> = fake.fleet_requests().iter().map(|r| r.place).collect();
    assert_eq!(places.len(), 2, "EC2 answered the repeats: {places:?}");
    assert_eq!(
        fake.count("CreateFleet"),
        4,
        "two first answers, two replays"
    );
}

/// Issue 39, case 4: the unavailable-offering cache lives in memory, so a request whose pools
/// it had thinned and the same request rebuilt after a restart differed: EC2 refused the
/// replay (`IdempotentParameterMismatch`) and the pod waited out the visibility grace before
/// its next token. A replay sends what was sent.
#[tokio::test]
async fn a_restart_replays_a_token_word_for_word_whatever_the_unavailable_cache_held() {
    let fake = Arc::new(FakeEc2::default());
    let first = provider(fake.clone());
    // Another pod's answer finds m5.large spot short in both subnets: the cache learns it.
    short(&fake, "m5.large", Market::Spot, 2);
    launch(&first, "other", Market::Spot, false).await.unwrap();
    // The pod's first token launches, but the answer is lost and the tags do not show yet.
    fake.hide_new_instances_for(10);
    fake.lose_next_answer(ApiError::transport("connection reset"));
    let failed = launch(&first, "a", Market::Spot, false).await.unwrap_err();
    assert!(failed.in_doubt);
    drop(first);

    // A new process, whose cache is empty: a wait for the grace would fail the launch.
    let restarted =
        provider(fake.clone()).with_visibility_grace(std::time::Duration::from_secs(3600));
    let launched = launch_older(&restarted, "a", Market::Spot, false)
        .await
        .unwrap();
    let uid = pod("a").metadata.uid.unwrap();
    let of_pod: Vec<String> = fake
        .instances()
        .into_iter()
        .filter(|i| i.tags.get(TAG_POD_UID) == Some(&uid))
        .map(|i| i.instance_id)
        .collect();
    assert_eq!(of_pod, [launched.instance_id], "EC2 answered the replay");
}

/// Issue 39, case 4: a process that forgot a pod walked its fleet tokens again from the
/// first, each rebuilt from the plan as it is now (a plugin answers otherwise, prices were
/// refreshed, a ConfigMap changed): every used token that differed cost a visibility grace.
/// The pod carries how many of its tokens EC2 answered with nothing; a restart resumes there.
#[tokio::test]
async fn a_restart_resumes_at_the_token_the_pod_records_whatever_the_plan_is_now() {
    let fake = Arc::new(FakeEc2::default());
    let first = provider(fake.clone());
    for _ in 0..2 {
        short(&fake, "m5.large", Market::OnDemand, 2);
        short(&fake, "m6i.large", Market::OnDemand, 2);
        launch(&first, "a", Market::OnDemand, false)
            .await
            .unwrap_err();
    }
    drop(first);

    let restarted =
        provider(fake.clone()).with_visibility_grace(std::time::Duration::from_secs(3600));
    let mut pod = pod("a");
    pod.metadata.annotations =
        Some([(FLEET_TOKENS_SPENT_ANNOTATION.to_owned(), "2".to_owned())].into());
    // The policy ranks the candidates otherwise now.
    let mut plan = plan(&pod, Market::OnDemand, false);
    plan.candidates.reverse();
    let launched = restarted.launch_pod(&pod, &plan).await.unwrap();
    assert_eq!(launched.offering.instance_type, "m6i.large");
    let places: Vec<u32> = fake.fleet_requests().iter().map(|r| r.place).collect();
    assert_eq!(places, [0, 1, 2], "no used token sent again");
    assert_eq!(fake.count("CreateFleet"), 3);
}

#[tokio::test]
async fn a_token_a_forgotten_request_used_waits_for_the_grace_then_moves_on() {
    let fake = Arc::new(FakeEc2::default());
    let first = provider(fake.clone());
    short(&fake, "m5.large", Market::OnDemand, 2);
    short(&fake, "m6i.large", Market::OnDemand, 2);
    launch(&first, "a", Market::OnDemand, false)
        .await
        .unwrap_err();
    drop(first);

    // A new process with another plan: the same token, other parameters.
    let restarted =
        provider(fake.clone()).with_visibility_grace(std::time::Duration::from_millis(200));
    let failed = launch_older(&restarted, "a", Market::Spot, false)
        .await
        .unwrap_err();
    assert_eq!(failed.error.code, "IdempotentParameterMismatch");
    assert!(failed.in_doubt, "the forgotten request may have launched");
    assert_eq!(failed.error.class, ErrorClass::Transient);
    assert!(fake.instances().is_empty());
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    let launched = launch_older(&restarted, "a", Market::Spot, false)
        .await
        .unwrap();
    assert_eq!(launched.offering.market, Market::Spot);
    assert_eq!(fake.instances().len(), 1);
}

#[tokio::test]
async fn a_missing_launch_template_is_made_again() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    launch(&provider, "a", Market::Spot, false).await.unwrap();
    fake.delete_templates();
    let failed = launch(&provider, "b", Market::Spot, false)
        .await
        .unwrap_err();
    assert_eq!(failed.error.code, "LaunchTemplateMissing");
    assert_eq!(failed.error.class, ErrorClass::Transient);
    launch(&provider, "b", Market::Spot, false).await.unwrap();
    assert_eq!(fake.count("CreateLaunchTemplate"), 2);
    let requests = fake.fleet_requests();
    assert_ne!(
        requests[0].template, requests[1].template,
        "the new template, by its own id"
    );
    assert_eq!(requests[1].place, 0, "a refused request used no token");
}

/// What a failed launch leaves for the pod to carry: how many of its tokens are spent.
#[tokio::test]
async fn a_failed_launch_says_how_many_of_the_pods_tokens_are_spent() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    for spent in ["1", "2"] {
        short(&fake, "m5.large", Market::OnDemand, 2);
        short(&fake, "m6i.large", Market::OnDemand, 2);
        let failed = launch(&provider, "a", Market::OnDemand, false)
            .await
            .unwrap_err();
        let progress = failed.progress.unwrap();
        assert_eq!(progress.annotation, FLEET_TOKENS_SPENT_ANNOTATION);
        assert_eq!(progress.value, spent);
    }
}

#[tokio::test]
async fn throttling_refuses_the_fleet_without_using_the_token() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    fake.refuse_next_fleet(ApiError::service("RequestLimitExceeded", "slow down"));
    let failed = launch(&provider, "a", Market::Spot, false)
        .await
        .unwrap_err();
    assert_eq!(failed.error.class, ErrorClass::Transient);
    assert!(!failed.in_doubt);
    launch(&provider, "a", Market::Spot, false).await.unwrap();
    assert_eq!(fake.instances().len(), 1);
    let places: Vec<u32> = fake.fleet_requests().iter().map(|r| r.place).collect();
    assert_eq!(places, [0], "the refused request did not use its token");
}

fn in_zone(name: &str, zone: &str) -> Pod {
    let mut pod = new_pod(name);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_selector = Some(
            [(
                crate::provider::zones::ZONE_LABEL.to_owned(),
                zone.to_owned(),
            )]
            .into(),
        );
    }
    pod
}

#[tokio::test]
async fn a_pod_that_names_a_zone_launches_only_in_that_zones_subnets() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let pod = in_zone("zoned", "us-west-2b");
    let launched = provider
        .launch_pod(&pod, &plan(&pod, Market::Spot, false))
        .await
        .unwrap();
    let request = fake.fleet_requests().pop().unwrap();
    assert!(
        request
            .pools
            .iter()
            .all(|p| p.subnet_id.as_deref() == Some(SUBNETS[1])),
        "{:?}",
        request.pools
    );
    assert_eq!(request.pools.len(), 2);
    assert!(
        launched.chosen_by.unwrap().contains("us-west-2b"),
        "the zone is reported"
    );
    assert_eq!(launched.zone.as_deref(), Some("us-west-2b"));
    // The subnets' zones are read once.
    let other = in_zone("zoned-too", "us-west-2a");
    provider
        .launch_pod(&other, &plan(&other, Market::Spot, false))
        .await
        .unwrap();
    assert_eq!(fake.count("DescribeSubnets"), 1);
}

/// Without subnets, the walk (`runInstances`) launches in the pod's zone's default subnet:
/// the zone goes into `RunInstances`' placement.
#[tokio::test]
async fn without_subnets_the_walk_places_the_instance_in_the_pods_zone() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider_with(
        fake.clone(),
        AwsConfig {
            launch_api: crate::config::LaunchApi::RunInstances,
            ..AwsConfig::default()
        },
    );
    let pod = in_zone("walked", "us-west-2c");
    let launched = provider
        .launch_pod(&pod, &plan(&pod, Market::OnDemand, false))
        .await
        .unwrap();
    assert_eq!(launched.zone.as_deref(), Some("us-west-2c"));
    let instance = fake.instances().pop().unwrap();
    assert_eq!(instance.zone.as_deref(), Some("us-west-2c"));
    let anywhere = new_pod("anywhere");
    let launched = provider
        .launch_pod(&anywhere, &plan(&anywhere, Market::OnDemand, false))
        .await
        .unwrap();
    assert_eq!(
        launched.zone, None,
        "EC2 picks; the fake does not say where"
    );
}

#[tokio::test]
async fn a_pod_whose_zone_has_no_subnet_fails_before_anything_is_launched() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider(fake.clone());
    let pod = in_zone("nowhere", "us-west-2c");
    let failed = provider
        .launch_pod(&pod, &plan(&pod, Market::Spot, false))
        .await
        .unwrap_err();
    assert_eq!(failed.error.code, "NoSubnetInZone");
    assert_eq!(failed.error.class, ErrorClass::Permanent);
    assert!(
        failed.error.message.contains("us-west-2c")
            && failed
                .error
                .message
                .contains("subnet-0a0a0a0a (us-west-2a)"),
        "{}",
        failed.error.message
    );
    assert_eq!(fake.count("CreateFleet"), 0);
    assert!(fake.instances().is_empty());
}
