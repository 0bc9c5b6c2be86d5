//! Draws from the model's single seeded RNG.
//!
//! A draw that cannot vary (a fixed span, a probability of 0 or 1) takes
//! nothing from the RNG, so a calm profile consumes no randomness at all.

use std::ops::RangeInclusive;

use jiff::SignedDuration;

use crate::behaviour::Span;

pub(crate) trait Draw {
    /// A duration within `span` (see [`Span::bounds`]).
    fn span(&mut self, span: Span) -> SignedDuration;
    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool;
    /// A count within `range`, whichever way round its ends are.
    fn count(&mut self, range: &RangeInclusive<u32>) -> u32;
}

impl Draw for fastrand::Rng {
    fn span(&mut self, span: Span) -> SignedDuration {
        let (low, high) = span.bounds();
        if low == high {
            return low;
        }
        let width = (high.as_nanos() - low.as_nanos()).clamp(0, i128::from(i64::MAX));
        // `width` is within `0..=i64::MAX`, so both conversions are exact.
        let width = u64::try_from(width).unwrap_or(0);
        let offset = i64::try_from(self.u64(0..=width)).unwrap_or(0);
        low.checked_add(SignedDuration::from_nanos(offset))
            .unwrap_or(high)
    }

    fn chance(&mut self, p: f64) -> bool {
        if p.is_nan() || p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.f64() < p
    }

    fn count(&mut self, range: &RangeInclusive<u32>) -> u32 {
        let (low, high) = (*range.start(), *range.end());
        let (low, high) = (low.min(high), low.max(high));
        if low == high {
            low
        } else {
            self.u32(low..=high)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawn_duration_stays_within_its_span() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..1_000 {
            let drawn = rng.span(Span::millis(200, 1_000));
            assert!(drawn >= SignedDuration::from_millis(200));
            assert!(drawn <= SignedDuration::from_millis(1_000));
        }
    }

    #[test]
    fn a_huge_span_does_not_panic() {
        let mut rng = fastrand::Rng::with_seed(7);
        let span = Span::between(SignedDuration::ZERO, SignedDuration::MAX);
        let drawn = rng.span(span);
        assert!(drawn >= SignedDuration::ZERO);
    }

    #[test]
    fn certain_and_impossible_chances_take_nothing_from_the_rng() {
        let mut rng = fastrand::Rng::with_seed(7);
        let before = rng.get_seed();
        assert!(rng.chance(1.0));
        assert!(!rng.chance(0.0));
        assert!(!rng.chance(f64::NAN));
        assert_eq!(rng.count(&(3..=3)), 3);
        assert_eq!(rng.span(Span::ZERO), SignedDuration::ZERO);
        assert_eq!(rng.get_seed(), before);
    }

    #[test]
    fn a_reversed_count_range_is_drawn_in_order() {
        let mut rng = fastrand::Rng::with_seed(7);
        #[allow(clippy::reversed_empty_ranges)]
        let drawn = rng.count(&(5..=2));
        assert!((2..=5).contains(&drawn));
    }
}
