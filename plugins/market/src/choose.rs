//! The decision, independent of the host so it is unit-tested natively.

use orca_plugin_sdk::{
    AllocationStrategy, AnnotationError, Candidate, Catalogue, Market, MarketDecision, Pod, PodExt,
    PolicyError,
};
use serde::Deserialize;

pub const LAUNCH_TYPE: &str = "orca.research/launch-type";
pub const MAX_SPOT_PRICE: &str = "orca.research/max-spot-price";

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {
    /// `spot` or `on-demand` for pods without `orca.research/launch-type`.
    pub default_market: String,
    /// Whether a spot pod may fall back to on-demand when spot capacity is refused.
    pub fallback_to_on_demand: bool,
    /// How EC2 Fleet picks among a spot pod's candidates (`price-capacity-optimized`,
    /// `capacity-optimized` or `lowest-price`); absent: the node's configured strategy.
    pub spot_allocation_strategy: Option<String>,
    /// The same for on-demand pods (`lowest-price` or `prioritized`).
    pub on_demand_allocation_strategy: Option<String>,
    /// Whether a rebalance recommendation marks a spot pod `DisruptionTarget` at once (rather
    /// than waiting for the two-minute warning). Off by default: a recommendation is often not
    /// followed by an interruption, and replacing the pod early costs a restart.
    pub mark_on_rebalance: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_market: "on-demand".to_owned(),
            fallback_to_on_demand: true,
            spot_allocation_strategy: None,
            on_demand_allocation_strategy: None,
            mark_on_rebalance: false,
        }
    }
}

impl Settings {
    /// # Errors
    /// `invalid-settings` naming what is wrong.
    pub fn parse(json: &str) -> Result<Settings, PolicyError> {
        let json = if json.trim().is_empty() { "{}" } else { json };
        let settings: Settings = serde_json::from_str(json)
            .map_err(|error| PolicyError::InvalidSettings(format!("market settings: {error}")))?;
        settings.market()?;
        settings.allocation_strategy(Market::Spot)?;
        settings.allocation_strategy(Market::OnDemand)?;
        Ok(settings)
    }

    /// The strategy the settings name for `market`, if any.
    fn allocation_strategy(
        &self,
        market: Market,
    ) -> Result<Option<AllocationStrategy>, PolicyError> {
        let (field, named, allowed): (&str, _, &[AllocationStrategy]) = match market {
            Market::Spot => (
                "spotAllocationStrategy",
                &self.spot_allocation_strategy,
                &[
                    AllocationStrategy::PriceCapacityOptimized,
                    AllocationStrategy::CapacityOptimized,
                    AllocationStrategy::LowestPrice,
                ],
            ),
            Market::OnDemand => (
                "onDemandAllocationStrategy",
                &self.on_demand_allocation_strategy,
                &[
                    AllocationStrategy::LowestPrice,
                    AllocationStrategy::Prioritized,
                ],
            ),
        };
        let Some(named) = named else {
            return Ok(None);
        };
        allowed
            .iter()
            .copied()
            .find(|strategy| strategy_name(*strategy) == named.trim())
            .map(Some)
            .ok_or_else(|| {
                let names: Vec<&str> = allowed.iter().copied().map(strategy_name).collect();
                PolicyError::InvalidSettings(format!(
                    "market settings: {field} {named:?}; expected {}",
                    names.join(", ")
                ))
            })
    }

    fn market(&self) -> Result<Market, PolicyError> {
        parse_market(&self.default_market).ok_or_else(|| {
            PolicyError::InvalidSettings(format!(
                "market settings: defaultMarket {:?}; expected spot or on-demand",
                self.default_market
            ))
        })
    }
}

fn parse_market(text: &str) -> Option<Market> {
    match text.trim() {
        "spot" => Some(Market::Spot),
        "on-demand" => Some(Market::OnDemand),
        _ => None,
    }
}

fn invalid(annotation: &str, value: &str, expected: &str) -> PolicyError {
    PolicyError::InvalidAnnotation(AnnotationError {
        annotation: annotation.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    })
}

