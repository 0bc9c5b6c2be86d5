//! What a pod's instance cost, as the `orca.research/cost` annotation and the `PodCost` Event
//! carry it, and where its hourly price came from.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::integrate::PricePoint;
use crate::policy::guardrails::Price;
use crate::provider::plan::Market;

/// The annotation orca writes on a pod once its instance has ended.
pub const COST_ANNOTATION: &str = "orca.research/cost";

/// Where an instance's hourly price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PriceSource {
    /// On demand: the catalogue's on-demand price for its type in the region.
    OnDemandCatalogue,
    /// Spot: its pool's (type and zone) `DescribeSpotPriceHistory`, piecewise.
    SpotPriceHistory,
    /// Spot, its pool's history unread (the call failed, or EC2 knew no price for the pool):
    /// the catalogue's spot price for the type, the lowest across zones.
    SpotCatalogue,
    /// Spot, with neither: the on-demand price, the most EC2 charges a spot instance by
    /// default.
    SpotAtOnDemand,
}

impl PriceSource {
    /// Words for logs and Events.
    pub fn describe(self) -> &'static str {
        match self {
            PriceSource::OnDemandCatalogue => "the catalogue's on-demand price",
            PriceSource::SpotPriceHistory => "the pool's spot price history",
            PriceSource::SpotCatalogue => {
                "the catalogue's spot price (the pool's history could not be read)"
            }
            PriceSource::SpotAtOnDemand => {
                "the on-demand price (no spot price could be read for the pool)"
            }
        }
    }
}

/// How an instance is priced over time: the price points, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pricing {
    pub points: Vec<PricePoint>,
    pub source: PriceSource,
}

/// The prices that may price an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known<'a> {
    pub on_demand: Option<Price>,
    /// The catalogue's spot price for the type (lowest across zones).
    pub catalogue_spot: Option<Price>,
    /// The pool's history, when read.
    pub pool_history: &'a [PricePoint],
}

/// How an instance of `market` launched at `launched_at` is priced from what is `known`:
/// on demand at the catalogue's price; spot by its pool's history, else the catalogue's spot
/// price, else the on-demand price (each fallback saying so). `None`: no price at all.
pub fn pricing(market: Market, launched_at: Timestamp, known: Known<'_>) -> Option<Pricing> {
    let flat = |price: Option<Price>, source| {
        price.map(|price| Pricing {
            points: vec![PricePoint {
                at: launched_at,
                price,
            }],
            source,
        })
    };
    match market {
        Market::OnDemand => flat(known.on_demand, PriceSource::OnDemandCatalogue),
        Market::Spot if !known.pool_history.is_empty() => Some(Pricing {
            points: known.pool_history.to_vec(),
            source: PriceSource::SpotPriceHistory,
        }),
        Market::Spot => flat(known.catalogue_spot, PriceSource::SpotCatalogue)
            .or_else(|| flat(known.on_demand, PriceSource::SpotAtOnDemand)),
    }
}

/// What a pod's instance cost from launch to end: the `orca.research/cost` annotation (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostRecord {
    /// US dollars, from launch to end.
    pub dollars: f64,
    pub hours: f64,
    pub market: Market,
    pub instance_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    pub instance_id: String,
    /// EC2's `LaunchTime`.
    pub launched_at: Timestamp,
    /// When it was asked to end (EC2's `StateTransitionReason`), else when orca first saw it
    /// ended.
    pub ended_at: Timestamp,
    pub price_source: PriceSource,
    /// The price per hour at launch, and at the end.
    pub price_per_hour_at_launch: f64,
    pub price_per_hour_at_end: f64,
    /// What the same hours would have cost on demand (spot only, when the catalogue has the
    /// price): the savings are the difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_demand_dollars: Option<f64>,
}

impl CostRecord {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// One line for the `PodCost` Event and the log.
    pub fn summary(&self) -> String {
        let saved = match self.on_demand_dollars {
            Some(on_demand) => format!(
                "; ${:.6} less than on demand",
                (on_demand - self.dollars).max(0.0)
            ),
            None => String::new(),
        };
        format!(
            "{} {} {} cost ${:.6} over {:.4} h (from {} to {}, at {}){saved}",
            self.instance_id,
            self.instance_type,
            self.market.as_str(),
            self.dollars,
            self.hours,
            self.launched_at,
            self.ended_at,
            self.price_source.describe(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(minutes: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
    }

    fn price(usd: f64) -> Option<Price> {
        Price::of(Some(usd))
    }

    #[test]
    fn an_instance_is_priced_by_the_best_source_known_for_its_market() {
        let history = [PricePoint {
            at: t(-5),
            price: price(0.03).unwrap(),
        }];
        let all = Known {
            on_demand: price(0.096),
            catalogue_spot: price(0.02),
            pool_history: &history,
        };
        let no_history = Known {
            pool_history: &[],
            ..all
        };
        let only_on_demand = Known {
            catalogue_spot: None,
            ..no_history
        };
        let nothing = Known {
            on_demand: None,
            ..only_on_demand
        };
        for (case, market, known, source, first) in [
            (
                "on demand",
                Market::OnDemand,
                all,
                Some(PriceSource::OnDemandCatalogue),
                0.096,
            ),
            (
                "spot with its pool's history",
                Market::Spot,
                all,
                Some(PriceSource::SpotPriceHistory),
                0.03,
            ),
            (
                "spot whose history failed",
                Market::Spot,
                no_history,
                Some(PriceSource::SpotCatalogue),
                0.02,
            ),
            (
                "spot with no spot price at all",
                Market::Spot,
                only_on_demand,
                Some(PriceSource::SpotAtOnDemand),
                0.096,
            ),
            ("nothing known", Market::Spot, nothing, None, 0.0),
            ("nothing known", Market::OnDemand, nothing, None, 0.0),
        ] {
            let got = pricing(market, t(0), known);
            assert_eq!(got.as_ref().map(|p| p.source), source, "{case}");
            if let Some(got) = got {
                assert_eq!(Some(got.points[0].price), price(first), "{case}");
            }
        }
    }

    #[test]
    fn the_annotation_is_documented_json_with_dollars_hours_market_and_type() {
        let record = CostRecord {
            dollars: 0.0125,
            hours: 0.5,
            market: Market::Spot,
            instance_type: "m5.large".to_owned(),
            zone: Some("us-west-2a".to_owned()),
            instance_id: "i-0123".to_owned(),
            launched_at: t(0),
            ended_at: t(30),
            price_source: PriceSource::SpotPriceHistory,
            price_per_hour_at_launch: 0.02,
            price_per_hour_at_end: 0.03,
            on_demand_dollars: Some(0.048),
        };
        let json: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
        assert_eq!(json["dollars"], 0.0125);
        assert_eq!(json["hours"], 0.5);
        assert_eq!(json["market"], "spot");
        assert_eq!(json["instanceType"], "m5.large");
        assert_eq!(json["priceSource"], "spotPriceHistory");
        let back: CostRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
        assert!(
            record.summary().contains("$0.035500 less than on demand"),
            "{}",
            record.summary()
        );
    }
}
