//! The spot price history of each pool (instance type + availability zone) orca has an
//! instance in, from `DescribeSpotPriceHistory`, cached per pool and asked again once older
//! than a TTL: every pool due is asked in one batched call (see [`SpotHistory::due`]), not one
//! call per pod.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

use super::integrate::{PricePoint, price_at};
use crate::policy::guardrails::Price;
use crate::provider::aws::api::{SpotHistoryQuery, SpotPriceChange};

/// A spot pool: one instance type in one availability zone, which has one spot price.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpotPool {
    pub instance_type: String,
    pub zone: String,
}

/// One pool's history as last asked.
#[derive(Debug, Clone, PartialEq)]
struct PoolHistory {
    /// Sorted by time; the first is the price in effect at `since` (when EC2 knew one).
    points: Vec<PricePoint>,
    /// The start of the window asked.
    since: Timestamp,
    fetched_at: Timestamp,
}

/// The cached histories.
#[derive(Debug, Clone, Default)]
pub struct SpotHistory {
    pools: BTreeMap<SpotPool, PoolHistory>,
}

impl SpotHistory {
    /// The one query that brings every pool of `wanted` (each pool, and the earliest time its
    /// history must reach back to: its oldest instance's launch) up to date at `now`: those
    /// not cached, cached from a later start, or fetched `ttl` or longer ago. All of them go
    /// in one call, reaching back to the earliest start among them; `None` when none is due.
    pub fn due(
        &self,
        wanted: &BTreeMap<SpotPool, Timestamp>,
        now: Timestamp,
        ttl: Duration,
    ) -> Option<(SpotHistoryQuery, Vec<SpotPool>)> {
        let due: Vec<(&SpotPool, Timestamp)> = wanted
            .iter()
            .filter(|(pool, since)| match self.pools.get(*pool) {
                None => true,
                Some(cached) => {
                    cached.since > **since
                        || now.duration_since(cached.fetched_at).unsigned_abs() >= ttl
                }
            })
            .map(|(pool, since)| (pool, *since))
            .collect();
        let since = due.iter().map(|(_, since)| *since).min()?;
        let instance_types: BTreeSet<String> = due
            .iter()
            .map(|(pool, _)| pool.instance_type.clone())
            .collect();
        let zones: BTreeSet<String> = due.iter().map(|(pool, _)| pool.zone.clone()).collect();
        Some((
            SpotHistoryQuery {
                instance_types: instance_types.into_iter().collect(),
                zones: zones.into_iter().collect(),
                since,
            },
            due.into_iter().map(|(pool, _)| pool.clone()).collect(),
        ))
    }

    /// The answer to `query` for `pools` (those [`SpotHistory::due`] named), fetched at
    /// `now`: each pool's history is replaced by what EC2 answered for it. Changes for pools
    /// not asked about (the batch's cross product) are left out.
    pub fn absorb(
        &mut self,
        query: &SpotHistoryQuery,
        pools: &[SpotPool],
        changes: &[SpotPriceChange],
        now: Timestamp,
    ) {
        for pool in pools {
            let mut points: Vec<PricePoint> = changes
                .iter()
                .filter(|c| c.instance_type == pool.instance_type && c.zone == pool.zone)
                .filter_map(|c| {
                    Some(PricePoint {
                        at: c.at,
                        price: Price::of(Some(c.usd_per_hour))?,
                    })
                })
                .collect();
            points.sort_by_key(|point| point.at);
            points.dedup_by_key(|point| point.at);
            self.pools.insert(
                pool.clone(),
                PoolHistory {
                    points,
                    since: query.since,
                    fetched_at: now,
                },
            );
        }
    }

    /// The pool's known price changes, sorted; empty when never asked or EC2 knew none.
    pub fn points(&self, pool: &SpotPool) -> &[PricePoint] {
        self.pools
            .get(pool)
            .map_or(&[][..], |history| history.points.as_slice())
    }

    /// The pool's price at `at`, when known.
    pub fn price_at(&self, pool: &SpotPool, at: Timestamp) -> Option<Price> {
        price_at(self.points(pool), at)
    }

