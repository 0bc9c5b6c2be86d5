//! The bookkeeping of what instances cost, one turn at a time, as a pure function of what a
//! listing shows, the prices known and the time: how much each live instance accrued since the
//! last turn (for the counters), what every live instance costs an hour now (for the gauge),
//! and, for each instance that ended, its [`CostRecord`] from launch to end.
//!
//! # Guarantees
//! - A record is computed from EC2's `LaunchTime`, its end time and the pool's price history,
//!   never from this process's memory: after a restart the same record comes out.
//! - The counters count what accrued since this process started (from the later of the
//!   instance's launch and the start), each dollar once: an instance launched while the
//!   process runs counts exactly its record, once ended. They never run ahead of the record:
//!   a live instance is counted up to the whole second before the listing that shows it (EC2
//!   gives end times in whole seconds, cut down), and an ended one up to its end.
//!
//! # Caveats
//! A price change EC2 publishes late (after a turn accrued past it at the old price) is not
//! taken back from the counters, which cannot go down; the record has it right.

use std::collections::{BTreeMap, HashMap, HashSet};

use jiff::Timestamp;

use super::integrate::{hours, integrate, price_at};
use super::record::{CostRecord, Pricing};
use crate::policy::guardrails::Price;
use crate::provider::plan::Market;

/// One of the cluster's instances as a listing shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub instance_id: String,
    pub namespace: String,
    pub pod_uid: String,
    /// The pod's name, from its tag.
    pub pod_name: Option<String>,
    pub instance_type: String,
    pub market: Market,
    pub zone: Option<String>,
    pub launched_at: Timestamp,
    /// Pending, running, stopping or stopped: it costs.
    pub live: bool,
    /// When it was asked to stop or end, as EC2 says.
    pub ended_at: Option<Timestamp>,
}

/// How one instance is priced, with the on-demand price its savings are counted against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priced {
    pub pricing: Pricing,
    pub on_demand: Option<Price>,
}

/// The counters' labels.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Series {
    pub namespace: String,
    pub instance_type: String,
    pub market: Market,
}

impl Series {
    fn of(seen: &Seen) -> Series {
        Series {
            namespace: seen.namespace.clone(),
            instance_type: seen.instance_type.clone(),
            market: seen.market,
        }
    }
}

/// What one turn found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// Dollars accrued since the last turn, and dollars saved against on demand.
    pub accrued: BTreeMap<Series, (f64, f64)>,
    /// What the live instances cost an hour now.
    pub live: BTreeMap<Series, Price>,
    /// Instances that ended, with their cost, not recorded yet.
    pub ended: Vec<(Seen, CostRecord)>,
    /// Instances with no price at all (their types, once each).
    pub unpriced: Vec<String>,
}

/// Per instance, what the counters have of it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Counted {
    dollars: f64,
    saved: f64,
}

/// The state between turns: what the counters have counted, and which instances are recorded.
#[derive(Debug, Clone)]
pub struct CostLedger {
    /// When this process started counting.
    started: Timestamp,
    counted: HashMap<String, Counted>,
    /// When this process first saw an instance ended, for one EC2 gives no end time for.
    first_seen_ended: HashMap<String, Timestamp>,
    recorded: HashSet<String>,
}

impl CostLedger {
    /// Counting from `started`, to the second below: EC2's `LaunchTime` is whole seconds, so
    /// an instance launched in the second the process started counts from its launch.
    pub fn new(started: Timestamp) -> CostLedger {
        CostLedger {
            started: whole_second(started),
            counted: HashMap::new(),
            first_seen_ended: HashMap::new(),
            recorded: HashSet::new(),
        }
    }

    /// Whether `instance_id`'s cost is on record (this process wrote it, or found it there).
    pub fn is_recorded(&self, instance_id: &str) -> bool {
        self.recorded.contains(instance_id)
    }

