//! The fault profile: how hostile the modelled EC2 is.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use jiff::SignedDuration;

/// A range of durations `[min, max]`, drawn uniformly from the model's RNG
/// each time the model needs one (per instance or per call).
///
/// # Guarantees
/// Negative bounds count as zero and swapped bounds are put in order, so any
/// `Span` is usable: the model never panics on one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub min: SignedDuration,
    pub max: SignedDuration,
}

impl Span {
    /// No delay at all.
    pub const ZERO: Span = Span::exactly(SignedDuration::ZERO);

    pub const fn between(min: SignedDuration, max: SignedDuration) -> Span {
        Span { min, max }
    }

    pub const fn exactly(duration: SignedDuration) -> Span {
        Span {
            min: duration,
            max: duration,
        }
    }

    /// A span between two numbers of milliseconds, for terse profiles.
    pub const fn millis(min: i64, max: i64) -> Span {
        Span::between(
            SignedDuration::from_millis(min),
            SignedDuration::from_millis(max),
        )
    }

    /// The bounds as drawn: clamped to zero and in order.
    pub(crate) fn bounds(self) -> (SignedDuration, SignedDuration) {
        let low = self.min.max(SignedDuration::ZERO);
        let high = self.max.max(SignedDuration::ZERO);
        if low <= high {
            (low, high)
        } else {
            (high, low)
        }
    }
}

/// How EC2 misbehaves. Durations are [`Span`]s drawn from the seeded RNG;
/// probabilities are in `[0, 1]` (values outside count as the nearest end,
/// NaN as 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Behaviour {
    /// A new instance is unknown to every call (describes omit it, by-id
    /// calls answer `InvalidInstanceID.NotFound`) until `launch + lag`.
    /// Drawn per instance. EC2: "If you run a command to modify or describe a
    /// resource that you just created, its ID might not have propagated".
    /// Also drawn per fleet: DescribeFleets omits a new fleet until then.
    pub visibility_lag: Span,
    /// Every tag write (at launch or later) becomes visible to describes and
    /// tag filters this long after it was made. Drawn per tag write.
    pub tag_lag: Span,
    /// Each describe answers as of a moment this long before `now` (a replica
    /// that is behind). Drawn per describe call.
    pub describe_staleness: Span,
    /// Console output written on the instance reaches `GetConsoleOutput`
    /// this long later. Drawn per batch of lines.
    pub console_lag: Span,
    /// `pending` → `running`. Drawn per instance.
    pub boot: Span,
    /// `shutting-down` → `terminated` and `stopping` → `stopped`. Drawn per
    /// transition.
    pub shutdown: Span,
    /// From the workload's end to the instance shutting itself down.
    pub workload_shutdown_delay: Span,
    /// How long a terminated instance stays listed; after that describes omit
    /// it and by-id calls answer `InvalidInstanceID.NotFound`. Drawn per
    /// instance.
    pub terminated_retention: Span,
    /// From a spot interruption notice to the instance shutting down (two
    /// minutes on EC2; short here so tests run fast).
    pub interruption_notice: Span,
    /// Chance that a call starts a throttling burst.
    pub throttle_probability: f64,
    /// How many calls (the one that starts it included) a burst refuses with
    /// `RequestLimitExceeded`.
    pub throttle_burst: RangeInclusive<u32>,
    /// Chance that a RunInstances that created an instance, or a CreateFleet
    /// that created a fleet (with or without an instance), answers a
    /// transport error instead (the connection dropped after EC2 acted).
    pub lost_answer_probability: f64,
    /// Chance that an offering (instance type, zone, spot or on-demand) has no
    /// capacity during one `capacity_window`.
    pub capacity_error_probability: f64,
    /// How long one capacity decision lasts. Zero or negative: every instant
    /// is its own window.
    pub capacity_window: SignedDuration,
    /// Chance that a TerminateInstances naming a pending instance refuses it
    /// with `IncorrectInstanceState`, failing the whole call.
    pub per_id_refusal_probability: f64,
    /// Chance that an interrupted spot instance's bootstrap traps SIGTERM and
    /// records exit code 143 (console line and exit-code tag) as it goes down.
    pub interrupted_workload_exits: f64,
    /// Subnet id → Availability Zone.
    pub subnets: BTreeMap<String, String>,
    /// The zone of a launch without a known subnet.
    pub default_zone: String,
    /// Instance type → current spot price; a spot launch whose `max_price` is
    /// below it fails with `SpotMaxPriceTooLow`. Types not listed: no check.
    pub spot_prices: BTreeMap<String, f64>,
}

