//! Capacity, decided per offering (instance type, zone, spot or on-demand)
//! and per time window, as EC2's `InsufficientInstanceCapacity` comes and
//! goes.
//!
//! The decision is a pure function of the seed, the offering and the window
//! index rather than a draw from the shared RNG, so every launch into the
//! same offering during one window gets the same answer whatever else
//! happened in between.

use jiff::{SignedDuration, Timestamp};

/// One kind of instance EC2 sells.
pub(crate) struct Offering<'a> {
    pub instance_type: &'a str,
    pub zone: &'a str,
    pub spot: bool,
}

/// True if `offering` has no capacity during the window holding `now`.
pub(crate) fn is_exhausted(
    seed: u64,
    probability: f64,
    window: SignedDuration,
    offering: &Offering<'_>,
    now: Timestamp,
) -> bool {
    if probability.is_nan() || probability <= 0.0 {
        return false;
    }
    if probability >= 1.0 {
        return true;
    }
    let mut hash = Fnv::new(seed);
    hash.write(offering.instance_type.as_bytes());
    hash.write(&[0]);
    hash.write(offering.zone.as_bytes());
    hash.write(&[0, u8::from(offering.spot)]);
    hash.write(&window_index(now, window).to_le_bytes());
    fastrand::Rng::with_seed(hash.finish()).f64() < probability
}

/// Which window `now` falls in; every instant is its own window when the
/// window is not positive.
fn window_index(now: Timestamp, window: SignedDuration) -> i128 {
    let nanos = now.as_nanosecond();
    let width = window.as_nanos();
    if width > 0 {
        nanos.div_euclid(width)
    } else {
        nanos
    }
}

/// FNV-1a, seeded: small, stable across platforms and Rust versions (unlike
/// `std`'s hashers, which may change).
struct Fnv(u64);

impl Fnv {
    fn new(seed: u64) -> Fnv {
        let mut fnv = Fnv(0xcbf2_9ce4_8422_2325);
        fnv.write(&seed.to_le_bytes());
        fnv
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH
            .checked_add(SignedDuration::from_secs(seconds))
            .unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn one_offering_gets_one_answer_per_window() {
        let offering = Offering {
            instance_type: "m7i.large",
            zone: "us-west-2a",
            spot: true,
        };
        let window = SignedDuration::from_secs(10);
        for start in (0..1_000).step_by(10) {
            let first = is_exhausted(3, 0.5, window, &offering, at(start));
            for offset in 1..10 {
                assert_eq!(
                    is_exhausted(3, 0.5, window, &offering, at(start + offset)),
                    first
                );
            }
        }
    }

    #[test]
    fn about_the_asked_share_of_windows_is_exhausted() {
        let offering = Offering {
            instance_type: "c7g.xlarge",
            zone: "us-west-2b",
            spot: false,
        };
        let window = SignedDuration::from_secs(1);
        let exhausted = (0..10_000)
            .filter(|&s| is_exhausted(11, 0.3, window, &offering, at(s)))
            .count();
        assert!((2_500..3_500).contains(&exhausted), "{exhausted}");
    }
}
