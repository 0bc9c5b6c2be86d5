//! The `orca.research/…` pod annotations, parsed and validated in one place so a bad value is
//! reported with the annotation's name and never reaches a provider.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::PlanError;
use crate::plan::Market;

pub const ANNOTATION_PREFIX: &str = "orca.research/";
pub const INSTANCE_TYPE: &str = "orca.research/instance-type";
pub const LAUNCH_TYPE: &str = "orca.research/launch-type";
pub const MAX_SPOT_PRICE: &str = "orca.research/max-spot-price";

/// The policy-relevant annotations of one pod, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct PodAnnotations {
    pub instance_type: Option<String>,
    pub launch_type: Option<Market>,
    pub max_spot_price: Option<f64>,
}

impl PodAnnotations {
    /// # Errors
    /// [`PlanError`] with reason `InvalidAnnotation`, naming the annotation, the value and what
    /// would be accepted.
    pub fn parse(pod: &Pod) -> Result<PodAnnotations, PlanError> {
        let empty = BTreeMap::new();
        let annotations = pod.metadata.annotations.as_ref().unwrap_or(&empty);
        let instance_type = annotations
            .get(INSTANCE_TYPE)
            .map(|value| {
                let value = value.trim();
                if is_instance_type_name(value) {
                    Ok(value.to_owned())
                } else {
                    Err(invalid(
                        INSTANCE_TYPE,
                        value,
                        "an EC2 instance type such as m5.large or p5.48xlarge",
                    ))
                }
            })
            .transpose()?;
        let launch_type = annotations
            .get(LAUNCH_TYPE)
            .map(|value| match value.trim() {
                "spot" => Ok(Market::Spot),
                "on-demand" => Ok(Market::OnDemand),
                other => Err(invalid(LAUNCH_TYPE, other, "spot or on-demand")),
            })
            .transpose()?;
        let max_spot_price = annotations
            .get(MAX_SPOT_PRICE)
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
        if max_spot_price.is_some() && launch_type == Some(Market::OnDemand) {
            return Err(PlanError {
                reason: "InvalidAnnotation",
                message: format!(
                    "annotation {MAX_SPOT_PRICE} is set but {LAUNCH_TYPE} is on-demand; a max price only applies to spot"
                ),
            });
        }
        Ok(PodAnnotations {
            instance_type,
            launch_type,
            max_spot_price,
        })
    }
}

/// `family.size`: lowercase letters, digits and '-' in each part (m5.large, u-6tb1.metal).
pub(crate) fn is_instance_type_name(value: &str) -> bool {
    let part_ok = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    matches!(value.split_once('.'), Some((family, size)) if part_ok(family) && part_ok(size))
        && value.len() <= 64
}

fn invalid(annotation: &str, value: &str, expected: &str) -> PlanError {
    PlanError {
        reason: "InvalidAnnotation",
        message: format!("annotation {annotation}: invalid value {value:?}; expected {expected}"),
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;

    use super::*;

    fn pod(pairs: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                annotations: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn the_design_doc_example_parses() {
        let parsed = PodAnnotations::parse(&pod(&[
            (INSTANCE_TYPE, "p5.48xlarge"),
            (LAUNCH_TYPE, "spot"),
            (MAX_SPOT_PRICE, "35.00"),
        ]))
        .unwrap();
        assert_eq!(parsed.instance_type.as_deref(), Some("p5.48xlarge"));
        assert_eq!(parsed.launch_type, Some(Market::Spot));
        assert_eq!(parsed.max_spot_price, Some(35.0));
    }

    #[test]
    fn each_bad_value_names_its_annotation() {
        for (annotation, value) in [
            (INSTANCE_TYPE, "P5 48XL"),
            (LAUNCH_TYPE, "reserved"),
            (MAX_SPOT_PRICE, "-1"),
            (MAX_SPOT_PRICE, "NaN"),
            (MAX_SPOT_PRICE, "cheap"),
        ] {
            let error = PodAnnotations::parse(&pod(&[(annotation, value)])).unwrap_err();
            assert_eq!(error.reason, "InvalidAnnotation");
            assert!(error.message.contains(annotation), "{error}");
            assert!(error.message.contains(&format!("{value:?}")), "{error}");
        }
    }

    #[test]
    fn max_price_with_on_demand_is_contradictory() {
        let error =
            PodAnnotations::parse(&pod(&[(LAUNCH_TYPE, "on-demand"), (MAX_SPOT_PRICE, "1.0")]))
                .unwrap_err();
        assert!(error.message.contains("only applies to spot"), "{error}");
    }
}
