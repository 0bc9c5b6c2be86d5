//! Whether EC2 can launch into an offering at a moment: the spot price and
//! the capacity, the two refusals that RunInstances and every pool of a
//! fleet meet alike, in the same order and with the same words.

use jiff::Timestamp;

use crate::capacity::{self, Offering};
use crate::error::Ec2Error;
use crate::model::World;

/// Why a launch into `offering` at `now` cannot happen, if it cannot:
/// `SpotMaxPriceTooLow` for a spot launch whose `max_price` is below the
/// type's spot price (checked first), `InsufficientInstanceCapacity` for an
/// offering without capacity in the window holding `now`.
///
/// # Guarantees
/// Takes nothing from the RNG: asking twice gives the same answer.
pub(crate) fn refusal(
    world: &World,
    now: Timestamp,
    offering: &Offering<'_>,
    max_price: Option<f64>,
) -> Option<Ec2Error> {
    if offering.spot
        && let (Some(max_price), Some(price)) = (
            max_price,
            world.behaviour.spot_price(offering.instance_type),
        )
        && max_price < price
    {
        return Some(Ec2Error::spot_price_too_low(max_price, price));
    }
    exhausted(world, now, offering)
        .then(|| Ec2Error::insufficient_capacity(offering.instance_type, offering.zone))
}

/// True if `offering` has no capacity at `now` (see [`capacity::is_exhausted`]).
pub(crate) fn exhausted(world: &World, now: Timestamp, offering: &Offering<'_>) -> bool {
    capacity::is_exhausted(
        world.seed,
        world.behaviour.capacity_error_probability,
        world.behaviour.capacity_window,
        offering,
        now,
    )
}
