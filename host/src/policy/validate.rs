//! Host-side checks of every plugin answer, whatever plugin gave it: a plugin is untrusted
//! code, and nothing it says reaches a provider unchecked. Messages name the plugin, because
//! they end up in the pod's status.

use std::collections::HashSet;

use orca_plugin_sdk::tags::{MAX_TAGS, validate_tag};

use super::catalogue::any_query;
use super::convert;
use super::wasm::{Candidate, CatalogueQuery, InstanceQuery, Market, MarketDecision, Tag};
use crate::provider::ownership::TAG_MANAGED_BY;
use crate::provider::plan::AllocationStrategy;

/// More candidates than this is a misbehaving selector (the provider tries them in order).
pub const MAX_CANDIDATES: usize = 20;
/// Reasons end up in annotations and Events; longer ones are a misbehaving plugin.
pub const MAX_REASON_CHARS: usize = 512;

/// What was wrong with a plugin's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    #[error("plugin {plugin} returned no instance types")]
    NoCandidates { plugin: String },
    #[error(
        "plugin {plugin} returned {count} instance types; at most {MAX_CANDIDATES} are accepted"
    )]
    TooManyCandidates { plugin: String, count: usize },
    #[error("plugin {plugin} chose instance type {name:?}, which the catalogue does not have")]
    UnknownInstanceType { plugin: String, name: String },
    #[error("plugin {plugin} chose max price {price}; expected a price in USD per hour above zero")]
    BadPrice { plugin: String, price: String },
    #[error("plugin {plugin} set a max price for on-demand; a max price only applies to spot")]
    PriceForOnDemand { plugin: String },
    #[error(
        "plugin {plugin} chose allocation strategy {strategy} for {market}; EC2 Fleet accepts \
         {allowed} there"
    )]
    StrategyForMarket {
        plugin: String,
        strategy: AllocationStrategy,
        market: &'static str,
        allowed: String,
    },
    #[error("plugin {plugin} returned {count} tags; EC2 accepts at most {MAX_TAGS}")]
    TooManyTags { plugin: String, count: usize },
    #[error("plugin {plugin} returned tag {key:?} twice")]
    DuplicateTag { plugin: String, key: String },
    #[error("plugin {plugin} returned a tag EC2 would refuse: {message}")]
    BadTag { plugin: String, message: String },
    #[error(
        "plugin {plugin} returned a reason of {chars} characters; at most {MAX_REASON_CHARS} are accepted"
    )]
    ReasonTooLong { plugin: String, chars: usize },
    #[error(
        "plugin {plugin} set tag {key:?}, which orca reserves: tags named {TAG_MANAGED_BY} or \
         starting with {RESERVED_TAG_PREFIX} are set by orca only"
    )]
    ReservedTag { plugin: String, key: String },
}

/// Tags under this prefix carry what orca relies on (ownership, the workload's exit code).
pub const RESERVED_TAG_PREFIX: &str = "orca.research/";

/// # Errors
/// [`OutputError`] for an empty, oversized or unknown candidate list.
pub fn candidates(
    plugin: &str,
    candidates: &[Candidate],
    catalogue: &dyn CatalogueQuery,
) -> Result<(), OutputError> {
    let plugin = plugin.to_owned();
    if candidates.is_empty() {
        return Err(OutputError::NoCandidates { plugin });
    }
    if candidates.len() > MAX_CANDIDATES {
        return Err(OutputError::TooManyCandidates {
            plugin,
            count: candidates.len(),
        });
    }
    for candidate in candidates {
        reason(&plugin, &candidate.reason)?;
    }
    let names: Vec<String> = candidates.iter().map(|c| c.instance_type.clone()).collect();
    let known: HashSet<String> = catalogue
        .query(&InstanceQuery {
            names: names.clone(),
            ..any_query()
        })
        .into_iter()
        .map(|instance| instance.name)
        .collect();
    match names.into_iter().find(|name| !known.contains(name)) {
        Some(name) => Err(OutputError::UnknownInstanceType { plugin, name }),
        None => Ok(()),
    }
}

