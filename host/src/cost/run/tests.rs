//! The spot price lookups' calls, counted on the fake EC2: what BENCHMARKS.md's "Spot price
//! lookups" reports (`cargo test -p orca --lib cost::run::tests -- --nocapture`).

use super::*;
use crate::provider::aws::api::SpotPriceChange;
use crate::provider::aws::fake::FakeEc2;
use crate::provider::plan::Market;

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

const TYPES: [&str; 3] = ["m5.large", "c5.large", "r5.large"];
const ZONES: [&str; 2] = ["us-west-2a", "us-west-2b"];

fn spot(n: usize, launched: i64) -> Seen {
    Seen {
        instance_id: format!("i-{n:04}"),
        namespace: "team".to_owned(),
        pod_uid: format!("uid-{n}"),
        pod_name: Some(format!("pod-{n}")),
        instance_type: TYPES[n % TYPES.len()].to_owned(),
        market: Market::Spot,
        zone: Some(ZONES[n % ZONES.len()].to_owned()),
        launched_at: t(launched),
        live: true,
        ended_at: None,
    }
}

fn history() -> Vec<SpotPriceChange> {
    let mut changes = Vec::new();
    for instance_type in TYPES {
        for zone in ZONES {
            changes.push(SpotPriceChange {
                instance_type: instance_type.to_owned(),
                zone: zone.to_owned(),
                usd_per_hour: 0.03,
                at: t(-3600),
            });
        }
    }
    changes
}

fn lookups(fake: &FakeEc2) -> usize {
    fake.calls()
        .iter()
        .filter(|call| *call == "DescribeSpotPriceHistory")
        .count()
}

/// 100 spot pods launched at once into 6 pools, then ten minutes of syncs every 5 s: one
/// call at the launch, one per TTL after, whatever the number of pods.
#[tokio::test]
async fn spot_price_lookups_are_one_call_per_batch_of_pools_due_not_one_per_pod() {
    let fake = FakeEc2::default();
    fake.set_spot_history(history());
    let mut books = Books::new(t(-10));
    let listing: Vec<Seen> = (0..100).map(|n| spot(n, 0)).collect();
    let ttl = Duration::from_secs(300);
    let mut per_sync = Vec::new();
    for sync in 0..=120 {
        let before = lookups(&fake);
        refresh_prices(&fake, ttl, &mut books, &listing, t(sync * 5)).await;
        per_sync.push(lookups(&fake) - before);
    }
    println!(
        "100 spot pods in 6 pools, 121 syncs 5 s apart: {} DescribeSpotPriceHistory calls \
         (at syncs {:?})",
        lookups(&fake),
        per_sync
            .iter()
            .enumerate()
            .filter(|(_, calls)| **calls > 0)
            .map(|(sync, _)| sync)
            .collect::<Vec<_>>()
    );
    assert_eq!(per_sync[0], 1, "the launch: one call for all 6 pools");
    assert_eq!(lookups(&fake), 3, "then one per TTL: at 300 s and 600 s");
    assert_eq!(books.history.len(), 6);

    // One more pod into a pool already known: no call; into a new pool: one.
    let mut more = listing.clone();
    more.push(spot(100, 601));
    let before = lookups(&fake);
    refresh_prices(&fake, ttl, &mut books, &more, t(605)).await;
    assert_eq!(lookups(&fake) - before, 0, "a launch into a known pool");
    let mut new_pool = spot(101, 606);
    new_pool.zone = Some("us-west-2c".to_owned());
    more.push(new_pool);
    refresh_prices(&fake, ttl, &mut books, &more, t(610)).await;
    assert_eq!(lookups(&fake) - before, 1, "a launch into a new pool");
}

#[tokio::test]
async fn a_failed_lookup_is_tried_again_after_a_pause_not_every_sync() {
    let fake = FakeEc2::default();
    fake.set_spot_history(history());
    let mut books = Books::new(t(-10));
    let listing = vec![spot(0, 0)];
    let ttl = Duration::from_secs(300);
    fake.fail_next_call(ApiError::service("RequestLimitExceeded", "slow down"));
    refresh_prices(&fake, ttl, &mut books, &listing, t(0)).await;
    assert!(books.history.points(&pool_of(&listing[0])).is_empty());
    for seconds in [5, 10, 25] {
        refresh_prices(&fake, ttl, &mut books, &listing, t(seconds)).await;
    }
    assert_eq!(lookups(&fake), 1, "no lookup within the pause");
    refresh_prices(&fake, ttl, &mut books, &listing, t(30)).await;
    assert_eq!(lookups(&fake), 2);
    assert_eq!(
        books.history.price_at(&pool_of(&listing[0]), t(30)),
        Price::of(Some(0.03))
    );
}

fn pool_of(seen: &Seen) -> SpotPool {
    SpotPool {
        instance_type: seen.instance_type.clone(),
        zone: seen.zone.clone().unwrap(),
    }
}