/// # Errors
/// `invalid-annotation` for a bad or contradictory annotation.
pub fn choose(
    pod: &Pod,
    settings: &Settings,
    candidates: &[Candidate],
    catalogue: &impl Catalogue,
) -> Result<MarketDecision, PolicyError> {
    let requested = pod
        .annotation(LAUNCH_TYPE)
        .map(|value| {
            parse_market(value).ok_or_else(|| invalid(LAUNCH_TYPE, value, "spot or on-demand"))
        })
        .transpose()?;
    let max_price = pod
        .annotation(MAX_SPOT_PRICE)
        .map(|value| {
            value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|price| price.is_finite() && *price > 0.0)
                .ok_or_else(|| {
                    invalid(
                        MAX_SPOT_PRICE,
                        value,
                        "a price in USD per hour above zero, such as 35.00",
                    )
                })
        })
        .transpose()?;
    if let (Some(Market::OnDemand), Some(_)) = (requested, max_price) {
        let value = pod.annotation(MAX_SPOT_PRICE).unwrap_or_default();
        return Err(invalid(
            MAX_SPOT_PRICE,
            value,
            &format!(
                "no max price: {LAUNCH_TYPE} is on-demand, and a max price only applies to spot"
            ),
        ));
    }
    let (market, mut reason) = match (requested, max_price) {
        (Some(market), _) => (market, format!("{LAUNCH_TYPE} asks for {}", name(market))),
        (None, Some(_)) => (Market::Spot, format!("{MAX_SPOT_PRICE} implies spot")),
        (None, None) => (
            settings.market()?,
            format!("the default market is {}", name(settings.market()?)),
        ),
    };
    let allocation_strategy = settings.allocation_strategy(market)?;
    if market == Market::OnDemand {
        return Ok(MarketDecision {
            market,
            max_price: None,
            fallback_to_on_demand: false,
            reason,
            allocation_strategy,
            mark_on_rebalance: false,
        });
    }
    let on_demand = candidates
        .first()
        .and_then(|first| catalogue.get(&first.instance_type))
        .and_then(|instance| instance.on_demand_price.map(|price| (instance.name, price)));
    let max_price = match (max_price, on_demand) {
        (Some(cap), Some((instance, price))) if cap > price => {
            reason.push_str(&format!(
                "; max price {cap} lowered to {instance}'s on-demand price {price}"
            ));
            Some(price)
        }
        (cap, _) => cap,
    };
    Ok(MarketDecision {
        market,
        max_price,
        fallback_to_on_demand: settings.fallback_to_on_demand,
        reason,
        allocation_strategy,
        mark_on_rebalance: settings.mark_on_rebalance,
    })
}

/// EC2's name for a strategy, as settings spell it.
fn strategy_name(strategy: AllocationStrategy) -> &'static str {
    match strategy {
        AllocationStrategy::PriceCapacityOptimized => "price-capacity-optimized",
        AllocationStrategy::CapacityOptimized => "capacity-optimized",
        AllocationStrategy::LowestPrice => "lowest-price",
        AllocationStrategy::Prioritized => "prioritized",
    }
}

fn name(market: Market) -> &'static str {
    match market {
        Market::Spot => "spot",
        Market::OnDemand => "on-demand",
    }
}

#[cfg(test)]
mod tests {
    use orca_plugin_sdk::Architecture;
    use orca_plugin_sdk::testing::{FixedCatalogue, instance_type, pod_with_annotations};

    use super::*;

    fn catalogue() -> FixedCatalogue {
        FixedCatalogue(vec![instance_type(
            "p5.48xlarge",
            192,
            2048,
            8,
            Architecture::Amd64,
            98.32,
        )])
    }

    fn candidates() -> Vec<Candidate> {
        vec![Candidate {
            instance_type: "p5.48xlarge".into(),
            reason: "test".into(),
        }]
    }

    fn decide(
        annotations: &[(&str, &str)],
        settings: &Settings,
    ) -> Result<MarketDecision, PolicyError> {
        choose(
            &pod_with_annotations(annotations),
            settings,
            &candidates(),
            &catalogue(),
        )
    }

    #[test]
    fn the_design_doc_spot_pod() {
        let decision = decide(
            &[(LAUNCH_TYPE, "spot"), (MAX_SPOT_PRICE, "35.00")],
            &Settings::default(),
        )
        .unwrap();
        assert_eq!(
            (
                decision.market,
                decision.max_price,
                decision.fallback_to_on_demand
            ),
            (Market::Spot, Some(35.0), true)
        );
    }