    /// Every pool's price at `now`, where known.
    pub fn prices_at(&self, now: Timestamp) -> std::collections::HashMap<SpotPool, Price> {
        self.pools
            .iter()
            .filter_map(|(pool, history)| Some((pool.clone(), price_at(&history.points, now)?)))
            .collect()
    }

    /// Forgets the pools not in `keep` (no instance of theirs is left to price).
    pub fn retain(&mut self, keep: &BTreeSet<SpotPool>) {
        self.pools.retain(|pool, _| keep.contains(pool));
    }

    pub fn len(&self) -> usize {
        self.pools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(minutes: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
    }

    fn pool(instance_type: &str, zone: &str) -> SpotPool {
        SpotPool {
            instance_type: instance_type.to_owned(),
            zone: zone.to_owned(),
        }
    }

    fn change(instance_type: &str, zone: &str, usd: f64, minutes: i64) -> SpotPriceChange {
        SpotPriceChange {
            instance_type: instance_type.to_owned(),
            zone: zone.to_owned(),
            usd_per_hour: usd,
            at: t(minutes),
        }
    }

    const TTL: Duration = Duration::from_secs(300);

    #[test]
    fn every_pool_due_goes_into_one_query_reaching_back_to_the_oldest_launch() {
        let wanted: BTreeMap<SpotPool, Timestamp> = [
            (pool("m5.large", "us-west-2a"), t(-20)),
            (pool("c5.large", "us-west-2b"), t(-5)),
            (pool("m5.large", "us-west-2b"), t(-60)),
        ]
        .into();
        let (query, pools) = SpotHistory::default().due(&wanted, t(0), TTL).unwrap();
        assert_eq!(query.instance_types, ["c5.large", "m5.large"]);
        assert_eq!(query.zones, ["us-west-2a", "us-west-2b"]);
        assert_eq!(query.since, t(-60));
        assert_eq!(pools.len(), 3);
    }

    #[test]
    fn a_pool_is_asked_again_when_its_history_is_stale_or_does_not_reach_back_far_enough() {
        let a = pool("m5.large", "us-west-2a");
        let mut history = SpotHistory::default();
        let wanted: BTreeMap<SpotPool, Timestamp> = [(a.clone(), t(-20))].into();
        let (query, pools) = history.due(&wanted, t(0), TTL).unwrap();
        history.absorb(
            &query,
            &pools,
            &[change("m5.large", "us-west-2a", 0.03, -30)],
            t(0),
        );
        for (case, since, now, asked) in [
            ("fresh and reaching back", -20, 4, false),
            ("a later launch needs nothing more", -10, 4, false),
            ("stale after the TTL", -20, 5, true),
            ("an older launch needs more history", -25, 1, true),
        ] {
            let wanted: BTreeMap<SpotPool, Timestamp> = [(a.clone(), t(since))].into();
            assert_eq!(history.due(&wanted, t(now), TTL).is_some(), asked, "{case}");
        }
    }

    #[test]
    fn an_answer_fills_only_the_pools_asked_about_sorted_by_time() {
        let a = pool("m5.large", "us-west-2a");
        let wanted: BTreeMap<SpotPool, Timestamp> = [
            (a.clone(), t(-20)),
            (pool("c5.large", "us-west-2b"), t(-20)),
        ]
        .into();
        let mut history = SpotHistory::default();
        let (query, pools) = history.due(&wanted, t(0), TTL).unwrap();
        history.absorb(
            &query,
            &pools,
            &[
                change("m5.large", "us-west-2a", 0.05, 10),
                change("m5.large", "us-west-2a", 0.03, -30),
                // The batch's cross product: a pool no instance is in.
                change("m5.large", "us-west-2b", 0.07, -30),
            ],
            t(0),
        );
        assert_eq!(history.len(), 2, "the pools asked about, answered or not");
        assert_eq!(history.price_at(&a, t(0)), Price::of(Some(0.03)));
        assert_eq!(history.price_at(&a, t(10)), Price::of(Some(0.05)));
        assert!(history.points(&pool("c5.large", "us-west-2b")).is_empty());
        assert!(history.points(&pool("m5.large", "us-west-2b")).is_empty());
        history.retain(&[a.clone()].into());
        assert_eq!(history.len(), 1);
    }
}
