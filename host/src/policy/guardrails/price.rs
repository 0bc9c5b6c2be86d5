//! Prices in USD per hour, held as whole micro-dollars: sums over a namespace's instances and
//! comparisons with a cap are exact (three pods at $0.10/h fit a $0.30/h cap, which
//! `0.1 + 0.1 + 0.1 <= 0.3` in floating point denies).

use std::fmt;

/// Micro-dollars in one dollar.
const MICROS: u64 = 1_000_000;
/// The most an hour may be said to cost: far above any instance type (the dearest, a
/// u7in-32tb.224xlarge, is about $400/h), low enough that sums never overflow.
const MAX_USD: f64 = 100_000.0;

/// Why a number is not a price.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PriceError {
    #[error("a price in USD per hour above 0 and at most {MAX_USD}, such as 2.5")]
    OutOfRange,
}

/// USD per hour, to the micro-dollar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Price(u64);

impl Price {
    pub const ZERO: Price = Price(0);

    /// A price from a decimal USD amount, rounded to the micro-dollar.
    ///
    /// # Errors
    /// [`PriceError::OutOfRange`] for zero or less, more than $100,000, NaN or infinity.
    pub fn from_usd(usd: f64) -> Result<Price, PriceError> {
        if !(usd.is_finite() && usd > 0.0 && usd <= MAX_USD) {
            return Err(PriceError::OutOfRange);
        }
        // In range, so the cast neither truncates nor saturates; a price below half a
        // micro-dollar still costs something.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let micros = (usd * MICROS as f64).round() as u64;
        Ok(Price(micros.max(1)))
    }

    /// A catalogue or plugin price, if it is one.
    pub fn of(usd: Option<f64>) -> Option<Price> {
        usd.and_then(|usd| Price::from_usd(usd).ok())
    }

    pub fn from_micros(micros: u64) -> Price {
        Price(micros)
    }

    pub fn micros(self) -> u64 {
        self.0
    }

    /// The price as a decimal amount (for records, metrics and EC2's max price).
    #[allow(clippy::cast_precision_loss)]
    pub fn usd(self) -> f64 {
        self.0 as f64 / MICROS as f64
    }

    #[must_use]
    pub fn saturating_add(self, other: Price) -> Price {
        Price(self.0.saturating_add(other.0))
    }

    #[must_use]
    pub fn saturating_sub(self, other: Price) -> Price {
        Price(self.0.saturating_sub(other.0))
    }
}

impl std::iter::Sum for Price {
    fn sum<I: Iterator<Item = Price>>(iter: I) -> Price {
        iter.fold(Price::ZERO, Price::saturating_add)
    }
}

/// `$55.04/h`, `$0.0416/h`, `$20/h`: every digit that counts, no more.
impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (dollars, micros) = (self.0 / MICROS, self.0 % MICROS);
        if micros == 0 {
            return write!(f, "${dollars}/h");
        }
        let fraction = format!("{micros:06}");
        let fraction = fraction.trim_end_matches('0');
        let fraction = if fraction.len() < 2 {
            format!("{fraction:0<2}")
        } else {
            fraction.to_owned()
        };
        write!(f, "${dollars}.{fraction}/h")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_read_and_print_as_operators_write_them() {
        for (usd, printed) in [
            (55.04, "$55.04/h"),
            (0.0416, "$0.0416/h"),
            (20.0, "$20/h"),
            (2.5, "$2.50/h"),
            (0.000_000_1, "$0.000001/h"),
            (100_000.0, "$100000/h"),
        ] {
            assert_eq!(Price::from_usd(usd).unwrap().to_string(), printed, "{usd}");
        }
    }

    #[test]
    fn sums_are_exact_where_floating_point_is_not() {
        let dime = Price::from_usd(0.1).unwrap();
        let cap = Price::from_usd(0.3).unwrap();
        let tenth = std::hint::black_box(0.1_f64);
        assert!(
            tenth + tenth + tenth > 0.3,
            "the floating-point sum overshoots"
        );
        assert!([dime, dime, dime].into_iter().sum::<Price>() <= cap);
    }

    #[test]
    fn what_is_not_a_price_is_refused() {
        for usd in [0.0, -1.0, f64::NAN, f64::INFINITY, 100_000.01] {
            assert_eq!(Price::from_usd(usd), Err(PriceError::OutOfRange), "{usd}");
        }
        assert_eq!(Price::of(None), None);
        assert_eq!(Price::of(Some(-2.0)), None);
    }
}
