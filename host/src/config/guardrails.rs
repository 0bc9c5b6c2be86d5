//! `policy.guardrails`: limits the host enforces on every plan, whatever plugin made it. A
//! plugin's own settings (the default selector's `allowFamilies`) bind only that plugin; a
//! plugin swapped in (a new file, a moved OCI tag) ignores them. These bind every plugin.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::policy::guardrails::{Glob, GlobKind, Price};
use crate::provider::plan::Market;

/// The host's limits on what any plugin may choose. Every field is optional; an empty block
/// limits nothing.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct GuardrailsConfig {
    /// Globs on instance type names (`m7i.*`, `g6e.xlarge`); with `allowFamilies`, a type must
    /// match one of either. Empty (and `allowFamilies` empty): every type.
    pub allow_instance_types: Vec<String>,
    /// Globs on instance type names; a match is refused, whatever the allow lists say.
    pub deny_instance_types: Vec<String>,
    /// Globs on families, the part of a name before the dot (`p5` of `p5.48xlarge`).
    pub allow_families: Vec<String>,
    /// Globs on families; a match is refused.
    pub deny_families: Vec<String>,
    /// The markets a pod may launch in.
    pub markets: Vec<Market>,
    /// USD per hour one pod's instance may cost at most.
    pub max_pod_price_per_hour: Option<f64>,
    /// USD per hour a namespace's live instances may cost at most together.
    pub max_namespace_price_per_hour: Option<f64>,
    /// Namespaces with a cap of their own, over `maxNamespacePricePerHour`.
    pub max_price_per_hour_by_namespace: BTreeMap<String, f64>,
}

impl Default for GuardrailsConfig {
    fn default() -> Self {
        GuardrailsConfig {
            allow_instance_types: Vec::new(),
            deny_instance_types: Vec::new(),
            allow_families: Vec::new(),
            deny_families: Vec::new(),
            markets: vec![Market::Spot, Market::OnDemand],
            max_pod_price_per_hour: None,
            max_namespace_price_per_hour: None,
            max_price_per_hour_by_namespace: BTreeMap::new(),
        }
    }
}

