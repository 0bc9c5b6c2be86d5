//! Throttling in bursts, as EC2's request rate limits are felt by a busy
//! client: once refused, the next few calls are refused too.

use crate::behaviour::Behaviour;
use crate::error::Ec2Error;
use crate::random::Draw;

#[derive(Clone, Debug, Default)]
pub(crate) struct Throttle {
    /// Calls the current burst will still refuse.
    remaining: u32,
}

impl Throttle {
    /// Lets a call through, or refuses it with `RequestLimitExceeded`.
    ///
    /// The call that starts a burst is the first one it refuses; a burst
    /// drawn as zero calls long refuses nothing.
    pub fn admit(
        &mut self,
        rng: &mut fastrand::Rng,
        behaviour: &Behaviour,
    ) -> Result<(), Ec2Error> {
        if self.remaining == 0 && rng.chance(behaviour.throttle_probability) {
            self.remaining = rng.count(&behaviour.throttle_burst);
        }
        if self.remaining > 0 {
            self.remaining -= 1;
            return Err(Ec2Error::request_limit_exceeded());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_refuses_exactly_its_length_then_lets_calls_through() {
        let mut behaviour = Behaviour::calm();
        behaviour.throttle_probability = 1.0;
        behaviour.throttle_burst = 3..=3;
        let mut rng = fastrand::Rng::with_seed(1);
        let mut throttle = Throttle::default();
        for _ in 0..3 {
            assert!(throttle.admit(&mut rng, &behaviour).is_err());
        }
        behaviour.throttle_probability = 0.0;
        assert!(throttle.admit(&mut rng, &behaviour).is_ok());
    }
}
