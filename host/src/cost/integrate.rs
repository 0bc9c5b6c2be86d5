//! What an instance cost over a span of time: its hourly price, piecewise constant between
//! the changes its pool's history shows, integrated over the span.

use jiff::Timestamp;

use crate::policy::guardrails::Price;

/// The price per hour from `at` on, until the next point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PricePoint {
    pub at: Timestamp,
    pub price: Price,
}

/// Dollars spent from `from` to `to` (nothing when `to` is not after `from`) at the prices
/// `points` show, sorted by time: each point's price holds until the next. Before the first
/// point the first point's price holds (EC2 answers the price in effect at a history's start,
/// so that happens only when it knew none then: the earliest price it knows counts).
/// `None` when `points` is empty.
pub fn integrate(points: &[PricePoint], from: Timestamp, to: Timestamp) -> Option<f64> {
    let first = points.first()?;
    if to <= from {
        return Some(0.0);
    }
    let mut dollars = 0.0;
    let mut price = first.price;
    let mut at = from;
    for point in points {
        if point.at <= at {
            price = point.price;
            continue;
        }
        if point.at >= to {
            break;
        }
        dollars += price.usd() * hours(at, point.at);
        price = point.price;
        at = point.at;
    }
    dollars += price.usd() * hours(at, to);
    Some(dollars)
}

/// Hours from `from` to `to` (zero when `to` is not after `from`).
pub fn hours(from: Timestamp, to: Timestamp) -> f64 {
    let span = to.duration_since(from);
    if span.is_negative() {
        0.0
    } else {
        span.as_secs_f64() / 3600.0
    }
}

/// The price in effect at `at`: the last point at or before it, else the first.
pub fn price_at(points: &[PricePoint], at: Timestamp) -> Option<Price> {
    points
        .iter()
        .take_while(|point| point.at <= at)
        .last()
        .or_else(|| points.first())
        .map(|point| point.price)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(minutes: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
    }

    fn at(minutes: i64, usd: f64) -> PricePoint {
        PricePoint {
            at: t(minutes),
            price: Price::from_usd(usd).unwrap(),
        }
    }

    #[test]
    fn the_cost_of_a_span_is_each_price_times_the_time_it_held() {
        let history = [at(-30, 0.04), at(30, 0.10), at(90, 0.02)];
        for (case, from, to, dollars) in [
            ("one price all along", 0, 30, 0.04 / 2.0),
            (
                "a change inside the span counts piecewise",
                0,
                60,
                0.02 + 0.05,
            ),
            ("two changes", 0, 120, 0.02 + 0.10 + 0.01),
            ("starting on a change takes the new price", 30, 90, 0.10),
            (
                "before the first known price, the first counts",
                -90,
                -30,
                0.04,
            ),
            ("a change after the span does not count", -30, 0, 0.02),
            ("an empty span costs nothing", 60, 60, 0.0),
            (
                "a span that ends before it starts costs nothing",
                60,
                0,
                0.0,
            ),
        ] {
            let got = integrate(&history, t(from), t(to)).unwrap();
            assert!((got - dollars).abs() < 1e-9, "{case}: {got} != {dollars}");
        }
    }

    #[test]
    fn no_history_is_no_cost_rather_than_zero() {
        assert_eq!(integrate(&[], t(0), t(60)), None);
        assert_eq!(price_at(&[], t(0)), None);
    }

    #[test]
    fn the_price_in_effect_is_the_last_change_at_or_before_the_time() {
        let history = [at(0, 0.04), at(30, 0.10)];
        for (minutes, usd) in [(-10, 0.04), (0, 0.04), (29, 0.04), (30, 0.10), (300, 0.10)] {
            assert_eq!(
                price_at(&history, t(minutes)),
                Price::of(Some(usd)),
                "{minutes}"
            );
        }
    }
}