    /// One turn over `listing`, asked for at `now`, each instance priced by `price`.
    pub fn turn(
        &mut self,
        listing: &[Seen],
        price: impl Fn(&Seen) -> Option<Priced>,
        now: Timestamp,
    ) -> Turn {
        let mut turn = Turn::default();
        let listed: HashSet<&str> = listing.iter().map(|s| s.instance_id.as_str()).collect();
        // What listings no longer show is gone from EC2's memory too: nothing more to count.
        self.counted.retain(|id, _| listed.contains(id.as_str()));
        self.first_seen_ended
            .retain(|id, _| listed.contains(id.as_str()));
        self.recorded.retain(|id| listed.contains(id.as_str()));
        for seen in listing {
            if self.recorded.contains(&seen.instance_id) {
                continue;
            }
            let Some(priced) = price(seen) else {
                if !turn.unpriced.contains(&seen.instance_type) {
                    turn.unpriced.push(seen.instance_type.clone());
                }
                continue;
            };
            let end = if seen.live {
                None
            } else {
                Some(seen.ended_at.unwrap_or_else(|| {
                    *self
                        .first_seen_ended
                        .entry(seen.instance_id.clone())
                        .or_insert(now)
                }))
            };
            // An end EC2 gives is when it ended even if the listing is older than that; a live
            // instance is known live only until the listing.
            let until = end.unwrap_or_else(|| whole_second(now));
            self.accrue(seen, &priced, until, &mut turn);
            if seen.live {
                if let Some(now_price) = price_at(&priced.pricing.points, now) {
                    let live = turn.live.entry(Series::of(seen)).or_default();
                    *live = live.saturating_add(now_price);
                }
            } else if let Some(end) = end {
                turn.ended.push((seen.clone(), record(seen, &priced, end)));
            }
        }
        turn
    }

    /// What `seen` accrued for the counters since the last turn, up to `until`.
    fn accrue(&mut self, seen: &Seen, priced: &Priced, until: Timestamp, turn: &mut Turn) {
        let from = seen.launched_at.max(self.started);
        let dollars = integrate(&priced.pricing.points, from, until).unwrap_or(0.0);
        let saved = match (seen.market, priced.on_demand) {
            (Market::Spot, Some(on_demand)) => {
                (on_demand.usd() * hours(from, until) - dollars).max(0.0)
            }
            _ => 0.0,
        };
        let counted = self.counted.entry(seen.instance_id.clone()).or_default();
        let more = (dollars - counted.dollars).max(0.0);
        let more_saved = (saved - counted.saved).max(0.0);
        counted.dollars = counted.dollars.max(dollars);
        counted.saved = counted.saved.max(saved);
        if more > 0.0 || more_saved > 0.0 {
            let entry = turn.accrued.entry(Series::of(seen)).or_default();
            entry.0 += more;
            entry.1 += more_saved;
        }
    }

    /// `instance_id`'s cost is on record: it is counted no more.
    pub fn mark_recorded(&mut self, instance_id: &str) {
        self.recorded.insert(instance_id.to_owned());
        self.counted.remove(instance_id);
    }
}

/// `at`, cut down to its second.
fn whole_second(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

/// The instance's cost from launch to `end`.
fn record(seen: &Seen, priced: &Priced, end: Timestamp) -> CostRecord {
    let points = &priced.pricing.points;
    let dollars = integrate(points, seen.launched_at, end).unwrap_or(0.0);
    let spent = hours(seen.launched_at, end);
    let at = |when| price_at(points, when).map_or(0.0, Price::usd);
    CostRecord {
        dollars,
        hours: spent,
        market: seen.market,
        instance_type: seen.instance_type.clone(),
        zone: seen.zone.clone(),
        instance_id: seen.instance_id.clone(),
        launched_at: seen.launched_at,
        ended_at: end,
        price_source: priced.pricing.source,
        price_per_hour_at_launch: at(seen.launched_at),
        price_per_hour_at_end: at(end),
        on_demand_dollars: match seen.market {
            Market::Spot => priced.on_demand.map(|price| price.usd() * spent),
            Market::OnDemand => None,
        },
    }
}

#[cfg(test)]
mod tests;
