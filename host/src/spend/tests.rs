use std::sync::{Arc, Barrier};
use std::time::Duration;

use jiff::Timestamp;

use super::census::{Census, CensusInstance, CensusLoop};
use super::*;
use crate::config::GuardrailsConfig;
use crate::policy::catalogue::InstanceCatalogue;
use crate::provider::ProviderError;
use crate::provider::plan::Market;

const GRACE: Duration = Duration::from_secs(120);

fn usd(usd: f64) -> Price {
    Price::from_usd(usd).unwrap()
}

/// Caps `team` at $1/h, `big` at $10/h; `free` has none.
fn spend() -> NamespaceSpend {
    let config: GuardrailsConfig = serde_saphyr::from_str(
        "maxPricePerHourByNamespace: {team: 1, big: 10}\nmarkets: [spot, on-demand]",
    )
    .unwrap();
    NamespaceSpend::new(Arc::new(Guardrails::from_config(&config)), GRACE)
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + second).unwrap()
}

fn instance(id: &str, namespace: &str, uid: &str, price: f64) -> Listed {
    Listed {
        instance_id: id.to_owned(),
        namespace: namespace.to_owned(),
        pod_uid: uid.to_owned(),
        price: usd(price),
        live: true,
    }
}

fn ended(mut instance: Listed) -> Listed {
    instance.live = false;
    instance
}

#[test]
fn nothing_launches_under_a_cap_before_the_cluster_was_listed_once() {
    let spend = spend();
    assert!(matches!(
        spend.reserve("team", "a", "node", Some(usd(0.1))),
        Err(SpendError::NotListed { .. })
    ));
    assert_eq!(
        spend.reserve("free", "a", "node", Some(usd(0.1))),
        Ok(Reserved::Uncapped)
    );
    spend.observe(Vec::new(), at(0));
    assert!(spend.is_listed());
    assert_eq!(
        spend.reserve("team", "a", "node", Some(usd(0.1))),
        Ok(Reserved::Reserved)
    );
}

#[test]
fn a_pod_that_would_pass_the_cap_is_refused_naming_cap_spend_and_price() {
    let spend = spend();
    spend.observe(vec![instance("i-1", "team", "a", 0.6)], at(0));
    assert_eq!(
        spend.reserve("team", "b", "node", Some(usd(0.3))),
        Ok(Reserved::Reserved)
    );
    let error = spend
        .reserve("team", "c", "node", Some(usd(0.2)))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "namespace team's live instances cost $0.90/h of its cap of $1/h \
         (policy.guardrails.maxPricePerHourByNamespace.team); this pod's instance may cost up \
         to $0.20/h, which would bring it to $1.10/h"
    );
    // Exactly to the cap fits; other namespaces are apart.
    assert_eq!(
        spend.reserve("team", "c", "node", Some(usd(0.1))),
        Ok(Reserved::Reserved)
    );
    assert_eq!(spend.room("team"), Some(Price::ZERO));
    assert_eq!(spend.room("big"), Some(usd(10.0)));
    assert_eq!(spend.room("free"), None);
}

#[test]
fn a_pod_reserving_again_replaces_its_own_reservation() {
    let spend = spend();
    spend.observe(Vec::new(), at(0));
    spend.reserve("team", "a", "node", Some(usd(0.8))).unwrap();
    assert_eq!(
        spend.reserve("team", "a", "node", Some(usd(0.9))),
        Ok(Reserved::Reserved),
        "its own earlier reservation does not count against it"
    );
    assert_eq!(spend.totals()["team"], usd(0.9));
}

