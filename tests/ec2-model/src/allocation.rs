//! How an instant fleet chooses its pool: it orders the pools by its
//! allocation strategy, then walks them until one can launch, noting why
//! each one before it could not.
//!
//! EC2 does not document the order beyond what each strategy optimises, so
//! the model takes the plainest reading of each and breaks every tie by the
//! caller's order.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use jiff::Timestamp;

use crate::availability;
use crate::capacity::Offering;
use crate::fleet::{AllocationStrategy, CreateFleet, FleetPool};
use crate::fleet_answer::FleetError;
use crate::model::World;

/// The pool the fleet launches into.
pub(crate) struct Chosen<'a> {
    /// An index into the request's pools.
    pub index: usize,
    pub pool: &'a FleetPool,
    pub zone: String,
}

/// What walking the pools found.
pub(crate) struct Allocation<'a> {
    /// One entry per distinct pool walked before the launch (every distinct
    /// pool when nothing launches), in walking order.
    pub errors: Vec<FleetError>,
    pub chosen: Option<Chosen<'a>>,
}

/// Orders the pools and walks them at `now`.
///
/// A pool whose (instance type, subnet) was already walked is skipped: it
/// counts once, under the index it was first walked at.
///
/// # Guarantees
/// Takes from the RNG only to shuffle the pools with capacity under
/// [`AllocationStrategy::CapacityOptimized`], and nothing to shuffle fewer
/// than two.
pub(crate) fn allocate<'a>(
    world: &mut World,
    now: Timestamp,
    request: &'a CreateFleet,
) -> Allocation<'a> {
    let order = order(world, now, request);
    let mut walked: BTreeSet<(&str, Option<&str>)> = BTreeSet::new();
    let mut errors = Vec::new();
    for (index, pool) in order {
        if !walked.insert((pool.instance_type.as_str(), pool.subnet_id.as_deref())) {
            continue;
        }
        let zone = zone_of(world, pool);
        let offering = Offering {
            instance_type: &pool.instance_type,
            zone: &zone,
            spot: request.spot,
        };
        match availability::refusal(world, now, &offering, request.max_price) {
            None => {
                return Allocation {
                    errors,
                    chosen: Some(Chosen { index, pool, zone }),
                };
            }
            Some(refusal) => errors.push(FleetError {
                pool: index,
                instance_type: pool.instance_type.clone(),
                subnet_id: pool.subnet_id.clone(),
                zone,
                code: refusal.code,
                message: refusal.message,
            }),
        }
    }
    Allocation {
        errors,
        chosen: None,
    }
}

/// The pools in the order the strategy tries them, each with its index:
/// - `Prioritized`: by priority, lowest first, pools without one last;
/// - `LowestPrice`, `PriceCapacityOptimized`: spot, by the type's spot price,
///   cheapest first, types without a price last; on-demand (the model knows
///   no on-demand prices), the caller's order;
/// - `CapacityOptimized`: the pools with capacity at `now` first, in an order
///   drawn from the RNG, then the others in the caller's order.
fn order<'a>(
    world: &mut World,
    now: Timestamp,
    request: &'a CreateFleet,
) -> Vec<(usize, &'a FleetPool)> {
    let mut pools: Vec<(usize, &FleetPool)> = request.pools.iter().enumerate().collect();
    match request.allocation_strategy {
        AllocationStrategy::Prioritized => {
            pools.sort_by(|(_, a), (_, b)| lowest_first(a.priority, b.priority));
        }
        AllocationStrategy::LowestPrice | AllocationStrategy::PriceCapacityOptimized => {
            if request.spot {
                let behaviour = &world.behaviour;
                // A NaN price in the profile is no price at all.
                let price = |pool: &FleetPool| {
                    behaviour
                        .spot_price(&pool.instance_type)
                        .filter(|price| !price.is_nan())
                };
                pools.sort_by(|(_, a), (_, b)| lowest_first(price(a), price(b)));
            }
        }
        AllocationStrategy::CapacityOptimized => {
            let (mut open, full): (Vec<_>, Vec<_>) = pools.into_iter().partition(|(_, pool)| {
                let zone = zone_of(world, pool);
                let offering = Offering {
                    instance_type: &pool.instance_type,
                    zone: &zone,
                    spot: request.spot,
                };
                !availability::exhausted(world, now, &offering)
            });
            world.rng.shuffle(&mut open);
            open.extend(full);
            pools = open;
        }
    }
    pools
}

fn zone_of(world: &World, pool: &FleetPool) -> String {
    world
        .behaviour
        .zone_for(pool.subnet_id.as_deref())
        .to_owned()
}

/// Ascending, `None` after every number. Stable sorts keep ties in the
/// caller's order.
fn lowest_first(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_before_none_and_in_ascending_order() {
        let mut values = vec![None, Some(2.0), Some(-0.0), None, Some(1.0)];
        values.sort_by(|a, b| lowest_first(*a, *b));
        assert_eq!(values, [Some(-0.0), Some(1.0), Some(2.0), None, None]);
    }
}