/// # Errors
/// [`OutputError`] for a non-positive or non-finite price, a price on on-demand, or an
/// allocation strategy EC2 Fleet refuses for the market.
pub fn market(plugin: &str, decision: &MarketDecision) -> Result<(), OutputError> {
    reason(plugin, &decision.reason)?;
    if let Some(strategy) = decision.allocation_strategy {
        let strategy = convert::allocation_strategy(strategy);
        let market = convert::market(decision.market);
        if !strategy.allowed_for(market) {
            return Err(OutputError::StrategyForMarket {
                plugin: plugin.to_owned(),
                strategy,
                market: market.as_str(),
                allowed: AllocationStrategy::allowed_names(market),
            });
        }
    }
    match (decision.market, decision.max_price) {
        (_, Some(price)) if !(price.is_finite() && price > 0.0) => Err(OutputError::BadPrice {
            plugin: plugin.to_owned(),
            price: price.to_string(),
        }),
        (Market::OnDemand, Some(_)) => Err(OutputError::PriceForOnDemand {
            plugin: plugin.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// # Errors
/// [`OutputError`] for too many, duplicate or malformed tags.
pub fn tags(plugin: &str, tags: &[Tag]) -> Result<(), OutputError> {
    let plugin = plugin.to_owned();
    if tags.len() > MAX_TAGS {
        return Err(OutputError::TooManyTags {
            plugin,
            count: tags.len(),
        });
    }
    let mut seen = HashSet::new();
    for tag in tags {
        if !seen.insert(tag.key.as_str()) {
            return Err(OutputError::DuplicateTag {
                plugin,
                key: tag.key.clone(),
            });
        }
        validate_tag(&tag.key, &tag.value).map_err(|message| OutputError::BadTag {
            plugin: plugin.clone(),
            message,
        })?;
    }
    Ok(())
}

/// orca reads some tags back to decide a pod's fate (ownership finds its instance; the exit-code
/// tag decides Succeeded or Failed), so no plugin may set them. A plugin that repeats one of
/// the pod's ownership tags with the value orca sets anyway (as version 0.1.0 of the default
/// tagger did) changes nothing and is let through.
///
/// # Errors
/// [`OutputError::ReservedTag`] naming the first reserved tag set otherwise.
pub fn reserved_tags(
    plugin: &str,
    tags: &[Tag],
    ownership: &[(&'static str, String)],
) -> Result<(), OutputError> {
    let reserved = |key: &str| key == TAG_MANAGED_BY || key.starts_with(RESERVED_TAG_PREFIX);
    let echoes_ownership = |tag: &Tag| {
        ownership
            .iter()
            .any(|(key, value)| *key == tag.key && *value == tag.value)
    };
    match tags
        .iter()
        .find(|tag| reserved(&tag.key) && !echoes_ownership(tag))
    {
        Some(tag) => Err(OutputError::ReservedTag {
            plugin: plugin.to_owned(),
            key: tag.key.clone(),
        }),
        None => Ok(()),
    }
}

fn reason(plugin: &str, reason: &str) -> Result<(), OutputError> {
    let chars = reason.chars().count();
    if chars > MAX_REASON_CHARS {
        return Err(OutputError::ReasonTooLong {
            plugin: plugin.to_owned(),
            chars,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::wasm::{Architecture, InstanceType};
    use super::*;

    struct Known(Vec<&'static str>);

    impl CatalogueQuery for Known {
        fn query(&self, query: &InstanceQuery) -> Vec<InstanceType> {
            self.0
                .iter()
                .filter(|name| query.names.iter().any(|n| n == *name))
                .map(|name| InstanceType {
                    name: (*name).to_owned(),
                    family: name.split('.').next().unwrap_or_default().to_owned(),
                    vcpus: 2,
                    memory_mib: 8192,
                    gpus: 0,
                    gpu_model: None,
                    architecture: Architecture::Amd64,
                    on_demand_price: Some(0.1),
                    spot_price: None,
                    zones: Vec::new(),
                })
                .collect()
        }
    }

    fn candidate(name: &str) -> Candidate {
        Candidate {
            instance_type: name.to_owned(),
            reason: "test".to_owned(),
        }
    }

    fn tag(key: &str, value: &str) -> Tag {
        Tag {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }

    fn decision(market: Market, max_price: Option<f64>) -> MarketDecision {
        MarketDecision {
            market,
            max_price,
            fallback_to_on_demand: false,
            reason: "test".to_owned(),
            allocation_strategy: None,
            mark_on_rebalance: false,
        }
    }

    #[test]
    fn candidates_must_exist_and_be_bounded() {
        let catalogue = Known(vec!["m7i.large", "c7i.large"]);
        assert!(
            candidates(
                "sel",
                &[candidate("m7i.large"), candidate("c7i.large")],
                &catalogue
            )
            .is_ok()
        );
        assert_eq!(
            candidates(
                "sel",
                &[candidate("m7i.large"), candidate("z9.imaginary")],
                &catalogue
            ),
            Err(OutputError::UnknownInstanceType {
                plugin: "sel".into(),
                name: "z9.imaginary".into()
            })
        );
        assert_eq!(
            candidates("sel", &[], &catalogue),
            Err(OutputError::NoCandidates {
                plugin: "sel".into()
            })
        );
        let many: Vec<Candidate> = (0..21).map(|_| candidate("m7i.large")).collect();
        assert!(matches!(
            candidates("sel", &many, &catalogue),
            Err(OutputError::TooManyCandidates { count: 21, .. })
        ));
        let long = Candidate {
            instance_type: "m7i.large".into(),
            reason: "x".repeat(513),
        };
        assert!(matches!(
            candidates("sel", &[long], &catalogue),
            Err(OutputError::ReasonTooLong { .. })
        ));
    }

    #[test]
    fn prices_are_positive_finite_and_spot_only() {
        assert!(market("mkt", &decision(Market::Spot, Some(1.5))).is_ok());
        assert!(market("mkt", &decision(Market::Spot, None)).is_ok());
        for price in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(
                    market("mkt", &decision(Market::Spot, Some(price))),
                    Err(OutputError::BadPrice { .. })
                ),
                "{price}"
            );
        }
        assert!(matches!(
            market("mkt", &decision(Market::OnDemand, Some(1.0))),
            Err(OutputError::PriceForOnDemand { .. })
        ));
    }

    #[test]
    fn an_allocation_strategy_must_suit_the_market() {
        use super::super::wasm::AllocationStrategy as Wit;
        let with = |market, strategy| MarketDecision {
            allocation_strategy: Some(strategy),
            ..decision(market, None)
        };
        for strategy in [
            Wit::PriceCapacityOptimized,
            Wit::CapacityOptimized,
            Wit::LowestPrice,
        ] {
            assert!(market("mkt", &with(Market::Spot, strategy)).is_ok());
        }
        for strategy in [Wit::LowestPrice, Wit::Prioritized] {
            assert!(market("mkt", &with(Market::OnDemand, strategy)).is_ok());
        }
        let error = market("mkt", &with(Market::Spot, Wit::Prioritized)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "plugin mkt chose allocation strategy prioritized for spot; EC2 Fleet accepts \
             price-capacity-optimized, capacity-optimized, lowest-price there"
        );
        assert!(matches!(
            market("mkt", &with(Market::OnDemand, Wit::CapacityOptimized)),
            Err(OutputError::StrategyForMarket { .. })
        ));
    }

    #[test]
    fn tags_follow_aws_rules() {
        assert!(tags("tag", &[tag("ManagedBy", "ORCA"), tag("team", "ml")]).is_ok());
        assert!(
            matches!(tags("tag", &[tag("aws:owner", "me")]), Err(OutputError::BadTag { ref message, .. }) if message.contains("aws:"))
        );
        assert!(matches!(
            tags("tag", &[tag("team", "a"), tag("team", "b")]),
            Err(OutputError::DuplicateTag { .. })
        ));
        let many: Vec<Tag> = (0..51).map(|i| tag(&format!("k{i}"), "v")).collect();
        assert!(matches!(
            tags("tag", &many),
            Err(OutputError::TooManyTags { count: 51, .. })
        ));
        let error = tags("my-tagger", &[tag("aws:x", "y")])
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("plugin my-tagger "), "{error}");
    }

    #[test]
    fn reserved_tags_are_refused_unless_they_repeat_orcas_own() {
        let ownership = [
            (TAG_MANAGED_BY, "ORCA".to_owned()),
            ("orca.research/pod-uid", "u1".to_owned()),
        ];
        let refused = |tags: &[Tag]| match reserved_tags("p", tags, &ownership) {
            Err(OutputError::ReservedTag { key, .. }) => Some(key),
            _ => None,
        };
        // The exit code decides Succeeded or Failed: a plugin must not forge it.
        assert_eq!(
            refused(&[tag("orca.research/exit-code", "0")]).as_deref(),
            Some("orca.research/exit-code")
        );
        assert_eq!(
            refused(&[tag("ManagedBy", "me")]).as_deref(),
            Some("ManagedBy")
        );
        assert_eq!(
            refused(&[tag("orca.research/pod-uid", "someone-else")]).as_deref(),
            Some("orca.research/pod-uid")
        );
        // Repeating what orca sets anyway changes nothing; other keys are the plugin's.
        assert_eq!(
            refused(&[
                tag("ManagedBy", "ORCA"),
                tag("orca.research/pod-uid", "u1"),
                tag("team", "ml"),
                tag("orca-research/x", "y"),
            ]),
            None
        );
        let message = reserved_tags(
            "hostile",
            &[tag("orca.research/exit-code", "0")],
            &ownership,
        )
        .unwrap_err()
        .to_string();
        assert!(message.contains("plugin hostile"), "{message}");
        assert!(message.contains("orca.research/exit-code"), "{message}");
    }
}