impl Behaviour {
    /// Every fault on at moderate rates, with short, test-friendly durations.
    pub fn hostile() -> Behaviour {
        Behaviour {
            visibility_lag: Span::millis(0, 2_000),
            tag_lag: Span::millis(0, 2_000),
            describe_staleness: Span::millis(0, 2_000),
            console_lag: Span::millis(0, 2_000),
            boot: Span::millis(200, 1_000),
            shutdown: Span::millis(200, 1_000),
            workload_shutdown_delay: Span::millis(50, 300),
            terminated_retention: Span::exactly(SignedDuration::from_secs(30)),
            interruption_notice: Span::exactly(SignedDuration::from_secs(2)),
            throttle_probability: 0.05,
            throttle_burst: 1..=3,
            lost_answer_probability: 0.1,
            capacity_error_probability: 0.1,
            capacity_window: SignedDuration::from_secs(10),
            per_id_refusal_probability: 0.1,
            interrupted_workload_exits: 0.5,
            subnets: default_subnets(),
            default_zone: "us-west-2a".to_owned(),
            spot_prices: BTreeMap::new(),
        }
    }

    /// Every fault off and no lags: a perfectly consistent EC2. Instances are
    /// `running` as soon as they are launched and `terminated` as soon as they
    /// are shut down; terminated ones are still purged after 30 s.
    pub fn calm() -> Behaviour {
        Behaviour {
            visibility_lag: Span::ZERO,
            tag_lag: Span::ZERO,
            describe_staleness: Span::ZERO,
            console_lag: Span::ZERO,
            boot: Span::ZERO,
            shutdown: Span::ZERO,
            workload_shutdown_delay: Span::ZERO,
            terminated_retention: Span::exactly(SignedDuration::from_secs(30)),
            interruption_notice: Span::exactly(SignedDuration::from_secs(2)),
            throttle_probability: 0.0,
            throttle_burst: 0..=0,
            lost_answer_probability: 0.0,
            capacity_error_probability: 0.0,
            capacity_window: SignedDuration::from_secs(10),
            per_id_refusal_probability: 0.0,
            interrupted_workload_exits: 0.0,
            subnets: default_subnets(),
            default_zone: "us-west-2a".to_owned(),
            spot_prices: BTreeMap::new(),
        }
    }

    /// The zone a launch into `subnet` lands in.
    pub fn zone_for(&self, subnet: Option<&str>) -> &str {
        subnet
            .and_then(|subnet| self.subnets.get(subnet))
            .map_or(self.default_zone.as_str(), String::as_str)
    }

    /// The current spot price of `instance_type`, if the profile sets one.
    pub fn spot_price(&self, instance_type: &str) -> Option<f64> {
        self.spot_prices.get(instance_type).copied()
    }
}

/// [`Behaviour::hostile`]: tests should meet the hostile EC2 unless they ask
/// for a calm one.
impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour::hostile()
    }
}

fn default_subnets() -> BTreeMap<String, String> {
    [
        ("subnet-0a0a0a0a0a0a0a0a0", "us-west-2a"),
        ("subnet-0b0b0b0b0b0b0b0b0", "us-west-2b"),
        ("subnet-0c0c0c0c0c0c0c0c0", "us-west-2c"),
    ]
    .into_iter()
    .map(|(subnet, zone)| (subnet.to_owned(), zone.to_owned()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_with_negative_or_swapped_bounds_is_put_in_order() {
        assert_eq!(
            Span::millis(500, -3).bounds(),
            (SignedDuration::ZERO, SignedDuration::from_millis(500))
        );
    }

    #[test]
    fn a_launch_without_a_known_subnet_lands_in_the_default_zone() {
        let behaviour = Behaviour::calm();
        assert_eq!(behaviour.zone_for(None), "us-west-2a");
        assert_eq!(behaviour.zone_for(Some("subnet-unknown")), "us-west-2a");
        assert_eq!(
            behaviour.zone_for(Some("subnet-0b0b0b0b0b0b0b0b0")),
            "us-west-2b"
        );
    }
}