    #[test]
    fn a_cap_above_on_demand_is_lowered_to_it() {
        let decision = decide(&[(MAX_SPOT_PRICE, "500")], &Settings::default()).unwrap();
        assert_eq!(
            (decision.market, decision.max_price),
            (Market::Spot, Some(98.32))
        );
        assert!(decision.reason.contains("lowered"), "{}", decision.reason);
    }

    #[test]
    fn the_default_market_comes_from_settings() {
        assert_eq!(
            decide(&[], &Settings::default()).unwrap().market,
            Market::OnDemand
        );
        let spot = Settings {
            default_market: "spot".into(),
            fallback_to_on_demand: false,
            ..Settings::default()
        };
        let decision = decide(&[], &spot).unwrap();
        assert_eq!(
            (decision.market, decision.fallback_to_on_demand),
            (Market::Spot, false)
        );
    }

    #[test]
    fn bad_annotations_name_themselves() {
        for (annotation, value) in [
            (LAUNCH_TYPE, "reserved"),
            (MAX_SPOT_PRICE, "cheap"),
            (MAX_SPOT_PRICE, "-1"),
            (MAX_SPOT_PRICE, "inf"),
        ] {
            match decide(&[(annotation, value)], &Settings::default()) {
                Err(PolicyError::InvalidAnnotation(error)) => assert_eq!(
                    (error.annotation.as_str(), error.value.as_str()),
                    (annotation, value)
                ),
                other => panic!("{annotation}={value}: expected invalid-annotation, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_max_price_with_on_demand_is_a_contradiction() {
        let result = decide(
            &[(LAUNCH_TYPE, "on-demand"), (MAX_SPOT_PRICE, "1")],
            &Settings::default(),
        );
        assert!(
            matches!(result, Err(PolicyError::InvalidAnnotation(e)) if e.expected.contains("only applies to spot"))
        );
    }

    #[test]
    fn bad_settings_are_reported() {
        assert!(
            matches!(Settings::parse(r#"{"defaultMarket": "cheap"}"#), Err(PolicyError::InvalidSettings(m)) if m.contains("cheap"))
        );
    }

    #[test]
    fn strategies_and_rebalance_marking_come_from_settings_per_market() {
        let plain = decide(&[(LAUNCH_TYPE, "spot")], &Settings::default()).unwrap();
        assert_eq!(
            (plain.allocation_strategy, plain.mark_on_rebalance),
            (None, false),
            "the defaults leave the strategy to the node's config and do not mark on rebalance"
        );
        let settings = Settings::parse(
            r#"{"spotAllocationStrategy": "capacity-optimized",
                "onDemandAllocationStrategy": "lowest-price", "markOnRebalance": true}"#,
        )
        .unwrap();
        let spot = decide(&[(LAUNCH_TYPE, "spot")], &settings).unwrap();
        assert_eq!(
            (spot.allocation_strategy, spot.mark_on_rebalance),
            (Some(AllocationStrategy::CapacityOptimized), true)
        );
        let on_demand = decide(&[(LAUNCH_TYPE, "on-demand")], &settings).unwrap();
        assert_eq!(
            (on_demand.allocation_strategy, on_demand.mark_on_rebalance),
            (Some(AllocationStrategy::LowestPrice), false),
            "an on-demand instance gets no rebalance recommendations"
        );
    }

    #[test]
    fn a_strategy_the_market_cannot_use_is_refused_naming_the_field() {
        for (json, field) in [
            (
                r#"{"spotAllocationStrategy": "prioritized"}"#,
                "spotAllocationStrategy",
            ),
            (
                r#"{"onDemandAllocationStrategy": "capacity-optimized"}"#,
                "onDemandAllocationStrategy",
            ),
            (
                r#"{"spotAllocationStrategy": "cheapest"}"#,
                "spotAllocationStrategy",
            ),
        ] {
            match Settings::parse(json) {
                Err(PolicyError::InvalidSettings(message)) => {
                    assert!(message.contains(field), "{message}");
                }
                other => panic!("{json}: expected invalid-settings, got {other:?}"),
            }
        }
    }
}