/// The race a burst runs: a hundred pods of one namespace reserving at the same moment from
/// many reconciles (and nodes) of one process. Only as many as the cap holds get through.
#[test]
fn a_burst_of_pods_reserving_at_once_never_passes_the_cap() {
    let spend = Arc::new(spend());
    spend.observe(Vec::new(), at(0));
    let start = Arc::new(Barrier::new(100));
    let reserved: Vec<bool> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..100)
            .map(|n| {
                let (spend, start) = (spend.clone(), start.clone());
                scope.spawn(move || {
                    start.wait();
                    let node = if n % 2 == 0 { "node-a" } else { "node-b" };
                    spend
                        .reserve("big", &format!("pod-{n}"), node, Some(usd(0.25)))
                        .is_ok()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(reserved.iter().filter(|r| **r).count(), 40, "$10 / $0.25");
    assert_eq!(spend.totals()["big"], usd(10.0));
}

#[test]
fn a_listed_instance_counts_instead_of_its_reservation() {
    let spend = spend();
    spend.observe(Vec::new(), at(0));
    spend.reserve("team", "a", "node", Some(usd(0.9))).unwrap();
    // Launched on a cheaper offering than the worst case: the listing counts what it is.
    spend.observe(vec![instance("i-1", "team", "a", 0.4)], at(5));
    assert_eq!(spend.totals()["team"], usd(0.4));
    assert_eq!(
        spend.reserve("team", "a", "node", Some(usd(0.9))),
        Ok(Reserved::Listed),
        "a pod whose instance is listed adds nothing"
    );
    assert_eq!(spend.totals()["team"], usd(0.4));
}

#[test]
fn a_reservation_outlives_listings_that_do_not_show_its_instance_yet() {
    let spend = spend();
    spend.observe(Vec::new(), at(0));
    spend.reserve("team", "a", "node", Some(usd(0.9))).unwrap();
    spend.observe(Vec::new(), at(5));
    assert_eq!(spend.totals()["team"], usd(0.9));
}

#[test]
fn an_ended_instance_frees_room_at_once_even_while_listings_show_it() {
    let spend = spend();
    let mut freed = spend.freed();
    spend.observe(vec![instance("i-1", "team", "a", 0.9)], at(0));
    freed.mark_unchanged();
    spend.ended("i-1", at(10));
    assert!(freed.has_changed().unwrap(), "waiting pods are told");
    assert_eq!(spend.room("team"), Some(usd(1.0)));
    // EC2 still shows it running a little later; it stays uncounted.
    spend.observe(vec![instance("i-1", "team", "a", 0.9)], at(15));
    assert_eq!(spend.room("team"), Some(usd(1.0)));
    // Gone from listings, and forgotten once the grace has passed; a late listing showing
    // it again within the grace does not count it either.
    spend.observe(Vec::new(), at(20));
    spend.observe(vec![instance("i-1", "team", "a", 0.9)], at(60));
    assert_eq!(spend.room("team"), Some(usd(1.0)));
    spend.observe(Vec::new(), at(200));
    spend.observe(vec![instance("i-1", "team", "a", 0.9)], at(205));
    assert_eq!(
        spend.room("team"),
        Some(usd(0.1)),
        "past the grace it is live again"
    );
}

#[test]
fn a_failed_launch_and_a_pod_gone_from_its_node_free_their_reservations() {
    let spend = spend();
    spend.observe(Vec::new(), at(0));
    spend
        .reserve("team", "a", "node-a", Some(usd(0.5)))
        .unwrap();
    spend
        .reserve("team", "b", "node-b", Some(usd(0.5)))
        .unwrap();
    let mut freed = spend.freed();
    freed.mark_unchanged();
    spend.release("a");
    assert!(freed.has_changed().unwrap());
    assert_eq!(spend.room("team"), Some(usd(0.5)));
    // Another node's pods are not this node's to drop.
    spend.retain("node-a", &HashSet::new());
    assert_eq!(spend.room("team"), Some(usd(0.5)));
    spend.retain("node-b", &HashSet::from(["b".to_owned()]));
    assert_eq!(spend.room("team"), Some(usd(0.5)));
    spend.retain("node-b", &HashSet::new());
    assert_eq!(spend.room("team"), Some(usd(1.0)));
}

#[test]
fn waiting_pods_are_told_when_a_listing_shows_less_and_not_when_it_shows_more() {
    let spend = spend();
    let mut freed = spend.freed();
    spend.observe(vec![instance("i-1", "team", "a", 0.5)], at(0));
    assert!(freed.has_changed().unwrap(), "the first listing");
    freed.mark_unchanged();
    spend.observe(
        vec![
            instance("i-1", "team", "a", 0.5),
            instance("i-2", "team", "b", 0.2),
        ],
        at(5),
    );
    assert!(!freed.has_changed().unwrap());
    spend.observe(
        vec![
            ended(instance("i-1", "team", "a", 0.5)),
            instance("i-2", "team", "b", 0.2),
        ],
        at(10),
    );
    assert!(freed.has_changed().unwrap());
    assert_eq!(spend.room("team"), Some(usd(0.8)));
}

/// EC2's listings are eventually consistent: a listing can leave out an instance an earlier
/// one showed running. It counts on (else a burst could take its room), until EC2 shows it
/// ended or the visibility grace has passed.
#[test]
fn an_instance_a_stale_listing_leaves_out_counts_on_within_the_grace() {
    let spend = spend();
    spend.observe(Vec::new(), at(0));
    spend.reserve("team", "a", "node", Some(usd(0.9))).unwrap();
    spend.observe(vec![instance("i-1", "team", "a", 0.9)], at(5));
    spend.observe(Vec::new(), at(10));
    assert_eq!(
        spend.room("team"),
        Some(usd(0.1)),
        "left out, still counted"
    );
    assert!(spend.reserve("team", "b", "node", Some(usd(0.5))).is_err());
    spend.observe(Vec::new(), at(5 + 119));
    assert_eq!(spend.room("team"), Some(usd(0.1)));
    spend.observe(Vec::new(), at(5 + 120));
    assert_eq!(
        spend.room("team"),
        Some(usd(1.0)),
        "not shown for the whole grace"
    );
    // Shown ended, it stops counting at once.
    spend.observe(vec![instance("i-2", "team", "c", 0.4)], at(200));
    spend.observe(vec![ended(instance("i-2", "team", "c", 0.4))], at(201));
    assert_eq!(spend.room("team"), Some(usd(1.0)));
}

#[test]
fn the_pods_that_fit_are_woken_longest_waiting_first() {
    let waiting = |uid: &str, namespace: &str, price: f64, since: i64| Waiting {
        uid: uid.to_owned(),
        namespace: namespace.to_owned(),
        price: usd(price),
        since: at(since),
    };
    let pods = [
        waiting("late", "team", 0.3, 30),
        waiting("first", "team", 0.3, 10),
        waiting("big", "team", 0.5, 20),
        waiting("second", "team", 0.3, 25),
        waiting("elsewhere", "big", 1.0, 0),
        waiting("uncapped", "free", 9.0, 0),
    ];
    let room = |namespace: &str| match namespace {
        "team" => Some(usd(0.6)),
        "big" => Some(usd(0.5)),
        _ => None,
    };
    // team: first (0.3) fits, big (0.5) does not and does not hold back second (0.3); late
    // does not fit what is left. big: nothing fits. free: no cap, goes.
    let mut woken = to_wake(&pods, room);
    woken.sort();
    assert_eq!(woken, ["first", "second", "uncapped"]);
}

struct FixedCensus(Vec<CensusInstance>);

#[async_trait::async_trait]
impl Census for FixedCensus {
    async fn instances(&self) -> Result<Vec<CensusInstance>, ProviderError> {
        Ok(self.0.clone())
    }
}

fn listed(id: &str, instance_type: &str, market: Market, max_price: Option<f64>) -> CensusInstance {
    CensusInstance {
        live: true,
        instance_id: id.to_owned(),
        namespace: "big".to_owned(),
        pod_uid: format!("pod-{id}"),
        instance_type: instance_type.to_owned(),
        market,
        spot_max_price: max_price,
    }
}

/// What counts, as the guardrails page says: on demand, the catalogue's on-demand price; spot, the max
/// price it was launched with, else the on-demand price; unknown, nothing (reported).
#[tokio::test]
async fn the_census_prices_each_instance_as_documented() {
    let catalogue = Arc::new(InstanceCatalogue::bundled("us-east-1").unwrap());
    let m7i = catalogue.get("m7i.large").unwrap().on_demand_price.unwrap();
    let spend = Arc::new(spend());
    let census = CensusLoop {
        census: Arc::new(FixedCensus(vec![
            listed("i-1", "m7i.large", Market::OnDemand, None),
            listed("i-2", "m7i.large", Market::Spot, Some(0.02)),
            listed("i-3", "m7i.large", Market::Spot, None),
            listed("i-4", "z9.imaginary", Market::OnDemand, None),
            // A max price tag on an on-demand instance (a spot plan's fallback) is not its price.
            listed("i-5", "m7i.large", Market::OnDemand, Some(0.02)),
        ])),
        spend: spend.clone(),
        catalogue,
        period: Duration::from_secs(5),
    };
    let unpriced = census.count_once().await.unwrap();
    assert_eq!(unpriced.into_iter().collect::<Vec<_>>(), ["z9.imaginary"]);
    assert_eq!(
        spend.totals()["big"],
        usd(m7i * 3.0).saturating_add(usd(0.02))
    );
}

/// The simulated provider's census: the served nodes' instances, spot at the on-demand price;
/// and no listing at all (rather than an empty one) while no node is served, so pods of a
/// capped namespace do not launch on a count that missed instances.
#[tokio::test]
async fn the_served_census_lists_the_served_nodes_instances_once_a_node_is_served() {
    use super::census::ServedCensus;
    use crate::process::served_nodes::{ServedNode, ServedNodes};
    use crate::provider::Provider;
    use crate::provider::simulated::SimulatedProvider;

    let served = Arc::new(ServedNodes::default());
    let census = ServedCensus(served.clone());
    assert!(census.instances().await.is_err(), "nothing served yet");
    let provider =
        Arc::new(SimulatedProvider::new(crate::config::SimulatedConfig::default()).unwrap());
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "p", "namespace": "big", "uid": "u-1" }
    }))
    .unwrap();
    let launched = provider
        .create(&crate::workload::testing::bare_request(
            &pod,
            &crate::provider::plan::LaunchPlan::on_demand("m7i.large"),
        ))
        .await
        .unwrap();
    let (store, _writer) = kube::runtime::reflector::store();
    served.serve(
        "node",
        ServedNode {
            pods: store,
            provider: provider.clone(),
        },
    );
    let listed = census.instances().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].instance_id, launched.instance_id);
    assert_eq!(
        (listed[0].namespace.as_str(), listed[0].pod_uid.as_str()),
        ("big", "u-1")
    );
    assert!(listed[0].live);
}