impl GuardrailsConfig {
    /// Whether any namespace has a cap: the namespaces' instances are then listed and counted.
    pub fn caps_namespaces(&self) -> bool {
        self.max_namespace_price_per_hour.is_some()
            || !self.max_price_per_hour_by_namespace.is_empty()
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let prefix = "policy.guardrails";
        for (field, globs, kind) in [
            (
                "allowInstanceTypes",
                &self.allow_instance_types,
                GlobKind::InstanceType,
            ),
            (
                "denyInstanceTypes",
                &self.deny_instance_types,
                GlobKind::InstanceType,
            ),
            ("allowFamilies", &self.allow_families, GlobKind::Family),
            ("denyFamilies", &self.deny_families, GlobKind::Family),
        ] {
            for (index, glob) in globs.iter().enumerate() {
                if let Err(error) = Glob::parse(glob, kind) {
                    return Err(ConfigError::invalid(
                        format!("{prefix}.{field}[{index}]"),
                        glob,
                        &error.to_string(),
                    ));
                }
            }
        }
        if self.markets.is_empty() {
            return Err(ConfigError::invalid(
                format!("{prefix}.markets"),
                "[]",
                "at least one of spot, on-demand (leave the field out to allow both)",
            ));
        }
        for (index, market) in self.markets.iter().enumerate() {
            if self.markets[..index].contains(market) {
                return Err(ConfigError::invalid(
                    format!("{prefix}.markets[{index}]"),
                    market.as_str(),
                    "each market once",
                ));
            }
        }
        let prices = [
            ("maxPodPricePerHour".to_owned(), self.max_pod_price_per_hour),
            (
                "maxNamespacePricePerHour".to_owned(),
                self.max_namespace_price_per_hour,
            ),
        ]
        .into_iter()
        .chain(
            self.max_price_per_hour_by_namespace
                .iter()
                .map(|(namespace, price)| {
                    (
                        format!("maxPricePerHourByNamespace.{namespace}"),
                        Some(*price),
                    )
                }),
        );
        for (field, price) in prices {
            if let Some(price) = price
                && let Err(error) = Price::from_usd(price)
            {
                return Err(ConfigError::invalid(
                    format!("{prefix}.{field}"),
                    price,
                    &error.to_string(),
                ));
            }
        }
        for namespace in self.max_price_per_hour_by_namespace.keys() {
            if !super::node::is_dns_label(namespace) {
                return Err(ConfigError::invalid(
                    format!("{prefix}.maxPricePerHourByNamespace"),
                    format!("{namespace:?}"),
                    "namespace names (lowercase letters, digits and '-', at most 63 characters, \
                     starting and ending with a letter or digit)",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn field_of(text: &str) -> String {
        match Config::parse(text) {
            Err(crate::config::ConfigError::Invalid { field, .. }) => field,
            Err(other) => format!("other error: {other}"),
            Ok(_) => "accepted".to_owned(),
        }
    }

    #[test]
    fn an_empty_block_limits_nothing() {
        let config = Config::parse("policy:\n  guardrails: {}\n").unwrap();
        let guardrails = &config.policy.guardrails;
        assert!(guardrails.allow_instance_types.is_empty());
        assert_eq!(guardrails.markets.len(), 2);
        assert!(!guardrails.caps_namespaces());
    }

    #[test]
    fn a_full_block_parses() {
        let config = Config::parse(
            "policy:\n  guardrails:\n    allowInstanceTypes: [\"m7i.*\", g6e.xlarge]\n    \
             denyInstanceTypes: [\"*.metal\"]\n    allowFamilies: [c7i]\n    denyFamilies: \
             [\"p5*\"]\n    markets: [on-demand]\n    maxPodPricePerHour: 2.5\n    \
             maxNamespacePricePerHour: 20\n    maxPricePerHourByNamespace:\n      ml-research: \
             200\n",
        )
        .unwrap();
        let guardrails = &config.policy.guardrails;
        assert_eq!(guardrails.max_pod_price_per_hour, Some(2.5));
        assert_eq!(
            guardrails.max_price_per_hour_by_namespace["ml-research"],
            200.0
        );
        assert!(guardrails.caps_namespaces());
    }

    #[test]
    fn bad_values_name_the_field() {
        for (text, field) in [
            (
                "allowInstanceTypes: [\"M7I.*\"]",
                "policy.guardrails.allowInstanceTypes[0]",
            ),
            (
                "denyInstanceTypes: [\"\"]",
                "policy.guardrails.denyInstanceTypes[0]",
            ),
            (
                "denyFamilies: [p5, \"p5.48xlarge\"]",
                "policy.guardrails.denyFamilies[1]",
            ),
            (
                "allowFamilies: [\"m7i[ab]\"]",
                "policy.guardrails.allowFamilies[0]",
            ),
            ("markets: []", "policy.guardrails.markets"),
            ("markets: [spot, spot]", "policy.guardrails.markets[1]"),
            (
                "maxPodPricePerHour: 0",
                "policy.guardrails.maxPodPricePerHour",
            ),
            (
                "maxNamespacePricePerHour: -3",
                "policy.guardrails.maxNamespacePricePerHour",
            ),
            (
                "maxPricePerHourByNamespace: {team-a: 1000000}",
                "policy.guardrails.maxPricePerHourByNamespace.team-a",
            ),
            (
                "maxPricePerHourByNamespace: {Team_A: 10}",
                "policy.guardrails.maxPricePerHourByNamespace",
            ),
        ] {
            assert_eq!(
                field_of(&format!("policy:\n  guardrails:\n    {text}\n")),
                field,
                "{text}"
            );
        }
    }

    #[test]
    fn unknown_fields_and_markets_are_refused_with_their_path() {
        for text in ["maxPricePerPod: 2", "markets: [reserved]"] {
            let error = Config::parse(&format!("policy:\n  guardrails:\n    {text}\n"))
                .unwrap_err()
                .to_string();
            assert!(error.contains("policy.guardrails"), "{text}: {error}");
        }
    }
}
